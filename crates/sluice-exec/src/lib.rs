//! Compaction executors: the same step functions (sluice-sst `compact::subtask` and
//! `compact::writer`) scheduled onto threads in different ways.
//!
//! - [`sequential`] (SCP): one thread runs every step of every sub-task in turn;
//! - [`pipelined`] (PCP): read (S1), compute (S2..S4) and encode-and-write (S5..S7) stages on
//!   three threads, joined by bounded queues;
//! - [`parallel`] (C-PPCP): one reader, `compute_threads` compute threads over different
//!   sub-tasks, and a writer that puts results back in key order; with tables spread over
//!   several directories (S-PPCP), a reader and a writer thread per directory (`dir_io`);
//!   with buffered I/O the compute threads read their own sub-tasks and take turns appending
//!   them in key order, with no reader or writer thread (`local_read`);
//! - [`streaming`] (the in-storage compaction paper's engine): a decoder per input run, a comparator, an encoder
//!   and the writer, each a stage on its own thread, passing blocks rather than sub-tasks.
//!
//! All of them produce byte-identical files with identical cuts, because blocks are sealed at
//! sub-task boundaries and files are cut by one output writer, in key order, from block
//! metadata.
//!
//! This crate knows tables and threads but not the version set: the engine (`sluice`) and the
//! compaction worker (`sluice-worker`) both run compactions through it, and only the engine can
//! commit the result to a MANIFEST.

pub mod auto;
pub mod decide;
mod dir_io;
mod local_read;
pub mod parallel;
pub mod pipelined;
pub mod sequential;
pub mod streaming;

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use sluice_sst::compact::output::NewOutput;
use sluice_sst::compact::plan::plan;
use sluice_sst::compact::{CompactionOutput, CompactionSpec, StepTimes};
use sluice_sst::compaction_iter::CompactionIterStats;
use sluice_sst::compaction_iter::drop_log::DropLog;
use sluice_sst::profile::{StageTiming, thread_cpu_time};

use sluice_sst::{Error, Result};

/// How a compaction is scheduled onto threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompactionMode {
    /// SCP: one thread.
    #[default]
    Sequential,
    /// PCP: a read, a compute and a write thread.
    Pipelined,
    /// C-PPCP: a reader, several compute threads, a writer.
    Parallel,
    /// The in-storage compaction paper's engine: per-input decoders, a comparator, an encoder, a writer.
    Streaming,
    /// Chosen before each compaction from the step times measured so far ([`auto`]).
    Auto,
}

impl CompactionMode {
    /// Every executor, for tests and benchmarks (`Auto` picks one of these).
    pub const ALL: [CompactionMode; 4] = [
        CompactionMode::Sequential,
        CompactionMode::Pipelined,
        CompactionMode::Parallel,
        CompactionMode::Streaming,
    ];

    /// The name used in options, logs and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CompactionMode::Sequential => "sequential",
            CompactionMode::Pipelined => "pipelined",
            CompactionMode::Parallel => "parallel",
            CompactionMode::Streaming => "streaming",
            CompactionMode::Auto => "auto",
        }
    }
}

impl std::fmt::Display for CompactionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CompactionMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        CompactionMode::ALL
            .into_iter()
            .chain([CompactionMode::Auto])
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown compaction mode {s:?} (sequential, pipelined, parallel, streaming, auto)"
                )
            })
    }
}

/// Scheduling settings shared by the executors.
#[derive(Clone, Copy, Debug)]
pub struct ExecOptions {
    /// Which executor.
    pub mode: CompactionMode,
    /// Input bytes per sub-task.
    pub sub_task_bytes: u64,
    /// Sub-tasks that may wait in each queue between stages.
    pub queue_depth: usize,
    /// Compute threads of the parallel executor.
    pub compute_threads: usize,
    /// Directories new tables are dealt over (`Options::data_dirs`, or the database
    /// directory). With more than one, the pipelined and parallel executors run S-PPCP: a
    /// writer thread per directory (and, whenever inputs lie in several directories, a reader
    /// per directory).
    pub table_dirs: usize,
}

