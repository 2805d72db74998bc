//! The engine's side of compaction offload: what a remote executor plugs into.
//!
//! The engine does not know how work reaches other machines or processes. A crate that does
//! (`sluice-offload`: gRPC workers, the CoPro split, output verification) implements
//! [`Offload`] and is handed to the engine as `Options::offload`. At open the engine starts it
//! and gets [`RemoteExecutors`]; for each compaction, `compaction::choose` asks them for an
//! [`Executor`] (which runs the compaction, split between this host and the workers, and
//! returns files like any executor), and `db/` installs the result as usual: only the host
//! commits. So an embedder who never offloads builds the engine without any of it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_exec::{ExecOptions, Executor};

use super::env::JobEnv;
use crate::Result;

pub use super::job::Accounting;

/// Compaction workers, as configured (`Options::offload`).
pub trait Offload: Send + Sync + fmt::Debug {
    /// Checks the settings; the open fails with the error.
    fn validate(&self) -> Result<()>;

    /// The workers' names (addresses): partitioned mode's owners name their worker by them.
    fn workers(&self) -> Vec<String>;

    /// Starts the machinery (clients, runtimes) when a database opens for writing.
    fn start(&self) -> Result<Arc<dyn RemoteExecutors>>;
}

/// Started compaction workers.
pub trait RemoteExecutors: Send + Sync {
    /// The executor that runs `job` split between this host and the workers, and how far its
    /// outputs must be checked against its inputs; `None` when the job is better run on the
    /// host alone (too small, say). With `job.sharing` set, the job is always split.
    fn executor<'a>(&'a self, job: RemoteJob<'a>) -> Option<(Box<dyn Executor + 'a>, Accounting)>;

    /// Per side (host first, then each worker), its measured bandwidth, to weight the shares of
    /// a partitioned compaction; empty when the split does not weight by bandwidth.
    fn share_bandwidths(&self) -> Vec<Option<f64>>;

    /// What offloading has done since the database opened.
    fn metrics(&self) -> OffloadMetrics;
}

/// One compaction offered to the workers.
pub struct RemoteJob<'a> {
    /// File numbers, table directories and open tables.
    pub env: &'a JobEnv<'a>,
    /// The compaction's upper level.
    pub level: usize,
    /// The level its outputs go to: the next one, L0's base level, or `level` itself.
    pub output_level: usize,
    /// Whether its last input run comes from `output_level`.
    pub has_lower_run: bool,
    /// Its input bytes.
    pub input_bytes: u64,
    /// An intra-L0 compaction: one output file, which must not be cut into key ranges.
    pub single_output: bool,
    /// The local executor for the host's parts.
    pub exec: ExecOptions,
    /// Partitioned mode: which sides run it and where outputs go. `None`: the workers' own
    /// split decides.
    pub sharing: Option<Sharing>,
}

/// Partitioned mode: which sides run a compaction, and where its outputs go.
#[derive(Clone, Debug, PartialEq)]
pub struct Sharing {
    /// Per side (host first, then each worker), its weight in a static split; 0 = not taking
    /// part. The range owner's side, plus the idle owners' when load balancing shares it.
    pub weights: Vec<f64>,
    /// The range owner's directory: outputs stay with the owner whoever computes them.
    pub output_root: PathBuf,
}

/// One side's part of an offloaded compaction, as reported in metrics and the bench JSON.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ShareReport {
    /// `host`, or the worker's address.
    pub side: String,
    /// Input bytes of the share (with the dynamic split: of all the side's chunks).
    pub input_bytes: u64,
    /// Wall seconds from sending (or starting) the share to having its checked result; for a
    /// static share sent in pieces, its pieces' calls (one after another) and the last
    /// piece's check; with the dynamic split, the side's busy time over its chunks (waits for
    /// work left out).
    pub seconds: f64,
    /// `input_bytes / seconds`, in MB/s.
    pub bandwidth_mb_s: f64,
    /// The executor the side ran.
    pub mode: String,
    /// CPU seconds the side spent.
    pub cpu_seconds: f64,
    /// The host's seconds checking a worker's outputs before it installs them (0 for the
    /// host's own share). In the static split, every piece's check: only the last one's is
    /// part of `seconds`, the others ran while the worker ran the next piece; in the dynamic
    /// split, a check hidden behind the worker's next chunk is not part of `seconds` either. The part of offloading that does not
    /// shrink with more workers.
    pub check_seconds: f64,
    /// Bytes of the drop logs the worker sent with its outputs (0 for the host's share, and
    /// below `audit`): the message the drop audit costs.
    pub drop_log_bytes: u64,
    /// The share failed on its worker and was re-run on the host (dynamic split: a chunk of
    /// this worker failed and went back to the queue).
    pub retried: bool,
}

/// One side's work, summed over every offloaded compaction since the database opened.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
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
    /// Seconds the host spent checking this side's outputs.
    pub check_seconds: f64,
    /// Bytes of the drop logs this side sent.
    pub drop_log_bytes: u64,
    /// Shares per executor that ran them (`sequential`, `pipelined`, ...).
    pub modes: std::collections::BTreeMap<String, u64>,
    /// Of `shares`, those that failed on this side (a timeout, an error, a reply that failed
    /// a check) and were re-run elsewhere.
    pub retried: u64,
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
            check_seconds: self.check_seconds,
            drop_log_bytes: self.drop_log_bytes,
            retried: self.retried > 0,
        }
    }
}

/// What offloading has done since the database opened.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct OffloadMetrics {
    /// Compactions split between host and workers.
    pub jobs: u64,
    /// Worker tasks (a static share's pieces, dynamic chunks) re-run elsewhere after a
    /// failure, including the pieces of a share never sent because an earlier one failed.
    pub retries: u64,
    /// Dynamic chunks a worker held that the host, out of other work, also ran because it
    /// expected to finish them sooner (the first copy to finish is kept).
    pub races: u64,
    /// Of `races`, those where the host's copy finished first.
    pub races_won_by_host: u64,
    /// Worker parts whose outputs did not match their inputs (by digest, by sampled keys, or
    /// by a full re-merge, as the offload options say): run again on the host, and counted in
    /// `retries` too.
    pub verify_failures: u64,
    /// Per side, host first, then each worker in the configured order.
    pub sides: Vec<SideTotals>,
    /// The host decision component's choices (CoPro+).
    pub host_pipelined_decisions: u64,
    /// See `host_pipelined_decisions`.
    pub host_sequential_decisions: u64,
    /// The shares of the last offloaded compaction.
    pub last_shares: Vec<ShareReport>,
}
