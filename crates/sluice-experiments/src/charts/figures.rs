//! From the report's figures to charts: which series go on which panel, axis texts and units.

use sluice_bench::charts::bars::{Bar, Breakdown};
use sluice_bench::charts::lines::{Line, LineChart, Panel};
use sluice_bench::charts::{Chart, DrawResult, executor_color};

use crate::results::{Figure, PcpReport};
use crate::table::binary_size;

/// The four charts of a report (a figure missing from the report gives empty panels).
pub(super) fn charts(report: &PcpReport) -> Vec<AnyChart> {
    vec![
        AnyChart::Bars(fig8(report)),
        AnyChart::Lines(fig10(report)),
        AnyChart::Lines(fig11(report)),
        AnyChart::Lines(fig12(report)),
    ]
}

/// The two kinds of chart, so one list can hold them.
pub(super) enum AnyChart {
    Bars(Breakdown),
    Lines(LineChart),
}

impl Chart for AnyChart {
    fn stem(&self) -> &str {
        match self {
            AnyChart::Bars(c) => c.stem(),
            AnyChart::Lines(c) => c.stem(),
        }
    }

    fn size(&self) -> (u32, u32) {
        match self {
            AnyChart::Bars(c) => c.size(),
            AnyChart::Lines(c) => c.size(),
        }
    }

    fn draw<DB: plotters::prelude::DrawingBackend>(
        &self,
        root: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
    ) -> DrawResult {
        match self {
            AnyChart::Bars(c) => c.draw(root),
            AnyChart::Lines(c) => c.draw(root),
        }
    }
}

/// `250k`, `1M`, `1.5M`: an entry count as a tick.
fn count_text(n: u64) -> String {
    let trim = |v: f64, unit: &str| {
        let s = format!("{v:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s}{unit}")
    };
    match n {
        n if n >= 1_000_000 => trim(n as f64 / 1e6, "M"),
        n if n >= 1_000 => trim(n as f64 / 1e3, "k"),
        n => n.to_string(),
    }
}

/// The common part of every caption: what the data looks like and on what machine.
fn setup(report: &PcpReport) -> String {
    let s = &report.settings;
    format!("{} B keys, {}, {} CPUs", s.key_size, s.compression, s.cpus)
}

fn empty_figure(id: &str) -> Figure {
    Figure {
        id: id.into(),
        title: String::new(),
        x_label: String::new(),
        series: Vec::new(),
    }
}

fn figure<'a>(report: &'a PcpReport, id: &str) -> std::borrow::Cow<'a, Figure> {
    report.figure(id).map_or_else(
        || std::borrow::Cow::Owned(empty_figure(id)),
        std::borrow::Cow::Borrowed,
    )
}

fn fig8(report: &PcpReport) -> Breakdown {
    let fig = figure(report, "fig8");
    let bars = fig
        .series
        .iter()
        .flat_map(|s| &s.points)
        .map(|p| {
            let stages = p.measurement.median.stage_profile;
            let total = stages.total();
            let mut shares = [0.0; 7];
            for (share, (_, secs)) in shares.iter_mut().zip(stages.entries()) {
                *share = if total > 0.0 {
                    secs / total * 100.0
                } else {
                    0.0
                };
            }
            Bar {
                label: format!("{} B", p.x),
                notes: vec![
                    format!("{} entries", count_text(p.entries)),
                    format!("{:.0} MB/s", p.bandwidth_mb_s()),
                ],
                shares,
            }
        })
        .collect();
    Breakdown {
        stem: "fig8_breakdown",
        caption: format!(
            "Fig. 8: SCP compaction time per step vs value size ({})",
            setup(report)
        ),
        x_label: "value size (bytes); every data set holds the same bytes".into(),
        bars,
    }
}

/// A line for each series of `fig`, each point in the slot of its x among `xs`.
fn lines_of(fig: &Figure, xs: &[u64]) -> Vec<Line> {
    fig.series
        .iter()
        .map(|s| Line {
            label: s.label.clone(),
            color: executor_color(&s.executor),
            dashed: s.reference,
            points: s
                .points
                .iter()
                .filter_map(|p| Some((xs.iter().position(|&x| x == p.x)?, p.bandwidth_mb_s())))
                .collect(),
        })
        .collect()
}

