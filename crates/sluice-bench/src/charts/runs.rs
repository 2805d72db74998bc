//! The charts of a `sluice bench` run (one entry per benchmark) or a `sluice ycsb` run (one
//! entry per phase), written by `--out DIR`:
//!
//! | file                          | content                                                  |
//! |-------------------------------|----------------------------------------------------------|
//! | `throughput.{png,svg}`        | ops/s in each second, one line per benchmark or phase   |
//! |                               | (the last, partial second rated over its length, as the |
//! |                               | YCSB table prints it: `crate::timeline::slices`)        |
//! | `latency_cdf.{png,svg}`       | share of operations at or below a latency (log x), one  |
//! |                               | line per benchmark, or per phase and operation type     |
//! | `compaction_bandwidth.{png,svg}` | MB/s of input bytes per benchmark or phase that      |
//! |                               | compacted, coloured by executor (only if one did)        |
//! | `stage_profile.{png,svg}`     | stacked S1..S7 shares of compaction time, same entries   |
//! | `compaction_executors.{png,svg}` | with compaction offload only: MB/s of each side (host, |
//! |                               | each worker) per entry, coloured by its executor         |
//! | `compaction_executors_local.{png,svg}` | without offload: MB/s of each executor that     |
//! |                               | compacted, per entry, coloured by executor (`executors`) |
//!
//! Benchmarks with a single operation (compact) have no throughput line or CDF: one point
//! says nothing about a distribution.

mod executors;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use plotters::prelude::SeriesLabelPosition;
use sluice::{IoContext, Result};

use super::bars::{Bar, Breakdown};
use super::columns::{Column, Columns};
use super::xy::{Scale, XyChart, XyLine};
use super::{executor_color, executor_legend, register_font, render, series_color, si_text};
use crate::delta::MetricsDelta;
use crate::histogram::LatencyHistogram;
use crate::report::BenchResult;
use crate::timeline::rates;
use crate::ycsb::YcsbReport;

/// What the charts need of one benchmark or phase.
struct Entry<'a> {
    /// Legend and tick text: the benchmark's name or the phase.
    label: String,
    /// Wall seconds.
    seconds: f64,
    /// Operations completed in each second.
    per_second: &'a [u64],
    /// Latency CDF lines: legend text and histogram.
    latencies: Vec<(String, &'a LatencyHistogram)>,
    /// What the engine did.
    engine: &'a MetricsDelta,
}

/// Everything the charts of one run show, with the words that describe it.
struct Run<'a> {
    /// Caption suffix: the workload's parameters.
    setup: String,
    /// What an entry is: `benchmark` or `phase`.
    entry_kind: &'static str,
    entries: Vec<Entry<'a>>,
}

/// Writes the charts of a `sluice bench` run into `dir`, creating it if needed. Returns the
/// paths written.
pub fn write_bench_charts(results: &[BenchResult], dir: &Path) -> Result<Vec<PathBuf>> {
    let setup = results.first().map_or_else(String::new, |r| {
        let o = &r.options;
        format!(
            "{} keys of {} B, {} B values, {}, {} thread{}",
            si_text(o.num as f64),
            o.key_size,
            o.value_size,
            o.compression,
            r.threads,
            if r.threads == 1 { "" } else { "s" }
        )
    });
    let entries = results
        .iter()
        .map(|r| Entry {
            label: r.name.clone(),
            seconds: r.seconds,
            per_second: if r.ops > 1 { &r.per_second } else { &[] },
            latencies: if r.ops > 1 {
                vec![(r.name.clone(), &r.latency)]
            } else {
                Vec::new()
            },
            engine: &r.engine,
        })
        .collect();
    write_run(
        &Run {
            setup,
            entry_kind: "benchmark",
            entries,
        },
        dir,
    )
}

/// Writes the charts of a `sluice ycsb` run into `dir`, creating it if needed. Returns the
/// paths written.
pub fn write_ycsb_charts(report: &YcsbReport, dir: &Path) -> Result<Vec<PathBuf>> {
    let setup = format!(
        "YCSB {} ({}), {} records, {} operations, {} B values, {} thread{}",
        report.workload.to_string().to_uppercase(),
        report.distribution,
        si_text(report.records as f64),
        si_text(report.operations as f64),
        report.value_size,
        report.threads,
        if report.threads == 1 { "" } else { "s" }
    );
    let entries = [&report.load, &report.run]
        .into_iter()
        .flatten()
        .map(|p| Entry {
            label: p.phase.clone(),
            seconds: p.seconds,
            per_second: &p.per_second,
            latencies: p
                .operations
                .iter()
                .map(|o| (format!("{} {}", p.phase, o.op.name()), &o.histogram))
                .collect(),
            engine: &p.engine,
        })
        .collect();
    write_run(
        &Run {
            setup,
            entry_kind: "phase",
            entries,
        },
        dir,
    )
}

