//! Compaction offloaded to workers (the MStore and CoPro papers): the host cuts one compaction's
//! sub-tasks into contiguous key ranges, runs some itself and sends the others to worker
//! processes, checks every file the workers report, and installs all outputs in one version
//! edit (the database installs the job's edit: only the host commits).
//!
//! Two splits: static (Co-KV), one share per side by a fixed ratio; dynamic, chunks handed
//! out on demand so each side takes work as fast as it gets through it.
//!
//! A worker part that fails in any way (unreachable, timed out, an error, a reply that fails
//! the checks in [`verify`]) costs time, never data: its files are deleted and its key range
//! is re-run on the host (or, for a chunk, by whichever side asks next), and the event is
//! counted.
//!
//! - [`options`]: the settings, `Options::offload`;
//! - [`split`]: cutting sub-tasks into static shares; the measured bandwidths;
//! - [`dispatch`]: the dynamic split's chunk queue;
//! - `run`, `dynamic`, `share`: running a job with either split, and one part of it;
//! - [`task`]: the wire task for a share;
//! - [`client`]: the gRPC client;
//! - [`verify`]: the checks on reported files.

pub mod client;
pub mod dispatch;
mod dynamic;
pub mod options;
mod prove;
mod run;
mod sample;
mod share;
pub mod split;
pub mod task;
pub mod verify;

use std::sync::Arc;

use parking_lot::Mutex;
use sluice_exec::decide::{DecisionConfig, DecisionCounters, LoadSampler};

use self::client::WorkerClient;
use self::options::OffloadOptions;
use self::split::Bandwidths;
use crate::{Error, Result};

pub use options::{Split, VerifyOutputs};
pub(crate) use run::{Offloaded, Sharing};

/// One side's part of an offloaded compaction, as reported in metrics and the bench JSON.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ShareReport {
    /// `host`, or the worker's address.
    pub side: String,
    /// Input bytes of the share (with the dynamic split: of all the side's chunks).
    pub input_bytes: u64,
    /// Wall seconds from sending (or starting) the share to having its checked result; with
    /// the dynamic split, the side's busy time over its chunks (waits for work left out).
    pub seconds: f64,
    /// `input_bytes / seconds`, in MB/s.
    pub bandwidth_mb_s: f64,
    /// The executor the side ran.
    pub mode: String,
    /// CPU seconds the side spent.
    pub cpu_seconds: f64,
    /// The share failed on its worker and was re-run on the host (dynamic split: a chunk of
    /// this worker failed and went back to the queue).
    pub retried: bool,
}

/// One side's work, summed over every offloaded compaction since the database opened.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SideTotals {
    /// `host`, or the worker's address.
    pub side: String,
    /// Shares run (a re-run share counts on the side it was meant for).
    pub shares: u64,
    /// Input bytes of those shares.
    pub input_bytes: u64,
    /// Wall seconds of those shares.
    pub seconds: f64,
    /// CPU seconds the side spent on them.
    pub cpu_seconds: f64,
    /// Shares per executor that ran them (`sequential`, `pipelined`, ...).
    pub modes: std::collections::BTreeMap<String, u64>,
}

impl SideTotals {
    /// The totals as one share report: bandwidth over all shares, and the executors that ran
    /// them (`pipelined+sequential` when the decision component changed its mind).
    pub fn report(&self) -> ShareReport {
        ShareReport {
            side: self.side.clone(),
            input_bytes: self.input_bytes,
            seconds: self.seconds,
            bandwidth_mb_s: if self.seconds > 0.0 {
                self.input_bytes as f64 / self.seconds / 1e6
            } else {
                0.0
            },
            mode: self.modes.keys().cloned().collect::<Vec<_>>().join("+"),
            cpu_seconds: self.cpu_seconds,
            retried: false,
        }
    }
}

/// What offloading has done since the database opened.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct OffloadMetrics {
    /// Compactions split between host and workers.
    pub jobs: u64,
    /// Worker shares (or dynamic chunks) re-run elsewhere after a failure.
    pub retries: u64,
    /// Dynamic chunks a worker held that the host, out of other work, also ran because it
    /// expected to finish them sooner (the first copy to finish is kept).
    pub races: u64,
    /// Of `races`, those where the host's copy finished first.
    pub races_won_by_host: u64,
    /// Worker parts whose outputs did not match their inputs (by digest, by sampled keys, or
    /// by a full re-merge, as `OffloadOptions::verify_outputs` says): run again on the host,
    /// and counted in `retries` too.
    pub verify_failures: u64,
    /// Per side, host first, then each worker in `OffloadOptions::workers` order.
    pub sides: Vec<SideTotals>,
    /// The host decision component's choices (CoPro+).
    pub host_pipelined_decisions: u64,
    /// See `host_pipelined_decisions`.
    pub host_sequential_decisions: u64,
    /// The shares of the last offloaded compaction.
    pub last_shares: Vec<ShareReport>,
}

/// The host's offload machinery: clients, the runtime they run on, and what has been measured.
pub(crate) struct Offloader {
    options: OffloadOptions,
    /// Drives the gRPC clients. Two threads: the calls are I/O waits, the host's own share
    /// runs on the compaction thread.
    runtime: tokio::runtime::Runtime,
    clients: Vec<Arc<WorkerClient>>,
    /// Side 0 is the host, side `i + 1` is `clients[i]`.
    bandwidths: Mutex<Bandwidths>,
    decision: DecisionConfig,
    sampler: Mutex<LoadSampler>,
    decisions: DecisionCounters,
    metrics: Mutex<OffloadMetrics>,
}

impl Offloader {
    /// Sets up clients for `options.workers`. Connections are made on first use, so a worker
    /// that is down at open costs a retry later, not a failed open.
    pub fn new(options: OffloadOptions) -> Result<Offloader> {
        options.validate()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-offload")
            .enable_all()
            .build()
            .map_err(|e| {
                Error::InvalidArgument(format!("cannot start the offload runtime: {e}"))
            })?;
        let clients = {
            let _guard = runtime.enter();
            options
                .workers
                .iter()
                .map(|a| WorkerClient::new(a, options.secret.clone()).map(Arc::new))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::InvalidArgument(e.to_string()))?
        };
        let sides = clients.len() + 1;
        Ok(Offloader {
            bandwidths: Mutex::new(Bandwidths::new(sides)),
            decision: DecisionConfig::host(),
            sampler: Mutex::new(LoadSampler::new()),
            decisions: DecisionCounters::default(),
            metrics: Mutex::new(OffloadMetrics {
                sides: std::iter::once("host")
                    .chain(options.workers.iter().map(String::as_str))
                    .map(|side| SideTotals {
                        side: side.to_string(),
                        ..SideTotals::default()
                    })
                    .collect(),
                ..OffloadMetrics::default()
            }),
            options,
            runtime,
            clients,
        })
    }

    /// Offload settings.
    pub fn options(&self) -> &OffloadOptions {
        &self.options
    }

    /// Every side's measured bandwidth (a moving average over its shares), host first; `None`
    /// where nothing was measured yet.
    pub fn bandwidths(&self) -> Vec<Option<f64>> {
        self.bandwidths.lock().priors()
    }

    /// A copy of the metrics.
    pub fn metrics(&self) -> OffloadMetrics {
        let mut m = self.metrics.lock().clone();
        m.host_pipelined_decisions = self.decisions.pipelined();
        m.host_sequential_decisions = self.decisions.sequential();
        m
    }
}
