//! The flags that say how a database is opened, shared by every command that opens one, and
//! the one place that turns them into [`Options`].
//!
//! [`EngineArgs`] is flattened into each such command (`bench`, `ycsb`, `compact`, `put`,
//! `get`, `delete`, `scan`, `stats`, `check`, `repair`, `range`, `keyspace`); a flag a command
//! does not give keeps `Options::default()`, so `sluice get` opens a database exactly as an
//! application with default options would. The flags describe every keyspace of the database
//! alike: the commands that open one give each of its keyspaces these settings too
//! (`Options::keyspaces`), and `keyspace create` and `--create-keyspace` create one with them. [`OffloadArgs`] (the `--worker` flags) is its own group, flattened
//! only where compactions run long enough to share (`bench`, `compact`).
//!
//! The engine flags come in two groups because experiments tell them apart: `--compression` and
//! `--direct-io` describe the data and the I/O an experiment also runs with, while everything in
//! [`TuningArgs`] (sizes, triggers, executors, directories) is chosen by an experiment per data
//! point, so `sluice bench --experiment` refuses the whole [`TUNING`] group at once.

mod offload;

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use sluice::options::CompactionMode;
use sluice::{
    BlobOptions, CompactionOptions, CompressionType, MemtableOptions, Options, PrefixExtractor,
    RateLimiter, TableOptions,
};

pub use offload::{OFFLOAD, OffloadArgs};

use crate::units::{parse_size, parse_u32, parse_usize};

/// The clap group id of [`TuningArgs`], for `conflicts_with`.
pub const TUNING: &str = "tuning";

/// How a database is opened: the engine's options, as flags. Counts and sizes accept `_`
/// separators and K/M/G (binary) suffixes.
#[derive(Clone, Debug, Args)]
#[command(next_help_heading = "Engine options")]
pub struct EngineArgs {
    /// Data block compression.
    #[arg(long, value_enum, default_value_t = Compression::Lz4)]
    pub compression: Compression,
    /// Flushes and compactions read and write with direct I/O (O_DIRECT), bypassing the page
    /// cache (RocksDB's use_direct_io_for_flush_and_compaction). Also applies to the pcp and
    /// scale experiments.
    #[arg(long)]
    pub direct_io: bool,
    /// The merge operator that combines `sluice merge`'s operands with values: `u64_add`
    /// (little-endian u64 counters), `append`, or `append(HEX)` (with the delimiter's bytes in
    /// hex, `append(2c)` for a comma), for the keyspace the command acts on. Each keyspace
    /// records the operator it was written with, and commands that open an existing database
    /// use a recorded built-in one without this flag; another one is refused.
    #[arg(long, value_name = "NAME", value_parser = parse_merge_operator)]
    pub merge_operator: Option<String>,
    /// Values expire this many seconds after they are written (Options::ttl), in every
    /// keyspace. A database is created with or without one for good, and so is each keyspace:
    /// give it on every open of one written with it.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub ttl: Option<u64>,
    /// Value separation: values of at least this many bytes are flushed into blob files, and
    /// tables keep a reference (Options::blob; RocksDB's min_blob_size with
    /// enable_blob_files). 0 keeps every value in the tables.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = 0)]
    pub min_blob_size: usize,
    /// A flush starts a new blob file once the current one holds this many bytes.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = BlobOptions::default().blob_file_size)]
    pub blob_file_size: u64,
    /// How values in blob files are compressed, each on its own.
    #[arg(long, value_enum, default_value_t = Compression::None)]
    pub blob_compression: Compression,
    /// Keep values read from blob files in the block cache (worth it for skewed reads).
    #[arg(long)]
    pub blob_cache_values: bool,
    /// The share of blob files, oldest first, whose live values compactions move out so the
    /// files can be deleted (RocksDB's blob_garbage_collection_age_cutoff); 0 turns blob
    /// garbage collection off.
    #[arg(long, value_name = "SHARE", default_value_t = BlobOptions::default().gc_age_cutoff)]
    pub blob_gc_age_cutoff: f64,
    /// Of those, only files at least this share garbage are collected, so a move frees at
    /// least (ratio / (1 - ratio)) bytes per byte it writes; 0 collects them all (RocksDB).
    #[arg(long, value_name = "SHARE", default_value_t = BlobOptions::default().gc_min_garbage_ratio)]
    pub blob_gc_min_garbage_ratio: f64,
    /// When those files hold at least this share of garbage, the tables referencing them are
    /// rewritten for it alone (RocksDB's blob_garbage_collection_force_threshold).
    #[arg(long, value_name = "SHARE", default_value_t = BlobOptions::default().gc_force_threshold)]
    pub blob_gc_force_threshold: f64,
    #[command(flatten)]
    pub tuning: TuningArgs,
    #[command(flatten)]
    pub own_flags_follow: OwnFlagsFollow,
}

