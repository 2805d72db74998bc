//! One data point: copy a data set, open it with an executor's settings, time one full manual
//! compaction, and take the compaction figures from the difference of two `Db::metrics()`.
//!
//! Bandwidth is the document's: compaction input bytes over compaction wall seconds, in MB/s
//! (10^6 bytes). The wall time is the engine's own measure of the compaction job (from planning
//! to the last output file), so opening the database and installing the result are excluded.

use std::path::Path;

use serde::Serialize;
use sluice::metrics::{JobMetrics, PipelineStage, StageSeconds};
use sluice::options::CompactionMode;
use sluice::{Db, Error, Result};
use sluice_bench::delta::compaction_delta;

use crate::dataset::Dataset;

/// How the compaction of a data point is executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ExecSettings {
    /// The executor (`executor` in JSON, by its `CompactionMode::name`).
    #[serde(rename = "executor", serialize_with = "serialize_mode")]
    pub mode: CompactionMode,
    /// Input bytes per sub-task.
    pub sub_task_bytes: u64,
    /// Compute threads (parallel executor).
    pub compute_threads: usize,
}

fn serialize_mode<S: serde::Serializer>(
    mode: &CompactionMode,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(mode.name())
}

/// The compaction figures of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Run {
    /// Bytes read from the L0 tables.
    pub input_bytes: u64,
    /// Bytes written to the output level's tables.
    pub output_bytes: u64,
    /// Wall seconds of the compaction job.
    pub seconds: f64,
    /// CPU seconds of the threads that ran it.
    pub cpu_seconds: f64,
    /// `input_bytes / seconds` in MB/s.
    pub bandwidth_mb_s: f64,
    /// Seconds per step S1..S7 (summed over threads, so in the multi-threaded executors the
    /// sum may exceed `seconds`).
    pub stage_profile: StageSeconds,
    /// Busy and idle seconds of each executor stage (thread), which show the bottleneck.
    pub stages: Vec<PipelineStage>,
}

