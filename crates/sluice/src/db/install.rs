//! Committing version edits (the only place the MANIFEST is written), handing out file
//! numbers, and deleting files no version needs any more.

use std::sync::Arc;

use super::{Tree, TreeState};
use crate::compaction::env::FileNumbers;
use crate::events::{FileKind, TableFileInfo};
use crate::filename::{FileType, parse_file_name, sync_dir};
use crate::version::Version;
use crate::version::edit::VersionEdit;
use crate::version::manifest::ManifestWriter;
use crate::{Error, IoContext, Result};

/// Start a fresh MANIFEST once the current one grows past this, so recovery stays fast.
const MAX_MANIFEST_BYTES: u64 = 64 << 20;

impl Tree {
    /// Durably records `edit` and makes the resulting version current.
    ///
    /// The MANIFEST append and its fsync happen with the state lock released (readers and
    /// writers keep going); the manifest lock serializes installs so the version the edit was
    /// computed against is still current when it is installed.
    pub(crate) fn log_and_apply(&self, edit: VersionEdit) -> Result<Arc<Version>> {
        self.log_and_apply_with(edit, |_| {})
    }

    /// [`Tree::log_and_apply`], running `installed` on the state under the same lock as the
    /// install: a reader then sees the new version and whatever `installed` changes together,
    /// or neither (a flush pops the memtable it wrote, so that no read sees its entries both
    /// in the memtable and in the new table, where merge operands would count twice).
    pub(crate) fn log_and_apply_with(
        &self,
        mut edit: VersionEdit,
        installed: impl FnOnce(&mut TreeState),
    ) -> Result<Arc<Version>> {
        if self.options.paranoid_checks || cfg!(debug_assertions) {
            // Invariant: every file a version names exists on disk.
            for (_, f) in &edit.new_files {
                let path = self.table_cache.table_path(f.dir_index, f.number);
                if !self.options.fs.exists(&path).with_path(&path)? {
                    return Err(Error::corruption(
                        path,
                        0,
                        "version edit names a table that does not exist",
                    ));
                }
            }
        }
        // The new tables' and blob files' directory entries must be durable before the
        // MANIFEST names them, or a crash could leave the tree pointing at a file that is not
        // there. A blob file may sit in another directory than the tables referencing it.
        let tables = edit.new_files.iter().map(|(_, f)| f.dir_index);
        let blobs = edit.new_blob_files.iter().map(|b| b.dir_index);
        let dirs: std::collections::BTreeSet<u32> = tables.chain(blobs).collect();
        for dir in dirs {
            if let Some(path) = self.table_cache.dirs().get(dir as usize) {
                sync_dir(&*self.options.fs, path)?;
            }
        }
        let mut manifest_guard = self.manifest.lock();
        let manifest = manifest_guard
            .as_mut()
            .ok_or_else(|| self.read_only_error())?;
        let (version, rollover) = {
            let mut st = self.state.lock();
            Self::check_bg_error(&st)?;
            let new_number = (manifest.file_size() > MAX_MANIFEST_BYTES).then(|| {
                let n = st.versions.new_file_number();
                // Its CURRENT temp file must survive a concurrent obsolete-file collection.
                st.pending_outputs.insert(n);
                n
            });
            let mut version =
                st.versions
                    .prepare(&mut edit, self.latest_seq(), self.options.paranoid_checks)?;
            // Range tombstones whose work is done go with the edit that finished it.
            let oldest_snapshot = self.snapshots.oldest();
            let unneeded = version.unneeded_tombstones(oldest_snapshot);
            if !unneeded.is_empty() {
                let drop = VersionEdit {
                    dropped_tombstones: unneeded,
                    ..VersionEdit::default()
                };
                version = version.apply(&drop)?;
                edit.dropped_tombstones.extend(drop.dropped_tombstones);
            }
            let rollover = new_number.map(|n| (n, st.versions.snapshot_edit_for(&version, &edit)));
            (version, rollover)
        };
        let rollover_number = rollover.as_ref().map(|(n, _)| (*n, ()));
        let result = match rollover {
            None => manifest.append(&edit),
            // A new MANIFEST describing the new version in full. If we crash before `create`
            // switches CURRENT, the old MANIFEST is current and lacks this edit, whose output
            // files are then unreferenced garbage: safe.
            Some((number, snapshot)) => {
                ManifestWriter::create(&*self.options.fs, &self.dir, number, &snapshot)
                    .map(|w| *manifest = w)
            }
        }
        .map_err(Error::from);
        let mut st = self.state.lock();
        if let Some((number, _)) = &rollover_number {
            st.pending_outputs.remove(number);
        }
        if let Err(e) = result {
            // The MANIFEST may now end in a partial record; further edits could not be trusted.
            self.set_bg_error(&mut st, &e);
            return Err(e);
        }
        // The edit is durable: if we crash from here on, recovery rebuilds this version.
        st.versions.manifest_number = manifest.number();
        st.versions.install(version, &edit);
        installed(&mut st);
        let current = Arc::clone(st.versions.current());
        drop(st);
        drop(manifest_guard);
        Ok(current)
    }

