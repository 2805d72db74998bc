//! Checkpoints: an openable copy of the database as of one moment (RocksDB's `Checkpoint`).
//!
//! A checkpoint is three things, made in this order:
//! 1. the tables of the current version, hard-linked into the checkpoint directory (copied
//!    where the file system cannot link: another device, no link support). Tables never change
//!    once written, so a link is as good as a copy and costs no space;
//! 2. copies of the WALs that hold what those tables do not, the live one cut at the last
//!    record written when the version was taken, so the copy ends on a record boundary;
//! 3. a new MANIFEST describing exactly those files, and `CURRENT` naming it, written last:
//!    a directory without `CURRENT` is an unfinished checkpoint, never a wrong database.
//!
//! The version and the WAL positions are taken together, with the WAL lock (no commit writes)
//! and the state lock (no version installs) held, so the checkpoint holds every write
//! acknowledged before the call, and each later write either whole or not at all. File
//! deletions are held off until the copy is done: a flush finishing meanwhile may make a
//! copied WAL obsolete, and it must stay until it is copied.
//!
//! Keyspaces: each tree's version is taken under its own state lock while the WAL lock is
//! still held, so no write lands between them; each tree's tables and MANIFEST go to
//! `keyspaces/<id>/` of the copy, before the database's `CURRENT`. A tree flushing between two
//! of these reads is harmless: its MANIFEST names the WAL its unflushed writes start in, and
//! every WAL from the oldest any tree needs is copied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::{Copied, Placed, copy_file, link_or_copy};

use super::{Db, Tree};
use crate::filename::{FileType, create_dir_all_durably, log_file_name, sync_dir};
use crate::keyspace::options::keyspace_dir;
use crate::version::edit::VersionEdit;
use crate::version::manifest::ManifestWriter;
use crate::{Error, IoContext, Result};

/// What [`Db::checkpoint`] made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointReport {
    /// Where the checkpoint is.
    pub dir: PathBuf,
    /// Tables hard-linked: no bytes copied.
    pub tables_linked: usize,
    /// Tables copied because they could not be linked.
    pub tables_copied: usize,
    /// WAL files copied.
    pub wals_copied: usize,
    /// Bytes copied (tables that could not be linked, and WALs).
    pub bytes_copied: u64,
    /// Every write up to this sequence number is in the checkpoint.
    pub sequence: u64,
}

/// Keeps obsolete-file collection from deleting anything in one tree while it lives.
pub(crate) struct DeletionHold(Arc<Tree>);

impl DeletionHold {
    fn new(inner: Arc<Tree>) -> Self {
        inner.state.lock().file_deletions_held += 1;
        DeletionHold(inner)
    }
}

impl Drop for DeletionHold {
    fn drop(&mut self) {
        let released = {
            let mut st = self.0.state.lock();
            st.file_deletions_held -= 1;
            st.file_deletions_held == 0
        };
        if released {
            // What became obsolete meanwhile goes now, not at the next install.
            self.0.delete_obsolete_files();
        }
    }
}

/// A table or blob file of [`LiveFiles`].
pub(crate) struct LiveTable {
    /// Where it is in the source.
    pub path: PathBuf,
    pub number: u64,
    pub size: u64,
    /// The whole-file CRC32C the MANIFEST recorded (tables only, and not those of older
    /// builds): a copy must find it, or the file was changed since it was installed.
    pub checksum: Option<u32>,
    /// [`FileType::Table`] or [`FileType::Blob`].
    pub kind: FileType,
}

impl LiveTable {
    /// Its name in a copy: `NNNNNN.sst` or `NNNNNN.blob`.
    pub fn file_name(&self) -> String {
        format!("{:06}.{}", self.number, self.kind_extension())
    }

    /// Fails with `Corruption` naming the file unless `copied` (what a copy of it read) has
    /// the size and the checksum the MANIFEST recorded.
    pub fn check_copied(&self, copied: &Copied) -> Result<()> {
        let recorded = self.checksum.unwrap_or(copied.crc32c);
        if copied.len != self.size || copied.crc32c != recorded {
            return Err(crate::Error::corruption(
                &self.path,
                0,
                format!(
                    "copied {} bytes with CRC32C {:08x}; the MANIFEST recorded {} bytes{}: the \
                     file changed after it was installed",
                    copied.len,
                    copied.crc32c,
                    self.size,
                    self.checksum
                        .map_or(String::new(), |c| format!(" with CRC32C {c:08x}"))
                ),
            ));
        }
        Ok(())
    }

    /// `sst` or `blob`.
    pub fn kind_extension(&self) -> &'static str {
        match self.kind {
            FileType::Blob => "blob",
            _ => "sst",
        }
    }
}

/// A WAL of [`LiveFiles`]: its first `len` bytes are the database's.
pub(crate) struct LiveWal {
    pub path: PathBuf,
    pub number: u64,
    pub len: u64,
}

