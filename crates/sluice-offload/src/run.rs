//! Running one compaction split between the host and its workers: the entry point, the static
//! split (one contiguous share per side, Co-KV), and joining the parts into one output. The
//! dynamic split's chunks are [`super::dynamic`].

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::task::{AbortHandle, JoinHandle};

use sluice_exec::decide::{decide, large_value_share};
use sluice_exec::{CompactionMode, ExecOptions, Executor, JobControl};
use sluice_sst::compact::plan::plan;
use sluice_sst::compact::{CompactionOutput, CompactionSpec, NewOutput};
use sluice_sst::profile::StageProfile;

use super::client::ShareError;
use super::options::{SideMode, Split};
use super::share::{Job, JobParts, Part, Share};
use super::split::cut;
use super::task::numbers_needed;
use super::{Offloader, ShareReport};
use sluice::compaction::env::JobEnv;
use sluice::compaction::remote::{RemoteJob, Sharing};
use sluice_rpc::proto::TaskResult;
use sluice_sst::Result;

impl Offloader {
    /// Static split weights, host first: `host_share`, the rest equally to the workers.
    fn static_weights(&self, host_share: f64) -> Vec<f64> {
        let workers = self.clients.len();
        std::iter::once(host_share)
            .chain(std::iter::repeat_n(
                (1.0 - host_share) / workers.max(1) as f64,
                workers,
            ))
            .collect()
    }

    /// The executor of the host's parts: fixed, the engine's (`Auto`, already resolved into
    /// `exec`), or the host decision component's choice.
    fn host_exec(&self, spec: &CompactionSpec, exec: &ExecOptions) -> ExecOptions {
        let mode = match self.options.host_mode {
            SideMode::Fixed(CompactionMode::Auto) => return *exec,
            SideMode::Fixed(m) => m,
            SideMode::Decide => {
                let mut m = self.sampler.lock().sample();
                m.large_value_share =
                    large_value_share(&spec.inputs, self.decision.large_value_bytes);
                let d = decide(&self.decision, &m);
                tracing::info!(side = "host", decision = %d, "CoPro+ decision");
                self.decisions.record(&d);
                d.mode
            }
        };
        ExecOptions { mode, ..*exec }
    }
}

/// The offloaded split as an executor: one compaction run by the host and its workers, by the
/// offload options' split or (partitioned mode) statically over a [`Sharing`]'s sides. Its
/// host parts run with the local executor it was given, or CoPro+'s choice
/// (`OffloadOptions::host_mode`).
pub(crate) struct Offloaded<'a> {
    off: &'a Offloader,
    env: &'a JobEnv<'a>,
    /// The compaction's upper level, and whether its last input run is from the level below.
    level: usize,
    has_lower_run: bool,
    exec: ExecOptions,
    sharing: Option<Sharing>,
}

impl<'a> Offloaded<'a> {
    pub fn new(off: &'a Offloader, job: RemoteJob<'a>) -> Self {
        Offloaded {
            off,
            env: job.env,
            level: job.level,
            has_lower_run: job.has_lower_run,
            exec: job.exec,
            sharing: job.sharing,
        }
    }
}

impl Executor for Offloaded<'_> {
    /// The local executor's name: the stages recorded are those of the host's parts.
    fn name(&self) -> &'static str {
        self.exec.mode.name()
    }

    fn execute(
        &self,
        spec: &CompactionSpec,
        control: Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<CompactionOutput> {
        let (off, exec) = (self.off, &self.exec);
        let start = Instant::now();
        let lower_runs = spec.inputs.len() - usize::from(self.has_lower_run);
        let job = Job {
            off,
            env: self.env,
            id: {
                let mut m = off.metrics.lock();
                m.jobs += 1;
                m.jobs
            },
            spec,
            run_levels: (0..spec.inputs.len())
                .map(|i| (self.level + usize::from(i >= lower_runs)) as u32)
                .collect(),
            exec,
            host_exec: off.host_exec(spec, exec),
            control,
            output_root: self.sharing.as_ref().map(|p| p.output_root.clone()),
            inputs: super::verify::InputFacts::of(spec),
            nonce_key: super::task::nonce_key(),
        };
        let JobParts { parts, mut reports } = match (&self.sharing, off.options.split) {
            (Some(p), _) => job.run_static(&p.weights, new_output)?,
            (None, Split::Static { host_share }) => {
                let weights = off.static_weights(host_share);
                job.run_static(&weights, new_output)?
            }
            (None, Split::Dynamic) => job.run_dynamic(new_output)?,
        };
        let proof = super::prove::Proof {
            parts,
            reports: &mut reports,
        };
        let parts = job.prove_parts(proof, new_output)?;
        Ok(off.assemble(parts, reports, start))
    }
}

