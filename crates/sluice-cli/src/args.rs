//! The command line, declared with clap: one struct per subcommand, so `--help` documents all
//! of it.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sluice::{CompressionType, Options};
use sluice_bench::Benchmark;
use sluice_experiments::Experiment;

use crate::units::{parse_size, parse_u32, parse_usize};

/// Inspect, check and benchmark Sluice databases.
///
/// Keys and values given as arguments are taken as their UTF-8 bytes. In output, bytes outside
/// printable ASCII (and the backslash) are written as \xNN. Logs go to stderr, filtered by
/// RUST_LOG (default: warn).
///
/// Exit status: 0 on success, 1 when `get` finds no value or `check` finds damage, 2 on any
/// other error. `get`, `scan`, `stats`, `check` and the dumps never change the database.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set KEY to VALUE (creates the database if needed).
    Put(PutArgs),
    /// Print the value of KEY; exit 1 if it has none.
    Get(KeyArgs),
    /// Delete KEY (a no-op if it is absent).
    Delete(KeyArgs),
    /// Print `key<TAB>value` for every key in [--from, --to), in key order.
    Scan(ScanArgs),
    /// Compact the key range [--from, --to] (default: everything) down the tree.
    Compact(CompactArgs),
    /// Print the per-level LSM table, flush and compaction totals and the stage profile.
    Stats(DbJsonArgs),
    /// Verify the MANIFEST, every WAL and every block of every live table without changing
    /// the database; exit 1 on damage or on anything recovery would not apply.
    Check(DbJsonArgs),
    /// Rebuild a damaged database from what can still be read: merge every readable table and
    /// WAL record into a new tree and MANIFEST, set what cannot be read aside in `lost/`, and
    /// print what was kept and dropped.
    Repair(Box<crate::commands::repair::RepairArgs>),
    /// Inspect table (.sst) files.
    #[command(subcommand)]
    Sst(SstCommand),
    /// Inspect the MANIFEST.
    #[command(subcommand)]
    Manifest(ManifestCommand),
    /// Change a partitioned database's range map by hand: move a range to another owner, or
    /// split one in two. Prints the map afterwards.
    #[command(subcommand)]
    Range(RangeCommand),
    /// Run db_bench-style benchmarks (fillseq, fillrandom, overwrite, readrandom, readseq,
    /// seekrandom, compact), or with --experiment reproduce a document's evaluation.
    Bench(Box<BenchArgs>),
    /// Run a YCSB core workload (a to f): a load phase, then a run phase, with per-operation
    /// latency percentiles and throughput per second.
    Ycsb(Box<crate::commands::ycsb::YcsbArgs>),
    /// Stress and crash-test the engine (db_stress + db_crashtest): random writes, batches,
    /// snapshots, iterators and compactions checked against an expected state kept beside
    /// the database; with --kill-every the workload is SIGKILLed again and again, with
    /// --corrupt files are damaged and I/O faults injected. Prints one summary line; exit 1
    /// on any failure.
    Stress(Box<crate::commands::stress::StressArgs>),
    /// Draw charts (PNG and SVG) from saved results: `chart peers` for the comparison of
    /// benches/peers/run.
    #[command(subcommand)]
    Chart(crate::commands::chart::ChartCommand),
    /// Serve compaction shares for Sluice hosts (`--worker` of bench and compact): a stand-in
    /// for a near-data-processing device. Runs until SIGTERM or Ctrl-C.
    Worker(Box<sluice_worker::WorkerArgs>),
}

/// The database directory.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database directory.
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    /// A partitioned database's owner directories, in owner order (repeat the flag for each
    /// owner). The range map itself is in the MANIFEST.
    #[arg(long = "owner-dir", value_name = "DIR")]
    pub owner_dirs: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The key.
    pub key: String,
}

#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// First key (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Print at most N entries.
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub limit: Option<u64>,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// First key of the range (inclusive; default: the first key).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Last key of the range (inclusive, as RocksDB's CompactRange; default: the last key).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Split each level's compaction by data and run the pieces on every core.
    #[arg(long)]
    pub parallel: bool,
    /// The executor of each compaction without --parallel (with it: parallel).
    #[arg(long, value_name = "MODE", default_value_t = Options::default().compaction_mode)]
    pub compaction_mode: sluice::options::CompactionMode,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub offload: crate::offload_args::OffloadArgs,
}

