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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::{Placed, copy_file, link_or_copy};

use super::{Db, DbInner};
use crate::filename::{FileType, log_file_name, sync_dir, table_file_name};
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

/// Keeps obsolete-file collection from deleting anything while it lives.
struct DeletionHold<'a>(&'a DbInner);

impl<'a> DeletionHold<'a> {
    fn new(inner: &'a DbInner) -> Self {
        inner.state.lock().file_deletions_held += 1;
        DeletionHold(inner)
    }
}

impl Drop for DeletionHold<'_> {
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

impl Db {
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
        let inner = &*self.inner;
        let fs = &*inner.options.fs;
        let dir = dir.as_ref();
        if fs.exists(dir).with_path(dir)? && !fs.list_dir(dir).with_path(dir)?.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "checkpoint directory {} exists and is not empty",
                dir.display()
            )));
        }
        fs.create_dir_all(dir).with_path(dir)?;
        let _hold = DeletionHold::new(inner);
        let (version, mut snapshot, active_wal, sequence) = {
            let mut wal = inner.wal.lock();
            let active_wal = match wal.as_mut() {
                Some(w) => {
                    w.flush()?;
                    w.log_number().map(|n| (n, w.len()))
                }
                None => None,
            };
            let st = inner.state.lock();
            DbInner::check_bg_error(&st)?;
            let min_log = st
                .imm
                .front()
                .map_or(st.mem.log_number(), |m| m.log_number())
                .min(st.versions.log_number);
            let mut snapshot = st.versions.snapshot_edit();
            snapshot.log_number = Some(min_log);
            let sequence = inner.latest_seq();
            snapshot.last_sequence = Some(sequence);
            (
                Arc::clone(st.versions.current()),
                snapshot,
                active_wal,
                sequence,
            )
        };
        let mut report = CheckpointReport {
            dir: dir.to_path_buf(),
            sequence,
            ..CheckpointReport::default()
        };
        for (_, file) in &mut snapshot.new_files {
            let from = inner.table_cache.table_path(file.dir_index, file.number);
            let to = table_file_name(dir, file.number);
            match link_or_copy(fs, &from, &to).with_path(&to)? {
                Placed::Linked => report.tables_linked += 1,
                Placed::Copied(bytes) => {
                    report.tables_copied += 1;
                    report.bytes_copied += bytes;
                }
            }
            file.dir_index = 0;
        }
        drop(version);
        let min_log = snapshot.log_number.unwrap_or_default();
        let tracked = std::mem::take(&mut snapshot.wals);
        for (kind, number) in super::recover::numbered_files(fs, &inner.dir)? {
            if kind != FileType::Log || number < min_log {
                continue;
            }
            let from = log_file_name(&inner.dir, number);
            let to = log_file_name(dir, number);
            // The live WAL is cut where the version was taken; the others are finished (cut
            // to their last record at the switch) or, read-only, whatever a crash left.
            let len = active_wal.and_then(|(n, len)| (n == number).then_some(len));
            let copied = copy_file(fs, &from, &to, len).with_path(&to)?;
            report.wals_copied += 1;
            report.bytes_copied += copied;
            // The copy is synced through `copied`; the claim stays no larger than what the
            // source claimed, except for the live WAL, which ends exactly on a record.
            let synced = match len {
                Some(_) => copied,
                None => tracked
                    .iter()
                    .find(|&&(n, _)| n == number)
                    .map_or(0, |&(_, s)| s.min(copied)),
            };
            snapshot.wals.push((number, synced));
        }
        let manifest_number = self.inner.state.lock().versions.manifest_number;
        // Writes the MANIFEST, syncs `dir` (making every link and copy above durable by
        // name), then switches CURRENT.
        ManifestWriter::create(fs, dir, manifest_number, &snapshot)?;
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(fs, parent)?;
        }
        Ok(report)
    }
}