const BANDWIDTH: &str = "compaction bandwidth (MB/s, input bytes)";

fn fig10(report: &PcpReport) -> LineChart {
    let fig = figure(report, "fig10");
    let xs = fig.xs();
    let bandwidth = Panel {
        title: "(a) bandwidth".into(),
        x_label: "data set (entries, all in L0 before the compaction; log scale)".into(),
        y_label: BANDWIDTH.into(),
        x_ticks: xs.iter().map(|&x| count_text(x)).collect(),
        lines: lines_of(&fig, &xs),
    };
    // Speedup: each executor's bandwidth over SCP's at the same data set.
    let scp: Vec<Option<f64>> = xs
        .iter()
        .map(|&x| {
            let p = fig
                .series_of("sequential")?
                .points
                .iter()
                .find(|p| p.x == x)?;
            Some(p.bandwidth_mb_s()).filter(|&b| b > 0.0)
        })
        .collect();
    let speedup_lines = bandwidth
        .lines
        .iter()
        .map(|l| Line {
            label: l.label.clone(),
            color: l.color,
            dashed: l.dashed,
            points: l
                .points
                .iter()
                .filter_map(|&(slot, y)| Some((slot, y / (*scp.get(slot)?)?)))
                .collect(),
        })
        .collect();
    let speedup = Panel {
        title: "(b) speedup over SCP".into(),
        x_label: bandwidth.x_label.clone(),
        y_label: "bandwidth / SCP bandwidth (x)".into(),
        x_ticks: bandwidth.x_ticks.clone(),
        lines: speedup_lines,
    };
    LineChart {
        stem: "fig10_bandwidth_vs_size",
        size: (1400, 620),
        caption: format!(
            "Fig. 10: compaction bandwidth of each executor as the data set grows ({} B values, {})",
            report.settings.value_size,
            setup(report)
        ),
        panels: vec![bandwidth, speedup],
    }
}

fn fig11(report: &PcpReport) -> LineChart {
    let fig = figure(report, "fig11");
    let xs = fig.xs();
    let entries = fig
        .series
        .first()
        .and_then(|s| s.points.first())
        .map_or(0, |p| p.entries);
    LineChart {
        stem: "fig11_subtask_size",
        size: (1000, 620),
        caption: format!(
            "Fig. 11: bandwidth vs sub-task size ({} entries of {} B values, {})",
            count_text(entries),
            report.settings.value_size,
            setup(report)
        ),
        panels: vec![Panel {
            title: String::new(),
            x_label: "sub-task size (input bytes per sub-task; log scale)".into(),
            y_label: BANDWIDTH.into(),
            x_ticks: xs.iter().map(|&x| binary_size(x)).collect(),
            lines: lines_of(&fig, &xs),
        }],
    }
}

fn fig12(report: &PcpReport) -> LineChart {
    let panel = |id: &str, title: &str, x_label: &str| {
        let fig = figure(report, id);
        let xs = fig.xs();
        Panel {
            title: title.into(),
            x_label: x_label.into(),
            y_label: BANDWIDTH.into(),
            x_ticks: xs.iter().map(|x| x.to_string()).collect(),
            lines: lines_of(&fig, &xs),
        }
    };
    LineChart {
        stem: "fig12_threads_dirs",
        size: (1400, 620),
        caption: format!(
            "Fig. 12: parallel pipelined compaction ({} entries of {} B values, {})",
            count_text(report.settings.num),
            report.settings.value_size,
            setup(report)
        ),
        panels: vec![
            panel(
                "fig12a",
                "(a) C-PPCP: compute threads",
                "compute threads of the parallel executor",
            ),
            panel(
                "fig12b",
                "(b) S-PPCP: data directories",
                "data directories (all on one device here)",
            ),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_ticks() {
        assert_eq!(count_text(250_000), "250k");
        assert_eq!(count_text(1_000_000), "1M");
        assert_eq!(count_text(1_450_000), "1.45M");
        assert_eq!(count_text(5_000), "5k");
        assert_eq!(count_text(999), "999");
    }
}