#[derive(Debug, Args)]
pub struct DbJsonArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum RangeCommand {
    /// Give range RANGE to owner OWNER. Its tables stay with the old owner, still read
    /// through a forwarding entry, until compactions rewrite them into OWNER's directory.
    Move(RangeMoveArgs),
    /// Cut range RANGE in two at KEY: the keys from KEY on become range RANGE + 1, with the
    /// same owner. Tables holding keys on both sides are rewritten in two.
    Split(RangeSplitArgs),
}

#[derive(Debug, Args)]
pub struct RangeMoveArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The range's index in the map (`sluice stats` lists them).
    pub range: usize,
    /// The owner's index: its position among the --owner-dir flags.
    pub owner: u32,
}

#[derive(Debug, Args)]
pub struct RangeSplitArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The range's index in the map (`sluice stats` lists them).
    pub range: usize,
    /// The first key of the new range; strictly inside RANGE.
    pub key: String,
}

#[derive(Debug, Subcommand)]
pub enum SstCommand {
    /// Print a table's footer, properties and index summary (and, with --entries, every entry).
    Dump(SstDumpArgs),
}

#[derive(Debug, Args)]
pub struct SstDumpArgs {
    /// The table file.
    pub file: PathBuf,
    /// Also list every entry: key, sequence number, kind and value length.
    #[arg(long)]
    pub entries: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Print every version edit of the current MANIFEST, then the files per level they produce.
    Dump(DbJsonArgs),
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

/// The default benchmark list.
pub const DEFAULT_BENCHMARKS: &str =
    "fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom,compact";

fn parse_benchmark(s: &str) -> Result<Benchmark, String> {
    s.parse()
}

fn parse_experiment(s: &str) -> Result<Experiment, String> {
    s.parse()
}

/// Flags of the db_bench mode that an experiment does not use (it chooses its own databases,
/// executors and engine options per data point).
const NOT_FOR_EXPERIMENTS: [&str; 31] = [
    "benchmarks",
    "reads",
    "db",
    "keep_db",
    "use_existing_db",
    "sync",
    "disable_auto_compactions",
    "write_buffer_size",
    "target_file_size",
    "block_size",
    "bloom_bits",
    "cache_size",
    "compaction_mode",
    "compaction_threads",
    "compaction_queue_depth",
    "max_concurrent_compactions",
    "sub_task_bytes",
    "l0_compaction_trigger",
    "l0_slowdown_writes_trigger",
    "l0_stop_writes_trigger",
    "l0_compaction_file_threshold",
    "l0_flush_split_bytes",
    "data_dirs",
    "rate_limit",
    "threads",
    // Experiments that offload start and configure their own workers.
    "workers",
    "worker_secret_file",
    "split",
    "host_mode",
    "worker_mode",
    "offload_min_bytes",
];

/// `sluice bench`: flags follow db_bench's (with dashes instead of underscores). Counts and
/// sizes accept `_` separators and K/M/G (binary) suffixes.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order on one database.
    #[arg(long, value_delimiter = ',', value_parser = parse_benchmark, default_value = DEFAULT_BENCHMARKS)]
    pub benchmarks: Vec<Benchmark>,
    /// Number of keys: fills write N entries with keys from [0, N) [default: 1000000; 3000000
    /// with --experiment mstore].
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub num: Option<u64>,
    /// Operations of readrandom and seekrandom, and the entry limit of readseq [default: --num].
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub reads: Option<u64>,
    /// Bytes per key (zero-padded decimal key numbers).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "16")]
    pub key_size: usize,
    /// Bytes per value (generated to compress to about half).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "100")]
    pub value_size: usize,
    /// Data block compression.
    #[arg(long, value_enum, default_value_t = Compression::Lz4)]
    pub compression: Compression,
    /// Database directory [default: a fresh temporary directory, removed at the end].
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Keep the temporary database and print its path.
    #[arg(long)]
    pub keep_db: bool,
    /// Run on the database already in --db instead of requiring an empty directory.
    #[arg(long, requires = "db")]
    pub use_existing_db: bool,
    /// Sync the write-ahead log on every write.
    #[arg(long)]
    pub sync: bool,
    /// Turn off automatic compactions (flushes still happen).
    #[arg(long)]
    pub disable_auto_compactions: bool,
    /// Memtable size.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().write_buffer_size)]
    pub write_buffer_size: usize,
    /// Size at which compaction outputs are cut (L1's target grows to at least this).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().target_file_size_base)]
    pub target_file_size: u64,
    /// Uncompressed data block size.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().block_size)]
    pub block_size: usize,
    /// Bloom filter bits per key (0: no filters).
    #[arg(long, value_name = "N", value_parser = parse_u32, default_value_t = Options::default().bloom_bits_per_key)]
    pub bloom_bits: u32,
    /// Block cache capacity (0: no cache).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = Options::default().block_cache_bytes)]
    pub cache_size: usize,
    /// How each compaction is scheduled: sequential (SCP), pipelined (PCP), parallel (C-PPCP),
    /// streaming (document 002's decoder/comparator/encoder stages) or auto (chosen per
    /// compaction from the measured step times).
    #[arg(long, value_name = "MODE", default_value_t = Options::default().compaction_mode)]
    pub compaction_mode: sluice::options::CompactionMode,
    /// Compute threads of the parallel compaction executor.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction_threads)]
    pub compaction_threads: usize,
    /// Automatic compactions that may run at once on disjoint files and key ranges.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().max_concurrent_compactions)]
    pub max_concurrent_compactions: usize,
    /// Sub-tasks that may wait between two stages of the pipelined, parallel and streaming
    /// executors.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().compaction_queue_depth)]
    pub compaction_queue_depth: usize,
    /// Input bytes per compaction sub-task.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().sub_task_bytes)]
    pub sub_task_bytes: u64,
    /// L0 depth (sublevels) that starts an L0 compaction.
    #[arg(long = "level0-file-num-compaction-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().l0_compaction_trigger)]
    pub l0_compaction_trigger: usize,
    /// L0 depth at which each write is delayed.
    #[arg(long = "level0-slowdown-writes-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().l0_slowdown_writes_trigger)]
    pub l0_slowdown_writes_trigger: usize,
    /// L0 depth at which writes stop until compaction catches up.
    #[arg(long = "level0-stop-writes-trigger", value_name = "N", value_parser = parse_usize, default_value_t = Options::default().l0_stop_writes_trigger)]
    pub l0_stop_writes_trigger: usize,
    /// L0 files that start an L0 compaction however shallow L0 is (Pebble's
    /// L0CompactionFileThreshold).
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = Options::default().l0_compaction_file_threshold)]
    pub l0_compaction_file_threshold: usize,
    /// Cut flushes at L1 file boundaries at most once per this many bytes of L1 (Pebble's
    /// FlushSplitBytes; 0: never).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = Options::default().l0_flush_split_bytes)]
    pub l0_flush_split_bytes: u64,
    /// Extra data directories, one per storage device (S-PPCP): new tables are dealt over the
    /// database directory and these.
    #[arg(long, value_name = "DIR", value_delimiter = ',')]
    pub data_dirs: Vec<PathBuf>,
    /// Limit the bytes per second flushes and compactions write, with K/M/G suffixes (RocksDB's
    /// rate_limiter); 0: no limit.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "0")]
    pub rate_limit: u64,
    /// Flushes and compactions read and write with direct I/O (O_DIRECT), bypassing the page
    /// cache (RocksDB's use_direct_io_for_flush_and_compaction). Also applies to --experiment.
    #[arg(long)]
    pub direct_io: bool,
    /// Client threads; each benchmark's operations are divided among them.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value = "1")]
    pub threads: usize,
    /// Seed of the key and value generators.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "301")]
    pub seed: u64,
    /// Print one JSON object per benchmark (one per line) instead of a table; with
    /// --experiment, the experiment's whole JSON document.
    #[arg(long)]
    pub json: bool,
    /// Run an experiment instead of benchmarks. `pcp` reproduces document 000's compaction
    /// figures (step breakdown, SCP vs PCP vs the parallel and streaming executors, sub-task
    /// size, threads and data directories) on fresh temporary databases (under $TMPDIR). It
    /// uses --num (the largest data set), --key-size, --value-size, --compression and --seed.
    /// `copro` reproduces document 004's comparison of host only, Co-KV, CoPro, CoPro+ and the
    /// dynamic split (fillrandom and YCSB A at 100 B to 64 KiB values, --num x 64 bytes per
    /// run) with --workers worker processes (`sluice worker`) it starts itself; it uses --num,
    /// --key-size, --compression, --seed, --workers and --throttle. `mstore` reproduces
    /// document 001's MStore-basic against MStore (storage and compaction-load balancing): one
    /// owner directory and `sluice worker` per --workers (default 2), --num zipfian writes hot
    /// in owner 0's ranges, a reader checking a reference set throughout; it uses --num,
    /// --key-size, --value-size, --compression, --seed, --workers and --throttle.
    #[arg(long, value_name = "NAME", value_parser = parse_experiment, conflicts_with_all = NOT_FOR_EXPERIMENTS)]
    pub experiment: Option<Experiment>,
    /// Also write the JSON and charts (PNG and SVG) into DIR, creating it if needed: for
    /// benchmarks bench.jsonl (one object per line) and throughput over time, latency CDF and,
    /// if anything compacted, compaction bandwidth and stage profile; with --experiment
    /// <NAME>.json and the experiment's figures.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With --experiment: measure every data point K times and report the median run.
    #[arg(long, value_name = "K", value_parser = parse_usize, requires = "experiment")]
    pub repeat: Option<usize>,
    /// With --experiment copro: worker processes started for each offloaded run [default: 1];
    /// with mstore: owners, each with its own worker [default: 2].
    #[arg(long = "workers", value_name = "N", value_parser = parse_usize, requires = "experiment")]
    pub experiment_workers: Option<usize>,
    /// With --experiment copro or mstore: emulate a device CPU F times slower than the host's
    /// (each worker sleeps (F - 1) x its CPU time per share), at least 1.0 [default: 1.0 for
    /// copro, 4.0 for mstore, whose document's devices are embedded boards].
    #[arg(long, value_name = "F", requires = "experiment")]
    pub throttle: Option<f64>,
    #[command(flatten)]
    pub offload: crate::offload_args::OffloadArgs,
}