/// The files holding the database as of one moment, and the MANIFEST snapshot naming them
/// (with every table in directory 0 and exactly these WALs). Nothing is deleted while this
/// lives: the holds keep the tables as well as the WALs.
pub(crate) struct LiveFiles {
    pub snapshot: VersionEdit,
    pub tables: Vec<LiveTable>,
    pub wals: Vec<LiveWal>,
    pub manifest_number: u64,
    pub sequence: u64,
    /// Each keyspace's tree as of the same moment.
    pub keyspaces: Vec<LiveTree>,
    _holds: Vec<DeletionHold>,
}

/// A keyspace's tree in [`LiveFiles`]: its files go to `keyspaces/<id>/` of a copy.
pub(crate) struct LiveTree {
    pub id: u32,
    /// Its MANIFEST snapshot, every table in directory 0.
    pub snapshot: VersionEdit,
    pub tables: Vec<LiveTable>,
    pub manifest_number: u64,
}

/// The tables and blob files `snapshot` names, moved to directory 0 of a copy.
fn tables_of(inner: &Tree, snapshot: &mut VersionEdit) -> Vec<LiveTable> {
    let cache = &inner.table_cache;
    let tables = snapshot.new_files.iter_mut().map(|(_, file)| {
        let path = cache.table_path(file.dir_index, file.number);
        file.dir_index = 0;
        LiveTable {
            path,
            number: file.number,
            size: file.file_size,
            checksum: file.file_checksum,
            kind: FileType::Table,
        }
    });
    let blobs = snapshot.new_blob_files.iter_mut().map(|blob| {
        let path = cache.blob_path(blob.dir_index, blob.number);
        blob.dir_index = 0;
        LiveTable {
            path,
            number: blob.number,
            size: blob.file_size,
            checksum: None,
            kind: FileType::Blob,
        }
    });
    tables.chain(blobs).collect()
}

impl Db {
    /// Takes the database's files as of now: the version and the WAL positions under the WAL
    /// and state locks together (see the module docs).
    pub(crate) fn live_files(&self) -> Result<LiveFiles> {
        let journal = &*self.journal;
        let inner = &*journal.default;
        let fs = &*inner.options.fs;
        let trees = journal.trees();
        let mut holds = vec![DeletionHold::new(Arc::clone(&journal.default))];
        holds.extend(trees.iter().map(|t| DeletionHold::new(Arc::clone(&t.tree))));
        let (mut snapshot, active_wal, sequence, manifest_number, mut keyspaces) = {
            let mut wal = journal.wal.lock();
            let active_wal = match wal.as_mut() {
                Some(w) => {
                    w.flush()?;
                    w.log_number().map(|n| (n, w.len()))
                }
                None => None,
            };
            let sequence = inner.latest_seq();
            // The trees first, each under its own lock only: the WAL lock keeps writes out.
            // Each copied tree needs the WALs from its oldest unflushed write on: a flush
            // after its copy was taken may move the floor past them (the holds keep them).
            let mut keyspaces = Vec::new();
            let mut trees_need = u64::MAX;
            for tree in &trees {
                let st = tree.tree.state.lock();
                Tree::check_bg_error(&st)?;
                if let Some(needed) = Tree::unflushed_wal(&st) {
                    trees_need = trees_need.min(needed);
                }
                let mut snapshot = st.versions.snapshot_edit();
                snapshot.last_sequence = Some(sequence);
                keyspaces.push(LiveTree {
                    id: tree.id,
                    snapshot,
                    tables: Vec::new(),
                    manifest_number: st.versions.manifest_number,
                });
            }
            let st = inner.state.lock();
            Tree::check_bg_error(&st)?;
            // The durable floor: no keyspace needs an older WAL (see `db::journal`),
            // lowered to what the copied trees need.
            let min_log = st.versions.log_number.min(trees_need);
            let mut snapshot = st.versions.snapshot_edit();
            snapshot.log_number = Some(min_log);
            snapshot.last_sequence = Some(sequence);
            // Exactly the keyspaces copied: one created since the list was taken has no
            // files in the copy.
            snapshot
                .keyspaces_created
                .retain(|(id, _)| keyspaces.iter().any(|t| t.id == *id));
            // Held to the copied trees: one may have flushed (and the floor recorded it)
            // after its copy was taken.
            snapshot.keyspace_log_numbers.retain_mut(|(id, n)| {
                let copied = keyspaces.iter().find(|t| t.id == *id);
                match copied.and_then(|t| t.snapshot.log_number) {
                    Some(boundary) => {
                        *n = (*n).min(boundary);
                        true
                    }
                    None => false,
                }
            });
            (
                snapshot,
                active_wal,
                sequence,
                st.versions.manifest_number,
                keyspaces,
            )
        };
        let tables = tables_of(inner, &mut snapshot);
        for (live, tree) in keyspaces.iter_mut().zip(&trees) {
            live.tables = tables_of(&tree.tree, &mut live.snapshot);
        }
        let min_log = snapshot.log_number.unwrap_or_default();
        let tracked = std::mem::take(&mut snapshot.wals);
        let mut wals = Vec::new();
        let mut numbers: Vec<u64> = super::recover::numbered_files(fs, &inner.dir)?
            .into_iter()
            .filter(|&(kind, n)| kind == FileType::Log && n >= min_log)
            .map(|(_, n)| n)
            .collect();
        numbers.sort_unstable();
        for number in numbers {
            let path = log_file_name(&inner.dir, number);
            let (len, synced) = match active_wal {
                // The live WAL ends, for us, at the last record written when the version was
                // taken: a copy ending there ends on a record boundary, synced whole.
                Some((active, len)) if active == number => (len, len),
                // WALs created since belong to later writes.
                Some((active, _)) if number > active => continue,
                // Finished WALs (cut to their last record at the switch) or, read-only, what
                // a crash left: whole, claiming no more than the source's MANIFEST did.
                _ => {
                    let len = fs.metadata(&path).with_path(&path)?.len;
                    let synced = tracked
                        .iter()
                        .find(|&&(n, _)| n == number)
                        .map_or(0, |&(_, s)| s.min(len));
                    (len, synced)
                }
            };
            snapshot.wals.push((number, synced));
            wals.push(LiveWal { path, number, len });
        }
        Ok(LiveFiles {
            snapshot,
            tables,
            wals,
            manifest_number,
            sequence,
            keyspaces,
            _holds: holds,
        })
    }

