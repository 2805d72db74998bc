//! Options for opening a database, reading and writing.
//!
//! Defaults follow RocksDB's where the two engines share a concept, so a user moving from RocksDB
//! gets the behaviour they expect. Every limit is named with its unit last.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_sst::fs::{FileSystem, IoMode, Storage};

pub use crate::wal::WalRecoveryMode;
pub use sluice_exec::CompactionMode;
use sluice_exec::ExecOptions;
pub use sluice_sst::compaction_iter::{CompactionFilter, FilterDecision};
pub use sluice_sst::compression::CompressionType;
pub use sluice_sst::merge_operator::MergeOperator;
pub use sluice_sst::prefix::PrefixExtractor;
pub use sluice_sst::table::TableOptions;

pub use crate::partition::{PartitionOptions, PartitionOwner};
use crate::rate_limiter::{RateLimiter, rate_limited};
use crate::snapshot::Snapshot;

/// Number of levels in the tree (L0..L6).
pub use crate::version::edit::NUM_LEVELS;
use crate::{Error, Result};

/// The options [`crate::Db::set_options`] changes on a live database.
pub use crate::db::set_options::MUTABLE_OPTIONS;

/// Options for [`crate::Db::open`].
///
/// The fields here are database-wide; the settings of the tree itself are grouped in
/// [`Options::memtable`], [`Options::table`] and [`Options::compaction`], as RocksDB separates
/// its `DBOptions` from its per-column-family options.
#[derive(Clone, Debug)]
pub struct Options {
    /// Create the database if `path` holds none.
    pub create_if_missing: bool,
    /// Fail if a database already exists at `path`.
    pub error_if_exists: bool,
    /// How big memtables grow and how many are kept.
    pub memtable: MemtableOptions,
    /// How tables are written (block size, compression, filters).
    pub table: TableOptions,
    /// When and how compactions run.
    pub compaction: CompactionOptions,
    /// Whether large values are kept in blob files (value separation; off by default).
    pub blob: crate::BlobOptions,
    /// Capacity of the block cache in bytes (0 disables it).
    pub block_cache_bytes: usize,
    /// A block cache to share with other databases (RocksDB's shared `Cache`): made with
    /// [`BlockCache::new`](crate::BlockCache::new), wrapped in an `Arc`, and given to each.
    /// Each keyspace of each database caches under a namespace of its own, and the cache's
    /// figures in [`crate::Metrics`] are then the shared cache's. `None` (the default): a
    /// cache of `block_cache_bytes` of this database's own.
    pub block_cache: Option<Arc<crate::BlockCache>>,
    /// Tables kept open in the table cache.
    pub max_open_files: usize,
    /// Largest key accepted, in bytes.
    pub max_key_size: usize,
    /// Largest value accepted, in bytes.
    pub max_value_size: usize,
    /// Verify block checksums on every read (compaction and `check` always verify).
    pub verify_checksums: bool,
    /// How to treat a damaged WAL on recovery.
    pub wal_recovery_mode: WalRecoveryMode,
    /// Extra data directories (one per storage device). Empty means "the database directory".
    pub data_dirs: Vec<PathBuf>,
    /// The file system tables live on. The default is the operating system's; tests put a
    /// [`sluice_sst::fs::FaultInjectingFs`] here to fail chosen reads, writes and syncs.
    pub fs: Arc<dyn FileSystem>,
    /// Check the tree's invariants after every version edit (files of L1+ disjoint, L0 in
    /// sequence order, every named table on disk) and fail the edit if one breaks. Always on
    /// in debug builds; tests turn it on in release builds too.
    pub paranoid_checks: bool,
    /// Limits the bytes per second flushes and compactions write (RocksDB's `rate_limiter`);
    /// keep the `Arc` to change the rate while the database runs. `None`: no limit.
    pub rate_limiter: Option<Arc<RateLimiter>>,
    /// Compaction workers to share big compactions with (the MStore and CoPro papers):
    /// `sluice_offload::OffloadOptions`, or any other [`crate::compaction::remote::Offload`].
    /// `None`: every compaction runs on this host. Each worker must serve this database's table
    /// directories.
    pub offload: Option<Arc<dyn crate::compaction::remote::Offload>>,
    /// Partitioned mode (the MStore paper): key ranges owned by directories and their workers.
    /// `None`: one tree in the database directory (and `data_dirs`).
    pub partitions: Option<PartitionOptions>,
    /// Shown the newest value of each key that compactions write, if no snapshot can see it,
    /// to keep, change or remove (RocksDB's `CompactionFilter`; see
    /// [`sluice_sst::compaction_iter`] for exactly which versions it sees). Flushes do not run
    /// it. Compactions it applies to run on this host: workers are not given the filter.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// Combines the operands [`Db::merge`](crate::Db::merge) writes with a key's value, on
    /// reads and in compactions (RocksDB's `MergeOperator`; [`sluice_sst::merge_operator`]
    /// has the contract and the built-in `u64_add` and `append`). A database holding operands
    /// must be reopened with the same operator: without one, reading a key with operands is an
    /// error, and compactions keep operands as they are. Workers run the compactions it
    /// applies to only if they know an operator of the same name (the built-ins).
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Values expire this long after they are written (RocksDB's `DBWithTTL`, at whole
    /// seconds): reads stop returning them at once, and compactions remove them (also when a
    /// snapshot is older: only values no snapshot can see are removed). Each value is stored
    /// with its write time ([`sluice_sst::ttl`]), so a database is created with or without a
    /// TTL for good: it must be reopened with one (any length), and one written without
    /// cannot take one. Not with [`Options::merge_operator`], nor ingestion.
    pub ttl: Option<std::time::Duration>,
    /// Told of flushes, compactions, files created and deleted, write stalls and background
    /// errors as they happen ([`crate::events`]), in this order.
    pub listeners: Vec<Arc<dyn crate::EventListener>>,
    /// The `LOG` file in the database directory ([`crate::info_log`]).
    pub info_log: crate::info_log::InfoLogOptions,
    /// The settings of the database's keyspaces, by name ([`crate::Db::create_keyspace`]):
    /// each existing keyspace opens with its entry here, or with the defaults when it has
    /// none. The fields above are the default keyspace's.
    pub keyspaces: std::collections::BTreeMap<String, crate::KeyspaceOptions>,
    /// Create each keyspace [`Options::keyspaces`] names that the database lacks, with its
    /// options there, when the database opens for writing (RocksDB's
    /// `create_missing_column_families`). Without it, such a name fails the open with
    /// [`Error::InvalidArgument`] listing the keyspaces the database has.
    pub create_missing_keyspaces: bool,
}

/// Memtable settings ([`Options::memtable`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemtableOptions {
    /// Bytes a memtable may hold before it is frozen and flushed.
    pub write_buffer_size: usize,
    /// Memtables (active + immutable) kept in memory before writes stall waiting for a flush.
    pub max_write_buffer_number: usize,
}

