//! YCSB's core workloads (A to F) on Sluice: Cooper et al., "Benchmarking Cloud Serving
//! Systems with YCSB" (SoCC 2010), with the generators of the reference implementation.
//!
//! A run has two phases: load inserts keys `0..records` in order; run issues `operations`
//! requests of the workload's mix ([`workload`]) with keys from its request distribution
//! ([`generator`]). Keys are the usual zero-padded decimal key numbers ([`crate::keys`]) rather
//! than YCSB's `user<hash>` strings, and values one `value_size` field ([`crate::values`])
//! rather than ten. Each phase reports per-operation latency percentiles and throughput overall
//! and per second ([`report`]). [`dump`] prints the run phase's operation stream without
//! running it, the reference the peer programs of benches/peers/ are checked against.
//!
//! ```no_run
//! use std::sync::atomic::AtomicBool;
//! use sluice_bench::ycsb::{YcsbConfig, Workload, run_ycsb};
//! let dir = tempfile::tempdir()?;
//! let db = sluice::Db::open(dir.path(), sluice::Options::default())?;
//! let config = YcsbConfig { workload: Workload::B, records: 10_000, ..YcsbConfig::default() };
//! let report = run_ycsb(&config, &db, true, true, &AtomicBool::new(false))?;
//! println!("{}", report.to_json());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod dump;
pub mod generator;
pub mod report;
pub mod run;
pub mod workload;

use std::sync::atomic::AtomicBool;

use sluice::{Db, Error, Result};

pub use dump::{OpsDump, dump_ops};
pub use report::{OpReport, PhaseReport, YcsbReport};
pub use workload::{Distribution, Operation, Workload};

/// The parameters of a YCSB run.
#[derive(Clone, Debug)]
pub struct YcsbConfig {
    pub workload: Workload,
    /// The request distribution; `None`: the workload's default.
    pub distribution: Option<Distribution>,
    /// Keys the load phase inserts (and the run phase assumes present).
    pub records: u64,
    /// Requests of the run phase.
    pub operations: u64,
    /// Client threads; each phase's work is divided among them.
    pub threads: usize,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Seed of every random choice, so runs are repeatable.
    pub seed: u64,
    /// Sync the WAL on every write.
    pub sync: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            workload: Workload::A,
            distribution: None,
            records: 100_000,
            operations: 100_000,
            threads: 1,
            key_size: 16,
            value_size: 100,
            seed: 301,
            sync: false,
            progress: false,
        }
    }
}

impl YcsbConfig {
    /// The request distribution in effect.
    pub fn distribution(&self) -> Distribution {
        self.distribution
            .unwrap_or(self.workload.default_distribution())
    }

    /// Key numbers the run may reach: the loaded keys plus one per operation (all could be
    /// inserts as far as key width is concerned).
    pub fn key_space(&self) -> u64 {
        self.records.saturating_add(self.operations)
    }

    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        if self.records == 0 {
            return Err(Error::InvalidArgument("records must be at least 1".into()));
        }
        crate::config::validate_clients(
            self.threads,
            self.key_size,
            self.value_size,
            self.key_space(),
        )
    }

    /// An empty report of this configuration.
    fn report(&self) -> YcsbReport {
        YcsbReport {
            workload: self.workload,
            distribution: self.distribution(),
            records: self.records,
            operations: self.operations,
            threads: self.threads,
            key_size: self.key_size,
            value_size: self.value_size,
            seed: self.seed,
            load: None,
            run: None,
        }
    }
}

/// Runs the load phase if `load`, then the run phase if `run` (skipped if `stop` was set
/// during the load).
pub fn run_ycsb(
    config: &YcsbConfig,
    db: &Db,
    load: bool,
    run: bool,
    stop: &AtomicBool,
) -> Result<YcsbReport> {
    config.validate()?;
    let mut report = config.report();
    if load {
        report.load = Some(run::load(config, db, stop)?);
    }
    let stopped = report.load.as_ref().is_some_and(|l| l.stopped);
    if run && !stopped {
        report.run = Some(run::run(config, db, stop)?);
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
