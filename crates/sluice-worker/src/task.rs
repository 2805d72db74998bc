//! A task as received, checked field by field before any file is touched.
//!
//! [`CheckedTask::from_wire`] is the only way to get a [`CheckedTask`], so holding one means:
//! - every input is a table name `N.sst` (a bare file name, no `/`, no `..`, whose number is
//!   the `FileRef.number`) at a level below [`MAX_LEVELS`]; there is at least one run and no
//!   run is empty; no input number appears twice;
//! - the share's bounds, if both are set, satisfy `lower < upper`; snapshots ascend;
//!   grandparent keys are internal keys (at least a trailer long) in ascending order;
//! - the table format is one the engine accepts, the target file size is above 0, and the
//!   scheduling knobs are within bounds (0 means "the worker's default");
//! - the reserved output numbers `[first, first + count)` are at least one, do not overflow,
//!   and contain no input's number (so cleaning up outputs can never delete an input).
//!
//! Nothing here reads the disk: resolving names inside the roots is `resolve.rs`'s, and
//! opening the tables and building the executor's spec is `job.rs`'s.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_exec::{CompactionMode, ExecOptions};
use sluice_rpc::convert::{mode_from_wire, table_options};
use sluice_rpc::names::check_file_name;
use sluice_rpc::proto;
use sluice_sst::compact::GrandparentFile;
use sluice_sst::compaction_iter::CompactionFilter;
use sluice_sst::fs::WriteFence;
use sluice_sst::key::{SeqNo, compare_internal};
use sluice_sst::merge_operator::{self, MergeOperator};
use sluice_sst::range_del::{RangeTombstone, Tombstones};
use sluice_sst::table::TableOptions;

use crate::config::MAX_COMPUTE_THREADS;
use crate::error::WorkerError;

/// Levels of the tree: a file's level is below this.
pub const MAX_LEVELS: u32 = 7;
/// Most sub-tasks a task may ask to queue between stages.
pub const MAX_QUEUE_DEPTH: usize = 1024;
/// Length of an internal key's trailer: shorter keys are malformed.
const TRAILER_BYTES: usize = 8;

/// One input file of a task, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputRef {
    /// A bare table name `N.sst`.
    pub name: String,
    /// The number in the name.
    pub number: u64,
    /// Its level in the host's tree (logged only).
    pub level: u32,
    /// Its size as the host knows it (0: not given).
    pub size: u64,
    /// Its smallest and largest internal keys as the host knows them (empty: not given).
    pub smallest: Vec<u8>,
    pub largest: Vec<u8>,
}

/// The block of file numbers the host reserved for a task's outputs: `first..first + count`,
/// with `count >= 1` and no overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutputBlock {
    pub first: u64,
    pub count: u32,
}

impl OutputBlock {
    /// True if `number` is one of the reserved numbers.
    pub fn contains(&self, number: u64) -> bool {
        number >= self.first && number - self.first < u64::from(self.count)
    }
}

/// A task that passed every check in the module comment.
#[derive(Clone, Debug)]
pub struct CheckedTask {
    pub job_id: u64,
    /// Sorted runs, newest first; each non-empty, in key order.
    pub runs: Vec<Vec<InputRef>>,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    /// Ascending.
    pub snapshots: Vec<SeqNo>,
    pub bottommost: bool,
    pub table: TableOptions,
    /// Above 0.
    pub target_file_size: u64,
    pub grandparents: Vec<GrandparentFile>,
    pub max_grandparent_overlap_bytes: u64,
    /// `None`: the worker decides.
    pub mode: Option<CompactionMode>,
    /// Above 0.
    pub sub_task_bytes: u64,
    /// `1..=MAX_QUEUE_DEPTH`.
    pub queue_depth: usize,
    /// `None`: the worker's default; else `1..=MAX_COMPUTE_THREADS`.
    pub compute_threads: Option<usize>,
    pub outputs: OutputBlock,
    /// The root every output goes to (checked against the roots by `resolve.rs`);
    /// `None`: dealt over the roots.
    pub output_root: Option<PathBuf>,
    /// The database whose roots the task may touch ([`crate::config::Root`]).
    pub database: String,
    /// The task's merge operator, found by name among the ones this worker knows.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The task's compaction filter, found by name among the built-in ones.
    pub filter: Option<Arc<dyn CompactionFilter>>,
    /// The database's range tombstones; `None` when there are none.
    pub range_tombstones: Option<Arc<Tombstones>>,
    /// The keyspace whose tree the task compacts (0: the default one).
    pub keyspace: u32,
    /// Written into every output's properties; `None` when the host sent none (0).
    pub task_nonce: Option<u64>,
    /// Whether the reply carries the drop log.
    pub log_drops: bool,
    /// The host's claim on its object-store prefix: outputs written into the bucket check it.
    pub fence: Option<WriteFence>,
}

