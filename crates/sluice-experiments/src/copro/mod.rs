//! The CoPro experiment: the CoPro paper's evaluation (section 4.3, Fig. 9, and Table 5) with
//! worker processes standing in for the near-data device.
//!
//! For each workload and value size, each configuration loads a fresh database:
//!
//! | configuration | split                 | host executor      | worker executor      |
//! |---------------|-----------------------|--------------------|----------------------|
//! | host only     | no offload            | sequential         | -                    |
//! | Co-KV         | static, half and half | sequential         | sequential           |
//! | CoPro         | static, half and half | pipelined          | pipelined            |
//! | CoPro+        | static, half and half | decision component | decision component   |
//! | dynamic split | by measured bandwidth | decision component | decision component   |
//!
//! Workloads: `fillrandom` (db_bench: `entries` uniformly random keys) and `ycsb-a` (YCSB's
//! load of `entries / 2` keys in order, then `entries` workload A requests, zipfian, half of
//! them updates). Every run writes about [`CoproConfig::data_bytes`] of keys and values, so a
//! larger value means fewer entries, as in the CoPro paper's fixed data volumes.
//!
//! Each workload and value size can also be run with large values separated into blob files
//! ([`Separation::Blobs`], issue 23): the merge then moves references, the decision component
//! sees small values and keeps the pipeline on (`sluice_exec::decide::large_value_share`), and
//! the report sets every separated run against its inline twin.
//!
//! Each offloaded run starts its own workers ([`crate::workers`]) serving that run's database
//! directory, with a fresh secret, each pinned to its own core where the machine has one
//! ([`pin`]: host on the first usable CPU, the workers on the others in turn); the host thread
//! that opens the database is pinned to its core for the whole experiment. `throttle` makes
//! the workers' CPU that many times slower (a device CPU).
//!
//! The engine is sized from the data volume ([`Sizing`]) so that every run flushes about 16
//! memtables and its L0 compactions are big enough to be offloaded and cut into several
//! sub-tasks.

pub mod charts;
pub mod pin;
pub mod report;
mod run;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use sluice::options::CompactionMode;
use sluice::{CompressionType, Error, IoContext, Result};
use sluice_bench::progress::Progress;
use sluice_offload::{SideMode, Split};

use crate::workers::WorkerProgram;

pub use report::{CoproReport, RunReport, SideReport};

/// Bytes of keys and values a run writes per unit of `--num` (the CLI's default `--num` of
/// one million gives 64 MB per run).
pub const BYTES_PER_NUM: u64 = 64;
/// Smallest data volume per run: below it too few memtables fill to compact.
pub const MIN_DATA_BYTES: u64 = 1 << 20;
/// Largest data volume per run.
pub const MAX_DATA_BYTES: u64 = 64 << 30;
/// Most workers.
pub const MAX_WORKERS: usize = 16;

/// One way of running compactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Configuration {
    HostOnly,
    CoKv,
    #[serde(rename = "copro")]
    CoPro,
    #[serde(rename = "copro+")]
    CoProPlus,
    Dynamic,
}

impl Configuration {
    /// Every configuration, in report order.
    pub const ALL: [Configuration; 5] = [
        Configuration::HostOnly,
        Configuration::CoKv,
        Configuration::CoPro,
        Configuration::CoProPlus,
        Configuration::Dynamic,
    ];

    /// The name in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Configuration::HostOnly => "host-only",
            Configuration::CoKv => "co-kv",
            Configuration::CoPro => "copro",
            Configuration::CoProPlus => "copro+",
            Configuration::Dynamic => "dynamic",
        }
    }

    /// The name in tables and legends.
    pub fn label(self) -> &'static str {
        match self {
            Configuration::HostOnly => "host only",
            Configuration::CoKv => "Co-KV",
            Configuration::CoPro => "CoPro",
            Configuration::CoProPlus => "CoPro+",
            Configuration::Dynamic => "dynamic split",
        }
    }

    /// The configuration called `name` (its JSON name).
    pub fn from_name(name: &str) -> Option<Configuration> {
        Configuration::ALL.into_iter().find(|c| c.name() == name)
    }

    /// True when compactions are shared with workers.
    pub fn offloaded(self) -> bool {
        self != Configuration::HostOnly
    }

    /// The split and who picks the (host, worker) executors. `None` for host only.
    pub fn offload(self) -> Option<(Split, SideMode, SideMode)> {
        let half = Split::Static { host_share: 0.5 };
        let fixed = |m| (half, SideMode::Fixed(m), SideMode::Fixed(m));
        match self {
            Configuration::HostOnly => None,
            Configuration::CoKv => Some(fixed(CompactionMode::Sequential)),
            Configuration::CoPro => Some(fixed(CompactionMode::Pipelined)),
            Configuration::CoProPlus => Some((half, SideMode::Decide, SideMode::Decide)),
            Configuration::Dynamic => Some((Split::Dynamic, SideMode::Decide, SideMode::Decide)),
        }
    }

    /// The executor of compactions that stay whole on the host (too small to offload, or
    /// everything in host only): the host's fixed executor, pipelined under the decision
    /// component (its starting state in the CoPro paper).
    pub fn local_mode(self) -> CompactionMode {
        match self {
            Configuration::HostOnly | Configuration::CoKv => CompactionMode::Sequential,
            _ => CompactionMode::Pipelined,
        }
    }
}

