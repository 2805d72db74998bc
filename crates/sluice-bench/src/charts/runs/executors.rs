//! Compaction bandwidth per executor, as far as a run measured it.
//!
//! A run without offload times its compactions as a whole per benchmark or phase: when one
//! executor ran them all, `compaction_bandwidth` already is that executor's bandwidth (its bars
//! are coloured by executor). When `--compaction-mode auto` picked several, the engine counts
//! compactions per executor but does not split their bytes and seconds, so no per-executor
//! bandwidth exists to draw and this module draws none rather than apportion one.
//!
//! With compaction offload every side of a compaction (the host, each worker) reports the
//! input bytes, wall seconds and executor of its shares, so each side's bandwidth is a
//! measurement: `compaction_executors.{png,svg}` draws one bar per side per benchmark or
//! phase, coloured by the executor the side ran (`pipelined+sequential` when the decision
//! component changed its mind between shares). Sides that ran no share are left out.

use std::collections::BTreeSet;

use super::super::columns::{Column, Columns};
use super::super::executor_color;
use super::Run;

/// One bar per side that worked, per entry; `None` when no entry offloaded anything.
pub(super) fn per_side(run: &Run<'_>) -> Option<Columns> {
    let mut columns = Vec::new();
    let mut executors = BTreeSet::new();
    for e in &run.entries {
        let Some(shares) = &e.engine.compaction.shares else {
            continue;
        };
        for side in shares
            .iter()
            .filter(|s| s.input_bytes > 0 && s.seconds > 0.0)
        {
            executors.insert(side.mode.clone());
            columns.push(Column {
                label: format!("{}: {}", e.label, side.side),
                value: side.bandwidth_mb_s,
                note: format!(
                    "{:.0} MB/s, {:.0} MB",
                    side.bandwidth_mb_s,
                    side.input_bytes as f64 / 1e6
                ),
                color: executor_color(&side.mode),
            });
        }
    }
    if columns.is_empty() {
        return None;
    }
    Some(Columns {
        stem: "compaction_executors",
        size: (1200, 650),
        caption: format!("Compaction bandwidth per side and executor ({})", run.setup),
        x_label: format!(
            "{}: side (the host or a worker), coloured by the executor it ran",
            run.entry_kind
        ),
        y_label: "bandwidth of the side's shares (MB/s of input, 1 MB = 10^6 B)".into(),
        columns,
        legend: executors
            .into_iter()
            .map(|x| {
                let color = executor_color(&x);
                (x, color)
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use sluice::compaction::offload::ShareReport;

    use super::*;
    use crate::charts::runs::Entry;
    use crate::delta::MetricsDelta;

    fn side(side: &str, mode: &str, input_bytes: u64, seconds: f64) -> ShareReport {
        ShareReport {
            side: side.into(),
            input_bytes,
            seconds,
            bandwidth_mb_s: input_bytes as f64 / seconds.max(f64::MIN_POSITIVE) / 1e6,
            mode: mode.into(),
            cpu_seconds: seconds,
            retried: false,
        }
    }

    fn run_of(engines: &[MetricsDelta]) -> Run<'_> {
        Run {
            setup: "test".into(),
            entry_kind: "benchmark",
            entries: engines
                .iter()
                .enumerate()
                .map(|(i, engine)| Entry {
                    label: format!("b{i}"),
                    seconds: 1.0,
                    per_second: &[],
                    latencies: Vec::new(),
                    engine,
                })
                .collect(),
        }
    }

    #[test]
    fn one_bar_per_side_that_worked_coloured_by_its_executor() {
        let mut offloaded = MetricsDelta::default();
        offloaded.compaction.shares = Some(vec![
            side("host", "pipelined", 40_000_000, 0.5),
            side("127.0.0.1:7001", "sequential", 60_000_000, 1.0),
            side("127.0.0.1:7002", "sequential", 0, 0.0),
        ]);
        let engines = [MetricsDelta::default(), offloaded];
        let chart = per_side(&run_of(&engines)).unwrap();
        let bars: Vec<(&str, f64)> = chart
            .columns
            .iter()
            .map(|c| (c.label.as_str(), c.value))
            .collect();
        assert_eq!(bars, [("b1: host", 80.0), ("b1: 127.0.0.1:7001", 60.0)]);
        assert_eq!(chart.columns[0].color, executor_color("pipelined"));
        assert_eq!(chart.columns[1].note, "60 MB/s, 60 MB");
        let legend: Vec<&str> = chart.legend.iter().map(|(x, _)| x.as_str()).collect();
        assert_eq!(legend, ["pipelined", "sequential"]);
    }

    #[test]
    fn the_chart_is_a_real_picture() {
        let mut fill = MetricsDelta::default();
        fill.compaction.shares = Some(vec![
            side("host", "pipelined", 120_000_000, 1.1),
            side("127.0.0.1:7001", "pipelined+sequential", 110_000_000, 1.6),
            side("127.0.0.1:7002", "sequential", 90_000_000, 1.5),
        ]);
        let mut compact = MetricsDelta::default();
        compact.compaction.shares = Some(vec![
            side("host", "parallel", 70_000_000, 0.4),
            side("127.0.0.1:7001", "sequential", 60_000_000, 0.9),
        ]);
        let engines = [fill, compact];
        let chart = per_side(&run_of(&engines)).unwrap();
        crate::charts::register_font().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let written = crate::charts::render(&chart, dir.path()).unwrap();
        assert!(crate::charts::testing::distinct_colors(&written[0]) > 8);
        assert!(crate::charts::testing::ink_pixels(&written[0]) > 20_000);
    }

    #[test]
    fn nothing_offloaded_draws_nothing() {
        let mut mixed = MetricsDelta::default();
        mixed.compaction.count = 5;
        mixed.compaction.modes = [("pipelined".to_string(), 3), ("sequential".to_string(), 2)]
            .into_iter()
            .collect();
        // Several executors but one total: no per-executor bandwidth was measured.
        assert!(per_side(&run_of(&[mixed])).is_none());
        let mut idle = MetricsDelta::default();
        idle.compaction.shares = Some(vec![side("host", "sequential", 0, 0.0)]);
        assert!(per_side(&run_of(&[idle])).is_none());
    }
}
