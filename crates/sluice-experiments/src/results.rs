//! What the PCP experiment produces: figures made of series of data points, and a summary.
//! This is the schema of `pcp.json`; the table and the charts are drawn from it alone.
//!
//! Units: bytes are bytes, MB/s is 10^6 bytes per second, seconds are wall-clock unless named
//! `cpu_seconds`.

use serde::Serialize;
use sluice::options::CompactionMode;

use crate::machine_limit::MachineLimit;
use crate::measure::{ExecSettings, Measurement};

/// One measured data point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Point {
    /// The figure's x value: value bytes (Fig. 8), entries (Fig. 10), sub-task bytes
    /// (Fig. 11), compute threads (Fig. 12a) or data directories (Fig. 12b).
    pub x: u64,
    /// Entries in the data set.
    pub entries: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Data directories the tables were spread over (0: the database directory only).
    pub data_dirs: usize,
    /// L0 runs the compaction merged.
    pub l0_files: usize,
    /// Executor, sub-task size and compute threads.
    #[serde(flatten)]
    pub exec: ExecSettings,
    /// The figures of the median run, and every run's bandwidth.
    #[serde(flatten)]
    pub measurement: Measurement,
}

impl Point {
    /// Compaction bandwidth of the median run, MB/s.
    pub fn bandwidth_mb_s(&self) -> f64 {
        self.measurement.median.bandwidth_mb_s
    }
}

/// One line (or bar group) of a figure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// The executor's name (`CompactionMode::name`).
    pub executor: String,
    /// True when the points are copied from another figure as a reference line (the SCP
    /// baseline of Fig. 12), not measured for this figure.
    pub reference: bool,
    /// Points in ascending `x`.
    pub points: Vec<Point>,
}

/// One figure of the document, reproduced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Figure {
    /// `fig8`, `fig10`, `fig11`, `fig12a`, `fig12b`.
    pub id: String,
    /// What it shows.
    pub title: String,
    /// What `x` is, with its unit.
    pub x_label: String,
    /// The series.
    pub series: Vec<Series>,
}

impl Figure {
    /// The distinct x values of the figure's points, ascending: one row or slot each.
    pub fn xs(&self) -> Vec<u64> {
        let mut xs: Vec<u64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .collect();
        xs.sort_unstable();
        xs.dedup();
        xs
    }

    /// The series of `executor` measured for this figure, if any.
    pub fn series_of(&self, executor: &str) -> Option<&Series> {
        self.series
            .iter()
            .find(|s| s.executor == executor && !s.reference)
    }
}

/// The parameters of the run, so `pcp.json` stands alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// `--num`: entries of the largest data set.
    pub num: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value outside Fig. 8.
    pub value_size: usize,
    /// Block compression.
    pub compression: String,
    /// Seed of key order and values.
    pub seed: u64,
    /// Runs per data point (the median is reported).
    pub repeat: usize,
    /// Flushes and compactions used direct I/O.
    pub direct_io: bool,
    /// Uncompressed data block bytes.
    pub block_size: usize,
    /// Compaction output file bytes.
    pub target_file_size: u64,
    /// Sub-task bytes outside Fig. 11.
    pub sub_task_bytes: u64,
    /// Compute threads of the parallel executor outside Fig. 12a.
    pub compute_threads: usize,
    /// Executors compared in Fig. 10 and the summary.
    pub executors: Vec<String>,
    /// CPUs available to the process.
    pub cpus: usize,
}

/// One executor on the largest data set of Fig. 10.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    /// `CompactionMode::name`.
    pub executor: String,
    /// The document's name for it.
    pub label: String,
    /// Entries of the data set.
    pub entries: u64,
    /// Compaction input bytes.
    pub input_bytes: u64,
    /// Compaction wall seconds.
    pub seconds: f64,
    /// CPU seconds of the compaction's threads.
    pub cpu_seconds: f64,
    /// Compaction bandwidth, MB/s.
    pub bandwidth_mb_s: f64,
    /// Bandwidth over SCP's (1.0 for SCP itself).
    pub ratio_to_scp: f64,
    /// The executor stage busy for the largest share of the wall time (the bottleneck of a
    /// pipeline), if the engine reported stages.
    pub busiest_stage: Option<String>,
    /// That stage's busy seconds per thread over the wall seconds.
    pub busiest_stage_share: Option<f64>,
}

/// Everything the experiment measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PcpReport {
    /// Always `pcp`.
    pub experiment: String,
    /// The document reproduced (`000`, Pipelined Compaction for the LSM-tree).
    pub document: String,
    /// The parameters.
    pub settings: Settings,
    /// Fig. 8, 10, 11, 12a, 12b.
    pub figures: Vec<Figure>,
    /// Per executor on the largest data set.
    pub summary: Vec<SummaryRow>,
    /// The best executor against the compute and disk ceilings, when SCP was measured.
    pub machine_limit: Option<MachineLimit>,
    /// Wall seconds of the whole experiment (loading included).
    pub elapsed_seconds: f64,
}

