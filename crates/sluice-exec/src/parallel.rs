//! C-PPCP: one reader, `compute_threads` compute threads working on different sub-tasks, and a
//! writer that restores key order before S7. With tables in several directories it is S-PPCP:
//! one reader per directory holding inputs, and the writer's I/O handed to one thread per
//! directory (the `dir_io` module). With buffered I/O from one directory and two or more
//! compute threads, there is neither reader nor writer thread: the compute threads read their
//! own sub-tasks and take turns appending them in key order (`local_read.rs` says why).
//!
//! The pipelined executor is the special case of one compute thread, with one difference: its
//! writer also compresses and checksums (S5, S6). With one compute thread, compute is the
//! pipeline's bottleneck (S2..S6 are most of a compaction's time) while the writer mostly
//! waits, so S5 and S6 move to where the time is spare.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::{CompactionPlan, SubTask};
use sluice_sst::compact::subtask::{
    decode_sub_task, encode_sub_task, merge_sub_task, read_sub_task,
};
use sluice_sst::compact::writer::OutputWriter;
use sluice_sst::compact::{CompactionSpec, StepTimes};
use sluice_sst::fs::{IoMode, Storage, WrapWrites};
use sluice_sst::table::{EncodedBlock, RawBlock, SealedBlock};

use super::dir_io::{DirWriters, input_dirs, read_by_dir};
use super::{ExecOptions, Shared};
use crate::{Error, Result};

/// A sub-task's blocks as read from storage.
pub(super) type ReadMsg = Result<(usize, Vec<Vec<RawBlock>>)>;
/// A sub-task's output blocks as a compute thread hands them to the writer.
pub(super) enum Output {
    /// Compressed and checksummed (S5, S6 done).
    Encoded(Vec<EncodedBlock>),
    /// Built (S4) and left for the writer to encode.
    Sealed(Vec<SealedBlock>),
}

/// A sub-task's output blocks, from a compute thread.
pub(super) type DoneMsg = Result<(usize, Output)>;

pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    exec: &ExecOptions,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    run_stages(spec, plan, exec, exec.compute_threads, shared, new_output)
}

/// The reader(s), `threads` compute threads and the writer (this thread), joined by queues of
/// `exec.queue_depth` sub-tasks; S-PPCP when `exec.table_dirs > 1`. Every spawned thread is
/// joined before this returns.
pub(super) fn run_stages(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    exec: &ExecOptions,
    threads: usize,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    if exec.table_dirs <= 1 {
        return stages(spec, plan, exec.queue_depth, threads, shared, new_output);
    }
    let writers = Arc::new(WrapWrites::new(
        Arc::clone(&spec.storage.fs),
        DirWriters::new(),
    ));
    let spread = CompactionSpec {
        storage: Storage::new(writers.clone(), spec.storage.mode),
        ..spec.clone()
    };
    let result = stages(&spread, plan, exec.queue_depth, threads, shared, new_output);
    // Every output file is finished or abandoned: the writer threads can drain and stop.
    drop(spread);
    writers.wrapper().finish(shared);
    result
}

fn stages(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    depth: usize,
    threads: usize,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    let depth = depth.max(1);
    let threads = threads.max(1);
    let dirs = input_dirs(spec);
    if threads > 1 && dirs.len() <= 1 && spec.storage.mode == IoMode::Buffered {
        return super::local_read::run(spec, plan, depth, threads, shared, new_output);
    }
    let (raw_tx, raw_rx) = bounded(depth);
    let (done_tx, done_rx) = bounded(depth + threads);
    std::thread::scope(|scope| {
        if dirs.len() > 1 {
            read_by_dir(scope, spec, plan, shared, dirs, depth, raw_tx);
        } else {
            scope.spawn(move || read_stage(spec, plan, shared, raw_tx));
        }
        // One compute thread (PCP): the writer encodes (see the module docs).
        let encode = threads > 1;
        for _ in 0..threads {
            let (raw_rx, done_tx) = (raw_rx.clone(), done_tx.clone());
            scope.spawn(move || compute_stage(spec, plan, shared, encode, raw_rx, done_tx));
        }
        // The writer must see the queue close once every compute thread is done.
        drop(done_tx);
        drop(raw_rx);
        write_stage(spec, shared, done_rx, new_output, &mut |_| {})
    })
}

/// S1 for every sub-task, in order.
pub(super) fn read_stage(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    tx: Sender<ReadMsg>,
) {
    let start = Instant::now();
    let mut idle = 0u64;
    let times = StepTimes::default();
    shared.with_cpu(|| {
        for st in &plan.sub_tasks {
            let msg = read_sub_task(spec, st, &times).map(|raw| (st.index, raw));
            times.drain_into(&shared.times);
            let failed = msg.is_err();
            let sent = timed(&mut idle, || tx.send(msg));
            if sent.is_err() || failed {
                return;
            }
        }
    });
    shared.record_stage("read", start.elapsed(), idle);
}