fn invalid(job_id: u64, what: impl std::fmt::Display) -> WorkerError {
    WorkerError::Invalid(format!("task {job_id}: {what}"))
}

/// Parses `name` as a table name `N.sst` (digits only, as `sluice`'s file names).
fn table_number(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".sst")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl CheckedTask {
    /// Checks `task` (see the module comment); the error names the first field that failed.
    pub fn from_wire(task: &proto::CompactionTask) -> Result<CheckedTask, WorkerError> {
        let job = task.job_id;
        if task.runs.is_empty() {
            return Err(invalid(job, "no input runs"));
        }
        let mut seen = HashSet::new();
        let mut runs = Vec::with_capacity(task.runs.len());
        for (r, run) in task.runs.iter().enumerate() {
            if run.files.is_empty() {
                return Err(invalid(job, format_args!("input run {r} is empty")));
            }
            let mut files = Vec::with_capacity(run.files.len());
            for f in &run.files {
                files.push(check_input(job, f, &mut seen)?);
            }
            runs.push(files);
        }
        if let (Some(lo), Some(up)) = (&task.lower, &task.upper)
            && lo >= up
        {
            return Err(invalid(
                job,
                "the share's lower bound is not below its upper bound",
            ));
        }
        if task.snapshots.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid(job, "snapshots are not in ascending order"));
        }
        let format = task
            .format
            .as_ref()
            .ok_or_else(|| invalid(job, "no table format"))?;
        let table = table_options(format).map_err(|e| invalid(job, e))?;
        if task.target_file_size == 0 {
            return Err(invalid(job, "target file size is 0"));
        }
        let grandparents = check_grandparents(job, &task.grandparents)?;
        let mode = mode_from_wire(task.mode).map_err(|e| invalid(job, e))?;
        let queue_depth = match task.queue_depth as usize {
            0 => ExecOptions::DEFAULT_QUEUE_DEPTH,
            d if d <= MAX_QUEUE_DEPTH => d,
            d => {
                return Err(invalid(
                    job,
                    format_args!("queue depth {d} > {MAX_QUEUE_DEPTH}"),
                ));
            }
        };
        let compute_threads = match task.compute_threads as usize {
            0 => None,
            t if t <= MAX_COMPUTE_THREADS => Some(t),
            t => {
                return Err(invalid(
                    job,
                    format_args!("compute threads {t} > {MAX_COMPUTE_THREADS}"),
                ));
            }
        };
        let outputs = OutputBlock {
            first: task.first_output_number,
            count: task.output_numbers,
        };
        if outputs.count == 0 {
            return Err(invalid(job, "no output numbers reserved"));
        }
        if outputs
            .first
            .checked_add(u64::from(outputs.count))
            .is_none()
        {
            return Err(invalid(job, "the reserved output numbers overflow"));
        }
        if let Some(n) = seen.iter().find(|&&n| outputs.contains(n)) {
            return Err(invalid(
                job,
                format_args!("input number {n} is inside the reserved output numbers"),
            ));
        }
        Ok(CheckedTask {
            job_id: job,
            runs,
            lower: task.lower.clone(),
            upper: task.upper.clone(),
            snapshots: task.snapshots.clone(),
            bottommost: task.bottommost,
            table,
            target_file_size: task.target_file_size,
            grandparents,
            max_grandparent_overlap_bytes: task.max_grandparent_overlap_bytes,
            mode,
            sub_task_bytes: match task.sub_task_bytes {
                0 => ExecOptions::DEFAULT_SUB_TASK_BYTES,
                b => b,
            },
            queue_depth,
            compute_threads,
            outputs,
            output_root: task.output_root.as_ref().map(PathBuf::from),
            database: {
                crate::config::check_database_name(&task.database)
                    .map_err(|e| invalid(task.job_id, e))?;
                task.database.clone()
            },
            merge_operator: match task.merge_operator.as_str() {
                "" => None,
                name => Some(merge_operator::builtin(name).ok_or_else(|| {
                    invalid(job, format_args!("unknown merge operator {name:?}"))
                })?),
            },
            filter: match task.compaction_filter.as_str() {
                "" => None,
                name => Some(sluice_sst::ttl::builtin_filter(name).ok_or_else(|| {
                    invalid(job, format_args!("unknown compaction filter {name:?}"))
                })?),
            },
            range_tombstones: {
                let pieces: Vec<RangeTombstone> = task
                    .range_tombstones
                    .iter()
                    .map(|t| RangeTombstone {
                        start: t.start.clone(),
                        end: t.end.clone(),
                        seq: t.seq,
                    })
                    .collect();
                (!pieces.is_empty()).then(|| Arc::new(Tombstones::new(&pieces)))
            },
            keyspace: task.keyspace,
            task_nonce: (task.task_nonce != 0).then_some(task.task_nonce),
            log_drops: task.log_drops,
            fence: task.fence.as_ref().map(|f| WriteFence {
                epoch: f.epoch,
                e_tag: f.e_tag.clone(),
            }),
        })
    }

    /// Every input, newest run first.
    pub fn inputs(&self) -> impl Iterator<Item = &InputRef> {
        self.runs.iter().flatten()
    }
}