/// Ends a group of flags' help section: the flags a command declares after it are its own,
/// listed under "Options" with `--db`, not among the engine's.
#[derive(Clone, Copy, Debug, Args)]
#[command(next_help_heading = None)]
#[group(skip)]
pub struct OwnFlagsFollow {}

/// A prefix extractor's name, `fixed:N` or `capped:N`.
fn parse_prefix_extractor(name: &str) -> Result<PrefixExtractor, String> {
    PrefixExtractor::from_name(name)
        .ok_or_else(|| format!("bad prefix extractor {name:?}: use fixed:N or capped:N, N >= 1"))
}

/// A built-in merge operator's name, checked.
fn parse_merge_operator(name: &str) -> Result<String, String> {
    match sluice::merge_operator::builtin(name) {
        Some(_) => Ok(name.to_string()),
        None => Err(format!(
            "unknown merge operator {name:?}: use u64_add, append or append(HEX)"
        )),
    }
}

/// The engine's sizes, triggers, executors and directories.
#[derive(Clone, Debug, Args)]
#[group(id = TUNING, multiple = true)]
#[command(next_help_heading = "Engine options")]
pub struct TuningArgs {
    /// Memtable size.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().memtable.write_buffer_size)]
    pub write_buffer_size: usize,
    /// Size at which compaction outputs are cut (max_bytes_for_level_base grows to at least
    /// this).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().compaction.target_file_size_base)]
    pub target_file_size: u64,
    /// Uncompressed data block size.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().table.block_size)]
    pub block_size: usize,
    /// Bloom filter bits per key (0: no filters).
    #[arg(long, value_name = "N", value_parser = parse_u32, default_value_t = Options::default().table.bloom_bits_per_key)]
    pub bloom_bits: u32,
    /// Also record key prefixes in the bloom filters, so prefix scans skip tables without
    /// theirs: `fixed:N` (the first N bytes) or `capped:N` (at most N bytes).
    #[arg(long, value_name = "NAME", value_parser = parse_prefix_extractor)]
    pub prefix_extractor: Option<PrefixExtractor>,
    /// Block cache capacity (0: no cache).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().block_cache_bytes)]
    pub cache_size: usize,
    /// Turn off automatic compactions (flushes still happen). Commands that maintain or read
    /// an existing database never start them anyway.
    #[arg(long)]
    pub disable_auto_compactions: bool,
    /// How each compaction is scheduled: sequential (SCP), pipelined (PCP), parallel (C-PPCP),
    /// streaming (the in-storage compaction paper's decoder/comparator/encoder stages) or auto (chosen per
    /// compaction from the measured step times).
    #[arg(long, value_name = "MODE", default_value_t = Options::default().compaction.mode)]
    pub compaction_mode: CompactionMode,
    /// Compute threads of the parallel compaction executor.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.compaction_threads)]
    pub compaction_threads: usize,
    /// Automatic compactions that may run at once on disjoint files and key ranges.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.max_concurrent_compactions)]
    pub max_concurrent_compactions: usize,
    /// Sub-tasks that may wait between two stages of the pipelined, parallel and streaming
    /// executors.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.compaction_queue_depth)]
    pub compaction_queue_depth: usize,
    /// Input bytes per compaction sub-task.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().compaction.sub_task_bytes)]
    pub sub_task_bytes: u64,
    /// L0 depth (sublevels) that starts an L0 compaction.
    #[arg(long = "level0-file-num-compaction-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.l0_compaction_trigger)]
    pub l0_compaction_trigger: usize,
    /// L0 depth at which each write is delayed.
    #[arg(long = "level0-slowdown-writes-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.l0_slowdown_writes_trigger)]
    pub l0_slowdown_writes_trigger: usize,
    /// L0 depth at which writes stop until compaction catches up.
    #[arg(long = "level0-stop-writes-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.l0_stop_writes_trigger)]
    pub l0_stop_writes_trigger: usize,
    /// L0 files that start an L0 compaction however shallow L0 is (Pebble's
    /// L0CompactionFileThreshold).
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction.l0_compaction_file_threshold)]
    pub l0_compaction_file_threshold: usize,
    /// Size levels from the bottom up (RocksDB's level_compaction_dynamic_level_bytes): L0
    /// compacts into the base level, the first whose target reaches max_bytes_for_level_base,
    /// and an empty tree's base level is the last one. false: L1 holds max_bytes_for_level_base,
    /// each level below ten times more.
    #[arg(long, value_name = "BOOL", action = clap::ArgAction::Set, default_value_t = Options::default().compaction.level_compaction_dynamic_level_bytes)]
    pub level_compaction_dynamic_level_bytes: bool,
    /// Cut flushes at the base level's file boundaries at most once per this many bytes of it
    /// (Pebble's FlushSplitBytes; 0: never).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().compaction.l0_flush_split_bytes)]
    pub l0_flush_split_bytes: u64,
    /// Extra data directories, one per storage device (S-PPCP), in order: new tables are dealt
    /// over the database directory and these. A database created with them must be opened
    /// (and repaired) with the same list. Comma-separated, or the flag repeated (also spelt
    /// --data-dir).
    #[arg(
        long,
        visible_alias = "data-dir",
        value_name = "DIR",
        value_delimiter = ','
    )]
    pub data_dirs: Vec<PathBuf>,
    /// Limit the bytes per second flushes and compactions write, with K/M/G suffixes (RocksDB's
    /// rate_limiter); 0: no limit.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "0")]
    pub rate_limit: u64,
}

