//! One task's work, on a blocking thread: find and open the inputs, build the executor's spec,
//! choose the executor, run it with outputs named by the task's [`OutputSet`], publish the
//! outputs, and describe them for the host.
//!
//! Precondition: the task passed [`CheckedTask::from_wire`]. Postcondition on error: the
//! executor has deleted what it wrote; the caller still abandons the [`OutputSet`] to remove
//! anything published or left behind.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_exec::decide::Decision;
use sluice_exec::{CompactionMode, ExecOptions, JobControl, execute_with};
use sluice_rpc::convert::{mode_to_wire, profile_to_wire, stages_to_wire, stats_to_wire};
use sluice_rpc::proto;
use sluice_sst::compact::{CompactionOutput, CompactionSpec};
use sluice_sst::fs::Storage;
use sluice_sst::key::compare_internal;
use sluice_sst::table::{REMOTE_OPENS_AT_ONCE, Table, TableReadOptions, open_in_parallel};

use crate::decision::Decider;
use crate::error::WorkerError;
use crate::outputs::{OutputSet, Published};
use crate::resolve::resolve_input;
use crate::task::{CheckedTask, InputRef};

/// What a job needs from the worker.
pub(crate) struct JobEnv<'a> {
    /// Canonical roots, non-empty.
    pub roots: &'a [PathBuf],
    /// Where the files under the roots are ([`crate::state::WorkerState::storage`]).
    pub storage: &'a Storage,
    /// Whether they are objects: an input is then the object its name gives, under the one
    /// root, with no directory entry to inspect.
    pub remote: bool,
    pub decider: &'a Decider,
    /// Compute threads when the task does not say.
    pub compute_threads: usize,
}

/// A finished job.
#[derive(Debug)]
pub(crate) struct JobReport {
    /// The reply, ready to seal.
    pub result: proto::TaskResult,
    pub input_bytes: u64,
    pub output_bytes: u64,
    /// CPU time of the executor's threads.
    pub cpu_nanos: u64,
}

/// Runs `task` (see the module comment); `control` may cancel it.
pub(crate) fn run(
    env: &JobEnv<'_>,
    task: &CheckedTask,
    control: Arc<JobControl>,
    outputs: &OutputSet,
) -> Result<JobReport, WorkerError> {
    let inputs = open_inputs(env, task)?;
    let input_bytes = inputs.iter().flatten().map(|t| t.file_size()).sum();
    let (mode, decision) = env.decider.choose(task.job_id, task.mode, &inputs);
    let spec = CompactionSpec {
        inputs,
        snapshots: task.snapshots.clone(),
        bottommost: task.bottommost,
        table: task.table.clone(),
        storage: outputs.storage(env.storage),
        target_file_size: task.target_file_size,
        grandparents: task.grandparents.clone(),
        max_grandparent_overlap_bytes: task.max_grandparent_overlap_bytes,
        lower: task.lower.clone(),
        upper: task.upper.clone(),
        filter: task.filter.clone(),
        merge_operator: task.merge_operator.clone(),
        range_tombstones: task.range_tombstones.clone(),
        blob_relocation: None,
        task_nonce: task.task_nonce,
        log_drops: task.log_drops,
    };
    #[cfg(feature = "test-lies")]
    let spec = crate::lies::misread(spec);
    let exec = ExecOptions {
        mode,
        sub_task_bytes: task.sub_task_bytes,
        queue_depth: task.queue_depth,
        compute_threads: task.compute_threads.unwrap_or(env.compute_threads),
        table_dirs: env.roots.len(),
    };
    tracing::info!(
        job_id = task.job_id,
        mode = %mode,
        inputs = task.inputs().count(),
        input_bytes,
        "task started"
    );
    let mut new_output = || outputs.allocate();
    #[cfg_attr(not(feature = "test-lies"), allow(unused_mut))]
    let mut out = execute_with(&spec, &exec, control, &mut new_output)?;
    let published = outputs.commit(&out.files)?;
    #[cfg(feature = "test-lies")]
    crate::lies::apply(&mut out, &published, &spec.inputs, &spec.table)?;
    let output_bytes = out.files.iter().map(|f| f.summary.file_size).sum();
    let cpu_nanos = out.profile.cpu_nanos;
    Ok(JobReport {
        result: task_result(task.job_id, mode, out, &published, decision.as_ref()),
        input_bytes,
        output_bytes,
        cpu_nanos,
    })
}