fn check_input(
    job: u64,
    f: &proto::FileRef,
    seen: &mut HashSet<u64>,
) -> Result<InputRef, WorkerError> {
    check_file_name(&f.name).map_err(|e| invalid(job, e))?;
    match table_number(&f.name) {
        Some(n) if n == f.number => {}
        Some(n) => {
            return Err(invalid(
                job,
                format_args!(
                    "file {:?} is number {n}, the task says {}",
                    f.name, f.number
                ),
            ));
        }
        None => {
            return Err(invalid(
                job,
                format_args!("file {:?} is not a table name (NNNNNN.sst)", f.name),
            ));
        }
    }
    if f.level >= MAX_LEVELS {
        return Err(invalid(
            job,
            format_args!(
                "file {:?} is at level {} (levels are 0..{MAX_LEVELS})",
                f.name, f.level
            ),
        ));
    }
    if !seen.insert(f.number) {
        return Err(invalid(
            job,
            format_args!("file {:?} is named twice", f.name),
        ));
    }
    Ok(InputRef {
        name: f.name.clone(),
        number: f.number,
        level: f.level,
        size: f.size,
        smallest: f.smallest.clone(),
        largest: f.largest.clone(),
    })
}

fn check_grandparents(
    job: u64,
    wire: &[proto::GrandparentFile],
) -> Result<Vec<GrandparentFile>, WorkerError> {
    let mut out: Vec<GrandparentFile> = Vec::with_capacity(wire.len());
    for (i, g) in wire.iter().enumerate() {
        if g.smallest.len() < TRAILER_BYTES || g.largest.len() < TRAILER_BYTES {
            return Err(invalid(
                job,
                format_args!("grandparent {i} has a key shorter than a trailer"),
            ));
        }
        let out_of_order = compare_internal(&g.smallest, &g.largest).is_gt()
            || out
                .last()
                .is_some_and(|p| compare_internal(&p.largest, &g.smallest).is_ge());
        if out_of_order {
            return Err(invalid(
                job,
                format_args!("grandparent {i} is out of order"),
            ));
        }
        out.push(GrandparentFile {
            smallest: g.smallest.clone(),
            largest: g.largest.clone(),
            size: g.size,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
