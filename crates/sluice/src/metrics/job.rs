//! Totals of flushes and compactions: counts, bytes, seconds, the seven steps' times and each
//! executor's share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_sst::profile::{StageProfile, StageTiming, Step};

/// Totals of one kind of background job.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct JobMetrics {
    /// Jobs completed.
    pub count: u64,
    /// Jobs that failed: their partial outputs were deleted and the tree left as it was.
    pub failed: u64,
    /// Input bytes (memtable bytes for flushes, table bytes for compactions).
    pub input_bytes: u64,
    /// Bytes written to table files.
    pub output_bytes: u64,
    /// Entries read.
    pub entries_in: u64,
    /// Entries written.
    pub entries_out: u64,
    /// Values the compaction filter removed (compactions only).
    pub filter_removed: u64,
    /// Values the compaction filter changed (compactions only).
    pub filter_changed: u64,
    /// Merge operands (and the values under them) combined into another written entry.
    pub merge_absorbed: u64,
    /// Versions dropped because a range tombstone covers them.
    pub range_covered: u64,
    /// Wall seconds, summed over jobs.
    pub seconds: f64,
    /// CPU seconds (user + system) of the threads that ran the jobs, from their thread CPU
    /// clocks. Flushes: the flush thread from taking the memtable until its table is
    /// installed (build, write, fsync, MANIFEST edit). Compactions: every thread the executor
    /// ran the job on, as the executor measured it. A job counts when it completes, so a job
    /// still running when metrics are read is not in this figure yet.
    pub cpu_seconds: f64,
    /// Seconds per step S1..S7, summed over jobs.
    pub stage_profile: StageSeconds,
    /// Busy and idle seconds per executor stage, summed over jobs (compactions only).
    pub pipeline: Vec<PipelineStage>,
    /// Jobs run by each executor mode (compactions only). Kept beside `mode_totals` (whose
    /// `jobs` it always equals) for the consumers that read only the counts.
    pub modes: BTreeMap<String, u64>,
    /// Jobs, input bytes and wall seconds of each executor mode (compactions only), so each
    /// executor's bandwidth is a measurement even when `auto` picked several. Summed over
    /// modes, `input_bytes` and `seconds` equal the job totals above: both are recorded from
    /// the same figures of the same compaction.
    pub mode_totals: BTreeMap<String, ModeTotals>,
}

/// The compactions one executor mode ran.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct ModeTotals {
    /// Compactions completed by this executor.
    pub jobs: u64,
    /// Input table bytes of those compactions.
    pub input_bytes: u64,
    /// Wall seconds of those compactions, summed (each compaction's
    /// [`StageProfile::wall_seconds`]).
    pub seconds: f64,
}

impl ModeTotals {
    /// Input bytes per wall second in MB/s (10^6 bytes); 0 when no time was measured.
    pub fn bandwidth_mb_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.input_bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// Busy and idle time of one executor stage, summed over jobs and threads.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct PipelineStage {
    /// Stage name (`read`, `compute`, `write`, `data decoder`, ...).
    pub stage: String,
    /// Thread runs of the stage.
    pub threads: u64,
    /// Seconds working.
    pub busy_seconds: f64,
    /// Seconds blocked on a queue.
    pub idle_seconds: f64,
}

impl JobMetrics {
    /// Input bytes per wall second in MB/s.
    pub fn bandwidth_mb_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.input_bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    /// Adds one job's profile.
    pub fn record(&mut self, input_bytes: u64, profile: &StageProfile) {
        self.count += 1;
        self.input_bytes += input_bytes;
        self.output_bytes += profile.bytes_written;
        self.entries_in += profile.entries_in;
        self.entries_out += profile.entries_out;
        self.seconds += profile.wall_seconds();
        self.cpu_seconds += profile.cpu_nanos as f64 / 1e9;
        self.stage_profile.add(profile);
    }

    /// Adds one compaction's executor mode and stage timings: the compaction counts under
    /// `mode` in `modes` and, with its `input_bytes` and `profile`'s wall seconds (the figures
    /// [`Self::record`] takes), in `mode_totals`.
    pub fn record_stages(
        &mut self,
        mode: &str,
        input_bytes: u64,
        profile: &StageProfile,
        stages: &[StageTiming],
    ) {
        *self.modes.entry(mode.to_string()).or_insert(0) += 1;
        let totals = self.mode_totals.entry(mode.to_string()).or_default();
        totals.jobs += 1;
        totals.input_bytes += input_bytes;
        totals.seconds += profile.wall_seconds();
        for s in stages {
            let slot = match self.pipeline.iter_mut().position(|p| p.stage == s.stage) {
                Some(i) => &mut self.pipeline[i],
                None => {
                    self.pipeline.push(PipelineStage {
                        stage: s.stage.clone(),
                        ..PipelineStage::default()
                    });
                    let last = self.pipeline.len() - 1;
                    &mut self.pipeline[last]
                }
            };
            slot.threads += u64::from(s.threads);
            slot.busy_seconds += s.busy_nanos as f64 / 1e9;
            slot.idle_seconds += s.idle_nanos as f64 / 1e9;
        }
    }
}

