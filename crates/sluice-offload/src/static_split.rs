//! The static split (Co-KV): one contiguous share per side, cut by fixed weights. A worker's
//! share goes out in pieces ([`OffloadOptions::piece_bytes`](super::options::OffloadOptions)),
//! one after another, and each piece's outputs are checked as soon as it is answered, while
//! the worker runs the next and the host runs its own share: the host's check of every output
//! byte then waits only for the last piece, not for the whole share. A failed piece is re-run
//! on the host.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use sluice_exec::ExecOptions;
use sluice_rpc::proto::{CompactionTask, TaskResult};
use sluice_sst::Result;
use sluice_sst::compact::plan::plan;
use sluice_sst::compact::{CompactionSpec, NewOutput};

use super::ShareReport;
use super::client::{ShareError, WorkerClient};
use super::share::{Job, JobParts, Part, Share};
use super::split::{cut, pieces};
use super::task::numbers_needed;

/// A worker's answer to a piece, and how long the call took.
type Answer = (std::result::Result<TaskResult, ShareError>, Duration);

/// A worker piece's outputs and report once checked, or why it failed.
type Checked = std::result::Result<(Part, ShareReport), ShareError>;

/// One worker piece on its way: the piece, its reserved output numbers, and where its
/// answer will arrive.
type Sent<'s> = (&'s Share, Range<u64>, oneshot::Receiver<Answer>);

/// What [`Job::check_answers`] hands its caller, on the job's thread.
enum Step<'s> {
    /// First, while the workers' answers are checked as they come: the host's own share.
    Host,
    /// A worker piece's outcome, as soon as it is checked (boxed: the outcome is large, the
    /// host's turn is nothing).
    Answer(&'s Share, Range<u64>, Box<Checked>),
}