impl Default for MemtableOptions {
    fn default() -> Self {
        MemtableOptions {
            write_buffer_size: 64 << 20,
            max_write_buffer_number: 2,
        }
    }
}

impl MemtableOptions {
    /// Checks the memtable settings; the error names the offending option.
    pub fn validate(&self) -> Result<()> {
        if self.write_buffer_size < 64 << 10 {
            return bad(format!(
                "write_buffer_size must be at least 64 KiB, got {}",
                self.write_buffer_size
            ));
        }
        if self.max_write_buffer_number < 2 {
            return bad("max_write_buffer_number must be at least 2".into());
        }
        Ok(())
    }
}

/// Checks [`Options::table`] with the database's limits, which are tighter than the table
/// format's own ([`TableOptions::validate`]); the error names the offending option.
fn validate_table_options(table: &TableOptions) -> Result<()> {
    if !(256..=(4 << 20)).contains(&table.block_size) {
        return bad(format!(
            "block_size must be between 256 B and 4 MiB, got {}",
            table.block_size
        ));
    }
    if table.restart_interval == 0 {
        return bad("restart_interval must be at least 1".into());
    }
    if !(-7..=22).contains(&table.zstd_level) {
        return bad(format!(
            "zstd_level must be in -7..=22, got {}",
            table.zstd_level
        ));
    }
    if let Some(extractor) = &table.prefix_extractor {
        extractor.validate().map_err(Error::InvalidArgument)?;
    }
    Ok(())
}