fn write_run(run: &Run<'_>, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    std::fs::create_dir_all(dir).with_path(dir)?;
    let mut written = Vec::new();
    written.extend(render(&throughput(run), dir)?);
    written.extend(render(&latency_cdf(run), dir)?);
    if run.entries.iter().any(|e| e.engine.compaction.count > 0) {
        written.extend(render(&bandwidth(run), dir)?);
        written.extend(render(&stage_profile(run), dir)?);
    }
    if let Some(chart) = executors::per_side(run) {
        written.extend(render(&chart, dir)?);
    }
    if let Some(chart) = executors::per_mode(run) {
        written.extend(render(&chart, dir)?);
    }
    Ok(written)
}

fn throughput(run: &Run<'_>) -> XyChart {
    XyChart {
        stem: "throughput",
        size: (1200, 650),
        caption: format!("Throughput over time ({})", run.setup),
        x_label: format!(
            "seconds since the {} started (a last part-second: its ops over its length)",
            run.entry_kind
        ),
        y_label: "operations completed per second (ops/s)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_format: seconds_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperRight,
        lines: run
            .entries
            .iter()
            .filter(|e| !e.per_second.is_empty())
            .enumerate()
            .map(|(i, e)| XyLine {
                label: e.label.clone(),
                color: series_color(i),
                points: rates(e.per_second, e.seconds),
            })
            .collect(),
    }
}

fn latency_cdf(run: &Run<'_>) -> XyChart {
    XyChart {
        stem: "latency_cdf",
        size: (1200, 650),
        caption: format!("Latency CDF ({})", run.setup),
        x_label: "latency of one operation (log scale)".into(),
        y_label: "operations at or below (%)".into(),
        x_scale: Scale::Log,
        y_scale: Scale::Linear,
        x_format: micros_text,
        y_format: |y| format!("{y:.0}"),
        y_range: Some((0.0, 100.0)),
        // A CDF leaves the lower right empty: it is at 100% on the right.
        legend: SeriesLabelPosition::LowerRight,
        lines: run
            .entries
            .iter()
            .flat_map(|e| &e.latencies)
            .filter(|(_, h)| !h.is_empty())
            .enumerate()
            .map(|(i, (label, h))| XyLine {
                label: label.clone(),
                color: series_color(i),
                points: h.cdf(),
            })
            .collect(),
    }
}

/// The executor of an entry's compactions, or `mixed` when several ran.
fn executor_of(engine: &MetricsDelta) -> String {
    let modes = &engine.compaction.modes;
    match (modes.len(), modes.keys().next()) {
        (1, Some(mode)) => mode.clone(),
        (0, _) => "unknown".into(),
        _ => "mixed".into(),
    }
}

fn compacted<'a, 'b>(run: &'b Run<'a>) -> impl Iterator<Item = &'b Entry<'a>> {
    run.entries.iter().filter(|e| e.engine.compaction.count > 0)
}

fn bandwidth(run: &Run<'_>) -> Columns {
    let executors: BTreeSet<String> = compacted(run).map(|e| executor_of(e.engine)).collect();
    Columns {
        stem: "compaction_bandwidth",
        size: (1200, 650),
        caption: format!("Compaction bandwidth ({})", run.setup),
        x_label: format!("{} (bars coloured by compaction executor)", run.entry_kind),
        y_label: "compaction bandwidth (MB/s of input, 1 MB = 10^6 B)".into(),
        columns: compacted(run)
            .map(|e| {
                let c = &e.engine.compaction;
                Column {
                    label: e.label.clone(),
                    value: c.bandwidth_mb_s,
                    note: format!(
                        "{:.0} MB/s, {} job{}",
                        c.bandwidth_mb_s,
                        c.count,
                        if c.count == 1 { "" } else { "s" }
                    ),
                    color: executor_color(&executor_of(e.engine)),
                }
            })
            .collect(),
        legend: executor_legend(executors),
    }
}

fn stage_profile(run: &Run<'_>) -> Breakdown {
    Breakdown {
        stem: "stage_profile",
        caption: format!("Compaction time per step ({})", run.setup),
        x_label: format!(
            "{}; step times summed over compactions and threads",
            run.entry_kind
        ),
        bars: compacted(run)
            .map(|e| {
                let c = &e.engine.compaction;
                let total = c.stage_profile.total();
                let mut shares = [0.0; 7];
                for (share, (_, secs)) in shares.iter_mut().zip(c.stage_profile.entries()) {
                    *share = if total > 0.0 {
                        secs / total * 100.0
                    } else {
                        0.0
                    };
                }
                Bar {
                    label: e.label.clone(),
                    notes: vec![
                        format!(
                            "{} compaction{}",
                            c.count,
                            if c.count == 1 { "" } else { "s" }
                        ),
                        format!("{:.0} MB/s", c.bandwidth_mb_s),
                    ],
                    shares,
                }
            })
            .collect(),
    }
}

/// `0`, `2.5`, `10`: seconds as a tick, decimals only where needed.
pub fn seconds_text(s: f64) -> String {
    let t = format!("{s:.2}");
    t.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `0.5 µs`, `20 µs`, `1 ms`, `10 s`: a latency tick given in microseconds.
fn micros_text(us: f64) -> String {
    let trim = |v: f64| {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    };
    match us {
        us if us >= 1e6 => format!("{} s", trim(us / 1e6)),
        us if us >= 1e3 => format!("{} ms", trim(us / 1e3)),
        us => format!("{} µs", trim(us)),
    }
}

#[cfg(test)]
mod tests;
