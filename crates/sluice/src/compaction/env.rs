//! What a job (a compaction, a flush, a range split) may use of the database: a narrow
//! environment instead of the database itself.
//!
//! A job reads its inputs through the table cache, writes new tables under numbers it
//! reserves here, and returns a version edit; it never sees the version set, the MANIFEST or
//! the database's locks. Only `db/` applies edits (and so commits the MANIFEST), and it drops
//! the environment, which releases the job's file numbers, only once the edit is installed or
//! abandoned.

use std::ops::Range;
use std::path::PathBuf;

use parking_lot::Mutex;
use sluice_sst::key::SeqNo;

use super::remote::RemoteExecutors;
use crate::options::Options;
use crate::table_cache::TableCache;

/// Hands out file numbers. Implemented by the database over its version set.
pub(crate) trait FileNumbers: Sync {
    /// Reserves `count` consecutive file numbers. Until [`FileNumbers::release`] is called
    /// for them, no obsolete-file collection deletes a file named with one of them, so a job
    /// can write its tables before the edit that names them is installed.
    fn reserve(&self, count: u64) -> Range<u64>;

    /// Lets obsolete-file collection see `numbers` again: the edit naming their files is
    /// installed (they are live) or was abandoned (they are garbage).
    fn release(&self, numbers: &[u64]);
}

/// One job's view of the database. Dropping it releases every file number the job reserved,
/// so it must outlive the installation of the job's edit.
pub struct JobEnv<'a> {
    /// The database's options.
    pub(crate) options: &'a Options,
    /// Open tables, and the directories new tables go to.
    pub(crate) table_cache: &'a TableCache,
    /// Sequence numbers of the live snapshots when the job started, oldest first: versions a
    /// snapshot can see are kept.
    pub(crate) snapshots: Vec<SeqNo>,
    /// The compaction workers, if the database offloads.
    pub(crate) remote: Option<&'a dyn RemoteExecutors>,
    /// The keyspace whose tree the job works on (0: the default one).
    keyspace: u32,
    numbers: &'a dyn FileNumbers,
    /// Numbers this job reserved; released on drop.
    reserved: Mutex<Vec<u64>>,
}

impl<'a> JobEnv<'a> {
    /// An environment over the database's parts.
    pub(crate) fn new(
        options: &'a Options,
        table_cache: &'a TableCache,
        snapshots: Vec<SeqNo>,
        numbers: &'a dyn FileNumbers,
    ) -> Self {
        JobEnv {
            options,
            table_cache,
            snapshots,
            remote: None,
            keyspace: 0,
            numbers,
            reserved: Mutex::new(Vec::new()),
        }
    }

    /// The same environment with compaction workers.
    pub(crate) fn with_remote(mut self, remote: Option<&'a dyn RemoteExecutors>) -> Self {
        self.remote = remote;
        self
    }

    /// The job works on keyspace `id`'s tree.
    pub(crate) fn in_keyspace(mut self, id: u32) -> Self {
        self.keyspace = id;
        self
    }

    /// The keyspace whose tree the job works on (0: the default one): its tables are in
    /// `keyspaces/<id>/` under each of the database's directories.
    pub fn keyspace(&self) -> u32 {
        self.keyspace
    }

    /// Reserves `count` consecutive file numbers for this job (see `FileNumbers::reserve`).
    pub fn reserve_numbers(&self, count: u64) -> Range<u64> {
        let numbers = self.numbers.reserve(count);
        self.reserved.lock().extend(numbers.clone());
        numbers
    }

    /// Every directory that may hold tables, the database directory first: a table's
    /// `dir_index` indexes it.
    pub fn table_dirs(&self) -> &[PathBuf] {
        self.table_cache.dirs()
    }

    /// Closes the cached reader of table `number`, whose file is about to be deleted.
    pub fn evict_table(&self, number: u64) {
        self.table_cache.evict(number);
    }

    /// A number and a path for a new table in table directory `dir_index`.
    pub(crate) fn new_table(&self, dir_index: u32) -> (u64, PathBuf) {
        let number = self.reserve_numbers(1).start;
        (number, self.table_cache.table_path(dir_index, number))
    }

    /// Largest overlap, in bytes, of one output table with the level below its level; also
    /// the most a trivial move may leave overlapping there.
    pub(crate) fn max_grandparent_overlap_bytes(&self) -> u64 {
        self.options
            .compaction
            .max_grandparent_overlap_factor
            .saturating_mul(self.options.compaction.target_file_size_base)
    }
}

impl Drop for JobEnv<'_> {
    fn drop(&mut self) {
        let reserved = std::mem::take(self.reserved.get_mut());
        if !reserved.is_empty() {
            self.numbers.release(&reserved);
        }
    }
}