/// Compaction settings ([`Options::compaction`]): when L0 compacts and stalls writes, how big
/// levels and files grow, and how compactions are executed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompactionOptions {
    /// L0 depth that triggers an L0 compaction. The depth is the number of L0 sublevels, the
    /// most L0 files one read visits (Pebble's read amplification): random-key flushes add one
    /// each, flushes of disjoint key ranges share one. Partitioned, it is the most L0 files of
    /// any one range.
    pub l0_compaction_trigger: usize,
    /// L0 depth at which each write is delayed by about a millisecond.
    pub l0_slowdown_writes_trigger: usize,
    /// L0 depth at which writes stop until compaction catches up.
    pub l0_stop_writes_trigger: usize,
    /// Number of L0 files that triggers an L0 compaction however shallow L0 is (Pebble's
    /// `L0CompactionFileThreshold`), so sequential loads, whose flushes never stack, still
    /// move down. Pebble's default is 500; ours is lower because a point read tests every L0
    /// file's key range.
    pub l0_compaction_file_threshold: usize,
    /// A flush cuts its L0 tables at the base level's file boundaries (the level L0 compacts
    /// into), at most once per this many bytes of it (Pebble's `FlushSplitBytes`), so L0
    /// compactions of different key intervals can run at once. 0 never cuts.
    pub l0_flush_split_bytes: u64,
    /// Target size of L1 in bytes; each deeper level is `max_bytes_for_level_multiplier` larger.
    /// With dynamic level sizing: the most the base level holds before a level is added above
    /// it, and the least any level's target is.
    pub max_bytes_for_level_base: u64,
    /// Growth factor between levels.
    pub max_bytes_for_level_multiplier: u64,
    /// Size the levels from the bottom up (RocksDB's option of the same name, on by default
    /// there since 8.4): the last level's target is the size of the largest level, each level
    /// above it `max_bytes_for_level_multiplier` smaller, and L0 compacts into the first level
    /// whose target reaches `max_bytes_for_level_base` (the base level); the levels above it
    /// stay empty. Data reaches the last level in fewer rewrites, and most of it sits there.
    /// Off, L1's target is `max_bytes_for_level_base` and L0 compacts into L1. Turned on for a
    /// database that has data above its last level, the next read-write open moves the levels
    /// down whole, by a MANIFEST edit (design note 0020).
    pub level_compaction_dynamic_level_bytes: bool,
    /// Size at which compaction output files are cut.
    pub target_file_size_base: u64,
    /// A compaction output is cut when it overlaps more than this many target-size files' worth
    /// of bytes in the grandparent level, to bound the cost of later compactions.
    pub max_grandparent_overlap_factor: u64,
    /// Turn off automatic background compactions (flushes still happen).
    pub disable_auto_compactions: bool,
    /// How each compaction is scheduled onto threads (SCP, PCP, C-PPCP).
    pub mode: CompactionMode,
    /// Input bytes per compaction sub-task (the PCP paper found 512 KiB best).
    pub sub_task_bytes: u64,
    /// Compute threads of the parallel executor.
    pub compaction_threads: usize,
    /// Automatic compactions that may run at once, on disjoint files and key ranges
    /// (RocksDB's `max_background_compactions`). Default: the number of cores.
    pub max_concurrent_compactions: usize,
    /// Sub-tasks that may wait between two pipeline stages. Deep enough to ride out bursts:
    /// with direct I/O every input's readahead window runs dry at about the same sub-task, and
    /// at depth 4 the compute stage of a 274 MB pipelined compaction waited 0.2 s for the read
    /// stage, at 16 under 0.1 s. Each queued sub-task holds about `sub_task_bytes` of blocks.
    pub compaction_queue_depth: usize,
    /// Read compaction inputs and write flush and compaction outputs with direct I/O
    /// (`O_DIRECT`), as RocksDB's option of the same name: background work stops evicting the
    /// page cache that foreground reads use, and its I/O becomes real device time that the
    /// pipelined executors overlap with computation. Every table directory must be on a file
    /// system that supports it (checked at open).
    pub use_direct_io_for_flush_and_compaction: bool,
    /// Compression of the tables written into each level, from L0 (RocksDB's
    /// `compression_per_level`): a level past the end takes the last entry, and an empty list
    /// leaves every level to `table.compression`. With dynamic level sizing the entries after
    /// the first count from the base level, as in RocksDB: L0 takes the first, the base level
    /// the second, the level below it the third. Cheap or no compression near the top, where
    /// data is rewritten soon, and strong compression below is the usual choice. A table moved
    /// down whole (a trivial move) keeps the compression it was written with, as in RocksDB.
    pub compression_per_level: Vec<CompressionType>,
    /// Compression of the tables of the bottommost compactions, whatever their level
    /// (RocksDB's `bottommost_compression`): most data ends there and is read for longest.
    /// `None`: as the level's.
    pub bottommost_compression: Option<CompressionType>,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            l0_compaction_trigger: 4,
            l0_slowdown_writes_trigger: 20,
            l0_stop_writes_trigger: 36,
            l0_compaction_file_threshold: 100,
            l0_flush_split_bytes: 32 << 20,
            max_bytes_for_level_base: 256 << 20,
            max_bytes_for_level_multiplier: 10,
            level_compaction_dynamic_level_bytes: true,
            target_file_size_base: 64 << 20,
            max_grandparent_overlap_factor: 10,
            disable_auto_compactions: false,
            mode: CompactionMode::Sequential,
            sub_task_bytes: ExecOptions::DEFAULT_SUB_TASK_BYTES,
            compaction_threads: ExecOptions::DEFAULT_COMPUTE_THREADS,
            max_concurrent_compactions: std::thread::available_parallelism().map_or(1, usize::from),
            compaction_queue_depth: ExecOptions::DEFAULT_QUEUE_DEPTH,
            use_direct_io_for_flush_and_compaction: false,
            compression_per_level: Vec::new(),
            bottommost_compression: None,
        }
    }
}

