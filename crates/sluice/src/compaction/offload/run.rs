//! Running one compaction split between the host and its workers.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use sluice_exec::decide::{decide, large_value_share};
use sluice_exec::{CompactionMode, ExecOptions, JobControl, execute_with};
use sluice_rpc::convert::{mode_from_wire, profile_from_wire, stats_from_wire};
use sluice_rpc::proto::TaskResult;
use sluice_sst::compact::plan::plan;
use sluice_sst::compact::{CompactionOutput, CompactionSpec, NewOutput, OutputFile};
use sluice_sst::profile::StageProfile;

use super::client::ShareError;
use super::options::Split;
use super::split::cut;
use super::task::{ShareTask, numbers_needed};
use super::verify::{ShareBounds, verify_outputs};
use super::{Offloader, ShareReport};
use crate::Result;
use crate::compaction::Compaction;
use crate::db::DbInner;
use crate::filename::{table_file_name, temp_file_name};

/// One side's contiguous run of sub-tasks.
struct Share {
    /// 0 for the host, `i + 1` for worker `i`.
    side: usize,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    input_bytes: u64,
}

/// A share's result, whoever produced it.
struct ShareOutput {
    files: Vec<OutputFile>,
    profile: StageProfile,
    stats: sluice_sst::compaction_iter::CompactionIterStats,
    /// Executor stage timings; only the host's are known in detail.
    stages: Vec<sluice_sst::profile::StageTiming>,
    report: ShareReport,
}

impl Offloader {
    /// Split weights for `sides` sides, host first.
    fn weights(&self) -> Vec<f64> {
        let workers = self.clients.len();
        match self.options.split {
            Split::Static { host_share } => std::iter::once(host_share)
                .chain(std::iter::repeat_n(
                    (1.0 - host_share) / workers.max(1) as f64,
                    workers,
                ))
                .collect(),
            Split::Dynamic => self.bandwidths.lock().weights(),
        }
    }

