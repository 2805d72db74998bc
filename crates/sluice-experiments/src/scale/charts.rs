//! Charts of the scale experiment, as PNG and SVG, drawn from a [`ScaleReport`] with the shared
//! [`XyChart`] of [`sluice_bench::charts`]: cost against the number of keys, one line each for
//! the fill and the two compactions, so that how the cost grows reads off the slope.
//!
//! | file                          | content                                                 |
//! |-------------------------------|---------------------------------------------------------|
//! | `scale_seconds.{png,svg}`     | wall seconds vs keys, log-log, with a line of slope 1    |
//! | `scale_cpu_seconds.{png,svg}` | process CPU seconds vs keys, log-log, same reference     |
//! | `scale_bandwidth.{png,svg}`   | MB/s vs keys (log x): user data filled, L0 compacted    |
//!
//! On a log-log chart a cost proportional to the keys is a line parallel to the grey
//! reference (drawn through the smallest fill); a steeper line costs more per key as the data
//! grows.

use std::path::{Path, PathBuf};

use plotters::prelude::SeriesLabelPosition;
use plotters::style::RGBColor;
use sluice::Result;
use sluice_bench::charts::xy::{Scale, XyChart, XyLine};
use sluice_bench::charts::{PALETTE, executor_color, register_font, render, si_text};

use super::report::{CompactionRun, ScaleReport, SizeReport};

/// Writes every chart of `report` into `dir` (which must exist), as PNG and SVG. Returns the
/// paths written.
pub fn write_charts(report: &ScaleReport, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut written = Vec::new();
    for chart in [seconds(report), cpu_seconds(report), bandwidth(report)] {
        written.extend(render(&chart, dir)?);
    }
    Ok(written)
}

const FILL_COLOR: RGBColor = PALETTE[1];
const REFERENCE_COLOR: RGBColor = RGBColor(190, 190, 190);

fn setup(report: &ScaleReport) -> String {
    let s = &report.settings;
    format!(
        "{}+{} B, {}, {} I/O, {} CPUs",
        s.key_size,
        s.value_size,
        s.compression,
        if s.direct_io { "direct" } else { "buffered" },
        s.cpus
    )
}

/// The fill and the two compactions, each `cost` against the keys; points without the cost
/// are left out.
fn cost_lines(
    report: &ScaleReport,
    fill: impl Fn(&SizeReport) -> Option<f64>,
    compaction: impl Fn(&CompactionRun) -> Option<f64>,
) -> Vec<XyLine> {
    let line = |label: &str, color: RGBColor, cost: &dyn Fn(&SizeReport) -> Option<f64>| XyLine {
        label: label.into(),
        color,
        points: report
            .sizes
            .iter()
            .filter_map(|r| Some((r.entries as f64, cost(r)?)))
            .collect(),
    };
    vec![
        line("fillrandom (writes and wait)", FILL_COLOR, &fill),
        line(
            "compaction, sequential",
            executor_color("sequential"),
            &|r| compaction(&r.sequential),
        ),
        line("compaction, parallel", executor_color("parallel"), &|r| {
            compaction(&r.parallel)
        }),
    ]
}

/// A line of slope 1 through the first point of `line`: cost proportional to the keys.
fn proportional(line: &XyLine) -> Option<XyLine> {
    let &(x0, y0) = line.points.first()?;
    let last = line.points.last()?.0;
    Some(XyLine {
        label: "proportional to keys".into(),
        color: REFERENCE_COLOR,
        points: vec![(x0, y0), (last, y0 * last / x0)],
    })
}

fn log_log(stem: &'static str, caption: String, y_label: &str, mut lines: Vec<XyLine>) -> XyChart {
    if let Some(reference) = lines.first().and_then(proportional) {
        lines.insert(0, reference);
    }
    XyChart {
        stem,
        size: (1100, 700),
        caption,
        x_label: "keys written (log)".into(),
        y_label: y_label.into(),
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        x_format: si_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperLeft,
        lines,
    }
}

fn seconds(report: &ScaleReport) -> XyChart {
    log_log(
        "scale_seconds",
        format!("Seconds vs keys ({})", setup(report)),
        "wall seconds (log)",
        cost_lines(report, |r| Some(r.fill.seconds), |c| Some(c.seconds)),
    )
}

fn cpu_seconds(report: &ScaleReport) -> XyChart {
    log_log(
        "scale_cpu_seconds",
        format!("CPU seconds vs keys ({})", setup(report)),
        "process CPU seconds (log)",
        cost_lines(report, |r| r.fill.cpu_seconds, |c| c.cpu_seconds),
    )
}

fn bandwidth(report: &ScaleReport) -> XyChart {
    XyChart {
        stem: "scale_bandwidth",
        size: (1100, 700),
        caption: format!("Throughput vs keys ({})", setup(report)),
        x_label: "keys written (log)".into(),
        y_label: "MB/s (fill: user data; compaction: L0 input)".into(),
        x_scale: Scale::Log,
        y_scale: Scale::Linear,
        x_format: si_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperRight,
        lines: cost_lines(
            report,
            |r| Some(r.fill.mb_per_sec),
            |c| Some(c.bandwidth_mb_s),
        ),
    }
}
