//! The dynamic split: one compaction's sub-tasks handed out as self-scheduled chunks (see
//! [`super::dispatch`] for the queue and chunk sizes).
//!
//! Who runs what:
//! - the compaction thread is the host side: it takes a chunk, runs it with the host's
//!   executor, and takes the next, until the queue is empty and no worker holds a chunk.
//!   While one does, the host either runs a copy of that chunk itself, when the dispatcher
//!   judges it would finish first ([`Dispatcher::worth_racing`]), or waits, since a failure
//!   would bring the chunk back to it;
//! - one scoped driver thread per worker takes a chunk, reserves its output numbers, sends
//!   it through the worker's client on the offload runtime and blocks on the answer. When the
//!   answer comes, the driver first sends the worker its next chunk and only then checks the
//!   files of the one just answered, so the worker never sits idle through the host's checks.
//!
//! A worker chunk that fails (unreachable, timed out, an error, a reply failing
//! [`super::verify`]) has its reserved numbers' files deleted and goes back to the queue for
//! another side; the worker takes nothing more in this job, and a chunk it already holds
//! next is abandoned and re-queued the same way. Each failed chunk counts as a retry.
//!
//! A raced chunk is kept from whichever copy finishes first: the first to put it in the
//! board's finished parts, under the lock, wins. The loser's files are deleted: the host's copy
//! is cancelled through a child of the job's control, the worker's call is aborted. The worker
//! is retired for the job either way.
//!
//! If the host's own chunk fails, or the job is cancelled, the queue is stopped, every call in
//! flight is aborted (dropping a call cancels it on the worker, which deletes its files; the
//! driver deletes them too), the drivers are joined, and the outputs of finished chunks are
//! deleted: nothing of a failed job is left behind.
//!
//! Lock order: the board's lock is never held across I/O, a call, or another lock.

use std::collections::BTreeMap;
use std::fmt::Display;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_exec::JobControl;
use sluice_rpc::proto::TaskResult;
use sluice_sst::compact::NewOutput;
use sluice_sst::compact::plan::{CompactionPlan, plan};
use tokio::task::{AbortHandle, JoinHandle};

use super::client::ShareError;
use super::dispatch::{Chunk, Dispatcher, HOST, Take};
use super::share::{Job, JobParts, Part, Share, restrict};
use super::task::numbers_needed;
use super::{Offloader, ShareReport};
use sluice_sst::{Error, Result};

/// Smallest chunk, in sub-tasks: with fewer, a round trip and a partial last output file
/// weigh too much against the work.
const MIN_CHUNK_SUB_TASKS: u64 = 4;

/// How often a waiting host looks at the job's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// The queue and the finished chunks, shared by the host thread and the drivers.
struct Board {
    state: Mutex<BoardState>,
    /// Signalled whenever a chunk finishes or fails: the host may be waiting for either.
    changed: Condvar,
}

struct BoardState {
    queue: Dispatcher,
    /// Finished chunks' outputs by first sub-task: iteration order is key order.
    parts: BTreeMap<usize, Part>,
    /// Per side: what it did in this job.
    sides: Vec<SideSum>,
    /// Worker chunks sent and not answered yet, by first sub-task.
    in_flight: BTreeMap<usize, InFlight>,
}

/// One side's chunks in this job, summed into its share report.
#[derive(Default)]
struct SideSum {
    input_bytes: u64,
    /// Busy seconds: the host's time running chunks; a worker's calls plus the checks that
    /// did not overlap its next call.
    seconds: f64,
    cpu_seconds: f64,
    check_seconds: f64,
    drop_log_bytes: u64,
    /// Executors that ran the chunks, sorted and without repeats.
    modes: Vec<String>,
    failed: bool,
}

impl SideSum {
    fn add(&mut self, r: &ShareReport) {
        self.input_bytes += r.input_bytes;
        self.seconds += r.seconds;
        self.cpu_seconds += r.cpu_seconds;
        self.check_seconds += r.check_seconds;
        self.drop_log_bytes += r.drop_log_bytes;
        if let Err(at) = self.modes.binary_search(&r.mode) {
            self.modes.insert(at, r.mode.clone());
        }
    }
}