/// A write workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Workload {
    #[serde(rename = "fillrandom")]
    FillRandom,
    #[serde(rename = "ycsb-a")]
    YcsbA,
}

impl Workload {
    /// Every workload, in report order.
    pub const ALL: [Workload; 2] = [Workload::FillRandom, Workload::YcsbA];

    /// The name in JSON, tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Workload::FillRandom => "fillrandom",
            Workload::YcsbA => "ycsb-a",
        }
    }

    /// The workload called `name`.
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }
}

/// Where a run keeps its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Separation {
    /// In the tables: every compaction copies them (the CoPro paper's setting).
    Inline,
    /// Values of at least [`CoproConfig::min_blob_size`] bytes in blob files, the tables
    /// holding references (`sluice::BlobOptions`).
    Blobs,
}

impl Separation {
    /// Both, in report order.
    pub const ALL: [Separation; 2] = [Separation::Inline, Separation::Blobs];

    /// The name in JSON, tables and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Separation::Inline => "inline",
            Separation::Blobs => "blobs",
        }
    }

    /// The separation called `name`.
    pub fn from_name(name: &str) -> Option<Separation> {
        Separation::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// Engine sizes of every run, from the data volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Sizing {
    /// Memtable bytes: a sixteenth of the data, 256 KiB to 4 MiB, a multiple of 64 KiB.
    pub write_buffer_size: usize,
    /// Compaction output file bytes: one memtable.
    pub target_file_size: u64,
    /// L1's size limit: four memtables, so L1 also compacts into L2.
    pub max_bytes_for_level_base: u64,
    /// Input bytes per sub-task: an eighth of a memtable, at least 32 KiB, so a share holds
    /// several sub-tasks.
    pub sub_task_bytes: u64,
    /// Smaller compactions stay on the host: one memtable, so every L0 compaction of four
    /// files is offloaded.
    pub min_offload_bytes: u64,
    /// The dynamic split's smallest chunk: half a memtable (four sub-tasks), so a compaction
    /// of a few memtables is cut into several chunks and every side takes some.
    pub min_chunk_bytes: u64,
}

