//! The MStore experiment: the MStore paper's evaluation (Fig. 3) with worker processes standing in
//! for the near-data-processing devices of a partitioned database.
//!
//! Each of `workers` owners has a directory (its device's storage) and a `sluice worker` that
//! compacts its ranges. The key space `0..num` is cut into `ranges_per_owner` ranges per
//! owner, owner 0 taking the first block. Two variants load a fresh database each:
//!
//! | variant        | storage balancing | compaction-load balancing |
//! |----------------|-------------------|---------------------------|
//! | `mstore-basic` | off               | off                       |
//! | `mstore`       | on                | on                        |
//!
//! A run first loads a reference set (every `reference_every`-th key, in key order, spread
//! evenly over the owners; not timed), then writes `num` values to keys drawn from YCSB's
//! zipfian distribution over the key numbers *unscrambled*, so the hot keys are the smallest
//! numbers and fall in owner 0's ranges ([`workload`]). The time runs from the first of those
//! writes until the background work they caused (compactions, relocations) is done.
//!
//! Throughout, a reader thread looks up reference keys and checks each value names its key; a
//! key that is missing or wrong is a read miss, and after the run every reference key is checked
//! once more. A sampler records each owner's bytes and compaction bandwidth over time.
//!
//! Workers are pinned as in the CoPro experiment ([`super::copro::pin`]): the host on the
//! first usable CPU, the workers on the others in turn, never on the host's. `throttle` makes
//! the workers' CPU that many times slower, [`DEFAULT_THROTTLE`] unless set: the MStore paper's
//! devices are embedded boards (Cortex-A72 and A53 cores) beside a desktop host, and a
//! compaction that a device finishes as fast as the host would never hold writes up, so there
//! would be no load to balance. Writers slow down and stop at LevelDB's 8 and 12 L0 files per
//! range, as the MStore paper's MStore is built on LevelDB.

pub mod charts;
pub mod report;
mod run;
pub mod table;
pub mod workload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use sluice::{CompressionType, Error, IoContext, Result};
use sluice_bench::progress::Progress;

use super::copro::pin::{CpuPlan, HostPin};
use crate::workers::{WorkerProgram, write_secret_file};

pub use report::{MstoreReport, Sample, VariantReport};

/// Most workers (owners).
pub const MAX_WORKERS: usize = 16;
/// How many times slower than the host a worker's CPU is unless set (the MStore paper's embedded
/// boards against a desktop core).
pub const DEFAULT_THROTTLE: f64 = 4.0;
/// Writes unless set: enough for the hot owner to fall behind. With 1M writes (about 7 s
/// here) MStore-basic's hot owner kept up at throttle 4 and never held writes up, so there was
/// no load to balance; with 3M its backlog stalls the writers for 3 to 5 seconds, the slowest
/// stave that the MStore paper measures balancing against.
pub const DEFAULT_NUM: u64 = 3_000_000;
/// Fewest writes: below it too few memtables fill for the owners to differ.
pub const MIN_NUM: u64 = 16 << 10;

/// With or without the balancers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Variant {
    /// The MStore paper's MStore-basic: every owner compacts its own ranges, nothing moves.
    #[serde(rename = "mstore-basic")]
    Basic,
    /// MStore: storage balancing moves ranges, idle owners share backlogged compactions.
    #[serde(rename = "mstore")]
    Balanced,
}

impl Variant {
    /// Both variants, in report order.
    pub const ALL: [Variant; 2] = [Variant::Basic, Variant::Balanced];