/// A worker chunk whose answer has not arrived, as the host sees it.
struct InFlight {
    side: usize,
    chunk: Chunk,
    sent: Instant,
    /// Aborts the call when the job stops or the host's copy finishes first.
    abort: AbortHandle,
    /// Set while the host runs a copy of the chunk: cancels that copy if the worker wins.
    backup: Option<Arc<JobControl>>,
}

/// The host's copy of a chunk a worker holds.
struct Backup {
    side: usize,
    chunk: Chunk,
    control: Arc<JobControl>,
}

/// What a driver learns when its worker's answer arrives: whether the host races the chunk.
enum Answered {
    /// Nobody else runs it.
    Alone,
    /// The host runs a copy, cancelled by this control if the worker's copy is kept.
    Raced(Arc<JobControl>),
    /// The host's copy already finished (or the job stopped): the worker's is not wanted.
    Gone,
}

/// A worker chunk sent and not yet answered.
struct Call {
    chunk: Chunk,
    share: Share,
    numbers: Range<u64>,
    handle: JoinHandle<(std::result::Result<TaskResult, ShareError>, Duration)>,
}

impl Board {
    fn take(&self, side: usize) -> Take {
        self.state.lock().queue.take(side)
    }

    /// Keeps `part`, the outputs of `chunk`, unless another copy of the chunk was kept first:
    /// then the part comes back, for its files to be deleted. `report` is added to `side`'s
    /// sums; `busy_seconds` go to the dispatcher's figures for side `ran` (the host when it
    /// took the chunk over: then a worker's time must not count as the host's, and is passed
    /// as zero).
    fn keep(
        &self,
        (side, ran): (usize, usize),
        chunk: &Chunk,
        part: Part,
        report: &ShareReport,
        busy_seconds: f64,
    ) -> Option<Part> {
        let mut st = self.state.lock();
        if st.parts.contains_key(&chunk.range.start) {
            return Some(part);
        }
        tracing::debug!(
            side = %report.side,
            sub_tasks = ?chunk.range,
            input_bytes = chunk.input_bytes,
            seconds = report.seconds,
            files = part.files.len(),
            "chunk done"
        );
        st.queue.finish(ran, chunk, busy_seconds);
        st.parts.insert(chunk.range.start, part);
        if let Some(s) = st.sides.get_mut(side) {
            s.add(report);
        }
        drop(st);
        self.changed.notify_all();
        None
    }

    /// Called by a driver when its call for `chunk` has ended: the chunk is no longer in
    /// flight, so the host will not start racing it.
    fn answered(&self, chunk: &Chunk) -> Answered {
        match self.state.lock().in_flight.remove(&chunk.range.start) {
            Some(InFlight {
                backup: Some(control),
                ..
            }) => Answered::Raced(control),
            Some(_) => Answered::Alone,
            None => Answered::Gone,
        }
    }

    /// Stops the job: no more chunks for anyone, and every call in flight aborted.
    fn stop(&self) {
        let mut st = self.state.lock();
        st.queue.stop();
        for call in std::mem::take(&mut st.in_flight).into_values() {
            call.abort.abort();
        }
        drop(st);
        self.changed.notify_all();
    }
}

impl BoardState {
    /// A chunk in flight that the idle host should run too, if there is one: it is taken over
    /// (see [`Dispatcher::take_over`]) and marked as raced.
    fn pick_race(&mut self, job: &JobControl) -> Option<Backup> {
        let (queue, in_flight) = (&mut self.queue, &mut self.in_flight);
        let call = in_flight.values_mut().find(|f| {
            let elapsed = f.sent.elapsed().as_secs_f64();
            f.backup.is_none() && queue.worth_racing(f.side, f.chunk.input_bytes, elapsed)
        })?;
        let control = Arc::new(job.child());
        call.backup = Some(Arc::clone(&control));
        queue.take_over(call.side, &call.chunk);
        Some(Backup {
            side: call.side,
            chunk: call.chunk.clone(),
            control,
        })
    }
}