    /// Deletes table, WAL, MANIFEST and temporary files that no live version, pending job or
    /// recovery needs, in every table directory, and returns how many table and temporary
    /// files it deleted (at open: the orphans a crash left). Errors are
    /// logged, not returned: a leftover file wastes space but is harmless, and it is retried
    /// after the next install.
    ///
    /// At open, `next_file_number` is above every number on disk, so every unreferenced table
    /// is collected, whatever its number; later, numbers from `next_file_number` on are left
    /// alone, as a job may be creating them.
    pub(crate) fn delete_obsolete_files(&self) -> usize {
        if self.read_only {
            return 0;
        }
        let mut deleted = 0;
        // Told to the listeners once the collection is over (a callback may collect too).
        let mut told = Vec::new();
        // One collector at a time: two would race to delete the same files.
        let collecting = self.obsolete_files_lock.lock();
        let (live, pending, first_unsafe, log_number, manifest_number) = {
            let mut st = self.state.lock();
            if st.file_deletions_held > 0 {
                // Collected by the first collection after the hold ends.
                return 0;
            }
            let live = st.versions.live_file_numbers();
            let pending = st.pending_outputs.clone();
            // Files numbered from here on may be created by jobs that start after this
            // snapshot of `pending` and before the directory listing below: never touch them.
            let first_unsafe = st.versions.next_file_number;
            // Durable: no keyspace needs a WAL below it (see `db::journal`), and the
            // memtables all began at or above it.
            let log_number = st.versions.log_number;
            (
                live,
                pending,
                first_unsafe,
                log_number,
                st.versions.manifest_number,
            )
        };
        for dir in self.table_cache.dirs() {
            let Ok(names) = self.options.fs.list_dir(dir) else {
                continue;
            };
            for name in names {
                let Some((kind, number)) = name.to_str().and_then(parse_file_name) else {
                    continue;
                };
                let obsolete = match kind {
                    FileType::Table | FileType::Blob => {
                        number < first_unsafe
                            && !live.contains(&number)
                            && !pending.contains(&number)
                    }
                    FileType::Log => number < log_number,
                    FileType::Manifest => number < manifest_number,
                    FileType::Temp => number < first_unsafe && !pending.contains(&number),
                    FileType::Current | FileType::Lock => false,
                };
                if !obsolete {
                    continue;
                }
                if matches!(kind, FileType::Table | FileType::Blob) {
                    self.table_cache.evict(number);
                }
                let path = dir.join(&name);
                // If we crash before the directory is synced, the file may come back; it is
                // still obsolete then, and the next collection deletes it again.
                match self.options.fs.remove(&path).with_path(&path) {
                    Ok(()) => {
                        deleted += usize::from(matches!(
                            kind,
                            FileType::Table | FileType::Blob | FileType::Temp
                        ));
                        tracing::debug!(file = %path.display(), "deleted obsolete file");
                        let kind = match kind {
                            FileType::Table => Some(FileKind::Table),
                            FileType::Blob => Some(FileKind::Blob),
                            _ => None,
                        };
                        if let Some(kind) = kind.filter(|_| !self.events.is_empty()) {
                            told.push(TableFileInfo {
                                kind,
                                number,
                                path,
                                ..TableFileInfo::default()
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "could not delete obsolete file"),
                }
            }
        }
        drop(collecting);
        self.events
            .each(|l| told.iter().for_each(|f| l.on_table_file_deleted(f)));
        deleted
    }
}

impl FileNumbers for Tree {
    fn reserve(&self, count: u64) -> std::ops::Range<u64> {
        let mut st = self.state.lock();
        let first = st.versions.new_file_number();
        st.pending_outputs.insert(first);
        for _ in 1..count {
            let n = st.versions.new_file_number();
            st.pending_outputs.insert(n);
        }
        first..first + count
    }

    fn release(&self, numbers: &[u64]) {
        let mut st = self.state.lock();
        for n in numbers {
            st.pending_outputs.remove(n);
        }
    }
}
