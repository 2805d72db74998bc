//! `sluice experiment`'s flags: one subcommand per experiment, each taking only the flags it
//! uses, with the experiment's own defaults (from `sluice_experiments`' configurations).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use sluice_experiments::PcpConfig;
use sluice_experiments::copro::{Configuration, CoproConfig, Separation, Workload};
use sluice_experiments::mstore::MstoreConfig;
use sluice_experiments::scale::ScaleConfig;
use sluice_experiments::scale_out;

use crate::engine_flags::Compression;
use crate::units::{parse_size, parse_usize};

/// Which experiment. Each runs on fresh temporary databases (under $TMPDIR, always removed)
/// and prints a table, or with --json its whole JSON document. Counts and sizes accept `_`
/// separators and K/M/G (binary) suffixes.
#[derive(Debug, Subcommand)]
pub enum ExperimentCommand {
    /// The PCP paper's compaction figures: the step breakdown, SCP vs PCP vs the parallel and
    /// streaming executors by data set size, sub-task size, threads and data directories.
    Pcp(PcpArgs),
    /// The CoPro paper's comparison of host only, Co-KV, CoPro, CoPro+ and the dynamic split
    /// (fillrandom and YCSB A at 100 B to 64 KiB values), with `sluice worker` processes it
    /// starts itself.
    Copro(CoproArgs),
    /// The MStore paper's MStore-basic against MStore (storage and compaction-load balancing): one
    /// owner directory and `sluice worker` per --workers, zipfian writes hot in owner 0's
    /// ranges, a reader checking a reference set throughout.
    Mstore(MstoreArgs),
    /// Cost as work grows: at each of --sizes keys, fillrandom with automatic
    /// compactions (2 at once) until they are done, and one full manual compaction of an
    /// inverted LSM (the same fill with automatic compactions off, every table in L0),
    /// sequential and parallel: seconds, CPU seconds and MB/s per size, and how each grows.
    Scale(ScaleArgs),
    /// How far compaction offloaded to workers that share only the bucket scales: one
    /// compaction of an inverted LSM by the host alone and by 1 and 2 workers
    /// (started here), measured, then a model calibrated from them predicting
    /// 1 to 64 workers, with the bucket's request limits, the network and the host's checks.
    /// Tables go to --object-store (credentials from AWS_*), else to a local-backend bucket in
    /// the scratch directory. docs/scale.md explains the model.
    ScaleOut(ScaleOutArgs),
}

/// The flags every experiment takes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Bytes per key (zero-padded decimal key numbers).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "16")]
    pub key_size: usize,
    /// Data block compression.
    #[arg(long, value_enum, default_value_t = Compression::Lz4)]
    pub compression: Compression,
    /// Seed of the key and value generators.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "301")]
    pub seed: u64,
    /// Measure every data point K times and report the median run.
    #[arg(long, value_name = "K", value_parser = parse_usize, default_value = "1")]
    pub repeat: usize,
    /// Print the experiment's whole JSON document instead of its table.
    #[arg(long)]
    pub json: bool,
    /// Also write NAME.json and the experiment's figures (PNG and SVG) into DIR, creating it
    /// if needed.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `sluice experiment pcp`.
