//! Charts of the CoPro experiment, as PNG and SVG, drawn from a [`CoproReport`] with the
//! shared line charts of [`sluice_bench::charts`] (which also registers the font). One line per
//! configuration over the value sizes; host only is dashed, a reference without workers.
//!
//! | file                                    | content (the CoPro paper's Fig. 9 panel)          |
//! |-----------------------------------------|------------------------------------------------|
//! | `copro_bandwidth_<workload>.{png,svg}`  | host and worker compaction bandwidth (e, f)    |
//! | `copro_cpu_<workload>.{png,svg}`        | host and worker process CPU use (g, h)         |
//! | `copro_throughput.{png,svg}`            | write throughput per workload (c, d)           |
//!
//! Runs with values in blob files get their own bandwidth and CPU charts
//! (`<workload>_blobs`) and their own throughput panels.

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;
use sluice::Result;
use sluice_bench::charts::lines::{Line, LineChart, Panel};
use sluice_bench::charts::{PALETTE, register_font, render};

use super::report::{CoproReport, RunReport, SideReport};
use super::{Configuration, Separation, Workload};
use crate::table::binary_size;

/// Writes every chart of `report` into `dir` (which must exist), as PNG and SVG. Returns the
/// paths written.
pub fn write_charts(report: &CoproReport, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut written = Vec::new();
    for chart in charts(report) {
        written.extend(render(&chart, dir)?);
    }
    Ok(written)
}

/// A configuration's colour, the same in every chart.
fn color(c: Configuration) -> RGBColor {
    match c {
        Configuration::HostOnly => RGBColor(80, 80, 80),
        Configuration::CoKv => PALETTE[1],
        Configuration::CoPro => PALETTE[0],
        Configuration::CoProPlus => PALETTE[2],
        Configuration::Dynamic => PALETTE[4],
    }
}

/// A workload and where its values are.
type Scenario = (Workload, Separation);

fn stems((w, s): Scenario) -> (&'static str, &'static str) {
    use Separation::{Blobs, Inline};
    match (w, s) {
        (Workload::FillRandom, Inline) => ("copro_bandwidth_fillrandom", "copro_cpu_fillrandom"),
        (Workload::YcsbA, Inline) => ("copro_bandwidth_ycsb_a", "copro_cpu_ycsb_a"),
        (Workload::FillRandom, Blobs) => (
            "copro_bandwidth_fillrandom_blobs",
            "copro_cpu_fillrandom_blobs",
        ),
        (Workload::YcsbA, Blobs) => ("copro_bandwidth_ycsb_a_blobs", "copro_cpu_ycsb_a_blobs"),
    }
}

/// `fillrandom`, or `fillrandom, values in blob files`.
fn scenario_title((w, s): Scenario) -> String {
    match s {
        Separation::Inline => w.name().into(),
        Separation::Blobs => format!("{}, values in blob files", w.name()),
    }
}

/// The charts of `report`: bandwidth and CPU for each workload measured, then throughput.
fn charts(report: &CoproReport) -> Vec<LineChart> {
    let (_, sizes) = report.axes();
    let setup = setup(report);
    let mut charts = Vec::new();
    let measured: Vec<Scenario> = Workload::ALL
        .into_iter()
        .flat_map(|w| Separation::ALL.map(|s| (w, s)))
        .filter(|&(w, s)| {
            report
                .runs
                .iter()
                .any(|r| r.workload == w.name() && r.separation == s)
        })
        .collect();
    for &w in &measured {
        let (bandwidth_stem, cpu_stem) = stems(w);
        let host = |r: &RunReport| Some(r.host.clone());
        let workers = |r: &RunReport| r.worker_totals();
        let bw = |s: &SideReport| Some(s.bandwidth_mb_s);
        let cpu = |s: &SideReport| s.process_cpu_percent;
        charts.push(LineChart {
            stem: bandwidth_stem,
            size: (1400, 640),
            caption: format!(
                "Compaction bandwidth per side, {} ({setup})",
                scenario_title(w)
            ),
            panels: vec![
                panel(report, w, &sizes, "(a) host", BANDWIDTH, host, bw),
                panel(
                    report,
                    w,
                    &sizes,
                    "(b) worker (mean of the workers)",
                    BANDWIDTH,
                    workers,
                    bw,
                ),
            ],
        });
        charts.push(LineChart {
            stem: cpu_stem,
            size: (1400, 640),
            caption: format!("CPU use per side, {} ({setup})", scenario_title(w)),
            panels: vec![
                panel(report, w, &sizes, "(a) host process", CPU, host, cpu),
                panel(
                    report,
                    w,
                    &sizes,
                    "(b) worker processes (sum)",
                    CPU,
                    workers,
                    cpu,
                ),
            ],
        });
    }
    charts.push(LineChart {
        stem: "copro_throughput",
        size: (1400, 640),
        caption: format!("Write throughput ({setup})"),
        panels: measured
            .iter()
            .enumerate()
            .map(|(i, &w)| {
                let title = format!(
                    "({}) {}",
                    char::from(b'a' + (i % 26) as u8),
                    scenario_title(w)
                );
                throughput_panel(report, w, &sizes, &title)
            })
            .collect(),
    });
    charts
}