    /// The name in JSON, tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Basic => "mstore-basic",
            Variant::Balanced => "mstore",
        }
    }

    /// True when the balancers are on.
    pub fn balanced(self) -> bool {
        self == Variant::Balanced
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct MstoreConfig {
    /// Writes of the measured phase; also the key space (`0..num`).
    pub num: u64,
    pub key_size: usize,
    /// Bytes per value, at least [`workload::MIN_VALUE_SIZE`] (a value names its key).
    pub value_size: usize,
    /// Owners, each with its own directory and worker process.
    pub workers: usize,
    /// Key ranges each owner starts with.
    pub ranges_per_owner: usize,
    /// Every this-many-th key is in the reference set the reader checks.
    pub reference_every: u64,
    /// The workers' CPU is this many times slower (`sluice worker --throttle`), at least 1.
    pub throttle: f64,
    pub compression: CompressionType,
    pub seed: u64,
    /// Runs per variant, alternating the variants; the median by throughput is reported.
    pub repeat: usize,
    /// How often the sampler records the owners' bytes and bandwidth.
    pub sample_interval: Duration,
    pub variants: Vec<Variant>,
    /// Draw a progress bar on stderr.
    pub progress: bool,
    /// How to start a worker.
    pub worker_program: WorkerProgram,
}

impl Default for MstoreConfig {
    fn default() -> Self {
        MstoreConfig {
            num: DEFAULT_NUM,
            key_size: 16,
            value_size: 100,
            workers: 2,
            ranges_per_owner: 4,
            reference_every: 8,
            throttle: DEFAULT_THROTTLE,
            compression: CompressionType::Lz4,
            seed: 301,
            repeat: 1,
            sample_interval: Duration::from_millis(250),
            variants: Variant::ALL.to_vec(),
            progress: false,
            worker_program: WorkerProgram::sluice("sluice"),
        }
    }
}

impl MstoreConfig {
    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.num < MIN_NUM {
            return bad(format!("num must be at least {MIN_NUM}, got {}", self.num));
        }
        if !(2..=MAX_WORKERS).contains(&self.workers) {
            return bad(format!(
                "workers must be 2..={MAX_WORKERS} (ranges move between owners), got {}",
                self.workers
            ));
        }
        if !(1..=64).contains(&self.ranges_per_owner) {
            return bad(format!(
                "ranges per owner must be 1..=64, got {}",
                self.ranges_per_owner
            ));
        }
        if !(1..=self.num).contains(&self.reference_every) {
            return bad(format!(
                "reference_every must be 1..=num, got {}",
                self.reference_every
            ));
        }
        if !(workload::MIN_VALUE_SIZE..=1 << 20).contains(&self.value_size) {
            return bad(format!(
                "value size must be {}..=1 MiB (a value names its key), got {}",
                workload::MIN_VALUE_SIZE,
                self.value_size
            ));
        }
        if !(self.throttle >= 1.0 && self.throttle <= 1000.0) {
            return bad(format!(
                "throttle must be in 1.0..=1000.0, got {}",
                self.throttle
            ));
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!("repeat must be 1..=100, got {}", self.repeat));
        }
        if self.sample_interval.is_zero() || self.variants.is_empty() {
            return bad("the sample interval and the variants must not be empty".into());
        }
        sluice_bench::keys::KeyFormat::new(self.key_size, self.num)?;
        Ok(())
    }

    /// Key ranges in all.
    pub fn ranges(&self) -> usize {
        self.workers * self.ranges_per_owner
    }

    /// Bytes of keys and values the measured phase writes.
    pub fn data_bytes(&self) -> u64 {
        self.num
            .saturating_mul((self.key_size + self.value_size) as u64)
    }
}

/// Runs the experiment, using `scratch` (an existing, preferably empty directory) for the
/// databases, the owners' directories, the secret file and the workers' logs; each run's
/// directories are removed as soon as it is measured.
pub fn run_mstore(config: &MstoreConfig, scratch: &Path) -> Result<MstoreReport> {
    config.validate()?;
    let start = Instant::now();
    let plan = CpuPlan::for_this_process(config.workers);
    let secret_file = scratch.join("worker-secret");
    let secret = write_secret_file(&secret_file)?;
    let _pin = HostPin::pin(plan.host)?;
    let runs = (config.variants.len() * config.repeat) as u64;
    let progress = Progress::new(config.progress, "mstore", Some(runs));
    let runner = run::Runner {
        config,
        plan: &plan,
        secret: &secret,
        secret_file: &secret_file,
        scratch,
    };
    // Repetitions alternate the variants, so a drift in the machine's speed (it is shared)
    // touches both alike.
    let mut runs: Vec<Vec<VariantReport>> = vec![Vec::new(); config.variants.len()];
    let outcome = (|| -> Result<()> {
        for repetition in 0..config.repeat {
            for (runs, &variant) in runs.iter_mut().zip(&config.variants) {
                runs.push(runner.run(variant, repetition)?);
                progress.inc(1);
            }
        }
        Ok(())
    })();
    progress.finish();
    outcome?;
    let variants = runs
        .into_iter()
        .map(report::median)
        .collect::<Result<Vec<_>>>()?;
    Ok(MstoreReport::new(
        report::Settings::new(config, &plan),
        variants,
        start.elapsed().as_secs_f64(),
    ))
}

/// Writes `dir/mstore.json` and the charts (PNG and SVG) into `dir`, creating it if needed.
/// Returns every path written, the JSON first.
pub fn write_outputs(report: &MstoreReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("mstore.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(charts::write_charts(report, dir)?);
    Ok(written)
}

#[cfg(test)]
mod tests;