impl Job<'_> {
    /// The static split: one contiguous share per side, cut by `weights` (host first); every worker
    /// share is sent first, the host runs its own meanwhile, then the workers' replies are
    /// checked as they arrive (several at once, [`Job::check_answers`]), and a failed worker
    /// share is re-run on the host.
    fn run_static(&self, weights: &[f64], new_output: &mut NewOutput<'_>) -> Result<JobParts> {
        let (off, spec) = (self.off, self.spec);
        let shares = plan_shares(spec, self.exec, weights);

        // Send every worker share first, so workers run while the host runs its own.
        let mut sent = Vec::new();
        for share in shares.iter().filter(|s| s.side > 0) {
            let numbers = self
                .env
                .reserve_numbers(numbers_needed(share.input_bytes, spec));
            let task = self
                .task(spec, &self.run_levels, share, numbers.clone())
                .map_err(sluice_sst::Error::InvalidArgument)?;
            let client = Arc::clone(&off.clients[share.side - 1]);
            let timeout = off.options.task_timeout;
            // The call's own duration is timed inside the task: the host may still be busy
            // with its share when the answer arrives, and that wait is not the worker's time.
            let handle = off.runtime.spawn(async move {
                let sent_at = Instant::now();
                let answer = client.execute(&task, timeout).await;
                (answer, sent_at.elapsed())
            });
            sent.push((share, numbers, handle));
        }

        tracing::debug!(job = self.id, shares = shares.len(), "static shares sent");
        let mut outputs: Vec<(usize, Part, ShareReport)> = Vec::new();
        if let Some(share) = shares.iter().find(|s| s.side == 0) {
            match self.run_share_on_host(spec, share, &self.control, new_output) {
                Ok((part, report)) => {
                    tracing::debug!(seconds = report.seconds, "host share done");
                    outputs.push((0, part, report))
                }
                Err(e) => {
                    // Dropping a call cancels it; the worker deletes its files, and so do we
                    // (its renames may already have happened).
                    for (_, numbers, handle) in sent {
                        handle.abort();
                        self.delete_share_outputs(numbers);
                    }
                    return Err(e);
                }
            }
        }

        // Each answer as it arrives: a failed share is re-run on the host while the other
        // workers' answers are still being checked.
        let failed = self.check_answers(sent, &mut |share, numbers, answer| match answer {
            Ok((part, report)) => {
                outputs.push((share.side, part, report));
                Ok(())
            }
            Err(e) => {
                let addr = off.clients[share.side - 1].addr();
                tracing::warn!(worker = %addr, error = %e, "worker share failed; re-running it on the host");
                self.delete_share_outputs(numbers);
                let mut m = off.metrics.lock();
                m.retries += 1;
                m.verify_failures += u64::from(e.is_verify_failure());
                drop(m);
                let (part, mut report) =
                    self.run_share_on_host(spec, share, &self.control, new_output)?;
                report.retried = true;
                outputs.push((share.side, part, report));
                Ok(())
            }
        });
        if let Err(e) = failed {
            // The job fails: nothing of it is installed.
            let parts: Vec<Part> = outputs.into_iter().map(|(_, p, _)| p).collect();
            self.delete_parts(&parts);
            return Err(e);
        }
        // Side order is key order.
        outputs.sort_by_key(|(side, _, _)| *side);
        let (parts, reports) = outputs
            .into_iter()
            .map(|(side, part, report)| (part, (side, report)))
            .unzip();
        Ok(JobParts { parts, reports })
    }
}