/// Seconds spent in each of the seven steps.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct StageSeconds {
    /// S1.
    pub read: f64,
    /// S2.
    pub checksum: f64,
    /// S3.
    pub decompress: f64,
    /// S4.
    pub merge: f64,
    /// S5.
    pub compress: f64,
    /// S6.
    pub rechecksum: f64,
    /// S7.
    pub write: f64,
}

impl StageSeconds {
    /// Adds a profile's step times.
    pub fn add(&mut self, p: &StageProfile) {
        self.read += p.step_seconds(Step::Read);
        self.checksum += p.step_seconds(Step::Checksum);
        self.decompress += p.step_seconds(Step::Decompress);
        self.merge += p.step_seconds(Step::Merge);
        self.compress += p.step_seconds(Step::Compress);
        self.rechecksum += p.step_seconds(Step::Rechecksum);
        self.write += p.step_seconds(Step::Write);
    }

    /// `(name, seconds)` for each step in order.
    pub fn entries(&self) -> [(&'static str, f64); 7] {
        [
            ("read", self.read),
            ("checksum", self.checksum),
            ("decompress", self.decompress),
            ("merge", self.merge),
            ("compress", self.compress),
            ("rechecksum", self.rechecksum),
            ("write", self.write),
        ]
    }

    /// Sum over steps.
    pub fn total(&self) -> f64 {
        self.entries().iter().map(|(_, s)| s).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(wall_millis: u64) -> StageProfile {
        StageProfile {
            wall_nanos: wall_millis * 1_000_000,
            ..StageProfile::default()
        }
    }

    fn stage(name: &str, busy_millis: u64) -> StageTiming {
        StageTiming {
            stage: name.into(),
            threads: 1,
            busy_nanos: busy_millis * 1_000_000,
            idle_nanos: 0,
        }
    }

    /// Records one compaction the way the database records an installed one.
    fn compaction(m: &mut JobMetrics, mode: &str, input_bytes: u64, wall_millis: u64) {
        let p = profile(wall_millis);
        m.record(input_bytes, &p);
        m.record_stages(mode, input_bytes, &p, &[stage("read", wall_millis / 2)]);
    }

    #[test]
    fn each_mode_keeps_its_own_bytes_and_seconds() {
        let mut m = JobMetrics::default();
        compaction(&mut m, "pipelined", 40_000_000, 500);
        compaction(&mut m, "sequential", 30_000_000, 1_000);
        compaction(&mut m, "pipelined", 20_000_000, 250);

        let pipelined = &m.mode_totals["pipelined"];
        assert_eq!(
            *pipelined,
            ModeTotals {
                jobs: 2,
                input_bytes: 60_000_000,
                seconds: 0.75,
            }
        );
        assert_eq!(pipelined.bandwidth_mb_s(), 80.0);
        assert_eq!(m.mode_totals["sequential"].bandwidth_mb_s(), 30.0);
        // The blended figure is neither executor's.
        assert!((m.bandwidth_mb_s() - 90.0 / 1.75).abs() < 1e-9);

        // `modes` is unchanged in meaning and agrees with the per-mode job counts.
        let jobs: BTreeMap<String, u64> = m
            .mode_totals
            .iter()
            .map(|(mode, t)| (mode.clone(), t.jobs))
            .collect();
        assert_eq!(m.modes, jobs);
        assert_eq!(m.modes["pipelined"], 2);

        // Summed over modes, the totals are the job totals.
        let bytes: u64 = m.mode_totals.values().map(|t| t.input_bytes).sum();
        let seconds: f64 = m.mode_totals.values().map(|t| t.seconds).sum();
        assert_eq!(bytes, m.input_bytes);
        assert!((seconds - m.seconds).abs() < 1e-12);
        assert_eq!(m.count, 3);

        assert_eq!(m.pipeline.len(), 1);
        assert_eq!(m.pipeline[0].threads, 3);
    }

    #[test]
    fn no_time_means_no_bandwidth() {
        let idle = ModeTotals {
            jobs: 1,
            input_bytes: 1_000,
            seconds: 0.0,
        };
        assert_eq!(idle.bandwidth_mb_s(), 0.0);
        assert_eq!(ModeTotals::default().bandwidth_mb_s(), 0.0);
    }
}
