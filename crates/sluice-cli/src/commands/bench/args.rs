//! `sluice bench`'s flags: db_bench's (with dashes instead of underscores), the engine and
//! offload groups, and `--experiment`, the older spelling of `sluice experiment`.
//!
//! With `--experiment` the run's own flags (`--benchmarks`, `--db`, `--threads`, ...), the
//! engine's tuning group and the offload group are usage errors: an experiment opens its own
//! databases and chooses those per data point. What it does take (`--num`, `--key-size`,
//! `--value-size`, `--compression`, `--seed`, `--direct-io`, `--json`, `--out`, `--repeat`,
//! `--workers`, `--throttle`, `--sizes`) becomes the experiment's flags in
//! [`BenchArgs::experiment_command`].

use std::path::PathBuf;

use clap::Args;
use sluice_bench::Benchmark;
use sluice_experiments::copro::CoproConfig;
use sluice_experiments::mstore::MstoreConfig;
use sluice_experiments::scale::ScaleConfig;
use sluice_experiments::{Experiment, PcpConfig};

use crate::commands::experiment::{
    CommonArgs, CoproArgs, ExperimentCommand, MstoreArgs, PcpArgs, ScaleArgs,
};
use crate::engine_flags::{EngineArgs, OFFLOAD, OffloadArgs, TUNING};
use crate::failure::Failure;
use crate::units::{parse_size, parse_usize};

/// `--num` unless given: db_bench's default.
pub const DEFAULT_NUM: u64 = 1_000_000;

/// The default benchmark list.
pub const DEFAULT_BENCHMARKS: &str =
    "fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom,compact";

