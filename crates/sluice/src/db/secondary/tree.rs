//! One tree as a secondary instance follows it: its MANIFEST read as the primary appends to
//! it, the version set that rebuilds, and the memtables its WAL entries go to.

use std::path::PathBuf;
use std::sync::Arc;

use crate::filename::read_current_file;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::manifest::read_manifest_from;
use crate::version::set::VersionSet;
use crate::{Error, Result};

/// What the follower knows of one tree (the default keyspace's, whose MANIFEST is the
/// database's, or another keyspace's). Nothing here is seen by readers until the catch-up
/// publishes it.
pub(super) struct FollowedTree {
    pub name: String,
    pub dir: PathBuf,
    pub options: Options,
    /// Holds every file of every version readers may still read.
    pub table_cache: Arc<TableCache>,
    /// Where the MANIFEST was read up to (`None` before the first read).
    manifest: Option<ManifestPosition>,
    /// The state the MANIFEST describes as far as it was read.
    pub versions: VersionSet,
    /// The entries read from WALs the tree's tables do not cover yet, one series of
    /// memtables per WAL, oldest first.
    pub mems: Vec<Arc<MemTable>>,
}

/// The MANIFEST being followed and the end of its last complete edit.
struct ManifestPosition {
    path: PathBuf,
    offset: u64,
}

impl FollowedTree {
    pub fn new(name: &str, dir: PathBuf, options: Options, table_cache: Arc<TableCache>) -> Self {
        FollowedTree {
            name: name.to_string(),
            dir,
            options,
            table_cache,
            manifest: None,
            versions: VersionSet::new_empty(),
            mems: Vec::new(),
        }
    }

    /// Reads what the primary appended to the MANIFEST since the last call, or, when
    /// `CURRENT` names another MANIFEST (the primary reopened), that whole MANIFEST. Returns
    /// whether the state changed.
    ///
    /// A MANIFEST the primary deleted after `CURRENT` was read (it switched again) is an
    /// `Io` error of kind `NotFound`, as is the `CURRENT` of a keyspace it dropped: the
    /// caller reads again from the database's MANIFEST.
    pub fn follow_manifest(&mut self) -> Result<bool> {
        let fs = &*self.options.fs;
        let name = read_current_file(fs, &self.dir)?;
        let path = self.dir.join(&name);
        if let Some(at) = self.manifest.as_mut().filter(|at| at.path == path) {
            let contents = read_manifest_from(fs, &path, at.offset)?;
            for edit in &contents.edits {
                if let Err(e) = self.versions.replay(edit, &path) {
                    // Half applied: the next call reads the MANIFEST whole.
                    self.manifest = None;
                    return Err(e);
                }
            }
            at.offset = contents.valid_len;
            return Ok(!contents.edits.is_empty());
        }
        let contents = read_manifest_from(fs, &path, 0)?;
        if contents.edits.is_empty() {
            // `CURRENT` names a MANIFEST only once its first edit is synced.
            return Err(Error::corruption(
                &path,
                0,
                "manifest holds no complete edit",
            ));
        }
        let mut versions = VersionSet::from_manifest(&contents.edits, &path)?;
        crate::db::open::check_value_format(&mut versions, true, &self.options, &self.dir)?;
        let keyspace =
            (self.name != crate::keyspace::DEFAULT_KEYSPACE).then_some(self.name.as_str());
        let tree = (self.dir.as_path(), keyspace);
        crate::db::open::check_merge_operator(&mut versions, &self.options, tree, false)?;
        if crate::db::open::reconcile_partitions(&versions, &self.options)?.is_some() {
            return Err(Error::InvalidArgument(
                "partitioning a database needs a read-write open".into(),
            ));
        }
        self.versions = versions;
        self.manifest = Some(ManifestPosition {
            path,
            offset: contents.valid_len,
        });
        Ok(true)
    }

    /// Before a batch of WAL `wal`: starts a new memtable if the newest one holds this WAL's
    /// entries and is full.
    pub fn start_batch(&mut self, wal: u64) {
        let size = self.options.memtable.write_buffer_size;
        if self
            .mems
            .last()
            .is_some_and(|m| m.log_number() == wal && m.approximate_bytes() >= size)
        {
            self.mems
                .push(Arc::new(MemTable::for_write_buffer(wal, size)));
        }
    }

    /// The memtable WAL `wal`'s entries of this tree go to: the newest, if it holds that
    /// WAL's entries, or a new one.
    pub fn memtable_for(&mut self, wal: u64) -> &MemTable {
        if self.mems.last().is_none_or(|m| m.log_number() != wal) {
            let size = self.options.memtable.write_buffer_size;
            self.mems
                .push(Arc::new(MemTable::for_write_buffer(wal, size)));
        }
        // Pushed just above when there was none.
        &self.mems[self.mems.len() - 1]
    }

    /// Forgets the memtables of WALs below `floor`, whose entries the tables now hold.
    pub fn drop_flushed(&mut self, floor: u64) {
        self.mems.retain(|m| m.log_number() >= floor);
    }
}