#[derive(Debug, Args)]
pub struct PcpArgs {
    /// Entries of the largest data set (the others are fractions of it).
    #[arg(long, value_name = "N", value_parser = parse_size, default_value_t = PcpConfig::default().num)]
    pub num: u64,
    /// Bytes per value of the figures that do not vary it.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = PcpConfig::default().value_size)]
    pub value_size: usize,
    /// Compactions read and write with direct I/O (O_DIRECT), bypassing the page cache.
    #[arg(long)]
    pub direct_io: bool,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `sluice experiment copro`.
#[derive(Debug, Args)]
pub struct CoproArgs {
    /// Data volume of each run: N x 64 bytes, whatever the value size (a larger value means
    /// fewer entries).
    #[arg(long, value_name = "N", value_parser = parse_size, default_value_t = CoproArgs::DEFAULT_NUM)]
    pub num: u64,
    /// Worker processes started for each offloaded run.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = CoproConfig::default().workers)]
    pub workers: usize,
    /// Emulate a device CPU F times slower than the host's (each worker sleeps (F - 1) x its
    /// CPU time per share), at least 1.0.
    #[arg(long, value_name = "F", default_value_t = CoproConfig::default().throttle)]
    pub throttle: f64,
    /// Comma-separated bytes per value, one set of runs each [default: 100,1K,16K,64K].
    #[arg(long, value_name = "BYTES,...", value_delimiter = ',', value_parser = parse_usize)]
    pub value_sizes: Vec<usize>,
    /// Comma-separated workloads: fillrandom, ycsb-a [default: both].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_workload)]
    pub workloads: Vec<Workload>,
    /// Comma-separated configurations: host-only, co-kv, copro, copro+, dynamic [default: all].
    #[arg(long, value_name = "NAME,...", value_delimiter = ',', value_parser = parse_configuration)]
    pub configurations: Vec<Configuration>,
    /// Where values go: inline (in the tables), blobs (values of --min-blob-size bytes or more
    /// in blob files), or inline,blobs to run every point both ways and compare them.
    #[arg(long, value_name = "inline|blobs,...", value_delimiter = ',', value_parser = parse_separation, default_value = "inline")]
    pub separation: Vec<Separation>,
    /// The smallest value put in a blob file by --separation blobs.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = CoproConfig::default().min_blob_size)]
    pub min_blob_size: usize,
    #[command(flatten)]
    pub common: CommonArgs,
}

fn parse_workload(name: &str) -> Result<Workload, String> {
    Workload::from_name(name).ok_or_else(|| format!("unknown workload {name:?}"))
}

fn parse_configuration(name: &str) -> Result<Configuration, String> {
    Configuration::from_name(name).ok_or_else(|| format!("unknown configuration {name:?}"))
}

fn parse_separation(name: &str) -> Result<Separation, String> {
    Separation::from_name(name)
        .ok_or_else(|| format!("unknown separation {name:?}: inline or blobs"))
}

impl CoproArgs {
    /// `--num` unless given: the configuration's default data volume.
    pub const DEFAULT_NUM: u64 = 1_000_000;
}

/// `sluice experiment mstore`.
#[derive(Debug, Args)]
pub struct MstoreArgs {
    /// Zipfian writes of each variant.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value_t = MstoreConfig::default().num)]
    pub num: u64,
    /// Bytes per value.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = MstoreConfig::default().value_size)]
    pub value_size: usize,
    /// Owners, each with its own directory and worker process.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = MstoreConfig::default().workers)]
    pub workers: usize,
    /// Emulate device CPUs F times slower than the host's, at least 1.0 (the document's
    /// devices are embedded boards).
    #[arg(long, value_name = "F", default_value_t = MstoreConfig::default().throttle)]
    pub throttle: f64,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `sluice experiment scale`.
#[derive(Debug, Args)]
pub struct ScaleArgs {
    /// Comma-separated numbers of keys, each measured on fresh databases (M is 2^20).
    #[arg(long, value_name = "N,N,...", value_delimiter = ',', value_parser = parse_size, default_value = ScaleArgs::DEFAULT_SIZES)]
    pub sizes: Vec<u64>,
    /// Bytes per value.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value_t = ScaleConfig::default().value_size)]
    pub value_size: usize,
    /// Flushes and compactions read and write with direct I/O (O_DIRECT), bypassing the page
    /// cache.
    #[arg(long)]
    pub direct_io: bool,
    /// Memtable bytes [default: the engine's, 64M]; smaller makes more L0 tables of a size.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize)]
    pub write_buffer_size: Option<usize>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// `sluice experiment scale-out`.
#[derive(Debug, Args)]
pub struct ScaleOutArgs {
    /// Keys of the data set (each written once, every table in L0).
    #[arg(long, value_name = "N", value_parser = parse_size, default_value_t = scale_out::DEFAULT_NUM)]
    pub num: u64,
    /// Bytes per value.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "100")]
    pub value_size: usize,
    /// Keep the tables under this URL: s3://bucket/prefix (endpoint, region and credentials
    /// from the AWS_* variables; AWS_ALLOW_HTTP=true for a plain-HTTP endpoint) or file:///dir.
    /// Each data point uses a prefix of its own below it and removes its objects.
    #[arg(long, value_name = "URL")]
    pub object_store: Option<String>,
    /// Memtable bytes and output table bytes.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = scale_out::DEFAULT_TABLE_BYTES)]
    pub table_size: u64,
    /// Comma-separated worker counts to measure; must include 1 (the calibration run).
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = parse_usize, default_value = "1,2")]
    pub measured_workers: Vec<usize>,
    /// Comma-separated worker counts to predict.
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = parse_usize, default_value = "1,2,4,8,16,32,64")]
    pub predicted_workers: Vec<usize>,
    /// Input bytes of the compaction the model predicts: the measured one grown to this
    /// size (same table size and runs).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = scale_out::DEFAULT_PREDICTED_BYTES)]
    pub predicted_bytes: u64,
    /// The host's cores in the model's "what if" column: shares it checks at once (as built,
    /// the host checks as many as it has cores).
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value_t = scale_out::DEFAULT_CHECK_THREADS)]
    pub check_threads: usize,
    #[command(flatten)]
    pub common: CommonArgs,
}