    /// The executor of the host's share: fixed, the engine's (`Auto`, already resolved into
    /// `exec`), or the host decision component's choice.
    fn host_exec(&self, spec: &CompactionSpec, exec: &ExecOptions) -> ExecOptions {
        let mode = match self.options.host_mode {
            Some(CompactionMode::Auto) => return *exec,
            Some(m) => m,
            None => {
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

impl DbInner {
    /// Runs `c` (already made into `spec`) split between the host and `off`'s workers.
    /// Output numbers reserved for workers are appended to `reserved`; the caller keeps them
    /// in `pending_outputs` until the outputs are installed.
    #[allow(
        clippy::too_many_arguments,
        reason = "the pieces of one compaction job"
    )]
    pub(crate) fn run_offloaded(
        &self,
        off: &Offloader,
        c: &Compaction,
        spec: &CompactionSpec,
        exec: &ExecOptions,
        control: Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
        reserved: &mut Vec<u64>,
    ) -> Result<CompactionOutput> {
        let start = Instant::now();
        let shares = self.plan_shares(off, spec, exec);
        let host_exec = off.host_exec(spec, exec);
        let run_levels: Vec<u32> = (0..spec.inputs.len())
            .map(|i| {
                let lower_runs = spec.inputs.len() - usize::from(!c.inputs[1].is_empty());
                (c.level + usize::from(i >= lower_runs)) as u32
            })
            .collect();
        let job_id = {
            let mut m = off.metrics.lock();
            m.jobs += 1;
            m.jobs
        };

        // Send every worker share first, so workers run while the host runs its own.
        let mut sent = Vec::new();
        for share in shares.iter().filter(|s| s.side > 0) {
            let numbers = self.reserve_numbers(numbers_needed(share.input_bytes, spec), reserved);
            let task = ShareTask {
                job_id,
                spec,
                run_levels: &run_levels,
                lower: share.lower.clone(),
                upper: share.upper.clone(),
                mode: off.options.worker_mode,
                exec,
                numbers: numbers.clone(),
            }
            .to_wire()
            .map_err(crate::Error::InvalidArgument)?;
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

        let mut outputs: Vec<(usize, ShareOutput)> = Vec::new();
        if let Some(share) = shares.iter().find(|s| s.side == 0) {
            match self.run_share_on_host(share, spec, &host_exec, &control, new_output) {
                Ok(out) => outputs.push((0, out)),
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

        for (share, numbers, handle) in sent {
            let addr = off.clients[share.side - 1].addr().to_string();
            let (answer, call_time) = off.runtime.block_on(handle).unwrap_or_else(|e| {
                let failed = ShareError::Unreachable {
                    addr: addr.clone(),
                    reason: format!("the call task failed: {e}"),
                };
                (Err(failed), std::time::Duration::ZERO)
            });
            let checking = Instant::now();
            let answer = answer
                .and_then(|r| self.check_worker_result(off, &addr, share, numbers.clone(), r));
            match answer {
                Ok(mut out) => {
                    // The share's time: the call, plus the host's checks of its files.
                    out.report.seconds = (call_time + checking.elapsed()).as_secs_f64();
                    outputs.push((share.side, out));
                }
                Err(e) => {
                    tracing::warn!(worker = %addr, error = %e, "worker share failed; re-running it on the host");
                    self.delete_share_outputs(numbers);
                    off.metrics.lock().retries += 1;
                    let mut out =
                        self.run_share_on_host(share, spec, &host_exec, &control, new_output)?;
                    out.report.retried = true;
                    outputs.push((share.side, out));
                }
            }
        }
        outputs.sort_by_key(|(side, _)| *side);
        Ok(off.assemble(outputs, start))
    }

    /// Cuts `spec`'s sub-tasks into shares by `off`'s split.
    fn plan_shares(
        &self,
        off: &Offloader,
        spec: &CompactionSpec,
        exec: &ExecOptions,
    ) -> Vec<Share> {
        let plan = plan(spec, exec.sub_task_bytes);
        let sizes: Vec<u64> = plan.sub_tasks.iter().map(|t| t.input_bytes()).collect();
        cut(&sizes, &off.weights())
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

    fn run_share_on_host(
        &self,
        share: &Share,
        spec: &CompactionSpec,
        exec: &ExecOptions,
        control: &Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<ShareOutput> {
        let started = Instant::now();
        let share_spec = CompactionSpec {
            lower: share.lower.clone(),
            upper: share.upper.clone(),
            ..spec.clone()
        };
        let out = execute_with(&share_spec, exec, Arc::clone(control), new_output)?;
        let seconds = started.elapsed().as_secs_f64();
        Ok(ShareOutput {
            report: ShareReport {
                side: "host".into(),
                input_bytes: share.input_bytes,
                seconds,
                bandwidth_mb_s: 0.0,
                mode: exec.mode.to_string(),
                cpu_seconds: out.profile.cpu_nanos as f64 / 1e9,
                retried: false,
            },
            files: out.files,
            profile: out.profile,
            stats: out.stats,
            stages: out.stages,
        })
    }

    /// Turns a worker's reply into checked outputs.
    fn check_worker_result(
        &self,
        off: &Offloader,
        addr: &str,
        share: &Share,
        numbers: Range<u64>,
        r: TaskResult,
    ) -> std::result::Result<ShareOutput, ShareError> {
        let bad = |reason: String| ShareError::Verify {
            addr: addr.to_string(),
            reason,
        };
        let bounds = ShareBounds {
            numbers,
            lower: share.lower.as_deref(),
            upper: share.upper.as_deref(),
        };
        let files = verify_outputs(
            &r.files,
            &bounds,
            self.table_cache.dirs(),
            off.options.verify_file_checksums,
        )
        .map_err(bad)?;
        let profile = r
            .profile
            .as_ref()
            .ok_or_else(|| bad("no profile".into()))
            .and_then(|p| profile_from_wire(p).map_err(|e| bad(e.to_string())))?;
        let mode = mode_from_wire(r.mode)
            .ok()
            .flatten()
            .map_or_else(|| "unknown".to_string(), |m| m.to_string());
        Ok(ShareOutput {
            report: ShareReport {
                side: addr.to_string(),
                input_bytes: share.input_bytes,
                seconds: 0.0,
                bandwidth_mb_s: 0.0,
                mode,
                cpu_seconds: profile.cpu_nanos as f64 / 1e9,
                retried: false,
            },
            stats: r.stats.as_ref().map(stats_from_wire).unwrap_or_default(),
            stages: Vec::new(),
            files,
            profile,
        })
    }

    /// Reserves `count` consecutive output numbers, adding them to `pending_outputs` (so no
    /// obsolete-file sweep deletes a worker's file before it is installed) and to `reserved`.
    fn reserve_numbers(&self, count: u64, reserved: &mut Vec<u64>) -> Range<u64> {
        let mut st = self.state.lock();
        let first = st.versions.new_file_number();
        st.pending_outputs.insert(first);
        reserved.push(first);
        for _ in 1..count {
            let n = st.versions.new_file_number();
            st.pending_outputs.insert(n);
            reserved.push(n);
        }
        first..first + count
    }

    /// Deletes whatever a failed worker share left: finished tables and temporary files with
    /// any of its reserved numbers, in every table directory. Best effort: anything missed is
    /// named by no version and is deleted when the database next opens.
    fn delete_share_outputs(&self, numbers: Range<u64>) {
        for dir in self.table_cache.dirs() {
            for n in numbers.clone() {
                for path in [table_file_name(dir, n), temp_file_name(dir, n)] {
                    match std::fs::remove_file(&path) {
                        Ok(()) => {
                            tracing::info!(file = %path.display(), "deleted a failed share's output")
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            tracing::warn!(file = %path.display(), error = %e, "cannot delete a failed share's output")
                        }
                    }
                }
            }
        }
    }
}

impl Offloader {
    /// Joins the sides' outputs (in side order, which is key order) into one compaction
    /// output, and records bandwidths and metrics.
    fn assemble(&self, outputs: Vec<(usize, ShareOutput)>, start: Instant) -> CompactionOutput {
        let mut files = Vec::new();
        let mut profile = StageProfile::default();
        let mut stats = sluice_sst::compaction_iter::CompactionIterStats::default();
        let mut reports = Vec::new();
        let mut stages = Vec::new();
        let mut bandwidths = self.bandwidths.lock();
        let mut metrics = self.metrics.lock();
        for (side, mut out) in outputs {
            files.append(&mut out.files);
            stages.append(&mut out.stages);
            for (sum, step) in profile.step_nanos.iter_mut().zip(out.profile.step_nanos) {
                *sum += step;
            }
            profile.bytes_read += out.profile.bytes_read;
            profile.bytes_written += out.profile.bytes_written;
            profile.cpu_nanos += out.profile.cpu_nanos;
            stats.entries_in += out.stats.entries_in;
            stats.entries_out += out.stats.entries_out;
            stats.shadowed_dropped += out.stats.shadowed_dropped;
            stats.tombstones_dropped += out.stats.tombstones_dropped;
            stats.input_key_bytes += out.stats.input_key_bytes;
            stats.input_value_bytes += out.stats.input_value_bytes;
            let r = &mut out.report;
            r.bandwidth_mb_s = if r.seconds > 0.0 {
                r.input_bytes as f64 / r.seconds / 1e6
            } else {
                0.0
            };
            // A re-run share measures the host, not the worker: it does not enter the
            // worker's bandwidth.
            if !r.retried {
                bandwidths.record(side, r.input_bytes, r.seconds);
            }
            if let Some(t) = metrics.sides.get_mut(side) {
                t.shares += 1;
                t.input_bytes += r.input_bytes;
                t.seconds += r.seconds;
                t.cpu_seconds += r.cpu_seconds;
                *t.modes.entry(r.mode.clone()).or_default() += 1;
            }
            reports.push(out.report);
        }
        profile.entries_in = stats.entries_in;
        profile.entries_out = stats.entries_out;
        profile.wall_nanos = start.elapsed().as_nanos() as u64;
        tracing::info!(shares = ?reports, "offloaded compaction done");
        metrics.last_shares = reports;
        CompactionOutput {
            files,
            profile,
            stats,
            stages,
        }
    }
}
