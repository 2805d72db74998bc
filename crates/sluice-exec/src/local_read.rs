//! C-PPCP over the page cache: each compute thread reads (S1) the sub-tasks it computes, and
//! writes (S7) whatever is next in key order.
//!
//! ```text
//! window ──indices──▶ compute × k (S1..S6 of one sub-task) ──▶ ready ──▶ S7 by whichever thread
//!    ▲                                                                   finds the next one ready
//!    └──────────────────────── "sub-task i written": one more may start ─┘
//! ```
//!
//! With buffered I/O, S1 of a block already in the page cache is a memory copy. Done by a
//! separate reader thread, it fills that core's cache, and the compute thread that verifies the
//! block on another core pays again to fetch every byte: on two cores the checksum step ran
//! 2-3x slower behind a reader than in SCP. The PCP paper keeps S2..S6 on one processor for this
//! reason ("the processors may not share the dcache"). With two or more compute threads the
//! cores are busy computing anyway, and the copy is one more step that belongs on the core
//! using the bytes. So here each compute thread runs S1..S6 of a whole sub-task.
//!
//! S7 follows the same rule. A writer thread of its own would be a third runnable thread on two
//! cores, preempting a compute thread at every block it appends, and would copy each output
//! block from the cache of the core that compressed it. Instead a thread that finishes a
//! sub-task leaves it in `ready` and, if no other thread is writing, appends every sub-task that
//! is next in order: most often its own, still in its cache. A thread that finds the writer
//! busy goes back to computing; the writing thread looks at `ready` again after it lets go, so
//! a sub-task made ready meanwhile is never left behind (see [`write_ready`]).
//!
//! Sub-tasks are handed out in plan order through a *window*: at most `2 * depth + threads` of
//! them are claimed and not yet written, so memory stays bounded however unevenly the threads
//! run, exactly as the queues bound it in [`super::parallel`]. Writing sub-task `i` releases
//! the next one; after the last release the window closes, which is how the compute threads
//! learn there is no more work. A failure closes it at once.
//!
//! Direct I/O keeps the reader thread ([`super::parallel`]): there S1 waits on the device, and
//! that wait is what the pipeline overlaps with computing.

use std::collections::BTreeMap;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, unbounded};
use parking_lot::Mutex;
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::subtask::{encode_sub_task, read_sub_task};
use sluice_sst::compact::writer::OutputWriter;
use sluice_sst::compact::{CompactionSpec, StepTimes};

use super::Shared;
use super::parallel::{Output, compute_sub_task, sub_task, timed};
use crate::{Error, Result};

/// The sub-task indices compute threads may claim: those below `released`, not yet claimed.
struct Window {
    tx: Option<Sender<usize>>,
    released: usize,
    len: usize,
}

impl Window {
    /// A window over `len` sub-tasks with the first `depth` released.
    fn open(len: usize, depth: usize) -> (Self, Receiver<usize>) {
        let (tx, rx) = unbounded();
        let mut window = Window {
            tx: Some(tx),
            released: 0,
            len,
        };
        for _ in 0..depth.max(1) {
            window.release_one();
        }
        (window, rx)
    }

    /// Stops handing out sub-tasks: the compute threads end once they finish what they hold.
    fn close(&mut self) {
        self.tx = None;
    }

    /// Lets the next sub-task start; closes the window once every sub-task was released.
    fn release_one(&mut self) {
        if self.released < self.len
            && let Some(tx) = &self.tx
        {
            // The receivers live until the compute threads end, which needs this window closed.
            let _ = tx.send(self.released);
            self.released += 1;
        }
        if self.released >= self.len {
            self.tx = None;
        }
    }
}

/// S7's state, shared by the compute threads: held by the one thread writing at a time.
struct Ordered<'w> {
    writer: OutputWriter<'w>,
    /// The sub-task to append next.
    next: usize,
    window: Window,
    /// The first failure; nothing more is appended after one.
    outcome: Result<()>,
}

impl Ordered<'_> {
    fn fail(&mut self, e: Error) {
        if self.outcome.is_ok() {
            self.outcome = Err(e);
        }
        self.window.close();
    }
}