    /// Writes an openable copy of the database as of now into `dir`, which must not exist or
    /// be empty, on the same file system ([`crate::Options::fs`]).
    ///
    /// Tables are hard-linked where possible, so a checkpoint on the same file system costs
    /// little space until the database compacts those tables away; WALs are copied. The
    /// checkpoint holds every write acknowledged before the call. Tables in other
    /// [`crate::Options::data_dirs`] are placed in `dir` too, so the checkpoint opens with
    /// default options. The database keeps serving reads and writes meanwhile; a read-only
    /// database can be checkpointed too, and is not modified.
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// db.put(b"k", b"v")?;
    /// db.checkpoint("/tmp/sluice-doc-checkpoint")?;
    /// let copy = sluice::Db::open("/tmp/sluice-doc-checkpoint", sluice::Options::default())?;
    /// assert_eq!(copy.get(b"k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok::<(), sluice::Error>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointReport> {
        let fs = &*self.tree.options.fs;
        let dir = dir.as_ref();
        create_empty_dir(fs, dir, "checkpoint")?;
        let live = self.live_files()?;
        let mut report = CheckpointReport {
            dir: dir.to_path_buf(),
            sequence: live.sequence,
            ..CheckpointReport::default()
        };
        let mut place_tables = |to_dir: &Path, tables: &[LiveTable]| -> Result<()> {
            for table in tables {
                let to = to_dir.join(table.file_name());
                match link_or_copy(fs, &table.path, &to).with_path(&to)? {
                    Placed::Linked => report.tables_linked += 1,
                    Placed::Copied(copied) => {
                        table.check_copied(&copied)?;
                        report.tables_copied += 1;
                        report.bytes_copied += copied.len;
                    }
                }
            }
            Ok(())
        };
        place_tables(dir, &live.tables)?;
        // Each keyspace's tree, MANIFEST and CURRENT included, before the database's CURRENT
        // makes the copy a database.
        for tree in &live.keyspaces {
            let tree_dir = keyspace_dir(dir, tree.id);
            create_dir_all_durably(fs, &tree_dir)?;
            place_tables(&tree_dir, &tree.tables)?;
            ManifestWriter::create(fs, &tree_dir, tree.manifest_number, &tree.snapshot)?;
        }
        for wal in &live.wals {
            let to = log_file_name(dir, wal.number);
            report.bytes_copied += copy_file(fs, &wal.path, &to, Some(wal.len))
                .with_path(&to)?
                .len;
            report.wals_copied += 1;
        }
        // Writes the MANIFEST, syncs `dir` (making every link and copy above durable by
        // name), then switches CURRENT.
        ManifestWriter::create(fs, dir, live.manifest_number, &live.snapshot)?;
        sync_parent(fs, dir)?;
        Ok(report)
    }
}

/// Creates `dir` for a `what` (checkpoint, restore), refusing one that holds anything.
pub(crate) fn create_empty_dir(
    fs: &dyn sluice_sst::fs::FileSystem,
    dir: &Path,
    what: &str,
) -> Result<()> {
    if fs.exists(dir).with_path(dir)? && !fs.list_dir(dir).with_path(dir)?.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{what} directory {} exists and is not empty",
            dir.display()
        )));
    }
    fs.create_dir_all(dir).with_path(dir)
}

/// Makes `dir`'s own name durable.
pub(crate) fn sync_parent(fs: &dyn sluice_sst::fs::FileSystem, dir: &Path) -> Result<()> {
    match dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => Ok(sync_dir(fs, parent)?),
        None => Ok(()),
    }
}