impl ExecOptions {
    /// Input bytes per sub-task: the PCP paper found 512 KiB best.
    pub const DEFAULT_SUB_TASK_BYTES: u64 = 512 << 10;
    /// Sub-tasks queued between stages: deep enough to ride out bursts (with direct I/O every
    /// input's readahead runs dry at about the same sub-task); at 512 KiB a sub-task, about
    /// 8 MiB of blocks per queue.
    pub const DEFAULT_QUEUE_DEPTH: usize = 16;
    /// Compute threads of the parallel executor.
    pub const DEFAULT_COMPUTE_THREADS: usize = 2;
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            mode: CompactionMode::default(),
            sub_task_bytes: Self::DEFAULT_SUB_TASK_BYTES,
            queue_depth: Self::DEFAULT_QUEUE_DEPTH,
            compute_threads: Self::DEFAULT_COMPUTE_THREADS,
            table_dirs: 1,
        }
    }
}

/// A handle on a running compaction: its progress, and a way to stop it.
#[derive(Debug, Default)]
pub struct JobControl {
    cancel: Arc<AtomicBool>,
    /// The enclosing job's flag, for a [`JobControl::child`]: cancelling the job stops it too.
    parent: Option<Arc<AtomicBool>>,
    bytes_read: AtomicU64,
}

impl JobControl {
    /// A control whose job stops once `cancel` is set (by whoever else holds it).
    pub fn with_cancel_flag(cancel: Arc<AtomicBool>) -> Self {
        JobControl {
            cancel,
            parent: None,
            bytes_read: AtomicU64::new(0),
        }
    }

    /// A control for part of this job that can be stopped on its own: cancelling the child
    /// stops only the child, cancelling `self` stops both. Its progress is its own.
    pub fn child(&self) -> JobControl {
        JobControl {
            cancel: Arc::default(),
            parent: Some(Arc::clone(&self.cancel)),
            bytes_read: AtomicU64::new(0),
        }
    }

    /// Asks the compaction to stop before its next output block. It then fails with
    /// [`Error::Cancelled`] after deleting its outputs, leaving the tree as it was.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// True once [`JobControl::cancel`] was called, on this control or on its parent.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
            || self
                .parent
                .as_ref()
                .is_some_and(|p| p.load(Ordering::Relaxed))
    }

    /// Input bytes read so far (S1), as of the last output block written.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }
}

/// Runs one compaction: produces its output files and nothing else; the caller decides
/// whether to install them. Every executor of this crate implements it (through
/// [`ExecOptions`], whose `mode` names one), and so does the engine's offloaded split, so the
/// engine runs whichever was chosen the same way.
pub trait Executor: Sync {
    /// The name recorded in logs and metrics (`sequential`, `pipelined`, ...).
    fn name(&self) -> &'static str;

    /// Runs `spec`, reporting progress to and taking cancellation from `control`. Output files
    /// are named by `new_output`; on failure every file written so far is deleted before the
    /// error is returned.
    fn execute(
        &self,
        spec: &CompactionSpec,
        control: Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<CompactionOutput>;
}

impl Executor for ExecOptions {
    fn name(&self) -> &'static str {
        self.mode.name()
    }

    fn execute(
        &self,
        spec: &CompactionSpec,
        control: Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<CompactionOutput> {
        execute_with(spec, self, control, new_output)
    }
}

/// Runs `spec` with the executor `exec` selects. Output files are named by `new_output`; on
/// failure every file written so far is deleted before the error is returned.
pub fn execute(
    spec: &CompactionSpec,
    exec: &ExecOptions,
    new_output: &mut NewOutput<'_>,
) -> Result<CompactionOutput> {
    execute_with(spec, exec, Arc::default(), new_output)
}

/// [`execute`], reporting progress to and taking cancellation from `control`.
pub fn execute_with(
    spec: &CompactionSpec,
    exec: &ExecOptions,
    control: Arc<JobControl>,
    new_output: &mut NewOutput<'_>,
) -> Result<CompactionOutput> {
    let start = Instant::now();
    let plan = plan(spec, exec.sub_task_bytes);
    let shared = Shared {
        control,
        ..Shared::default()
    };
    match exec.mode {
        CompactionMode::Sequential => sequential::run(spec, &plan, &shared, new_output),
        CompactionMode::Pipelined => pipelined::run(spec, &plan, exec, &shared, new_output),
        CompactionMode::Parallel => parallel::run(spec, &plan, exec, &shared, new_output),
        CompactionMode::Streaming => streaming::run(spec, &plan, exec, &shared, new_output),
        // The engine resolves `Auto` in one place (`sluice::compaction::choose`) before it
        // builds an executor; reaching here with it is a caller's mistake, not a panic.
        CompactionMode::Auto => Err(Error::InvalidArgument(
            "resolve the auto compaction mode with executor::auto::choose before executing".into(),
        )),
    }
    .map(|files| {
        let stats = *shared.stats.lock();
        let mut profile = shared.times.profile();
        profile.entries_in = stats.entries_in;
        profile.entries_out = stats.entries_out;
        profile.wall_nanos = start.elapsed().as_nanos() as u64;
        profile.cpu_nanos = shared.cpu_nanos.load(Ordering::Relaxed);
        CompactionOutput {
            files,
            profile,
            stats,
            drops: shared.drops(),
            stages: shared.stages(),
        }
    })
}

/// What the threads of one compaction share.
#[derive(Default)]
pub(crate) struct Shared {
    pub times: StepTimes,
    pub stats: parking_lot::Mutex<CompactionIterStats>,
    /// Each sub-task's drop log by sub-task index (logs are concatenated in key order).
    drops: parking_lot::Mutex<Vec<(usize, DropLog)>>,
    pub cpu_nanos: AtomicU64,
    stages: parking_lot::Mutex<Vec<StageTiming>>,
    control: Arc<JobControl>,
}

impl Shared {
    /// Called by every executor's writer before each output block: publishes progress and
    /// stops the job if it was cancelled.
    pub fn before_append(&self) -> Result<()> {
        self.control
            .bytes_read
            .store(self.times.bytes_read(), Ordering::Relaxed);
        if self.control.is_cancelled() {
            return Err(Error::Cancelled);
        }
        Ok(())
    }