impl Job<'_> {
    /// The static split: the pieces of every worker share are sent first (each worker's in
    /// turn), the host runs its own share meanwhile, and the workers' answers are checked as
    /// they arrive ([`Job::check_answers`]); a failed worker piece is re-run on the host.
    pub(super) fn run_static(
        &self,
        weights: &[f64],
        new_output: &mut NewOutput<'_>,
    ) -> Result<JobParts> {
        let (off, spec) = (self.off, self.spec);
        if weights.len() != off.clients.len() + 1 {
            // A side without a worker would leave its key range unrun.
            return Err(sluice_sst::Error::InvalidArgument(format!(
                "a static split of {} sides for the host and {} worker(s)",
                weights.len(),
                off.clients.len()
            )));
        }
        let shares = plan_shares(spec, self.exec, weights, off.options.piece_bytes);

        // Every piece's numbers and task before any is sent: a task that cannot be built
        // fails the job before a worker has written anything.
        let (mut chains, mut sent) = (Vec::new(), Vec::new());
        for (i, client) in off.clients.iter().enumerate() {
            let (mut tasks, mut answers): (Vec<_>, Vec<Sent<'_>>) = (Vec::new(), Vec::new());
            for share in shares.iter().filter(|s| s.side == i + 1) {
                let numbers = self
                    .env
                    .reserve_numbers(numbers_needed(share.input_bytes, spec));
                let task = self
                    .task(spec, &self.run_levels, share, numbers.clone())
                    .map_err(sluice_sst::Error::InvalidArgument)?;
                let (answered, answer) = oneshot::channel();
                tasks.push((task, answered));
                answers.push((share, numbers, answer));
            }
            if !tasks.is_empty() {
                chains.push((Arc::clone(client), tasks));
                sent.push(answers);
            }
        }
        let timeout = off.options.task_timeout;
        let calls: Vec<AbortHandle> = chains
            .into_iter()
            .map(|(client, tasks)| {
                let call = off.runtime.spawn(send_in_turn(client, tasks, timeout));
                call.abort_handle()
            })
            .collect();
        tracing::debug!(job = self.id, shares = shares.len(), "static pieces sent");

        let host_share = shares.iter().find(|s| s.side == 0);
        let mut outputs: Vec<(usize, Part, ShareReport)> = Vec::new();
        let failed = self.check_answers(sent, &calls, &mut |step| match step {
            Step::Host => {
                if let Some(share) = host_share {
                    let (part, report) =
                        self.run_share_on_host(spec, share, &self.control, new_output)?;
                    tracing::debug!(seconds = report.seconds, "host share done");
                    outputs.push((0, part, report));
                }
                Ok(())
            }
            Step::Answer(share, numbers, checked) => match *checked {
                Ok((part, report)) => {
                    outputs.push((share.side, part, report));
                    Ok(())
                }
                Err(e) => {
                    let addr = off.clients[share.side - 1].addr();
                    tracing::warn!(
                        worker = %addr,
                        error = %e,
                        "worker piece failed; re-running it on the host"
                    );
                    if !never_sent(&e) {
                        self.delete_share_outputs(numbers);
                    }
                    let mut m = off.metrics.lock();
                    m.retries += 1;
                    m.verify_failures += u64::from(e.is_verify_failure());
                    drop(m);
                    let (part, mut report) =
                        self.run_share_on_host(spec, share, &self.control, new_output)?;
                    // The worker's piece, run on the host instead.
                    report.side = addr.to_string();
                    report.retried = true;
                    outputs.push((share.side, part, report));
                    Ok(())
                }
            },
        });
        if let Err(e) = failed {
            // The job fails: nothing of it is installed.
            let parts: Vec<Part> = outputs.into_iter().map(|(_, p, _)| p).collect();
            self.delete_parts(&parts);
            return Err(e);
        }
        // Key order: pieces tile the key range, so their lower bounds differ, and the first
        // one's is the only `None` (which sorts first).
        outputs.sort_by(|a, b| a.1.share.lower.cmp(&b.1.share.lower));
        let mut parts = Vec::with_capacity(outputs.len());
        let mut sides: Vec<(usize, SideReport)> = Vec::new();
        for (side, part, report) in outputs {
            parts.push(part);
            // A side's pieces are adjacent in key order: one report per side.
            match sides.last_mut() {
                Some((last, merged)) if *last == side => merged.fold(report),
                _ => sides.push((side, SideReport::new(report))),
            }
        }
        let reports = sides
            .into_iter()
            .map(|(side, r)| (side, r.report))
            .collect();
        Ok(JobParts { parts, reports })
    }

    /// Hands `take` [`Step::Host`] first, then every worker piece's outcome as soon as it is
    /// checked, all on this thread. One thread per worker waits for its pieces' answers in
    /// turn and checks each as it arrives (at most as many checks at once as the host has
    /// cores), so a piece answered while the host runs its own share, or while the worker
    /// runs the next piece, is checked meanwhile. If `take` fails, the calls still running
    /// are aborted, the outcomes still to come are discarded (their outputs deleted) and its
    /// error returned. The bound on checks is per job: offloaded compactions running at once
    /// check side by side.
    fn check_answers<'s>(
        &self,
        sent: Vec<Vec<Sent<'s>>>,
        calls: &[AbortHandle],
        take: &mut dyn FnMut(Step<'s>) -> Result<()>,
    ) -> Result<()> {
        let gate = Gate::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
        // Set when the job has failed: answers still to come are not checked, only deleted.
        let abandoned = AtomicBool::new(false);
        let abandon = || {
            abandoned.store(true, AtomicOrdering::SeqCst);
            calls.iter().for_each(AbortHandle::abort);
        };
        let (done, outcomes) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            // A panic in `take` (the host's own share, a re-run) unwinds through here before
            // the scope joins the check threads: stop the calls, so that joining does not
            // wait for every piece still to come. Once all outcomes are in, it changes nothing.
            let _stop_on_unwind = Defer(Some(abandon));
            for chain in sent {
                let (gate, abandoned, done) = (&gate, &abandoned, done.clone());
                scope.spawn(move || {
                    for (share, numbers, answer) in chain {
                        let addr = share
                            .side
                            .checked_sub(1)
                            .and_then(|i| self.off.clients.get(i))
                            .map_or_else(|| format!("#{}", share.side), |c| c.addr().to_string());
                        let reserved = numbers.clone();
                        // Every piece sends exactly one outcome, a panic in the check included.
                        let checked =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                self.wait_and_check(&addr, share, reserved, answer, gate, abandoned)
                            }))
                            .unwrap_or_else(|_| {
                                Err(ShareError::HostCheck {
                                    addr: addr.clone(),
                                    reason: "the check panicked".into(),
                                })
                            });
                        // Fails only if the receiver is gone (`take` panicked): the outputs are
                        // then the obsolete-file sweep's.
                        let _ = done.send((share, numbers, checked));
                    }
                });
            }
            drop(done);
            let mut outcome = take(Step::Host);
            if outcome.is_err() {
                abandon();
            }
            for (share, numbers, checked) in outcomes {
                match outcome {
                    Ok(()) => {
                        outcome = take(Step::Answer(share, numbers, Box::new(checked)));
                        if outcome.is_err() {
                            // Stop waiting for the other answers and checking them.
                            abandon();
                        }
                    }
                    // The job failed: what the other pieces produced is not wanted.
                    Err(_) => match checked {
                        Ok((part, _)) => self.delete_parts(&[part]),
                        Err(e) if never_sent(&e) => {}
                        Err(_) => self.delete_share_outputs(numbers),
                    },
                }
            }
            outcome
        })
    }

    /// Waits for one worker piece's answer and checks it, when `gate` lets it and the job has
    /// not been `abandoned`.
    fn wait_and_check(
        &self,
        addr: &str,
        share: &Share,
        numbers: Range<u64>,
        answer: oneshot::Receiver<Answer>,
        gate: &Gate,
        abandoned: &AtomicBool,
    ) -> Checked {
        let (answer, call_time) = self.off.runtime.block_on(answer).unwrap_or_else(|_| {
            let failed = ShareError::Unreachable {
                addr: addr.to_string(),
                reason: "the call ended without an answer".into(),
            };
            (Err(failed), Duration::ZERO)
        });
        let _turn = gate.enter();
        if abandoned.load(AtomicOrdering::SeqCst) {
            return Err(ShareError::HostCheck {
                addr: addr.to_string(),
                reason: "the job failed before this answer was checked".into(),
            });
        }
        let checking = Instant::now();
        let (part, mut report) =
            answer.and_then(|r| self.check_worker_result(addr, share, numbers, r))?;
        // The piece's time: the call, plus the host's checks of its files.
        report.check_seconds = checking.elapsed().as_secs_f64();
        report.seconds = call_time.as_secs_f64() + report.check_seconds;
        tracing::debug!(
            worker = %addr,
            call_seconds = call_time.as_secs_f64(),
            check_seconds = report.check_seconds,
            files = part.files.len(),
            "worker piece checked"
        );
        Ok((part, report))
    }
}

