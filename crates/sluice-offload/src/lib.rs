//! The host side of compaction offload (the MStore and CoPro papers): the host cuts one
//! compaction's sub-tasks into contiguous key ranges, runs some itself and sends the others to
//! worker processes, and checks every file the workers report; the engine installs all
//! outputs in one version edit (only the host commits).
//!
//! The engine knows none of this: [`OffloadOptions`] is handed to it as `Options::offload`
//! (an `Arc<dyn sluice::compaction::remote::Offload>`), and it asks the started
//! [`Offloader`] for an executor per compaction.
//!
//! ```no_run
//! use sluice::{Db, Options};
//! use sluice_offload::{OffloadOptions, Secret};
//!
//! let secret = Secret::from_file("/etc/sluice/worker.secret".as_ref())?;
//! let offload = OffloadOptions::new(vec!["127.0.0.1:7071".into()], secret);
//! let db = Db::open("/tmp/db", Options { offload: Some(offload.into()), ..Options::default() })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Two splits: static (Co-KV), one share per side by a fixed ratio; dynamic, chunks handed
//! out on demand so each side takes work as fast as it gets through it.
//!
//! A worker part that fails in any way (unreachable, timed out, an error, a reply that fails
//! the checks in [`verify`]) costs time, never data: its files are deleted and its key range
//! is re-run on the host (or, for a chunk, by whichever side asks next), and the event is
//! counted.
//!
//! - [`options`]: the settings, [`OffloadOptions`];
//! - [`split`]: cutting sub-tasks into static shares; the measured bandwidths;
//! - [`dispatch`]: the dynamic split's chunk queue;
//! - `run`, `static_split`, `dynamic`, `share`: running a job, with either split, and one part
//!   of it;
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
mod static_split;
pub mod task;
pub mod verify;

use std::sync::Arc;

use parking_lot::Mutex;
use sluice_exec::decide::{DecisionConfig, DecisionCounters, LoadSampler};

use sluice::compaction::remote::{Accounting, Offload, RemoteExecutors, RemoteJob, SideTotals};
use sluice::{Error, Result};
use sluice_exec::Executor;

use self::client::WorkerClient;
use self::run::Offloaded;
use self::split::Bandwidths;

pub use options::{OffloadOptions, SideMode, Split, VerifyOutputs};
pub use sluice::compaction::remote::{OffloadMetrics, ShareReport};
pub use sluice_rpc::auth::Secret;

/// The host's offload machinery: clients, the runtime they run on, and what has been measured.
pub struct Offloader {
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

/// `Options { offload: Some(offload_options.into()), .. }`.
impl From<OffloadOptions> for Arc<dyn Offload> {
    fn from(options: OffloadOptions) -> Self {
        Arc::new(options)
    }
}

impl Offload for OffloadOptions {
    fn validate(&self) -> Result<()> {
        OffloadOptions::validate(self)
    }

    fn workers(&self) -> Vec<String> {
        self.workers.clone()
    }

    fn start(&self) -> Result<Arc<dyn RemoteExecutors>> {
        Ok(Arc::new(Offloader::new(self.clone())?))
    }
}

impl RemoteExecutors for Offloader {
    fn executor<'a>(&'a self, job: RemoteJob<'a>) -> Option<(Box<dyn Executor + 'a>, Accounting)> {
        // A small compaction is not worth a round trip and a second writer's partial last
        // file; an intra-L0 compaction's single output must not be cut into key ranges.
        let worth_it = job.input_bytes >= self.options.min_offload_bytes && !job.single_output;
        if job.sharing.is_none() && !worth_it {
            return None;
        }
        let accounting = match self.options.verify_outputs {
            VerifyOutputs::None => Accounting::Trusted,
            _ => Accounting::Checked,
        };
        Some((Box::new(Offloaded::new(self, job)), accounting))
    }

    fn share_bandwidths(&self) -> Vec<Option<f64>> {
        match self.options.split {
            Split::Dynamic => self.bandwidths(),
            Split::Static { .. } => Vec::new(),
        }
    }

    fn metrics(&self) -> OffloadMetrics {
        Offloader::metrics(self)
    }
}