/// `sluice bench`. Counts and sizes accept `_` separators and K/M/G (binary) suffixes.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Comma-separated benchmarks, run in order on one database.
    #[arg(long, value_delimiter = ',', value_parser = parse_benchmark, default_value = DEFAULT_BENCHMARKS, conflicts_with = "experiment")]
    pub benchmarks: Vec<Benchmark>,
    /// Number of keys: fills write N entries with keys from [0, N) [default: 1000000; 3000000
    /// with --experiment mstore].
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub num: Option<u64>,
    /// Operations of readrandom and seekrandom, and the entry limit of readseq [default: --num].
    #[arg(long, value_name = "N", value_parser = parse_size, conflicts_with = "experiment")]
    pub reads: Option<u64>,
    /// Bytes per key (zero-padded decimal key numbers).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "16")]
    pub key_size: usize,
    /// Bytes per value (generated to compress to about half).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "100")]
    pub value_size: usize,
    /// Database directory [default: a fresh temporary directory, removed at the end].
    #[arg(long, value_name = "DIR", conflicts_with = "experiment")]
    pub db: Option<PathBuf>,
    /// Keep the database's tables as objects under this URL (`s3://bucket/prefix` with the
    /// `AWS_*` environment, or `file:///dir`), the WAL and MANIFEST in the database directory.
    #[arg(long, value_name = "URL", conflicts_with = "experiment")]
    pub object_store: Option<String>,
    /// A local directory caching whole objects of `--object-store`.
    #[arg(long, value_name = "DIR", requires = "object_store")]
    pub object_cache_dir: Option<PathBuf>,
    /// The most bytes `--object-cache-dir` holds.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "1G")]
    pub object_cache_bytes: u64,
    /// Keep the temporary database and print its path.
    #[arg(long, conflicts_with = "experiment")]
    pub keep_db: bool,
    /// Run on the database already in --db instead of requiring an empty directory.
    #[arg(long, requires = "db")]
    pub use_existing_db: bool,
    /// Sync the write-ahead log on every write.
    #[arg(long, conflicts_with = "experiment")]
    pub sync: bool,
    /// Client threads; each benchmark's operations are divided among them (readwhilewriting:
    /// N readers, and one more thread writing, as db_bench adds it).
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value = "1", conflicts_with = "experiment")]
    pub threads: usize,
    /// Seed of the key and value generators.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "301")]
    pub seed: u64,
    /// readrandomwriterandom: percent of operations that are reads (every 100 operations of a
    /// thread are this many gets, then puts).
    #[arg(long, value_name = "PERCENT", value_parser = clap::value_parser!(u8).range(0..=100), default_value = "90", conflicts_with = "experiment")]
    pub read_write_percent: u8,
    /// seekrandom: `next` calls after each seek, each reading one more entry.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value = "0", conflicts_with = "experiment")]
    pub seek_nexts: usize,
    /// Stop each benchmark after this many seconds even if its operations are not done
    /// (0: no limit); its result counts the operations that ran. compact and deleterange are
    /// not limited.
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64), default_value = "0", conflicts_with = "experiment")]
    pub duration: u64,
    /// Spread the keys over this many keyspaces, key number n in keyspace n % N (the default
    /// one, then bench-1, bench-2, ..., created if missing): the same bytes as one keyspace,
    /// written round-robin. fillseq, fillrandom, overwrite, readrandom and compact only.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value = "1", conflicts_with = "experiment")]
    pub keyspaces: usize,
    /// randomtransaction's transactions: optimistic (conflicts fail the commit, which runs
    /// again) or pessimistic (keys are locked as they are read).
    #[arg(long, value_name = "MODE", value_parser = parse_concurrency, default_value = "optimistic", conflicts_with = "experiment")]
    pub transaction_db: sluice::Concurrency,
    /// Print one JSON object per benchmark (one per line) instead of a table; with
    /// --experiment, the experiment's whole JSON document.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON and charts (PNG and SVG) into DIR, creating it if needed: for
    /// benchmarks bench.jsonl (one object per line) and throughput over time, latency CDF and,
    /// if anything compacted, compaction bandwidth and stage profile; with --experiment
    /// NAME.json and the experiment's figures.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run experiment NAME (pcp, copro, mstore or scale) instead of benchmarks: the same as
    /// `sluice experiment NAME` (see its --help) with this command's --num, --key-size,
    /// --value-size, --compression, --seed, --direct-io, --json, --out, --repeat, --workers,
    /// --throttle and --sizes.
    #[arg(long, value_name = "NAME", value_parser = parse_experiment, conflicts_with_all = [TUNING, OFFLOAD])]
    pub experiment: Option<Experiment>,
    /// With --experiment: measure every data point K times and report the median run.
    #[arg(long, value_name = "K", value_parser = parse_usize, requires = "experiment")]
    pub repeat: Option<usize>,
    /// With --experiment copro: worker processes started for each offloaded run [default: 1];
    /// with mstore: owners, each with its own worker [default: 2].
    #[arg(long = "workers", value_name = "N", value_parser = parse_usize, requires = "experiment")]
    pub experiment_workers: Option<usize>,
    /// With --experiment copro or mstore: emulate a device CPU F times slower than the host's
    /// [default: 1.0 for copro, 4.0 for mstore].
    #[arg(long, value_name = "F", requires = "experiment")]
    pub throttle: Option<f64>,
    /// With --experiment scale: comma-separated numbers of keys, each measured on fresh
    /// databases [default: 1M,4M,16M,64M] (scale takes these instead of --num).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', value_parser = parse_size, requires = "experiment")]
    pub sizes: Option<Vec<u64>>,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub offload: OffloadArgs,
}

fn parse_benchmark(s: &str) -> Result<Benchmark, String> {
    s.parse()
}

fn parse_experiment(s: &str) -> Result<Experiment, String> {
    s.parse()
}

impl BenchArgs {
    /// `--num` for benchmarks.
    pub fn num(&self) -> u64 {
        self.num.unwrap_or(DEFAULT_NUM)
    }