/// `threads` compute threads, each reading, computing and (when its turn comes) writing
/// sub-tasks. Every spawned thread is joined before this returns.
pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    depth: usize,
    threads: usize,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    // As many sub-tasks ahead of the writing as the reader's and the results' queues of
    // `super::parallel` hold, so a thread waiting on a sync stalls the others no sooner.
    let (window, todo) = Window::open(plan.sub_tasks.len(), 2 * depth + threads);
    let ready = Mutex::new(BTreeMap::new());
    let ordered = Mutex::new(Ordered {
        writer: OutputWriter::new(spec.output_rules(), &shared.times, new_output),
        next: 0,
        window,
        outcome: Ok(()),
    });
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            let todo = todo.clone();
            let (ready, ordered) = (&ready, &ordered);
            scope.spawn(move || compute_and_write(spec, plan, shared, todo, ready, ordered));
        }
    });
    let Ordered {
        writer,
        next,
        outcome,
        ..
    } = ordered.into_inner();
    let outcome = outcome.and_then(|()| {
        if next < plan.sub_tasks.len() {
            return Err(Error::InvalidArgument(format!(
                "compaction stages stopped before sub-task {next} was written"
            )));
        }
        Ok(())
    });
    writer.conclude(outcome)
}

/// S1..S6 for each sub-task claimed from the window, then S7 of whatever is next in order if no
/// other thread is writing, until the window closes.
fn compute_and_write(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    todo: Receiver<usize>,
    ready: &Mutex<BTreeMap<usize, Output>>,
    ordered: &Mutex<Ordered<'_>>,
) {
    let start = Instant::now();
    let mut idle = 0u64;
    let times = StepTimes::default();
    shared.with_cpu(|| {
        while let Ok(index) = timed(&mut idle, || todo.recv()) {
            let done = sub_task(plan, index)
                .and_then(|st| read_sub_task(spec, st, &times))
                .and_then(|raw| compute_sub_task(spec, plan, shared, index, raw, true, &times));
            times.drain_into(&shared.times);
            match done {
                Ok((index, output)) => {
                    ready.lock().insert(index, output);
                }
                Err(e) => return ordered.lock().fail(e),
            }
            write_ready(spec, shared, ready, ordered);
        }
    });
    shared.record_stage("read+compute+write", start.elapsed(), idle);
}

/// Appends every sub-task in `ready` that is next in order, unless another thread holds the
/// writer. No ready sub-task is stranded: a thread inserts into `ready` and then tries the
/// writer, and the writing thread lets go of the writer and then looks at `ready` again; both
/// looks take `ready`'s lock, so either the writer sees the insertion, or the inserting thread's
/// try comes after the writer was let go.
fn write_ready(
    spec: &CompactionSpec,
    shared: &Shared,
    ready: &Mutex<BTreeMap<usize, Output>>,
    ordered: &Mutex<Ordered<'_>>,
) {
    while let Some(mut o) = ordered.try_lock() {
        while o.outcome.is_ok() {
            let next = o.next;
            let Some(output) = ready.lock().remove(&next) else {
                break;
            };
            match append(spec, shared, &mut o.writer, output) {
                Ok(()) => {
                    o.next += 1;
                    o.window.release_one();
                }
                Err(e) => o.fail(e),
            }
        }
        let (next, failed) = (o.next, o.outcome.is_err());
        drop(o);
        if failed || !ready.lock().contains_key(&next) {
            return;
        }
    }
}

/// S7 of one sub-task's blocks (S5 and S6 first if they were left undone).
fn append(
    spec: &CompactionSpec,
    shared: &Shared,
    writer: &mut OutputWriter<'_>,
    output: Output,
) -> Result<()> {
    let blocks = match output {
        Output::Encoded(blocks) => blocks,
        Output::Sealed(blocks) => encode_sub_task(blocks, &spec.table, &shared.times),
    };
    for block in &blocks {
        shared.before_append()?;
        writer.append(block)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &Receiver<usize>) -> Vec<usize> {
        rx.try_iter().collect()
    }

    #[test]
    fn the_window_releases_depth_sub_tasks_then_one_per_write_and_closes() {
        let (mut window, rx) = Window::open(5, 2);
        assert_eq!(drain(&rx), [0, 1]);
        window.release_one();
        assert_eq!(drain(&rx), [2]);
        window.release_one();
        window.release_one();
        assert_eq!(drain(&rx), [3, 4]);
        assert!(
            rx.recv().is_err(),
            "closed once every sub-task was released"
        );
    }

    #[test]
    fn a_window_deeper_than_the_plan_closes_at_once() {
        let (_window, rx) = Window::open(2, 16);
        assert_eq!(drain(&rx), [0, 1]);
        assert!(rx.recv().is_err());
        let (_window, rx) = Window::open(0, 4);
        assert!(rx.recv().is_err(), "an empty plan has nothing to claim");
    }
}