const BANDWIDTH: &str = "compaction bandwidth (MB/s of share input)";
const CPU: &str = "process CPU (% of one core)";
const X_LABEL: &str = "value size (same data volume per run)";

/// What the captions say about the setup.
fn setup(report: &CoproReport) -> String {
    let s = &report.settings;
    format!(
        "{:.0} MB per run, {} worker(s), throttle {}, {}",
        s.data_bytes as f64 / 1e6,
        s.workers,
        s.throttle,
        if s.cpus.host.is_some() {
            "one core per side"
        } else {
            "unpinned"
        }
    )
}

/// A panel of one figure per configuration over the value sizes: `side` picks the side of a
/// run (none: no point), `figure` its value.
fn panel(
    report: &CoproReport,
    workload: Scenario,
    sizes: &[usize],
    title: &str,
    y_label: &str,
    side: impl Fn(&RunReport) -> Option<SideReport>,
    figure: impl Fn(&SideReport) -> Option<f64>,
) -> Panel {
    lines_panel(report, workload, sizes, title, y_label, |r| {
        figure(&side(r)?)
    })
}

fn throughput_panel(
    report: &CoproReport,
    workload: Scenario,
    sizes: &[usize],
    title: &str,
) -> Panel {
    lines_panel(
        report,
        workload,
        sizes,
        title,
        "throughput (MB/s of keys and values)",
        |r| Some(r.mb_per_sec),
    )
}

fn lines_panel(
    report: &CoproReport,
    workload: Scenario,
    sizes: &[usize],
    title: &str,
    y_label: &str,
    value: impl Fn(&RunReport) -> Option<f64>,
) -> Panel {
    let lines = report
        .settings
        .configurations
        .iter()
        .map(|&c| Line {
            label: c.label().into(),
            color: color(c),
            dashed: c == Configuration::HostOnly,
            points: sizes
                .iter()
                .enumerate()
                .filter_map(|(slot, &size)| {
                    let y = value(report.run((workload.0.name(), workload.1), size, c)?)?;
                    y.is_finite().then_some((slot, y))
                })
                .collect(),
        })
        .filter(|l| !l.points.is_empty())
        .collect();
    Panel {
        title: title.into(),
        x_label: X_LABEL.into(),
        y_label: y_label.into(),
        x_ticks: sizes.iter().map(|&s| binary_size(s as u64)).collect(),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copro::tests::sample_report;
    use sluice_bench::charts::testing::{distinct_colors, ink_pixels};

    #[test]
    fn every_chart_is_written_and_drawn() {
        let report = sample_report();
        let dir = tempfile::tempdir().unwrap();
        let written = write_charts(&report, dir.path()).unwrap();
        assert_eq!(written.len(), 2 * 5);
        for path in &written {
            assert!(path.exists(), "{}", path.display());
            if path.extension().is_some_and(|e| e == "png") {
                assert!(ink_pixels(path) > 10_000, "{}", path.display());
                assert!(distinct_colors(path) > 5, "{}", path.display());
            }
        }
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.contains(&"copro_bandwidth_ycsb_a.svg".to_string()),
            "{names:?}"
        );
    }

    #[test]
    fn host_only_has_no_worker_line() {
        let report = sample_report();
        let (_, sizes) = report.axes();
        let p = panel(
            &report,
            (Workload::FillRandom, Separation::Inline),
            &sizes,
            "",
            BANDWIDTH,
            RunReport::worker_totals,
            |s| Some(s.bandwidth_mb_s),
        );
        let labels: Vec<&str> = p.lines.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(labels, vec!["Co-KV", "CoPro", "CoPro+", "dynamic split"]);
        assert!(p.lines.iter().all(|l| l.points.len() == sizes.len()));
    }
}