impl CompactionOptions {
    /// Checks the compaction settings; the error names the offending option.
    pub fn validate(&self) -> Result<()> {
        if self.l0_compaction_trigger == 0 {
            return bad("l0_compaction_trigger must be at least 1".into());
        }
        if self.l0_slowdown_writes_trigger < self.l0_compaction_trigger
            || self.l0_stop_writes_trigger < self.l0_slowdown_writes_trigger
        {
            return bad(format!(
                "need l0_compaction_trigger ({}) <= l0_slowdown_writes_trigger ({}) <= l0_stop_writes_trigger ({})",
                self.l0_compaction_trigger,
                self.l0_slowdown_writes_trigger,
                self.l0_stop_writes_trigger
            ));
        }
        if self.l0_compaction_file_threshold < self.l0_compaction_trigger {
            return bad(format!(
                "l0_compaction_file_threshold ({}) must be at least l0_compaction_trigger ({})",
                self.l0_compaction_file_threshold, self.l0_compaction_trigger
            ));
        }
        if self.max_bytes_for_level_multiplier < 2 {
            return bad("max_bytes_for_level_multiplier must be at least 2".into());
        }
        if self.target_file_size_base < 64 << 10 {
            return bad("target_file_size_base must be at least 64 KiB".into());
        }
        if self.max_bytes_for_level_base < self.target_file_size_base {
            return bad("max_bytes_for_level_base must be at least target_file_size_base".into());
        }
        if self.sub_task_bytes < 4 << 10 {
            return bad("sub_task_bytes must be at least 4 KiB".into());
        }
        if !(1..=256).contains(&self.compaction_threads) {
            return bad("compaction_threads must be between 1 and 256".into());
        }
        if !(1..=64).contains(&self.max_concurrent_compactions) {
            return bad("max_concurrent_compactions must be between 1 and 64".into());
        }
        if self.compaction_queue_depth == 0 {
            return bad("compaction_queue_depth must be at least 1".into());
        }
        Ok(())
    }

    /// Target size in bytes of level `level` (L1 and deeper) under static level sizing; with
    /// dynamic sizing the targets depend on the data (`Metrics::levels` shows them).
    pub fn max_bytes_for_level(&self, level: usize) -> u64 {
        let mut bytes = self.max_bytes_for_level_base;
        for _ in 1..level {
            bytes = bytes.saturating_mul(self.max_bytes_for_level_multiplier);
        }
        bytes
    }
}