    /// Adds one sub-task's merge statistics.
    pub fn add_stats(&self, s: &CompactionIterStats) {
        *self.stats.lock() += *s;
    }

    /// Keeps the drop log of sub-task `index` (or of every sub-task from `index` on, for an
    /// executor that merges them in one pass). A log without records is kept too: its written
    /// entries place the records of the logs after it.
    pub fn add_drops(&self, index: usize, log: DropLog) {
        self.drops.lock().push((index, log));
    }

    /// The drop logs of every sub-task, in key order.
    fn drops(&self) -> DropLog {
        let mut logs = std::mem::take(&mut *self.drops.lock());
        logs.sort_by_key(|(index, _)| *index);
        logs.into_iter()
            .fold(DropLog::default(), |mut all, (_, log)| {
                all.append(log);
                all
            })
    }

    /// Adds one thread's run of stage `stage`: `elapsed` in all, `idle_nanos` of it blocked on
    /// a queue.
    pub fn record_stage(&self, stage: &str, elapsed: std::time::Duration, idle_nanos: u64) {
        let busy_nanos = (elapsed.as_nanos() as u64).saturating_sub(idle_nanos);
        let mut stages = self.stages.lock();
        match stages.iter_mut().find(|s| s.stage == stage) {
            Some(s) => {
                s.threads += 1;
                s.busy_nanos += busy_nanos;
                s.idle_nanos += idle_nanos;
            }
            None => stages.push(StageTiming {
                stage: stage.to_string(),
                threads: 1,
                busy_nanos,
                idle_nanos,
            }),
        }
    }

    /// The stages recorded, in data-flow order.
    fn stages(&self) -> Vec<StageTiming> {
        const ORDER: [&str; 10] = [
            "sequential",
            "read",
            "index decoder",
            "data decoder",
            "read+compute+write",
            "compute",
            "comparator",
            "encoder",
            "write",
            "dir writer",
        ];
        let rank = |s: &StageTiming| {
            ORDER
                .iter()
                .position(|o| *o == s.stage)
                .unwrap_or(ORDER.len())
        };
        let mut stages = self.stages.lock().clone();
        stages.sort_by_key(rank);
        stages
    }

    /// Runs `f` on the calling thread, charging the thread's CPU time.
    pub fn with_cpu<T>(&self, f: impl FnOnce() -> T) -> T {
        let before = thread_cpu_time();
        let out = f();
        let used = thread_cpu_time().saturating_sub(before);
        self.cpu_nanos
            .fetch_add(used.as_nanos() as u64, Ordering::Relaxed);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_stops_with_its_parent_but_not_the_other_way() {
        let job = JobControl::default();
        let mine = job.child();
        let sibling = job.child();
        mine.cancel();
        assert!(mine.is_cancelled());
        assert!(!sibling.is_cancelled() && !job.is_cancelled());
        job.cancel();
        assert!(sibling.is_cancelled());
    }
}