/// A worker's answer to a share, and how long the call took.
type Answer = (std::result::Result<TaskResult, ShareError>, Duration);

/// A worker share's outputs and report once checked, or why it failed.
type Checked = std::result::Result<(Part, ShareReport), ShareError>;

impl Job<'_> {
    /// Waits for every worker share's answer and checks each as soon as it arrives, as many at
    /// once as the host has cores: a check reads every byte of the share's outputs, so a share
    /// that answers first is not kept waiting behind an earlier one, and two shares' checks need
    /// not queue on a host with cores to spare. Hands each outcome to `take` on this thread, in
    /// the order they finish. If `take` fails, the outcomes still to come are discarded (their
    /// outputs deleted) and its error returned. The bound is per job: offloaded compactions
    /// running at once check side by side.
    fn check_answers<'s>(
        &self,
        sent: Vec<(&'s Share, Range<u64>, JoinHandle<Answer>)>,
        take: &mut dyn FnMut(&'s Share, Range<u64>, Checked) -> Result<()>,
    ) -> Result<()> {
        let gate = Gate::new(std::thread::available_parallelism().map_or(1, |n| n.get()));
        // Set when the job has failed: answers still to come are not checked, only deleted.
        let abandoned = AtomicBool::new(false);
        let (done, outcomes) = std::sync::mpsc::channel();
        let calls: Vec<_> = sent.iter().map(|(_, _, h)| h.abort_handle()).collect();
        std::thread::scope(|scope| {
            for (share, numbers, handle) in sent {
                let (gate, abandoned, done) = (&gate, &abandoned, done.clone());
                scope.spawn(move || {
                    let reserved = numbers.clone();
                    let addr = share
                        .side
                        .checked_sub(1)
                        .and_then(|i| self.off.clients.get(i))
                        .map_or_else(|| format!("#{}", share.side), |c| c.addr().to_string());
                    // Every share sends exactly one outcome, a panic in the check included.
                    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        self.wait_and_check(&addr, share, reserved, handle, gate, abandoned)
                    }))
                    .unwrap_or_else(|_| {
                        Err(ShareError::HostCheck {
                            addr: addr.clone(),
                            reason: "the check panicked".into(),
                        })
                    });
                    // Fails only if the receiver is gone (`take` panicked): the outputs are then
                    // the obsolete-file sweep's.
                    let _ = done.send((share, numbers, checked));
                });
            }
            drop(done);
            let mut outcome = Ok(());
            for (share, numbers, checked) in outcomes {
                match outcome {
                    Ok(()) => {
                        outcome = take(share, numbers, checked);
                        if outcome.is_err() {
                            // Stop waiting for the other workers and checking their answers.
                            abandoned.store(true, AtomicOrdering::SeqCst);
                            calls.iter().for_each(AbortHandle::abort);
                        }
                    }
                    // The job failed: what the other shares produced is not wanted.
                    Err(_) => match checked {
                        Ok((part, _)) => self.delete_parts(&[part]),
                        Err(_) => self.delete_share_outputs(numbers),
                    },
                }
            }
            outcome
        })
    }

    /// Waits for one worker share's answer and checks it, when `gate` lets it and the job has
    /// not been `abandoned`.
    fn wait_and_check(
        &self,
        addr: &str,
        share: &Share,
        numbers: Range<u64>,
        handle: JoinHandle<Answer>,
        gate: &Gate,
        abandoned: &AtomicBool,
    ) -> Checked {
        let (answer, call_time) = self.off.runtime.block_on(handle).unwrap_or_else(|e| {
            let failed = ShareError::Unreachable {
                addr: addr.to_string(),
                reason: format!("the call task failed: {e}"),
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
        // The share's time: the call, plus the host's checks of its files.
        report.check_seconds = checking.elapsed().as_secs_f64();
        report.seconds = call_time.as_secs_f64() + report.check_seconds;
        tracing::debug!(
            worker = %addr,
            call_seconds = call_time.as_secs_f64(),
            check_seconds = report.check_seconds,
            files = part.files.len(),
            "worker share checked"
        );
        Ok((part, report))
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
/// shares.
fn plan_shares(spec: &CompactionSpec, exec: &ExecOptions, weights: &[f64]) -> Vec<Share> {
    let plan = plan(spec, exec.sub_task_bytes);
    let sizes: Vec<u64> = plan.sub_tasks.iter().map(|t| t.input_bytes()).collect();
    cut(&sizes, weights)
        .into_iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .filter_map(|(side, r)| {
            let first = plan.sub_tasks.get(r.start)?;
            let last = plan.sub_tasks.get(r.end - 1)?;
            Some(Share {
                side,
                lower: first.lower.clone(),
                upper: last.upper.clone(),
                input_bytes: sizes.get(r).map_or(0, |s| s.iter().sum()),
            })
        })
        .collect()
}

impl Offloader {
    /// Joins `parts` (in key order) into one compaction output, and records each side's
    /// report (one per side that took part) in the bandwidths and metrics.
    fn assemble(
        &self,
        parts: Vec<Part>,
        reports: Vec<(usize, ShareReport)>,
        start: Instant,
    ) -> CompactionOutput {
        let mut files = Vec::new();
        let mut profile = StageProfile::default();
        let mut stats = sluice_sst::compaction_iter::CompactionIterStats::default();
        let mut stages = Vec::new();
        for mut part in parts {
            files.append(&mut part.files);
            stages.append(&mut part.stages);
            // Saturating: a worker's profile is its word, and only reported.
            for (sum, step) in profile.step_nanos.iter_mut().zip(part.profile.step_nanos) {
                *sum = sum.saturating_add(step);
            }
            let p = &part.profile;
            profile.bytes_read = profile.bytes_read.saturating_add(p.bytes_read);
            profile.bytes_written = profile.bytes_written.saturating_add(p.bytes_written);
            profile.cpu_nanos = profile.cpu_nanos.saturating_add(p.cpu_nanos);
            stats += part.stats;
        }
        profile.entries_in = stats.entries_in;
        profile.entries_out = stats.entries_out;
        profile.wall_nanos = start.elapsed().as_nanos() as u64;

        let mut bandwidths = self.bandwidths.lock();
        let mut metrics = self.metrics.lock();
        let mut last = Vec::with_capacity(reports.len());
        for (side, mut r) in reports {
            r.bandwidth_mb_s = if r.seconds > 0.0 {
                r.input_bytes as f64 / r.seconds / 1e6
            } else {
                0.0
            };
            // A side that failed measured the host (or a timeout), not itself: its figure
            // does not enter its bandwidth.
            if !r.retried {
                bandwidths.record(side, r.input_bytes, r.seconds);
            }
            if let Some(t) = metrics.sides.get_mut(side) {
                t.shares += 1;
                t.retried += u64::from(r.retried);
                t.input_bytes += r.input_bytes;
                t.seconds += r.seconds;
                t.cpu_seconds += r.cpu_seconds;
                t.check_seconds += r.check_seconds;
                t.drop_log_bytes += r.drop_log_bytes;
                for mode in r.mode.split('+').filter(|m| !m.is_empty()) {
                    *t.modes.entry(mode.to_string()).or_default() += 1;
                }
            }
            last.push(r);
        }
        tracing::info!(shares = ?last, "offloaded compaction done");
        metrics.last_shares = last;
        CompactionOutput {
            files,
            profile,
            stats,
            // The job's own log would be of its workers' drops only: the host checked those.
            drops: Default::default(),
            stages,
        }
    }
}
