//! The command line, declared with clap: the subcommands, each with its flags declared beside
//! its code in `commands/<name>`, so `--help` documents all of it.

use clap::{Parser, Subcommand};

use crate::commands::backup::BackupCommand;
use crate::commands::bench::BenchArgs;
use crate::commands::blob::BlobCommand;
use crate::commands::chart::ChartCommand;
use crate::commands::check::CheckArgs;
use crate::commands::checkpoint::CheckpointArgs;
use crate::commands::compact::CompactArgs;
use crate::commands::dump::{DumpArgs, LoadArgs};
use crate::commands::experiment::ExperimentCommand;
use crate::commands::ingest::IngestArgs;
use crate::commands::keyspace::KeyspaceCommand;
use crate::commands::kv::{DeleteRangeArgs, GetArgs, KeyArgs, MergeArgs, PutArgs, ScanArgs};
use crate::commands::manifest::ManifestCommand;
use crate::commands::range::RangeCommand;
use crate::commands::repair::RepairArgs;
use crate::commands::sst::SstCommand;
use crate::commands::stats::StatsArgs;
use crate::commands::stress::StressArgs;
use crate::commands::wal::WalCommand;
use crate::commands::ycsb::YcsbArgs;

/// Inspect, check and benchmark Sluice databases.
///
/// Keys and values given as arguments are taken as their UTF-8 bytes. In output, bytes outside
/// printable ASCII (and the backslash) are written as \xNN. Logs go to stderr, filtered by
/// RUST_LOG (default: warn).
///
/// The key-value commands, `compact` and `stats` act on one keyspace (RocksDB's column family):
/// `--keyspace NAME`, default `default`, the database's own; `sluice keyspace` lists, creates
/// and drops them. The engine flags apply to every keyspace of the database opened.
///
/// Exit status: 0 on success, 1 when `get` finds no value or `check` finds damage, 2 on any
/// other error. `get`, `scan`, `dump`, `stats`, `check`, `keyspace list` and the file dumps
/// never change the database.
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
    /// Add OPERAND to KEY's merge operands, for the database's --merge-operator to combine
    /// with its value when it is read (`--merge-operator u64_add --u64 5` adds 5).
    Merge(MergeArgs),
    /// Print the value of KEY; exit 1 if it has none.
    Get(GetArgs),
    /// Delete KEY (a no-op if it is absent).
    Delete(KeyArgs),
    /// Delete every key in [--from, --to) with one range tombstone, however many there are.
    DeleteRange(DeleteRangeArgs),
    /// Print `key<TAB>value` for every key in [--from, --to), in key order.
    Scan(ScanArgs),
    /// Write a keyspace's live keys and values (or those in [--from, --to)) as text, from one
    /// snapshot, in the format of docs/format/dump.md that `load` reads (RocksDB's `ldb dump`).
    Dump(DumpArgs),
    /// Put every key and value of a dump (`sluice dump`'s output, from --input or stdin) into
    /// an existing database, or a new one with --create (RocksDB's `ldb load`).
    Load(LoadArgs),
    /// Keyspaces (RocksDB's column families): `list` them, `create` or `drop` one.
    #[command(subcommand)]
    Keyspace(KeyspaceCommand),
    /// Compact the key range [--from, --to] (default: everything) down the tree.
    Compact(CompactArgs),
    /// Print the per-level LSM table, flush and compaction totals and the stage profile.
    Stats(StatsArgs),
    /// Verify the MANIFEST, every WAL, every block of every live table and every record of
    /// every blob file without changing the database; exit 1 on damage or on anything
    /// recovery would not apply.
    Check(CheckArgs),
    /// Write an openable copy of the database into --to (tables hard-linked where the file
    /// system allows, WALs copied), without changing the source.
    Checkpoint(CheckpointArgs),
    /// Incremental backups: `create` (tables an earlier backup stored are not copied again),
    /// `list`, `verify` (every file's CRC32C; exit 1 on damage), `restore`, `delete`, `purge`.
    #[command(subcommand)]
    Backup(BackupCommand),
    /// Place tables from `sst write` into the database (bulk load): each at the deepest level
    /// it can go without rewriting, or rewritten once where it overlaps existing data.
    Ingest(IngestArgs),
    /// Rebuild a damaged database from what can still be read: merge every readable table and
    /// WAL record into a new tree and MANIFEST, set what cannot be read aside in `lost/`, and
    /// print what was kept and dropped.
    Repair(Box<RepairArgs>),
    /// Inspect table (.sst) files.
    #[command(subcommand)]
    Sst(SstCommand),
    /// Inspect blob (.blob) files, where value separation (--min-blob-size) keeps large values.
    #[command(subcommand)]
    Blob(BlobCommand),
    /// Inspect the MANIFEST.
    #[command(subcommand)]
    Manifest(ManifestCommand),
    /// Inspect write-ahead log (.log) files.
    #[command(subcommand)]
    Wal(WalCommand),
    /// Change a partitioned database's range map by hand: move a range to another owner, or
    /// split one in two. Prints the map afterwards.
    #[command(subcommand)]
    Range(RangeCommand),
    /// Run db_bench-style benchmarks (fillseq, fillrandom, overwrite, readrandom, readseq,
    /// seekrandom, compact); `--experiment NAME` is another spelling of `sluice experiment NAME`.
    Bench(Box<BenchArgs>),
    /// Reproduce a design document's evaluation, or measure how cost grows with the data
    /// (scale), on fresh temporary databases: print a table (or JSON) and, with --out, write
    /// the JSON and the figures (PNG and SVG).
    #[command(subcommand)]
    Experiment(ExperimentCommand),
    /// Run a YCSB core workload (a to f): a load phase, then a run phase, with per-operation
    /// latency percentiles and throughput per second.
    Ycsb(Box<YcsbArgs>),
    /// Stress and crash-test the engine (db_stress + db_crashtest): random writes, batches,
    /// snapshots, iterators and compactions checked against an expected state kept beside
    /// the database; with --kill-every the workload is SIGKILLed again and again, with
    /// --corrupt files are damaged and I/O faults injected. Prints one summary line; exit 1
    /// on any failure.
    Stress(Box<StressArgs>),
    /// Draw charts (PNG and SVG) from saved results: `chart peers` for the comparison of
    /// benches/peers/run.
    #[command(subcommand)]
    Chart(ChartCommand),
    /// Serve compaction shares for Sluice hosts (`--worker` of bench and compact): a stand-in
    /// for a near-data-processing device. Runs until SIGTERM or Ctrl-C.
    Worker(Box<sluice_worker::WorkerArgs>),
    /// Forward TCP connections to an object store, adding a fixed delay to every response:
    /// `--object-store` runs measured as if the bucket were that far away (S3 Express answers
    /// in single milliseconds, S3 Standard in tens). Runs until Ctrl-C.
    LatencyProxy(LatencyProxyArgs),
}