impl BenchArgs {
    /// `--num` for benchmarks and every experiment but mstore, which has its own default.
    pub fn num(&self) -> u64 {
        self.num.unwrap_or(1_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_defaults_and_lists_parse() {
        let cli = Cli::try_parse_from(["sluice", "bench"]).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!(b.benchmarks, Benchmark::ALL.to_vec());
        assert_eq!(b.num(), 1_000_000);
        assert_eq!(b.compression, Compression::Lz4);
        let cli = Cli::try_parse_from([
            "sluice",
            "bench",
            "--benchmarks",
            "fillrandom,readrandom",
            "--num",
            "2K",
            "--write-buffer-size",
            "1M",
            "--level0-stop-writes-trigger",
            "50",
            "--l0-flush-split-bytes",
            "0",
        ])
        .unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!((b.l0_stop_writes_trigger, b.l0_flush_split_bytes), (50, 0));
        assert_eq!(
            b.benchmarks,
            vec![Benchmark::FillRandom, Benchmark::ReadRandom]
        );
        assert_eq!((b.num(), b.write_buffer_size), (2048, 1 << 20));
    }

    #[test]
    fn experiment_flags_parse_and_exclude_db_bench_ones() {
        let cli = Cli::try_parse_from([
            "sluice",
            "bench",
            "--experiment",
            "pcp",
            "--num",
            "100K",
            "--out",
            "charts",
            "--repeat",
            "3",
        ])
        .unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!(b.experiment, Some(Experiment::Pcp));
        assert_eq!(b.out, Some(PathBuf::from("charts")));
        assert_eq!((b.num(), b.repeat), (100 << 10, Some(3)));
        // --out also serves plain benchmarks.
        let cli = Cli::try_parse_from(["sluice", "bench", "--out", "charts"]).unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!((b.out, b.experiment), (Some(PathBuf::from("charts")), None));
        for args in [
            &["sluice", "bench", "--experiment", "fig8"][..],
            &["sluice", "bench", "--repeat", "3"],
            &[
                "sluice",
                "bench",
                "--experiment",
                "pcp",
                "--benchmarks",
                "compact",
            ],
            &["sluice", "bench", "--experiment", "pcp", "--db", "x"],
            &[
                "sluice",
                "bench",
                "--experiment",
                "pcp",
                "--compaction-mode",
                "parallel",
            ],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn copro_flags_parse_and_need_an_experiment() {
        let cli = Cli::try_parse_from([
            "sluice",
            "bench",
            "--experiment",
            "copro",
            "--workers",
            "2",
            "--throttle",
            "2.5",
        ])
        .unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!(b.experiment, Some(Experiment::Copro));
        assert_eq!((b.experiment_workers, b.throttle), (Some(2), Some(2.5)));
        for args in [
            &["sluice", "bench", "--workers", "2"][..],
            &["sluice", "bench", "--throttle", "2"],
            &[
                "sluice",
                "bench",
                "--experiment",
                "copro",
                "--throttle",
                "x",
            ],
            // The experiment starts its own workers.
            &[
                "sluice",
                "bench",
                "--experiment",
                "copro",
                "--worker",
                "127.0.0.1:1",
            ],
            &[
                "sluice",
                "bench",
                "--experiment",
                "copro",
                "--split",
                "dynamic",
            ],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["sluice", "bench", "--compression", "foo"][..],
            &["sluice", "bench", "--benchmarks", "fillsequential"],
            &["sluice", "bench", "--use-existing-db"],
            &["sluice", "get", "--db", "x"],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }
}