impl EngineArgs {
    /// The engine options these flags give; every option without a flag keeps its default,
    /// and so does every flag not given. Whether the database is created, and offload, are
    /// the command's to set.
    pub fn options(&self) -> Options {
        let defaults = Options::default();
        let t = &self.tuning;
        Options {
            block_cache_bytes: t.cache_size,
            data_dirs: t.data_dirs.clone(),
            rate_limiter: (t.rate_limit > 0).then(|| RateLimiter::new(t.rate_limit)),
            memtable: MemtableOptions {
                write_buffer_size: t.write_buffer_size,
                ..defaults.memtable
            },
            table: TableOptions {
                compression: self.compression.into(),
                block_size: t.block_size,
                bloom_bits_per_key: t.bloom_bits,
                prefix_extractor: t.prefix_extractor,
                ..defaults.table
            },
            compaction: CompactionOptions {
                use_direct_io_for_flush_and_compaction: self.direct_io,
                target_file_size_base: t.target_file_size,
                // The base level must hold at least one output file.
                max_bytes_for_level_base: defaults
                    .compaction
                    .max_bytes_for_level_base
                    .max(t.target_file_size),
                disable_auto_compactions: t.disable_auto_compactions,
                mode: t.compaction_mode,
                compaction_threads: t.compaction_threads,
                compaction_queue_depth: t.compaction_queue_depth,
                max_concurrent_compactions: t.max_concurrent_compactions,
                sub_task_bytes: t.sub_task_bytes,
                l0_compaction_trigger: t.l0_compaction_trigger,
                l0_slowdown_writes_trigger: t.l0_slowdown_writes_trigger,
                l0_stop_writes_trigger: t.l0_stop_writes_trigger,
                l0_compaction_file_threshold: t.l0_compaction_file_threshold,
                l0_flush_split_bytes: t.l0_flush_split_bytes,
                level_compaction_dynamic_level_bytes: t.level_compaction_dynamic_level_bytes,
                ..defaults.compaction
            },
            merge_operator: self
                .merge_operator
                .as_deref()
                .and_then(sluice::merge_operator::builtin),
            ttl: self.ttl.map(std::time::Duration::from_secs),
            blob: BlobOptions {
                min_blob_size: self.min_blob_size,
                blob_file_size: self.blob_file_size,
                blob_compression: self.blob_compression.into(),
                cache_values: self.blob_cache_values,
                garbage_collection: self.blob_gc_age_cutoff > 0.0,
                gc_age_cutoff: self.blob_gc_age_cutoff,
                gc_min_garbage_ratio: self.blob_gc_min_garbage_ratio,
                gc_force_threshold: self.blob_gc_force_threshold,
            },
            ..defaults
        }
    }
}