impl ScaleArgs {
    /// `--sizes` unless given: the configuration's default sizes.
    pub const DEFAULT_SIZES: &str = "1M,4M,16M,64M";
}

#[cfg(test)]
mod tests {
    use sluice_experiments::copro::BYTES_PER_NUM;

    use super::*;

    #[test]
    fn copro_default_num_is_its_configurations_data_volume() {
        assert_eq!(
            CoproArgs::DEFAULT_NUM * BYTES_PER_NUM,
            CoproConfig::default().data_bytes
        );
    }

    #[test]
    fn copro_takes_its_axes_as_lists() {
        use clap::Parser;

        use crate::args::{Cli, Command};

        let cli = Cli::try_parse_from([
            "sluice",
            "experiment",
            "copro",
            "--separation",
            "inline,blobs",
            "--configurations",
            "host-only,copro+",
            "--workloads",
            "fillrandom",
            "--value-sizes",
            "1K,64K",
            "--min-blob-size",
            "2K",
        ])
        .unwrap();
        let Command::Experiment(ExperimentCommand::Copro(args)) = cli.command else {
            panic!("{:?}", cli.command)
        };
        assert_eq!(args.separation, Separation::ALL);
        assert_eq!(
            args.configurations,
            [Configuration::HostOnly, Configuration::CoProPlus]
        );
        assert_eq!(args.workloads, [Workload::FillRandom]);
        assert_eq!(args.value_sizes, [1 << 10, 64 << 10]);
        assert_eq!(args.min_blob_size, 2 << 10);
    }

    #[test]
    fn scale_out_defaults_are_its_configurations() {
        use clap::Parser;

        use crate::args::{Cli, Command};
        use sluice_experiments::workers::WorkerProgram;

        let cli = Cli::try_parse_from(["sluice", "experiment", "scale-out"]).unwrap();
        let Command::Experiment(ExperimentCommand::ScaleOut(args)) = cli.command else {
            panic!("{:?}", cli.command)
        };
        let config = scale_out::ScaleOutConfig::new(WorkerProgram::sluice("sluice"));
        assert_eq!(args.num, config.num);
        assert_eq!(args.value_size, config.value_size);
        assert_eq!(args.table_size, config.output_table_bytes);
        assert_eq!(args.measured_workers, config.measured_workers);
        assert_eq!(args.predicted_workers, config.predicted_workers);
        assert_eq!(args.check_threads, config.check_threads);
        assert_eq!(args.predicted_bytes, config.predicted_bytes);
    }

    #[test]
    fn scale_default_sizes_are_its_configurations() {
        let sizes: Vec<u64> = ScaleArgs::DEFAULT_SIZES
            .split(',')
            .map(|s| parse_size(s).unwrap())
            .collect();
        assert_eq!(sizes, ScaleConfig::default().sizes);
    }
}