/// One side's report, folded from its pieces' in key order: bytes, CPU, checks and drop
/// logs add up; its seconds are its calls' (which run one after another) plus the last
/// piece's check (each earlier one ran while the worker ran the next piece); it was retried
/// if any piece was.
struct SideReport {
    report: ShareReport,
    /// The check of the last piece folded in.
    last_check: f64,
}

impl SideReport {
    fn new(first: ShareReport) -> SideReport {
        SideReport {
            last_check: first.check_seconds,
            report: first,
        }
    }

    fn fold(&mut self, next: ShareReport) {
        let r = &mut self.report;
        r.input_bytes += next.input_bytes;
        r.seconds = r.seconds - self.last_check + next.seconds;
        self.last_check = next.check_seconds;
        r.cpu_seconds += next.cpu_seconds;
        r.check_seconds += next.check_seconds;
        r.drop_log_bytes += next.drop_log_bytes;
        r.retried |= next.retried;
        if !r.mode.split('+').any(|m| m == next.mode) {
            let mut modes: Vec<&str> = r.mode.split('+').chain([next.mode.as_str()]).collect();
            modes.sort_unstable();
            r.mode = modes.join("+");
        }
    }
}

/// Sends one worker's pieces one after another, each answer to its own receiver as it
/// comes, with the call's own duration (not the wait behind earlier pieces). Once a call
/// fails (unreachable, timed out, an error status) the rest are not sent, since each would
/// wait out its own timeout: they are answered with [`ShareError::NotSent`] and re-run on
/// the host. A receiver gone means the job was abandoned: nothing more is sent.
async fn send_in_turn(
    client: Arc<WorkerClient>,
    pieces: Vec<(CompactionTask, oneshot::Sender<Answer>)>,
    timeout: Duration,
) {
    let mut failed: Option<String> = None;
    for (task, answered) in pieces {
        let answer = match &failed {
            Some(why) => {
                let skipped = ShareError::NotSent {
                    addr: client.addr().to_string(),
                    reason: why.clone(),
                };
                (Err(skipped), Duration::ZERO)
            }
            None => {
                let sent_at = Instant::now();
                let answer = client.execute(&task, timeout).await;
                if let Err(e) = &answer {
                    failed = Some(e.to_string());
                }
                (answer, sent_at.elapsed())
            }
        };
        if answered.send(answer).is_err() {
            return;
        }
    }
}