    /// `--experiment`'s run as `sluice experiment` would take it, or `None` without one; a
    /// flag not given takes that command's default. Errors name a flag the chosen experiment
    /// does not take (pcp: `--workers`, `--throttle`).
    pub fn experiment_command(&self) -> Result<Option<ExperimentCommand>, Failure> {
        let Some(experiment) = self.experiment else {
            return Ok(None);
        };
        let common = CommonArgs {
            key_size: self.key_size,
            compression: self.engine.compression,
            seed: self.seed,
            repeat: self.repeat.unwrap_or(1),
            json: self.json,
            out: self.out.clone(),
        };
        if self.sizes.is_some() && experiment != Experiment::Scale {
            return Err(Failure::Error(
                "--sizes applies to --experiment scale only".into(),
            ));
        }
        let command = match experiment {
            Experiment::ScaleOut => {
                return Err(Failure::Error(
                    "--experiment scale-out has no `bench` spelling: run `sluice experiment \
                     scale-out` (see its --help)"
                        .into(),
                ));
            }
            Experiment::Pcp => {
                if self.experiment_workers.is_some() || self.throttle.is_some() {
                    return Err(Failure::Error(
                        "--workers and --throttle apply to --experiment copro and mstore only"
                            .into(),
                    ));
                }
                ExperimentCommand::Pcp(PcpArgs {
                    num: self.num.unwrap_or(PcpConfig::default().num),
                    value_size: self.value_size,
                    direct_io: self.engine.direct_io,
                    common,
                })
            }
            Experiment::Copro => ExperimentCommand::Copro(CoproArgs {
                num: self.num.unwrap_or(CoproArgs::DEFAULT_NUM),
                workers: self
                    .experiment_workers
                    .unwrap_or(CoproConfig::default().workers),
                throttle: self.throttle.unwrap_or(CoproConfig::default().throttle),
                value_sizes: Vec::new(),
                workloads: Vec::new(),
                configurations: Vec::new(),
                separation: CoproConfig::default().separations,
                min_blob_size: CoproConfig::default().min_blob_size,
                common,
            }),
            Experiment::Mstore => ExperimentCommand::Mstore(MstoreArgs {
                num: self.num.unwrap_or(MstoreConfig::default().num),
                value_size: self.value_size,
                workers: self
                    .experiment_workers
                    .unwrap_or(MstoreConfig::default().workers),
                throttle: self.throttle.unwrap_or(MstoreConfig::default().throttle),
                common,
            }),
            Experiment::Scale => {
                if self.num.is_some()
                    || self.experiment_workers.is_some()
                    || self.throttle.is_some()
                {
                    return Err(Failure::Error(
                        "--experiment scale takes --sizes, not --num, --workers or --throttle"
                            .into(),
                    ));
                }
                ExperimentCommand::Scale(ScaleArgs {
                    sizes: self
                        .sizes
                        .clone()
                        .unwrap_or_else(|| ScaleConfig::default().sizes),
                    value_size: self.value_size,
                    direct_io: self.engine.direct_io,
                    write_buffer_size: None,
                    common,
                })
            }
        };
        Ok(Some(command))
    }
}