/// Resolves and opens every input, and checks each against what the task says of it (size,
/// key range, if given) and each run's files against key order.
fn open_inputs(env: &JobEnv<'_>, task: &CheckedTask) -> Result<Vec<Vec<Arc<Table>>>, WorkerError> {
    let mut paths = Vec::new();
    for input in task.runs.iter().flatten() {
        // The name is bare ([`crate::task`]): under the root, it names an object.
        paths.push(match (env.remote, env.roots.first()) {
            (true, Some(root)) => root.join(&input.name),
            _ => resolve_input(env.roots, &input.name)?,
        });
    }
    let mut opened = open_tables(env, task, &paths)?.into_iter();
    let mut runs = Vec::with_capacity(task.runs.len());
    for run in &task.runs {
        let mut tables: Vec<Arc<Table>> = Vec::with_capacity(run.len());
        for input in run {
            let table = opened.next().ok_or_else(|| {
                WorkerError::Internal(format!("task {}: an input was not opened", task.job_id))
            })?;
            check_matches(task.job_id, input, &table)?;
            if let Some(prev) = tables.last()
                && compare_internal(
                    &prev.properties().largest_key,
                    &table.properties().smallest_key,
                )
                .is_ge()
            {
                return Err(WorkerError::Invalid(format!(
                    "task {}: input {} overlaps or precedes the file before it in its run",
                    task.job_id, input.name
                )));
            }
            tables.push(table);
        }
        runs.push(tables);
    }
    Ok(runs)
}

/// Opens the tables at `paths` (the task's inputs, in run order), in order:
/// [`REMOTE_OPENS_AT_ONCE`] at a time from an object store, one by one from local directories.
fn open_tables(
    env: &JobEnv<'_>,
    task: &CheckedTask,
    paths: &[PathBuf],
) -> Result<Vec<Arc<Table>>, WorkerError> {
    let numbers = task.runs.iter().flatten().map(|i| i.number);
    let inputs: Vec<(&PathBuf, u64)> = paths.iter().zip(numbers).collect();
    let threads = if env.remote { REMOTE_OPENS_AT_ONCE } else { 1 };
    Ok(open_in_parallel(&inputs, threads, |&(path, number)| {
        // A worker only compacts, and compaction never looks a key up.
        let opts = TableReadOptions {
            load_filter: false,
            storage: env.storage.clone(),
            ..TableReadOptions::default()
        };
        Table::open(path, number, opts)
    })?)
}

/// The opened `table` is the file the host meant: same size and key range, where given.
fn check_matches(job: u64, input: &InputRef, table: &Table) -> Result<(), WorkerError> {
    let props = table.properties();
    let mismatch = if input.size != 0 && input.size != table.file_size() {
        Some(format!(
            "size {}, the file has {}",
            input.size,
            table.file_size()
        ))
    } else if !input.smallest.is_empty() && input.smallest != props.smallest_key {
        Some("another smallest key than the file".to_string())
    } else if !input.largest.is_empty() && input.largest != props.largest_key {
        Some("another largest key than the file".to_string())
    } else {
        None
    };
    match mismatch {
        Some(what) => Err(WorkerError::Invalid(format!(
            "task {job}: input {} (level {}): the task says {what}",
            input.name, input.level
        ))),
        None => Ok(()),
    }
}

/// The reply for a finished job.
fn task_result(
    job_id: u64,
    mode: CompactionMode,
    out: CompactionOutput,
    published: &[Published],
    decision: Option<&Decision>,
) -> proto::TaskResult {
    let files = out
        .files
        .iter()
        .zip(published)
        .map(|(f, p)| proto::OutputFile {
            number: f.number,
            name: p.name.clone(),
            size: f.summary.file_size,
            smallest: f.summary.smallest_key.clone(),
            largest: f.summary.largest_key.clone(),
            entries: f.summary.properties.num_entries,
            file_crc32c: f.summary.file_checksum,
        })
        .collect();
    proto::TaskResult {
        job_id,
        files,
        profile: Some(profile_to_wire(&out.profile)),
        stages: stages_to_wire(&out.stages),
        stats: Some(stats_to_wire(&out.stats)),
        mode: mode_to_wire(Some(mode)) as i32,
        drop_log: out.drops.into_bytes().into(),
        decision: decision.map(|d| proto::DecisionRecord {
            f: d.f,
            cpu_use: d.inputs.cpu_use,
            mem_use: d.inputs.mem_use,
            large_value_share: d.inputs.large_value_share,
            reason: d.reason.clone(),
        }),
    }
}