impl Job<'_> {
    /// Runs `job` split into self-scheduled chunks; returns the parts in key order and one
    /// report per side that took part.
    pub(super) fn run_dynamic(&self, new_output: &mut NewOutput<'_>) -> Result<JobParts> {
        let off = self.off;
        let plan = plan(self.spec, self.exec.sub_task_bytes);
        let sizes: Vec<u64> = plan.sub_tasks.iter().map(|t| t.input_bytes()).collect();
        let floor = off
            .options
            .min_chunk_bytes
            .max(MIN_CHUNK_SUB_TASKS.saturating_mul(self.exec.sub_task_bytes));
        let sides = off.clients.len() + 1;
        let board = Board {
            state: Mutex::new(BoardState {
                queue: Dispatcher::new(sizes, &off.bandwidths.lock().priors(), floor),
                parts: BTreeMap::new(),
                sides: (0..sides).map(|_| SideSum::default()).collect(),
                in_flight: BTreeMap::new(),
            }),
            changed: Condvar::new(),
        };
        tracing::debug!(
            job = self.id,
            sub_tasks = plan.sub_tasks.len(),
            floor,
            "chunked job planned"
        );
        let hosted = std::thread::scope(|s| {
            for side in 1..sides {
                let board = &board;
                let plan = &plan;
                s.spawn(move || self.drive_worker(board, plan, side));
            }
            let hosted = self.host_chunks(&board, &plan, new_output);
            if hosted.is_err() {
                board.stop();
            }
            hosted
        });
        let st = board.state.into_inner();
        let parts: Vec<Part> = st.parts.into_values().collect();
        if let Err(e) = hosted {
            self.delete_parts(&parts);
            return Err(e);
        }
        if !st.queue.is_complete() {
            self.delete_parts(&parts);
            return Err(Error::InvalidArgument(format!(
                "offloaded compaction {}: the chunk queue ended with sub-tasks unfinished",
                self.id
            )));
        }
        let names = std::iter::once("host").chain(off.clients.iter().map(|c| c.addr()));
        let reports = st
            .sides
            .into_iter()
            .zip(names)
            .enumerate()
            .filter(|(_, (sum, _))| sum.input_bytes > 0 || sum.failed)
            .map(|(side, (sum, name))| {
                let report = ShareReport {
                    side: name.to_string(),
                    input_bytes: sum.input_bytes,
                    seconds: sum.seconds,
                    bandwidth_mb_s: 0.0,
                    mode: sum.modes.join("+"),
                    cpu_seconds: sum.cpu_seconds,
                    check_seconds: sum.check_seconds,
                    drop_log_bytes: sum.drop_log_bytes,
                    retried: sum.failed,
                };
                (side, report)
            })
            .collect();
        Ok(JobParts { parts, reports })
    }

    /// The host side: runs chunks until the queue is drained and no worker holds one, racing
    /// the workers' chunks it would finish first.
    fn host_chunks(
        &self,
        board: &Board,
        plan: &CompactionPlan,
        new_output: &mut NewOutput<'_>,
    ) -> Result<()> {
        loop {
            let (chunk, backup) = {
                let mut st = board.state.lock();
                loop {
                    match st.queue.take(HOST) {
                        Take::Chunk(chunk) => break (chunk, None),
                        Take::Done => return Ok(()),
                        // Checked under the lock, so no finish or failure is missed.
                        Take::Wait if self.control.is_cancelled() => return Err(Error::Cancelled),
                        Take::Wait => {
                            if let Some(b) = st.pick_race(&self.control) {
                                break (b.chunk.clone(), Some(b));
                            }
                            board.changed.wait_for(&mut st, CANCEL_POLL);
                        }
                    }
                }
            };
            let share = chunk_share(plan, &chunk, HOST);
            let (spec, _) = restrict(
                self.spec,
                &self.run_levels,
                share.lower.as_deref(),
                share.upper.as_deref(),
            );
            let Some(backup) = backup else {
                let (part, report) =
                    self.run_share_on_host(&spec, &share, &self.control, new_output)?;
                if let Some(part) = board.keep((HOST, HOST), &chunk, part, &report, report.seconds)
                {
                    // A chunk taken from the queue has no other copy; were one kept, this
                    // one would be surplus.
                    self.delete_parts(&[part]);
                }
                continue;
            };
            let addr = self.off.clients[backup.side - 1].addr();
            tracing::info!(worker = %addr, sub_tasks = ?chunk.range, "the host races a worker's chunk");
            self.off.metrics.lock().races += 1;
            match self.run_share_on_host(&spec, &share, &backup.control, new_output) {
                Ok((part, report)) => {
                    match board.keep((HOST, HOST), &chunk, part, &report, report.seconds) {
                        Some(lost) => self.delete_parts(&[lost]),
                        None => {
                            tracing::info!(worker = %addr, sub_tasks = ?chunk.range, "the host's copy finished first");
                            self.off.metrics.lock().races_won_by_host += 1;
                            let call = board.state.lock().in_flight.remove(&chunk.range.start);
                            if let Some(call) = call {
                                call.abort.abort();
                            }
                        }
                    }
                }
                // The worker's copy was kept first; the executor deleted the host's files.
                Err(Error::Cancelled) if !self.control.is_cancelled() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// A worker's driver: sends it chunks one after another until the queue has none for it,
    /// it fails, or the job stops.
    fn drive_worker(&self, board: &Board, plan: &CompactionPlan, side: usize) {
        let addr = self.off.clients[side - 1].addr().to_string();
        let mut next = self.send_chunk(board, plan, side);
        while let Some(mut call) = next.take() {
            let (answer, call_time) = wait(self.off, &addr, &mut call);
            let raced = match board.answered(&call.chunk) {
                Answered::Alone => None,
                Answered::Raced(control) => Some(control),
                Answered::Gone => {
                    // The host's copy was kept (and aborted this call), or the job stopped.
                    self.drop_call(call);
                    return;
                }
            };
            let result = match answer {
                Ok(r) => r,
                Err(e) => {
                    self.fail_chunk(board, side, call, raced.is_some(), &e);
                    return;
                }
            };
            // The worker is free: its next chunk goes out before this one is checked (a
            // raced worker is retired: there is none).
            next = self.send_chunk(board, plan, side);
            let checking = Instant::now();
            let numbers = call.numbers.clone();
            match self.check_worker_result(&addr, &call.share, numbers, result) {
                Ok((part, mut report)) => {
                    report.check_seconds = checking.elapsed().as_secs_f64();
                    let unhidden = if next.is_some() {
                        Duration::ZERO
                    } else {
                        checking.elapsed()
                    };
                    report.seconds = (call_time + unhidden).as_secs_f64();
                    // A raced chunk is the host's in the dispatcher's books.
                    let (ran, busy) = match &raced {
                        Some(_) => (HOST, 0.0),
                        None => (side, report.seconds),
                    };
                    match board.keep((side, ran), &call.chunk, part, &report, busy) {
                        Some(_) => self.delete_share_outputs(call.numbers.clone()),
                        None => {
                            if let Some(control) = raced {
                                tracing::info!(worker = %addr, sub_tasks = ?call.chunk.range, "the worker's copy finished first");
                                control.cancel();
                            }
                        }
                    }
                }
                Err(e) => {
                    self.off.metrics.lock().verify_failures += u64::from(e.is_verify_failure());
                    self.fail_chunk(board, side, call, raced.is_some(), &e);
                    if let Some(abandoned) = next.take() {
                        let why = "abandoned: the worker failed the chunk before it";
                        match board.answered(&abandoned.chunk) {
                            Answered::Gone => self.drop_call(abandoned),
                            a => {
                                let raced = matches!(a, Answered::Raced(_));
                                self.fail_chunk(board, side, abandoned, raced, &why);
                            }
                        }
                    }
                    return;
                }
            }
        }
    }

    /// Takes the next chunk for worker `side`, reserves its numbers and sends it; `None` when
    /// the queue has nothing for the worker (it does not wait for failed chunks: the host will
    /// take them).
    fn send_chunk(&self, board: &Board, plan: &CompactionPlan, side: usize) -> Option<Call> {
        let off = self.off;
        let chunk = match board.take(side) {
            Take::Chunk(c) => c,
            Take::Wait | Take::Done => return None,
        };
        let share = chunk_share(plan, &chunk, side);
        let numbers = self
            .env
            .reserve_numbers(numbers_needed(chunk.input_bytes, self.spec));
        let (spec, levels) = restrict(
            self.spec,
            &self.run_levels,
            share.lower.as_deref(),
            share.upper.as_deref(),
        );
        let task = self.task(&spec, &levels, &share, numbers.clone());
        let client = Arc::clone(&off.clients[side - 1]);
        let timeout = off.options.task_timeout;
        let handle = off.runtime.spawn(async move {
            let sent_at = Instant::now();
            let answer = match task {
                Ok(task) => client.execute(&task, timeout).await,
                Err(reason) => Err(ShareError::Failed {
                    addr: client.addr().to_string(),
                    code: tonic::Code::InvalidArgument,
                    message: format!("the task cannot be sent: {reason}"),
                }),
            };
            (answer, sent_at.elapsed())
        });
        let mut st = board.state.lock();
        if st.queue.is_stopped() {
            handle.abort();
        } else {
            let in_flight = InFlight {
                side,
                chunk: chunk.clone(),
                sent: Instant::now(),
                abort: handle.abort_handle(),
                backup: None,
            };
            st.in_flight.insert(chunk.range.start, in_flight);
        }
        Some(Call {
            chunk,
            share,
            numbers,
            handle,
        })
    }

    /// `call` failed: its files are deleted, its chunk goes back to the queue (unless the host
    /// took it over and runs it already), and the worker is retired for this self. Counted as a
    /// retry unless the job was stopping anyway.
    fn fail_chunk(
        &self,
        board: &Board,
        side: usize,
        call: Call,
        taken_over: bool,
        error: &dyn Display,
    ) {
        let chunk = call.chunk.clone();
        self.drop_call(call);
        let mut st = board.state.lock();
        let stopping = st.queue.is_stopped();
        if !taken_over {
            st.queue.fail(side, chunk);
        }
        if let Some(s) = st.sides.get_mut(side) {
            s.failed = true;
        }
        drop(st);
        board.changed.notify_all();
        if !stopping {
            let addr = self.off.clients[side - 1].addr();
            let then = if taken_over {
                "the host runs it already"
            } else {
                "it goes back to the queue"
            };
            tracing::warn!(worker = %addr, error = %error, "worker chunk failed; {then}");
            self.off.metrics.lock().retries += 1;
        }
    }

    /// Abandons `call`: aborts it if it still runs and deletes whatever its reserved numbers
    /// name (the worker deletes its own files too when the call goes away).
    fn drop_call(&self, call: Call) {
        call.handle.abort();
        self.delete_share_outputs(call.numbers);
    }
}

/// Waits for `call`'s answer; also returns the call's own duration (zero if it was aborted).
fn wait(
    off: &Offloader,
    addr: &str,
    call: &mut Call,
) -> (std::result::Result<TaskResult, ShareError>, Duration) {
    off.runtime.block_on(&mut call.handle).unwrap_or_else(|e| {
        let reason = if e.is_cancelled() {
            "the call was abandoned".to_string()
        } else {
            format!("the call task failed: {e}")
        };
        let failed = ShareError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        (Err(failed), Duration::ZERO)
    })
}

/// The bounds and bytes of `chunk`'s sub-tasks, as a share of `side`.
fn chunk_share(plan: &CompactionPlan, chunk: &Chunk, side: usize) -> Share {
    let first = plan.sub_tasks.get(chunk.range.start);
    let last = chunk
        .range
        .end
        .checked_sub(1)
        .and_then(|i| plan.sub_tasks.get(i));
    Share {
        side,
        lower: first.and_then(|t| t.lower.clone()),
        upper: last.and_then(|t| t.upper.clone()),
        input_bytes: chunk.input_bytes,
    }
}