fn bad(msg: String) -> Result<()> {
    Err(Error::InvalidArgument(msg))
}

impl Default for Options {
    fn default() -> Self {
        Options {
            create_if_missing: true,
            error_if_exists: false,
            memtable: MemtableOptions::default(),
            table: TableOptions::default(),
            compaction: CompactionOptions::default(),
            block_cache_bytes: 64 << 20,
            block_cache: None,
            max_open_files: 1000,
            max_key_size: 64 << 10,
            max_value_size: 32 << 20,
            verify_checksums: true,
            wal_recovery_mode: WalRecoveryMode::default(),
            data_dirs: Vec::new(),
            fs: sluice_sst::fs::os_fs(),
            rate_limiter: None,
            offload: None,
            partitions: None,
            paranoid_checks: false,
            compaction_filter: None,
            merge_operator: None,
            listeners: Vec::new(),
            info_log: crate::info_log::InfoLogOptions::default(),
            ttl: None,
            keyspaces: Default::default(),
            create_missing_keyspaces: false,
            blob: Default::default(),
        }
    }
}

impl Options {
    /// Checks that the options make sense together; the error names the offending option.
    pub fn validate(&self) -> Result<()> {
        self.memtable.validate()?;
        validate_table_options(&self.table)?;
        self.compaction.validate()?;
        if self.max_key_size == 0 || self.max_key_size > (1 << 20) {
            return bad("max_key_size must be between 1 B and 1 MiB".into());
        }
        // A table entry (key + value) must fit the format's entry limit, or a flush would fail
        // long after the write was acknowledged.
        let entry_limit = sluice_sst::format::MAX_ENTRY_BYTES;
        if self.max_key_size + self.max_value_size > entry_limit {
            return bad(format!(
                "max_key_size + max_value_size must be at most {entry_limit} bytes (the table entry limit)"
            ));
        }
        if self.max_open_files < 16 {
            return bad("max_open_files must be at least 16".into());
        }
        if let Some(o) = &self.offload {
            o.validate()?;
        }
        self.blob.validate()?;
        if self.blob.enabled() {
            // Both look at values in compactions, which move blob references unread.
            if self.ttl.is_some() {
                return bad("blob.min_blob_size and ttl cannot both be set yet".into());
            }
            if self.compaction_filter.is_some() {
                return bad(
                    "blob.min_blob_size and compaction_filter cannot both be set yet".into(),
                );
            }
        }
        if let Some(ttl) = self.ttl {
            if ttl.as_secs() == 0 {
                return bad(format!("ttl must be at least one second, got {ttl:?}"));
            }
            if self.merge_operator.is_some() {
                return bad("ttl and merge_operator cannot both be set".into());
            }
        }
        if let Some(p) = &self.partitions {
            p.validate()?;
            if !self.data_dirs.is_empty() {
                return bad(
                    "partitions and data_dirs cannot both be set: in partitioned mode each owner's directory is a data directory".into(),
                );
            }
            let workers = self
                .offload
                .as_ref()
                .map(|o| o.workers())
                .unwrap_or_default();
            if let Some(w) = p
                .owners
                .iter()
                .filter_map(|o| o.worker.as_ref())
                .find(|w| !workers.contains(w))
            {
                return bad(format!(
                    "partitions: owner worker {w} is not one of offload.workers"
                ));
            }
        }
        for (name, keyspace) in &self.keyspaces {
            if name == crate::keyspace::DEFAULT_KEYSPACE {
                return bad(format!(
                    "keyspaces: {name:?} is the database's own keyspace; its options are the \
                     fields of Options itself"
                ));
            }
            // Before the open creates any of them (`create_missing_keyspaces`).
            crate::keyspace::check_name(name)
                .map_err(|e| Error::InvalidArgument(format!("keyspaces: {e}")))?;
            keyspace
                .tree_options(self, 1)
                .validate()
                .map_err(|e| Error::InvalidArgument(format!("keyspace {name:?}: {e}")))?;
        }
        Ok(())
    }

    /// The TTL in whole seconds, when set.
    pub(crate) fn ttl_secs(&self) -> Option<u64> {
        self.ttl.map(|t| t.as_secs())
    }