impl PcpReport {
    /// The figure `id`.
    pub fn figure(&self, id: &str) -> Option<&Figure> {
        self.figures.iter().find(|f| f.id == id)
    }

    /// Pretty-printed JSON (serialization of plain numbers and strings cannot fail; a
    /// non-finite float becomes `null`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The document's name for an executor: SCP, PCP, C-PPCP; other executors keep their own.
pub fn executor_label(mode: CompactionMode) -> String {
    match mode.name() {
        "sequential" => "SCP (sequential)".into(),
        "pipelined" => "PCP (pipelined)".into(),
        "parallel" => "C-PPCP (parallel)".into(),
        other => other.to_string(),
    }
}

/// The summary rows from the last point of each executor's series in `fig10`, with ratios to
/// the sequential executor (0 when it is missing or measured nothing).
pub fn summarize(fig10: &Figure) -> Vec<SummaryRow> {
    let last = |s: &Series| s.points.last().cloned();
    let scp = fig10
        .series_of(CompactionMode::Sequential.name())
        .and_then(last)
        .map_or(0.0, |p| p.bandwidth_mb_s());
    fig10
        .series
        .iter()
        .filter_map(|s| {
            let p = last(s)?;
            let run = &p.measurement.median;
            let busiest = run.busiest_stage();
            Some(SummaryRow {
                executor: s.executor.clone(),
                label: s.label.clone(),
                entries: p.entries,
                input_bytes: run.input_bytes,
                seconds: run.seconds,
                cpu_seconds: run.cpu_seconds,
                bandwidth_mb_s: run.bandwidth_mb_s,
                ratio_to_scp: if scp > 0.0 {
                    run.bandwidth_mb_s / scp
                } else {
                    0.0
                },
                busiest_stage: busiest.map(|b| b.0.to_string()),
                busiest_stage_share: busiest.map(|b| b.1),
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::measure::Run;

    /// A point of `executor` at `x` with bandwidth `bw` (for tests of the renderings).
    pub(crate) fn point(mode: CompactionMode, x: u64, bw: f64) -> Point {
        let mut median = Run {
            input_bytes: 10_000_000,
            output_bytes: 9_000_000,
            seconds: 10.0 / bw,
            cpu_seconds: 12.0 / bw,
            bandwidth_mb_s: bw,
            ..Run::default()
        };
        median.stage_profile.read = 0.1;
        median.stage_profile.merge = 0.3;
        median.stage_profile.compress = 0.4;
        median.stage_profile.write = 0.2;
        median.stages = vec![sluice::metrics::PipelineStage {
            stage: "compute".into(),
            threads: 2,
            busy_seconds: median.seconds,
            idle_seconds: 0.0,
        }];
        Point {
            x,
            entries: x,
            value_size: 100,
            data_dirs: 0,
            l0_files: 16,
            exec: ExecSettings {
                mode,
                sub_task_bytes: 512 << 10,
                compute_threads: 2,
            },
            measurement: Measurement {
                median,
                runs_mb_s: vec![bw],
            },
        }
    }

    pub(crate) fn series(mode: CompactionMode, points: &[(u64, f64)]) -> Series {
        Series {
            label: executor_label(mode),
            executor: mode.name().into(),
            reference: false,
            points: points.iter().map(|&(x, bw)| point(mode, x, bw)).collect(),
        }
    }

    #[test]
    fn summary_takes_the_largest_point_and_divides_by_scp() {
        let fig = Figure {
            id: "fig10".into(),
            title: String::new(),
            x_label: String::new(),
            series: vec![
                series(CompactionMode::Sequential, &[(1, 50.0), (2, 100.0)]),
                series(CompactionMode::Pipelined, &[(1, 60.0), (2, 150.0)]),
            ],
        };
        let rows = summarize(&fig);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].ratio_to_scp, 1.0);
        assert_eq!(rows[1].executor, "pipelined");
        assert_eq!(rows[1].entries, 2);
        assert!((rows[1].ratio_to_scp - 1.5).abs() < 1e-12);
        assert_eq!(rows[1].busiest_stage.as_deref(), Some("compute"));
        assert_eq!(rows[1].busiest_stage_share, Some(0.5));
        assert_eq!(
            executor_label(CompactionMode::Parallel),
            "C-PPCP (parallel)"
        );
    }

    #[test]
    fn json_flattens_points() {
        let v = serde_json::to_value(point(CompactionMode::Pipelined, 3, 80.0)).unwrap();
        assert_eq!(v["executor"], "pipelined");
        assert_eq!(v["bandwidth_mb_s"], 80.0);
        assert_eq!(v["stage_profile"]["merge"], 0.3);
        assert_eq!(v["runs_mb_s"][0], 80.0);
        assert_eq!(v["sub_task_bytes"], 512 << 10);
    }
}