/// Block compression, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Compression {
    None,
    Lz4,
    Snappy,
    Zstd,
}

impl From<Compression> for CompressionType {
    fn from(c: Compression) -> Self {
        match c {
            Compression::None => CompressionType::None,
            Compression::Lz4 => CompressionType::Lz4,
            Compression::Snappy => CompressionType::Snappy,
            Compression::Zstd => CompressionType::Zstd,
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        engine: EngineArgs,
    }

    fn options(args: &[&str]) -> Options {
        let mut argv = vec!["x"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().engine.options()
    }

    #[test]
    fn no_flags_are_the_default_options() {
        let (got, want) = (options(&[]), Options::default());
        // Options has no PartialEq (it holds a rate limiter); its Debug form says it all.
        assert_eq!(format!("{got:?}"), format!("{want:?}"));
    }

    #[test]
    fn flags_reach_their_options() {
        let o = options(&[
            "--compression",
            "zstd",
            "--direct-io",
            "--write-buffer-size",
            "1M",
            "--target-file-size",
            "512M",
            "--level0-stop-writes-trigger",
            "50",
            "--compaction-mode",
            "parallel",
            "--data-dirs",
            "a,b",
            "--data-dir",
            "c",
            "--rate-limit",
            "10M",
            "--prefix-extractor",
            "capped:6",
            "--merge-operator",
            "append(2c)",
        ]);
        assert_eq!(o.table.compression, CompressionType::Zstd);
        assert!(o.compaction.use_direct_io_for_flush_and_compaction);
        assert_eq!(o.memtable.write_buffer_size, 1 << 20);
        assert_eq!(o.compaction.target_file_size_base, 512 << 20);
        assert_eq!(o.compaction.max_bytes_for_level_base, 512 << 20);
        assert_eq!(o.compaction.l0_stop_writes_trigger, 50);
        assert_eq!(o.compaction.mode, CompactionMode::Parallel);
        let dirs: Vec<PathBuf> = ["a", "b", "c"].into_iter().map(PathBuf::from).collect();
        assert_eq!(o.data_dirs, dirs);
        assert!(o.rate_limiter.is_some());
        assert_eq!(o.table.prefix_extractor, Some(PrefixExtractor::Capped(6)));
        assert_eq!(
            o.merge_operator.map(|m| m.name().to_string()).as_deref(),
            Some("append(2c)")
        );
        for bad in [
            ["--prefix-extractor", "fixed:0"],
            ["--merge-operator", "max"],
        ] {
            let argv = [&["x"][..], &bad].concat();
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn blob_flags_reach_the_blob_options() {
        let o = options(&[
            "--min-blob-size",
            "4K",
            "--blob-file-size",
            "64M",
            "--blob-compression",
            "zstd",
            "--blob-cache-values",
            "--blob-gc-age-cutoff",
            "0.5",
            "--blob-gc-min-garbage-ratio",
            "0.3",
            "--blob-gc-force-threshold",
            "0.8",
        ]);
        let want = BlobOptions {
            min_blob_size: 4 << 10,
            blob_file_size: 64 << 20,
            blob_compression: CompressionType::Zstd,
            cache_values: true,
            garbage_collection: true,
            gc_age_cutoff: 0.5,
            gc_min_garbage_ratio: 0.3,
            gc_force_threshold: 0.8,
        };
        assert_eq!(o.blob, want);
        // The table compression flag is its own: blob values are compressed only when asked.
        assert_eq!(o.table.compression, CompressionType::Lz4);
        let no_gc = options(&["--min-blob-size", "100", "--blob-gc-age-cutoff", "0"]).blob;
        assert!(!no_gc.garbage_collection);
        let only_min = options(&["--min-blob-size", "100"]).blob;
        assert!(only_min.enabled());
        assert_eq!(
            only_min,
            BlobOptions {
                min_blob_size: 100,
                ..BlobOptions::default()
            }
        );
        assert_eq!(options(&[]).blob, BlobOptions::default());
        for bad in [
            ["--blob-compression", "gzip"],
            ["--min-blob-size", "big"],
            ["--blob-file-size", "1X"],
        ] {
            let argv = [&["x"][..], &bad].concat();
            assert!(Cli::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }
}