    /// The compaction filter a compaction starting `now` (Unix seconds) applies: the TTL's
    /// (wrapping the user's filter), the user's alone, or none.
    pub(crate) fn compaction_filter_at(&self, now: u64) -> Option<Arc<dyn CompactionFilter>> {
        match self.ttl_secs() {
            Some(ttl) => Some(Arc::new(sluice_sst::ttl::TtlFilter::new(
                ttl,
                now,
                self.compaction_filter.clone(),
            ))),
            None => self.compaction_filter.clone(),
        }
    }

    /// The directories tables may live in: `dir` (the database directory) first, then
    /// `data_dirs` or the partition owners' directories. A table's `dir_index` indexes this.
    pub fn table_dirs(&self, dir: &std::path::Path) -> Vec<PathBuf> {
        let mut dirs = vec![dir.to_path_buf()];
        dirs.extend(self.data_dirs.iter().cloned());
        if let Some(p) = &self.partitions {
            dirs.extend(p.dirs().cloned());
        }
        dirs
    }

    /// The executor settings derived from these options.
    pub fn exec_options(&self) -> ExecOptions {
        let c = &self.compaction;
        ExecOptions {
            mode: c.mode,
            sub_task_bytes: c.sub_task_bytes,
            queue_depth: c.compaction_queue_depth,
            compute_threads: c.compaction_threads,
            table_dirs: self.data_dirs.len().max(1),
        }
    }

    /// How tables are read by foreground reads: through the page cache.
    pub fn table_storage(&self) -> Storage {
        Storage::new(Arc::clone(&self.fs), IoMode::Buffered)
    }

    /// How tables written into `level` of a tree whose base level (the one L0 compacts into)
    /// is `base_level` are built: `table`, with the compression that
    /// [`CompactionOptions::compression_per_level`] and, for a bottommost compaction,
    /// [`CompactionOptions::bottommost_compression`] give that level.
    pub fn table_for_level(
        &self,
        level: usize,
        base_level: usize,
        bottommost: bool,
    ) -> TableOptions {
        let per_level = &self.compaction.compression_per_level;
        let index = match level {
            0 => 0,
            _ => level.saturating_sub(base_level) + 1,
        };
        let compression = match (bottommost, self.compaction.bottommost_compression) {
            (true, Some(bottom)) => bottom,
            _ => per_level
                .get(index)
                .or(per_level.last())
                .copied()
                .unwrap_or(self.table.compression),
        };
        TableOptions {
            compression,
            ..self.table.clone()
        }
    }

    /// How flushes and compactions read and write tables: through the rate limiter, if any.
    pub fn background_storage(&self) -> Storage {
        let mode = if self.compaction.use_direct_io_for_flush_and_compaction {
            IoMode::Direct
        } else {
            IoMode::Buffered
        };
        let fs: Arc<dyn FileSystem> = match &self.rate_limiter {
            Some(limiter) => Arc::new(rate_limited(Arc::clone(&self.fs), Arc::clone(limiter))),
            None => Arc::clone(&self.fs),
        };
        Storage::new(fs, mode)
    }
}

/// Options for one write.
#[derive(Clone, Copy, Debug, Default)]
pub struct WriteOptions {
    /// Sync the WAL before acknowledging. Concurrent writers share one sync (group commit).
    pub sync: bool,
}

