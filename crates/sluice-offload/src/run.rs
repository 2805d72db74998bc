//! Running one compaction split between the host and its workers: the entry point, and
//! joining the parts into one output. The static split is [`super::static_split`], the
//! dynamic split's chunks [`super::dynamic`].

use std::sync::Arc;
use std::time::Instant;

use sluice_exec::decide::{decide, large_value_share};
use sluice_exec::{CompactionMode, ExecOptions, Executor, JobControl};
use sluice_sst::compact::{CompactionOutput, CompactionSpec, NewOutput};
use sluice_sst::profile::StageProfile;

use super::options::{SideMode, Split};
use super::share::{Job, JobParts, Part};
use super::{Offloader, ShareReport};
use sluice::compaction::env::JobEnv;
use sluice::compaction::remote::{RemoteJob, Sharing};
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
    /// The compaction's upper and output levels, and whether its last input run is from the
    /// output level.
    level: usize,
    output_level: usize,
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
            output_level: job.output_level,
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
                .map(|i| match i >= lower_runs {
                    true => self.output_level as u32,
                    false => self.level as u32,
                })
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
