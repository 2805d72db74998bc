//! C-PPCP over the page cache: each compute thread reads (S1) the sub-tasks it computes.
//!
//! ```text
//! window ──indices──▶ compute × k (S1..S6, one sub-task each) ──queue──▶ writer (S7)
//!    ▲                                                                     │
//!    └──────────────── "sub-task i written": one more may start ───────────┘
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
//! Sub-tasks are handed out in plan order through a *window*: at most `2 * depth + threads` of
//! them are claimed and not yet written, so memory stays bounded however unevenly the threads run,
//! exactly as the queues bound it in [`super::parallel`]. The writer, after writing sub-task
//! `i`, releases the next one; after the last release it closes the window, which is how the
//! compute threads learn there is no more work.
//!
//! Direct I/O keeps the reader thread ([`super::parallel`]): there S1 waits on the device, and
//! that wait is what the pipeline overlaps with computing.

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::subtask::read_sub_task;

use super::Shared;
use super::parallel::{DoneMsg, compute_sub_task, sub_task, work_stage, write_stage};
use crate::Result;

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

/// `threads` compute threads reading their own sub-tasks and the writer (this thread). Every
/// spawned thread is joined before this returns.
pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    depth: usize,
    threads: usize,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    // As many sub-tasks ahead of the writer as the reader's and the results' queues of
    // `super::parallel` hold, so a writer waiting on a sync stalls the threads no sooner.
    let (mut window, todo) = Window::open(plan.sub_tasks.len(), 2 * depth + threads);
    let (done_tx, done_rx) = bounded(depth + threads);
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            let (todo, done_tx) = (todo.clone(), done_tx.clone());
            scope.spawn(move || read_and_compute_stage(spec, plan, shared, todo, done_tx));
        }
        // The writer must see the queue close once every compute thread is done.
        drop(done_tx);
        drop(todo);
        let written = write_stage(spec, shared, done_rx, new_output, &mut |_| {
            window.release_one()
        });
        // On failure the compute threads still waiting for work must see the window close.
        drop(window);
        written
    })
}

/// S1..S6 for each sub-task claimed from the window, until it closes or the writer goes away.
fn read_and_compute_stage(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    todo: Receiver<usize>,
    tx: Sender<DoneMsg>,
) {
    work_stage(shared, "read+compute", todo, tx, |index, times| {
        let raw = read_sub_task(spec, sub_task(plan, index)?, times)?;
        compute_sub_task(spec, plan, shared, index, raw, true, times)
    });
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