/// `sluice latency-proxy`.
#[derive(Debug, clap::Args)]
pub struct LatencyProxyArgs {
    /// Address to listen on; port 0 picks one (the line printed at start names it).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: std::net::SocketAddr,
    /// The server to forward to (`host:port`).
    #[arg(long)]
    pub target: std::net::SocketAddr,
    /// Milliseconds added to every response.
    #[arg(long, default_value_t = 5)]
    pub delay_ms: u64,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["sluice", "bench", "--compression", "foo"][..],
            &["sluice", "bench", "--benchmarks", "fillsequential"],
            &["sluice", "bench", "--use-existing-db"],
            &["sluice", "get", "--db", "x"],
            &["sluice", "experiment", "fig8"],
            &["sluice", "get", "--db", "x", "k", "--bloom-bits", "many"],
            &["sluice", "keyspace", "create", "--db", "x"],
            &["sluice", "get", "--db", "x", "k", "--create-keyspace"],
            &["sluice", "put", "--db", "x", "--keyspace", "k", "v"],
            &["sluice", "experiment", "copro", "--separation", "both"],
            &[
                "sluice",
                "experiment",
                "copro",
                "--configurations",
                "copro++",
            ],
            &["sluice", "experiment", "copro", "--workloads", "ycsb-b"],
        ] {
            let err = Cli::try_parse_from(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }
}