/// Whether a piece failed before it was sent: it has written nothing to delete.
fn never_sent(e: &ShareError) -> bool {
    matches!(e, ShareError::NotSent { .. })
}

/// Runs its closure when dropped.
struct Defer<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> Drop for Defer<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// At most `n` holders at once.
struct Gate {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A turn through a [`Gate`], given back when dropped.
struct Turn<'a>(&'a Gate);

impl Gate {
    fn new(n: usize) -> Gate {
        Gate {
            free: Mutex::new(n.max(1)),
            freed: Condvar::new(),
        }
    }

    fn enter(&self) -> Turn<'_> {
        let mut free = self.free.lock();
        while *free == 0 {
            self.freed.wait(&mut free);
        }
        *free -= 1;
        Turn(self)
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
    }
}

/// Cuts `spec`'s sub-tasks into one contiguous share per side by `weights`, dropping empty
/// shares, and every worker's share (side > 0) into pieces of about `piece_bytes`. In key
/// order.
fn plan_shares(
    spec: &CompactionSpec,
    exec: &ExecOptions,
    weights: &[f64],
    piece_bytes: u64,
) -> Vec<Share> {
    let plan = plan(spec, exec.sub_task_bytes);
    let sizes: Vec<u64> = plan.sub_tasks.iter().map(|t| t.input_bytes()).collect();
    let mut shares = Vec::new();
    for (side, range) in cut(&sizes, weights).into_iter().enumerate() {
        let cuts = match side {
            0 => vec![range].into_iter().filter(|r| !r.is_empty()).collect(),
            _ => pieces(&sizes, range, piece_bytes),
        };
        for r in cuts {
            let (Some(first), Some(last)) =
                (plan.sub_tasks.get(r.start), plan.sub_tasks.get(r.end - 1))
            else {
                continue;
            };
            shares.push(Share {
                side,
                lower: first.lower.clone(),
                upper: last.upper.clone(),
                input_bytes: sizes.get(r).map_or(0, |s| s.iter().sum()),
            });
        }
    }
    shares
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(bytes: u64, seconds: f64, check: f64, mode: &str, retried: bool) -> ShareReport {
        ShareReport {
            side: "w".into(),
            input_bytes: bytes,
            seconds,
            mode: mode.into(),
            cpu_seconds: seconds - check,
            check_seconds: check,
            drop_log_bytes: 10,
            retried,
            ..ShareReport::default()
        }
    }

    #[test]
    fn a_sides_pieces_fold_into_one_report() {
        let mut side = SideReport::new(piece(100, 1.0, 0.25, "sequential", false));
        side.fold(piece(50, 0.5, 0.125, "sequential", false));
        side.fold(piece(25, 2.0, 0.5, "pipelined", true));
        let r = side.report;
        assert_eq!(r.input_bytes, 175);
        // The calls (0.75 + 0.375 + 1.5) and the last check.
        assert_eq!(r.seconds, 0.75 + 0.375 + 1.5 + 0.5);
        assert_eq!(r.check_seconds, 0.875);
        assert_eq!(r.cpu_seconds, 2.625);
        assert_eq!(r.drop_log_bytes, 30);
        assert!(r.retried);
        assert_eq!(r.mode, "pipelined+sequential");
    }
}