/// `optimistic` or `pessimistic`.
fn parse_concurrency(s: &str) -> Result<sluice::Concurrency, String> {
    match s {
        "optimistic" => Ok(sluice::Concurrency::Optimistic),
        "pessimistic" => Ok(sluice::Concurrency::Pessimistic),
        other => Err(format!("expected optimistic or pessimistic, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sluice::options::CompactionMode;

    use super::*;
    use crate::args::{Cli, Command};
    use crate::engine_flags::Compression;

    fn bench(args: &[&str]) -> Result<BenchArgs, clap::Error> {
        let mut argv = vec!["sluice", "bench"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv)?.command {
            Command::Bench(b) => Ok(*b),
            other => panic!("not bench: {other:?}"),
        }
    }

    #[test]
    fn defaults_and_lists_parse() {
        let b = bench(&[]).unwrap();
        assert_eq!(b.benchmarks, Benchmark::ALL.to_vec());
        assert_eq!(b.num(), 1_000_000);
        assert_eq!(b.engine.compression, Compression::Lz4);
        let b = bench(&[
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
        let t = &b.engine.tuning;
        assert_eq!((t.l0_stop_writes_trigger, t.l0_flush_split_bytes), (50, 0));
        assert_eq!(
            b.benchmarks,
            vec![Benchmark::FillRandom, Benchmark::ReadRandom]
        );
        assert_eq!((b.num(), t.write_buffer_size), (2048, 1 << 20));
    }

    #[test]
    fn workload_flags_parse_and_default_to_db_bench() {
        let b = bench(&[]).unwrap();
        assert_eq!((b.read_write_percent, b.seek_nexts, b.duration), (90, 0, 0));
        let b = bench(&[
            "--benchmarks",
            "fillseq,readwhilewriting,updaterandom,readrandomwriterandom,deleterandom,seekrandom",
            "--threads",
            "4",
            "--read-write-percent",
            "70",
            "--seek-nexts",
            "10",
            "--duration",
            "30",
        ])
        .unwrap();
        use Benchmark::*;
        assert_eq!(
            b.benchmarks,
            [
                FillSeq,
                ReadWhileWriting,
                UpdateRandom,
                ReadRandomWriteRandom,
                DeleteRandom,
                SeekRandom
            ]
        );
        assert_eq!(
            (b.threads, b.read_write_percent, b.seek_nexts, b.duration),
            (4, 70, 10, 30)
        );
        for args in [
            &["--read-write-percent", "101"][..],
            &["--seek-nexts", "-1"],
            &["--duration", "soon"],
            &["--experiment", "pcp", "--duration", "5"],
        ] {
            assert_eq!(bench(args).unwrap_err().exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn an_experiment_takes_the_flags_it_uses_and_refuses_the_rest() {
        let b = bench(&[
            "--experiment",
            "pcp",
            "--num",
            "100K",
            "--out",
            "charts",
            "--repeat",
            "3",
            "--compression",
            "zstd",
            "--direct-io",
        ])
        .unwrap();
        let Some(ExperimentCommand::Pcp(p)) = b.experiment_command().unwrap() else {
            panic!("not pcp")
        };
        assert_eq!((p.num, p.common.repeat), (100 << 10, 3));
        assert_eq!(p.common.out, Some(PathBuf::from("charts")));
        assert_eq!(p.common.compression, Compression::Zstd);
        assert!(p.direct_io);
        // --out also serves plain benchmarks.
        let b = bench(&["--out", "charts"]).unwrap();
        assert_eq!(b.out, Some(PathBuf::from("charts")));
        assert!(b.experiment_command().unwrap().is_none());
        // Flags of the run, of the tuning group and of the offload group.
        for args in [
            &["--experiment", "fig8"][..],
            &["--repeat", "3"],
            &["--experiment", "pcp", "--benchmarks", "compact"],
            &["--experiment", "pcp", "--db", "x"],
            &["--experiment", "pcp", "--threads", "2"],
            &["--experiment", "pcp", "--compaction-mode", "parallel"],
            &["--experiment", "pcp", "--data-dirs", "a,b"],
            &["--experiment", "copro", "--worker", "127.0.0.1:1"],
            &["--experiment", "copro", "--split", "dynamic"],
            &["--experiment", "copro", "--verify-outputs", "full"],
        ] {
            let err = bench(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
        // Without --experiment the same flags are fine.
        let b = bench(&["--compaction-mode", "parallel", "--split", "dynamic"]).unwrap();
        assert_eq!(b.engine.tuning.compaction_mode, CompactionMode::Parallel);
    }

    #[test]
    fn experiment_flags_take_each_experiments_defaults() {
        let b = bench(&[
            "--experiment",
            "copro",
            "--workers",
            "2",
            "--throttle",
            "2.5",
        ])
        .unwrap();
        let Some(ExperimentCommand::Copro(c)) = b.experiment_command().unwrap() else {
            panic!("not copro")
        };
        assert_eq!((c.workers, c.throttle, c.num), (2, 2.5, 1_000_000));
        let b = bench(&["--experiment", "mstore"]).unwrap();
        let Some(ExperimentCommand::Mstore(m)) = b.experiment_command().unwrap() else {
            panic!("not mstore")
        };
        let d = MstoreConfig::default();
        assert_eq!(
            (m.num, m.workers, m.throttle),
            (d.num, d.workers, d.throttle)
        );
        // pcp starts no workers.
        let b = bench(&["--experiment", "pcp", "--workers", "2"]).unwrap();
        assert!(b.experiment_command().is_err());
        // scale takes sizes, and only scale does.
        let b = bench(&["--experiment", "scale", "--sizes", "1M,4M", "--direct-io"]).unwrap();
        let Some(ExperimentCommand::Scale(s)) = b.experiment_command().unwrap() else {
            panic!("not scale")
        };
        assert_eq!((s.sizes, s.direct_io), (vec![1 << 20, 4 << 20], true));
        let b = bench(&["--experiment", "scale"]).unwrap();
        let Some(ExperimentCommand::Scale(s)) = b.experiment_command().unwrap() else {
            panic!("not scale")
        };
        assert_eq!(s.sizes, ScaleConfig::default().sizes);
        for args in [
            &["--experiment", "pcp", "--sizes", "1M"][..],
            &["--experiment", "scale", "--num", "1M"],
            &["--experiment", "scale", "--workers", "2"],
        ] {
            let b = bench(args).unwrap();
            assert!(b.experiment_command().is_err(), "{args:?}");
        }
        assert_eq!(bench(&["--sizes", "1M"]).unwrap_err().exit_code(), 2);
        for args in [
            &["--workers", "2"][..],
            &["--throttle", "2"],
            &["--experiment", "copro", "--throttle", "x"],
        ] {
            let err = bench(args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
    }
}