/// Runs `f`, adding its duration to `idle` (time blocked on a queue).
pub(super) fn timed<T>(idle: &mut u64, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    *idle += start.elapsed().as_nanos() as u64;
    out
}

/// S2..S6 (S2..S4 unless `encode`) for whatever sub-tasks arrive.
fn compute_stage(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    encode: bool,
    rx: Receiver<ReadMsg>,
    tx: Sender<DoneMsg>,
) {
    work_stage(shared, "compute", rx, tx, |msg, times| {
        let (index, raw) = msg?;
        compute_sub_task(spec, plan, shared, index, raw, encode, times)
    });
}

/// Runs `work` on each message from `rx` and sends its result to `tx`, until `rx` closes, `tx`
/// is gone or `work` fails. Step times are tallied per thread and drained once per message;
/// the time blocked on either queue is the stage's idle time.
pub(super) fn work_stage<T>(
    shared: &Shared,
    stage: &str,
    rx: Receiver<T>,
    tx: Sender<DoneMsg>,
    mut work: impl FnMut(T, &StepTimes) -> DoneMsg,
) {
    let start = Instant::now();
    let mut idle = 0u64;
    let times = StepTimes::default();
    shared.with_cpu(|| {
        while let Ok(msg) = timed(&mut idle, || rx.recv()) {
            let done = work(msg, &times);
            times.drain_into(&shared.times);
            let failed = done.is_err();
            if timed(&mut idle, || tx.send(done)).is_err() || failed {
                return;
            }
        }
    });
    shared.record_stage(stage, start.elapsed(), idle);
}

/// The plan's sub-task `index`.
pub(super) fn sub_task(plan: &CompactionPlan, index: usize) -> Result<&SubTask> {
    plan.sub_tasks
        .get(index)
        .ok_or_else(|| Error::InvalidArgument(format!("sub-task {index} is not in the plan")))
}

/// S2..S6 of sub-task `index`, whose blocks `raw` were read; S2..S4 unless `encode`.
pub(super) fn compute_sub_task(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    index: usize,
    raw: Vec<Vec<RawBlock>>,
    encode: bool,
    times: &StepTimes,
) -> DoneMsg {
    let st = sub_task(plan, index)?;
    let blocks = decode_sub_task(raw, times)?;
    let merged = merge_sub_task(spec, st, blocks, times)?;
    shared.add_stats(&merged.stats);
    shared.add_drops(st.index, merged.drops);
    let output = if encode {
        Output::Encoded(encode_sub_task(merged.blocks, &spec.table, times))
    } else {
        Output::Sealed(merged.blocks)
    };
    Ok((index, output))
}

/// S7 in sub-task order. Results may arrive out of order; they wait until their turn.
/// `written(i)` is called once sub-task `i` is all appended.
pub(super) fn write_stage(
    spec: &CompactionSpec,
    shared: &Shared,
    rx: Receiver<DoneMsg>,
    new_output: &mut NewOutput<'_>,
    written: &mut dyn FnMut(usize),
) -> Result<Vec<OutputFile>> {
    let start = Instant::now();
    let mut idle = 0u64;
    let result = shared.with_cpu(|| {
        let mut writer = OutputWriter::new(spec.output_rules(), &shared.times, new_output);
        let mut waiting: BTreeMap<usize, Output> = BTreeMap::new();
        let mut next = 0usize;
        let outcome = (|| {
            while let Ok(msg) = timed(&mut idle, || rx.recv()) {
                let (index, blocks) = msg?;
                waiting.insert(index, blocks);
                while let Some(output) = waiting.remove(&next) {
                    let blocks = match output {
                        Output::Encoded(blocks) => blocks,
                        Output::Sealed(blocks) => {
                            encode_sub_task(blocks, &spec.table, &shared.times)
                        }
                    };
                    for block in &blocks {
                        shared.before_append()?;
                        writer.append(block)?;
                    }
                    written(next);
                    next += 1;
                }
            }
            if !waiting.is_empty() {
                return Err(Error::InvalidArgument(format!(
                    "compaction stages stopped before sub-task {next} was written"
                )));
            }
            Ok(())
        })();
        // Dropping the receiver makes upstream stages stop at their next send.
        drop(rx);
        writer.conclude(outcome)
    });
    shared.record_stage("write", start.elapsed(), idle);
    result
}