impl Sizing {
    /// The sizes for runs of `data_bytes`.
    pub fn for_data(data_bytes: u64) -> Sizing {
        const STEP: u64 = 64 << 10;
        let write_buffer = (data_bytes / 16).clamp(256 << 10, 4 << 20) / STEP * STEP;
        Sizing {
            write_buffer_size: usize::try_from(write_buffer).unwrap_or(4 << 20),
            target_file_size: write_buffer,
            max_bytes_for_level_base: 4 * write_buffer,
            sub_task_bytes: (write_buffer / 8).max(32 << 10),
            min_offload_bytes: write_buffer,
            min_chunk_bytes: 4 * (write_buffer / 8).max(32 << 10),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct CoproConfig {
    /// Bytes of keys and values each run writes.
    pub data_bytes: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value; one set of runs each.
    pub value_sizes: Vec<usize>,
    pub workloads: Vec<Workload>,
    pub configurations: Vec<Configuration>,
    /// Values inline, in blob files, or each workload both ways.
    pub separations: Vec<Separation>,
    /// The smallest value separated in [`Separation::Blobs`] runs.
    pub min_blob_size: usize,
    /// Worker processes of an offloaded run.
    pub workers: usize,
    /// The workers' CPU is this many times slower (`sluice worker --throttle`), at least 1.
    pub throttle: f64,
    /// Block compression.
    pub compression: CompressionType,
    /// Seed of keys and values.
    pub seed: u64,
    /// Runs per data point; the median by throughput is reported.
    pub repeat: usize,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// How to start a worker.
    pub worker_program: WorkerProgram,
}

impl Default for CoproConfig {
    fn default() -> Self {
        CoproConfig {
            data_bytes: 1_000_000 * BYTES_PER_NUM,
            key_size: 16,
            value_sizes: vec![100, 1 << 10, 16 << 10, 64 << 10],
            workloads: Workload::ALL.to_vec(),
            configurations: Configuration::ALL.to_vec(),
            separations: vec![Separation::Inline],
            min_blob_size: 4 << 10,
            workers: 1,
            throttle: 1.0,
            compression: CompressionType::Lz4,
            seed: 301,
            repeat: 1,
            progress: false,
            worker_program: WorkerProgram::sluice("sluice"),
        }
    }
}

impl CoproConfig {
    /// The data volume for `--num`: `num` x [`BYTES_PER_NUM`].
    pub fn data_bytes_for_num(num: u64) -> u64 {
        num.saturating_mul(BYTES_PER_NUM)
    }

    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if !(MIN_DATA_BYTES..=MAX_DATA_BYTES).contains(&self.data_bytes) {
            return bad(format!(
                "data per run must be {MIN_DATA_BYTES}..={MAX_DATA_BYTES} bytes (num {}..={}), got {}",
                MIN_DATA_BYTES.div_ceil(BYTES_PER_NUM),
                MAX_DATA_BYTES / BYTES_PER_NUM,
                self.data_bytes
            ));
        }
        if !(1..=MAX_WORKERS).contains(&self.workers) {
            return bad(format!(
                "workers must be 1..={MAX_WORKERS}, got {}",
                self.workers
            ));
        }
        if !(self.throttle >= 1.0 && self.throttle <= 1000.0) {
            return bad(format!(
                "throttle must be in 1.0..=1000.0, got {}",
                self.throttle
            ));
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!(
                "repeat must be between 1 and 100, got {}",
                self.repeat
            ));
        }
        if self.value_sizes.is_empty()
            || self.workloads.is_empty()
            || self.configurations.is_empty()
            || self.separations.is_empty()
        {
            return bad(
                "value sizes, workloads, configurations and separations must not be empty".into(),
            );
        }
        if self.separations.contains(&Separation::Blobs) && self.min_blob_size == 0 {
            return bad("min blob size must be at least 1 byte to separate values".into());
        }
        if let Some(&v) = self.value_sizes.iter().find(|&&v| v == 0 || v > 1 << 20) {
            return bad(format!("value sizes must be 1 B..=1 MiB, got {v}"));
        }
        let most_entries = self
            .value_sizes
            .iter()
            .map(|&v| self.entries(v))
            .max()
            .unwrap_or(1);
        // YCSB's key space is its records plus its operations.
        sluice_bench::keys::KeyFormat::new(self.key_size, most_entries.saturating_mul(2))?;
        Ok(())
    }

    /// Entries of a run with `value_size`-byte values: `data_bytes` worth, at least one.
    pub fn entries(&self, value_size: usize) -> u64 {
        (self.data_bytes / (self.key_size + value_size).max(1) as u64).max(1)
    }

    /// The engine sizes of every run.
    pub fn sizing(&self) -> Sizing {
        Sizing::for_data(self.data_bytes)
    }

    fn runs(&self) -> u64 {
        (self.workloads.len()
            * self.separations.len()
            * self.value_sizes.len()
            * self.configurations.len()
            * self.repeat) as u64
    }
}

/// Runs the experiment, using `scratch` (an existing, preferably empty directory) for the
/// databases, the secret file and the workers' logs; each run's database is removed as soon as
/// it is measured.
pub fn run_copro(config: &CoproConfig, scratch: &Path) -> Result<CoproReport> {
    config.validate()?;
    let start = Instant::now();
    let plan = pin::CpuPlan::for_this_process(config.workers);
    let secret_file = scratch.join("worker-secret");
    let secret = crate::workers::write_secret_file(&secret_file)?;
    let _pin = pin::HostPin::pin(plan.host)?;
    let progress = Progress::new(config.progress, "copro", Some(config.runs()));
    let runner = run::Runner {
        config,
        sizing: config.sizing(),
        plan: &plan,
        secret: &secret,
        secret_file: &secret_file,
        scratch,
    };
    let mut runs = Vec::new();
    let outcome = (|| -> Result<()> {
        for &workload in &config.workloads {
            for &separation in &config.separations {
                for &value_size in &config.value_sizes {
                    for &configuration in &config.configurations {
                        let point = run::Point {
                            workload,
                            separation,
                            value_size,
                            configuration,
                        };
                        runs.push(runner.point(point, &progress)?);
                    }
                }
            }
        }
        Ok(())
    })();
    progress.finish();
    outcome?;
    Ok(CoproReport::new(
        report::Settings::new(config, &plan),
        runs,
        start.elapsed().as_secs_f64(),
    ))
}

/// Writes `dir/copro.json` and the charts (PNG and SVG) into `dir`, creating it if needed.
/// Returns every path written, the JSON first.
pub fn write_outputs(report: &CoproReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("copro.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(charts::write_charts(report, dir)?);
    Ok(written)
}

#[cfg(test)]
pub(crate) mod tests;
