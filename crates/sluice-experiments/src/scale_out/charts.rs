//! The scale-out chart, as PNG and SVG: `scale_out_throughput.{png,svg}`, input MB/s against
//! workers (log x), the model with a host of this machine's cores and of more, the
//! model run as this machine, and the measured points; a dashed-grey line of perfect scaling
//! from the one-worker prediction shows how far each falls short.

use std::path::{Path, PathBuf};

use plotters::prelude::SeriesLabelPosition;
use plotters::style::RGBColor;
use sluice::Result;
use sluice_bench::charts::xy::{Scale, XyChart, XyLine};
use sluice_bench::charts::{PALETTE, register_font, render, si_text};

use super::ScaleOutReport;
use super::model::Prediction;

/// Writes the chart of `report` into `dir` (which must exist); returns the paths written.
pub fn write_charts(report: &ScaleOutReport, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    Ok(render(&throughput(report), dir)?.to_vec())
}

const REFERENCE_COLOR: RGBColor = RGBColor(190, 190, 190);

fn line(label: String, color: RGBColor, predictions: &[Prediction]) -> XyLine {
    XyLine {
        label,
        color,
        points: predictions
            .iter()
            .map(|p| (p.workers as f64, p.mb_per_second))
            .collect(),
    }
}

fn throughput(report: &ScaleOutReport) -> XyChart {
    let mut lines = Vec::new();
    if let (Some(first), Some(last)) = (report.predicted.first(), report.predicted.last()) {
        let per_worker = first.mb_per_second / first.workers.max(1) as f64;
        lines.push(XyLine {
            label: "perfect scaling".into(),
            color: REFERENCE_COLOR,
            points: vec![
                (first.workers as f64, first.mb_per_second),
                (last.workers as f64, per_worker * last.workers as f64),
            ],
        });
    }
    lines.push(line(
        format!("model: a host of {} cores", report.cluster.check_threads),
        PALETTE[0],
        &report.predicted,
    ));
    lines.push(line(
        format!(
            "model: a host of {} cores",
            report.parallel_checks.check_threads
        ),
        PALETTE[1],
        &report.predicted_parallel_checks,
    ));
    let this_machine: Vec<Prediction> =
        report.checked.iter().map(|c| c.predicted.clone()).collect();
    lines.push(line(
        format!("model: this machine ({} cores)", report.cores),
        PALETTE[2],
        &this_machine,
    ));
    lines.push(XyLine {
        label: "measured".into(),
        color: PALETTE[3],
        points: report
            .checked
            .iter()
            .map(|c| (c.measured.workers as f64, c.measured.mb_per_second()))
            .collect(),
    });
    XyChart {
        stem: "scale_out_throughput",
        size: (1100, 700),
        caption: format!(
            "Compaction throughput vs workers sharing only the bucket (measured: {} MB, \
             predicted: {} MB)",
            report.host_only.input_bytes / 1_000_000,
            report.predicted_job.input_bytes / 1_000_000
        ),
        x_label: "workers (log)".into(),
        y_label: "input MB/s".into(),
        x_scale: Scale::Log,
        y_scale: Scale::Log,
        x_format: si_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperLeft,
        lines,
    }
}