/// Options for one read or iterator.
#[derive(Clone, Copy, Debug)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot; `None` reads the latest state.
    pub snapshot: Option<&'a Snapshot>,
    /// Verify block checksums (defaults to the database's `verify_checksums`).
    pub verify_checksums: Option<bool>,
    /// Put blocks read by this operation in the block cache.
    pub fill_cache: bool,
    /// Iterators start at this user key (inclusive).
    pub lower_bound: Option<&'a [u8]>,
    /// Iterators stop before this user key (exclusive), as RocksDB's `iterate_upper_bound`.
    pub upper_bound: Option<&'a [u8]>,
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            verify_checksums: None,
            fill_cache: true,
            lower_bound: None,
            upper_bound: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        Options::default().validate().unwrap();
    }

    #[test]
    fn bad_options_name_the_option() {
        let mut opts = Options::default();
        opts.compaction.l0_stop_writes_trigger = 1;
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("l0_stop_writes_trigger"), "{err}");
        let mut opts = Options::default();
        opts.table.block_size = 1;
        assert!(
            opts.validate()
                .unwrap_err()
                .to_string()
                .contains("block_size")
        );
        let mut opts = Options::default();
        opts.memtable.write_buffer_size = 1;
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("write_buffer_size"), "{err}");
    }

    /// The grouped defaults are the values the flat `Options` had, field by field.
    #[test]
    fn defaults_are_unchanged() {
        let o = Options::default();
        assert!(o.create_if_missing && !o.error_if_exists);
        assert_eq!(
            o.memtable,
            MemtableOptions {
                write_buffer_size: 64 << 20,
                max_write_buffer_number: 2,
            }
        );
        assert_eq!(
            o.table,
            TableOptions {
                block_size: 4096,
                restart_interval: 16,
                compression: CompressionType::Lz4,
                zstd_level: 3,
                bloom_bits_per_key: 10,
                prefix_extractor: None,
            }
        );
        assert_eq!(
            o.compaction,
            CompactionOptions {
                l0_compaction_trigger: 4,
                l0_slowdown_writes_trigger: 20,
                l0_stop_writes_trigger: 36,
                l0_compaction_file_threshold: 100,
                l0_flush_split_bytes: 32 << 20,
                max_bytes_for_level_base: 256 << 20,
                max_bytes_for_level_multiplier: 10,
                level_compaction_dynamic_level_bytes: true,
                target_file_size_base: 64 << 20,
                max_grandparent_overlap_factor: 10,
                disable_auto_compactions: false,
                mode: CompactionMode::Sequential,
                sub_task_bytes: ExecOptions::DEFAULT_SUB_TASK_BYTES,
                compaction_threads: ExecOptions::DEFAULT_COMPUTE_THREADS,
                max_concurrent_compactions: std::thread::available_parallelism()
                    .map_or(1, usize::from),
                compaction_queue_depth: ExecOptions::DEFAULT_QUEUE_DEPTH,
                use_direct_io_for_flush_and_compaction: false,
                compression_per_level: Vec::new(),
                bottommost_compression: None,
            }
        );
        assert_eq!(o.block_cache_bytes, 64 << 20);
        assert_eq!(o.max_open_files, 1000);
        assert_eq!(o.max_key_size, 64 << 10);
        assert_eq!(o.max_value_size, 32 << 20);
        assert!(o.verify_checksums && !o.paranoid_checks);
        assert_eq!(o.wal_recovery_mode, WalRecoveryMode::default());
        assert!(o.data_dirs.is_empty());
        assert!(o.rate_limiter.is_none() && o.offload.is_none() && o.partitions.is_none());
    }

    #[test]
    fn each_level_takes_its_compression_and_the_bottom_its_own() {
        use CompressionType::{Lz4, None as Plain, Zstd};
        let mut o = Options::default();
        assert_eq!(
            o.table_for_level(3, 1, true).compression,
            Lz4,
            "nothing set: table's"
        );
        o.compaction.compression_per_level = vec![Plain, Plain, Lz4];
        let at = |o: &Options, level, bottom| o.table_for_level(level, 1, bottom).compression;
        assert_eq!(at(&o, 0, false), Plain);
        assert_eq!(at(&o, 2, false), Lz4);
        assert_eq!(at(&o, 6, false), Lz4, "past the list: its last entry");
        assert_eq!(at(&o, 1, true), Plain, "no bottommost setting: the level's");
        o.compaction.bottommost_compression = Some(Zstd);
        assert_eq!(at(&o, 1, true), Zstd);
        assert_eq!(at(&o, 1, false), Plain);
        assert_eq!(o.table_for_level(1, 1, true).block_size, o.table.block_size);
        // Counted from the base level, as RocksDB counts them with dynamic level sizing.
        o.compaction.bottommost_compression = None;
        let from_base = |level| o.table_for_level(level, 5, false).compression;
        assert_eq!(
            [0, 5, 6].map(from_base),
            [Plain, Plain, Lz4],
            "L0, the base level, the one below"
        );
    }

    #[test]
    fn level_targets_grow_tenfold() {
        let o = Options::default().compaction;
        assert_eq!(o.max_bytes_for_level(1), 256 << 20);
        assert_eq!(o.max_bytes_for_level(2), 2560 << 20);
    }
}