impl Run {
    /// The stage busy for the largest share of the wall time, with that share (busy seconds
    /// per thread of the stage over `seconds`).
    pub fn busiest_stage(&self) -> Option<(&str, f64)> {
        self.stages
            .iter()
            .filter(|s| s.threads > 0 && self.seconds > 0.0)
            .map(|s| {
                let share = s.busy_seconds / s.threads as f64 / self.seconds;
                (s.stage.as_str(), share)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }
}

/// A data point measured `runs_mb_s.len()` times: the figures are those of the median run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measurement {
    /// The median run by bandwidth (for an even count, the lower of the two middle runs, so
    /// the reported figures all come from one real run).
    #[serde(flatten)]
    pub median: Run,
    /// Bandwidth of every run, in the order they ran.
    pub runs_mb_s: Vec<f64>,
}

impl Measurement {
    /// The median of `runs` (at least one).
    pub fn from_runs(runs: &[Run]) -> Result<Measurement> {
        let mut sorted = runs.to_vec();
        sorted.sort_by(|a, b| a.bandwidth_mb_s.total_cmp(&b.bandwidth_mb_s));
        let median = sorted
            .get((sorted.len().max(1) - 1) / 2)
            .cloned()
            .ok_or_else(|| Error::InvalidArgument("a data point needs at least one run".into()))?;
        Ok(Measurement {
            median,
            runs_mb_s: runs.iter().map(|r| r.bandwidth_mb_s).collect(),
        })
    }
}

/// Measures `exec` on `dataset` `repeat` times, each on a fresh copy in a new directory under
/// `scratch` that is removed afterwards (also on failure).
pub fn measure(
    dataset: &Dataset,
    exec: ExecSettings,
    repeat: usize,
    scratch: &Path,
) -> Result<Measurement> {
    let mut runs = Vec::with_capacity(repeat);
    for i in 0..repeat.max(1) {
        let dir = scratch.join(format!("run-{}-{i}", exec.mode.name()));
        let outcome = run_once(dataset, exec, &dir);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && dir.exists()
        {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a run directory");
        }
        runs.push(outcome?);
    }
    Measurement::from_runs(&runs)
}

fn run_once(dataset: &Dataset, exec: ExecSettings, dir: &Path) -> Result<Run> {
    let mut options = dataset.copy_to(dir)?;
    options.compaction.mode = exec.mode;
    options.compaction.sub_task_bytes = exec.sub_task_bytes;
    options.compaction.compaction_threads = exec.compute_threads;
    let db = Db::open(dir, options)?;
    let before = db.metrics().compaction;
    let compacted = db.compact_range(None, None);
    let after = db.metrics().compaction;
    db.close()?;
    compacted?;
    let run = run_between(&before, &after);
    if after.count.saturating_sub(before.count) != 1 || run.input_bytes == 0 || run.seconds <= 0.0 {
        return Err(Error::InvalidArgument(format!(
            "expected one merging compaction of {} L0 files, the engine reported {} ({} input \
             bytes in {} s)",
            dataset.l0_files,
            after.count.saturating_sub(before.count),
            run.input_bytes,
            run.seconds
        )));
    }
    Ok(run)
}

/// The figures of the compactions between two snapshots of the compaction totals.
fn run_between(before: &JobMetrics, after: &JobMetrics) -> Run {
    let d = compaction_delta(before, after);
    Run {
        input_bytes: d.input_bytes,
        output_bytes: d.output_bytes,
        seconds: d.seconds,
        cpu_seconds: (after.cpu_seconds - before.cpu_seconds).max(0.0),
        bandwidth_mb_s: d.bandwidth_mb_s,
        stage_profile: d.stage_profile,
        stages: d.stages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::DatasetSpec;

    fn run(bw: f64) -> Run {
        Run {
            bandwidth_mb_s: bw,
            input_bytes: 1,
            ..Run::default()
        }
    }

    #[test]
    fn median_is_a_real_run() {
        let m = Measurement::from_runs(&[run(3.0), run(1.0), run(2.0)]).unwrap();
        assert_eq!(m.median.bandwidth_mb_s, 2.0);
        assert_eq!(m.runs_mb_s, vec![3.0, 1.0, 2.0]);
        let m = Measurement::from_runs(&[run(4.0), run(1.0)]).unwrap();
        assert_eq!(m.median.bandwidth_mb_s, 1.0);
        assert!(Measurement::from_runs(&[]).is_err());
    }

    #[test]
    fn every_executor_compacts_a_copy_and_cleans_up() {
        let tmp = tempfile::tempdir().unwrap();
        let spec = DatasetSpec {
            entries: 8_000,
            key_size: 16,
            value_size: 100,
            compression: sluice::CompressionType::Lz4,
            seed: 1,
            data_dirs: 0,
            direct_io: false,
            memtable_bytes: None,
            output_table_bytes: None,
        };
        let ds = Dataset::load(&spec, &tmp.path().join("template")).unwrap();
        let scratch = tmp.path().join("scratch");
        std::fs::create_dir(&scratch).unwrap();
        let mut outputs = Vec::new();
        for mode in CompactionMode::ALL {
            let exec = ExecSettings {
                mode,
                sub_task_bytes: 64 << 10,
                compute_threads: 2,
            };
            let m = measure(&ds, exec, 2, &scratch).unwrap();
            assert_eq!(m.runs_mb_s.len(), 2);
            assert_eq!(m.median.input_bytes, ds.l0_bytes, "{mode}");
            assert!(m.median.bandwidth_mb_s > 0.0, "{mode}");
            assert!(m.median.stage_profile.total() > 0.0, "{mode}");
            let (stage, share) = m.median.busiest_stage().unwrap();
            assert!(
                !stage.is_empty() && share > 0.0,
                "{mode}: {:?}",
                m.median.stages
            );
            outputs.push(m.median.output_bytes);
        }
        // Same input, same cuts: every executor writes the same bytes.
        assert!(outputs.windows(2).all(|w| w[0] == w[1]), "{outputs:?}");
        assert_eq!(std::fs::read_dir(&scratch).unwrap().count(), 0);
    }
}
