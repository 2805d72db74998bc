//! Compaction bandwidth per executor, as far as a run measured it. Two charts, for two kinds
//! of entry that never share a bar:
//!
//! Without compaction offload the engine adds each compaction's input bytes and wall seconds
//! under the executor that ran it (`mode_totals`), so each executor's bandwidth is a
//! measurement even when `--compaction-mode auto` picked several within one benchmark or
//! phase: `compaction_executors_local.{png,svg}` draws one bar per executor per entry,
//! coloured by the executor. When one executor ran them all its bar repeats that entry's
//! `compaction_bandwidth`; the chart is drawn all the same, so a run's files do not depend on
//! what `auto` decided.
//!
//! With compaction offload every side of a compaction (the host, each worker) reports the
//! input bytes, wall seconds and executor of its shares, so each side's bandwidth is a
//! measurement: `compaction_executors.{png,svg}` draws one bar per side per benchmark or
//! phase, coloured by the executor the side ran (`pipelined+sequential` when the decision
//! component changed its mind between shares). Sides that ran no share are left out.
//! Offloaded entries have no bar in the local chart: the engine times an offloaded compaction
//! as a whole under the host's executor, which is not the bandwidth of any one executor.
//!
//! Executors or sides whose input bytes or seconds are zero have no measured bandwidth and
//! no bar; a chart without bars is not drawn.

use std::collections::BTreeSet;

use super::super::columns::{Column, Columns};
use super::super::{executor_color, executor_legend};
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
        legend: executor_legend(executors),
    })
}

/// One bar per executor that ran a timed compaction, per entry that did not offload; `None`
/// when there is no such bar.
pub(super) fn per_mode(run: &Run<'_>) -> Option<Columns> {
    let mut columns = Vec::new();
    let mut executors = BTreeSet::new();
    for e in &run.entries {
        let c = &e.engine.compaction;
        if c.shares.is_some() {
            continue;
        }
        for (mode, totals) in c
            .mode_totals
            .iter()
            .filter(|(_, t)| t.input_bytes > 0 && t.seconds > 0.0)
        {
            let bandwidth = totals.bandwidth_mb_s();
            executors.insert(mode.clone());
            columns.push(Column {
                label: format!("{}: {mode}", e.label),
                value: bandwidth,
                note: format!(
                    "{bandwidth:.0} MB/s, {} job{}",
                    totals.jobs,
                    if totals.jobs == 1 { "" } else { "s" }
                ),
                color: executor_color(mode),
            });
        }
    }
    if columns.is_empty() {
        return None;
    }
    Some(Columns {
        stem: "compaction_executors_local",
        size: (1200, 650),
        caption: format!("Compaction bandwidth per executor ({})", run.setup),
        x_label: format!("{}: executor that ran the compactions", run.entry_kind),
        y_label: "bandwidth per executor (MB/s of input, 1 MB = 10^6 B)".into(),
        columns,
        legend: executor_legend(executors),
    })
}

#[cfg(test)]
mod tests {
    use sluice::compaction::remote::ShareReport;
    use sluice::metrics::ModeTotals;

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
            check_seconds: 0.0,
            drop_log_bytes: 0,
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

    fn local(modes: &[(&str, u64, u64, f64)]) -> MetricsDelta {
        let mut d = MetricsDelta::default();
        for &(mode, jobs, input_bytes, seconds) in modes {
            d.compaction.count += jobs;
            d.compaction.modes.insert(mode.into(), jobs);
            d.compaction.mode_totals.insert(
                mode.into(),
                ModeTotals {
                    jobs,
                    input_bytes,
                    seconds,
                },
            );
        }
        d
    }

    #[test]
    fn one_bar_per_executor_that_ran_timed_compactions() {
        let auto = local(&[
            ("pipelined", 3, 90_000_000, 1.0),
            ("sequential", 1, 30_000_000, 0.5),
            ("parallel", 1, 0, 0.0),
        ]);
        let single = local(&[("streaming", 2, 50_000_000, 0.25)]);
        let engines = [MetricsDelta::default(), auto, single];
        let chart = per_mode(&run_of(&engines)).unwrap();
        assert_eq!(chart.stem, "compaction_executors_local");
        let bars: Vec<(&str, f64)> = chart
            .columns
            .iter()
            .map(|c| (c.label.as_str(), c.value))
            .collect();
        assert_eq!(
            bars,
            [
                ("b1: pipelined", 90.0),
                ("b1: sequential", 60.0),
                ("b2: streaming", 200.0)
            ]
        );
        assert_eq!(chart.columns[1].color, executor_color("sequential"));
        assert_eq!(chart.columns[0].note, "90 MB/s, 3 jobs");
        assert_eq!(chart.columns[1].note, "60 MB/s, 1 job");
        let legend: Vec<&str> = chart.legend.iter().map(|(x, _)| x.as_str()).collect();
        assert_eq!(legend, ["pipelined", "sequential", "streaming"]);
    }

    #[test]
    fn offloaded_entries_have_no_local_bars() {
        let mut offloaded = local(&[("pipelined", 2, 80_000_000, 1.0)]);
        offloaded.compaction.shares = Some(vec![side("host", "pipelined", 80_000_000, 1.0)]);
        let engines = [offloaded];
        assert!(per_mode(&run_of(&engines)).is_none());
        assert!(per_side(&run_of(&engines)).is_some());
        // Nothing compacted, or nothing timed: no bandwidth measured, no chart.
        assert!(per_mode(&run_of(&[MetricsDelta::default()])).is_none());
        assert!(per_mode(&run_of(&[local(&[("sequential", 1, 1_000, 0.0)])])).is_none());
    }

    #[test]
    fn the_local_chart_is_a_real_picture() {
        let engines = [
            local(&[
                ("pipelined", 4, 120_000_000, 1.2),
                ("sequential", 2, 40_000_000, 0.8),
            ]),
            local(&[("parallel", 3, 150_000_000, 0.6)]),
        ];
        let chart = per_mode(&run_of(&engines)).unwrap();
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
        // Several executors and no offload: the per-side chart has nothing to draw.
        assert!(per_side(&run_of(&[mixed])).is_none());
        let mut idle = MetricsDelta::default();
        idle.compaction.shares = Some(vec![side("host", "sequential", 0, 0.0)]);
        assert!(per_side(&run_of(&[idle])).is_none());
    }
}
