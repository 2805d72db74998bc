//! Charts of real (tiny) runs: every file written, every PNG a real picture.

use std::sync::atomic::AtomicBool;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};

use super::*;
use crate::charts::testing::{distinct_colors, ink_pixels};
use crate::config::{BenchConfig, Benchmark};
use crate::workloads::run_benchmarks;
use crate::ycsb::{Workload, YcsbConfig, run_ycsb};

fn small_options() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Every path exists and is non-empty; every PNG has a picture on it: many colours, and more
/// than a frame's worth of non-white pixels.
fn assert_real_pictures(written: &[PathBuf], stems: &[&str]) {
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let expected: Vec<String> = stems
        .iter()
        .flat_map(|s| [format!("{s}.png"), format!("{s}.svg")])
        .collect();
    assert_eq!(names, expected);
    for path in written {
        let len = std::fs::metadata(path).unwrap().len();
        assert!(len > 1_000, "{} has {len} bytes", path.display());
        if path.extension().is_some_and(|e| e == "png") {
            assert!(distinct_colors(path) > 8, "{} is blank", path.display());
            assert!(
                ink_pixels(path) > 5_000,
                "{} is nearly blank",
                path.display()
            );
        } else {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(
                svg.contains("<svg") && svg.contains("<text"),
                "{}",
                path.display()
            );
        }
    }
}

#[test]
fn bench_run_draws_throughput_cdf_bandwidth_and_stages() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let config = BenchConfig {
        benchmarks: vec![
            Benchmark::FillRandom,
            Benchmark::ReadRandom,
            Benchmark::Compact,
        ],
        num: 5_000,
        reads: 5_000,
        ..BenchConfig::default()
    };
    let results = run_benchmarks(&config, &db, &mut |_| {}).unwrap();
    assert!(results.iter().any(|r| r.engine.compaction.count > 0));
    let out = tempfile::tempdir().unwrap();
    let charts = out.path().join("charts");
    let written = write_bench_charts(&results, &charts).unwrap();
    assert_real_pictures(
        &written,
        &[
            "throughput",
            "latency_cdf",
            "compaction_bandwidth",
            "stage_profile",
            "compaction_executors_local",
        ],
    );
    // The engine split its compaction figures by executor: they add up to the totals.
    for r in results.iter().filter(|r| r.engine.compaction.count > 0) {
        let c = &r.engine.compaction;
        let jobs: u64 = c.mode_totals.values().map(|t| t.jobs).sum();
        let bytes: u64 = c.mode_totals.values().map(|t| t.input_bytes).sum();
        assert_eq!(jobs, c.count, "{}", r.name);
        assert_eq!(bytes, c.input_bytes, "{}", r.name);
    }
}

/// A run whose benchmark ran two executors (as `--compaction-mode auto` may) draws one local
/// bar per executor; an offloaded benchmark in the same run adds the per-side chart and no
/// local bar.
#[test]
fn mixed_executors_without_offload_get_their_own_bars() {
    use sluice::compaction::remote::ShareReport;
    use sluice::metrics::ModeTotals;

    let mut auto = MetricsDelta::default();
    for (mode, jobs, input_bytes, seconds) in [
        ("pipelined", 3, 90_000_000, 1.0),
        ("sequential", 2, 20_000_000, 0.5),
    ] {
        auto.compaction.count += jobs;
        auto.compaction.input_bytes += input_bytes;
        auto.compaction.seconds += seconds;
        auto.compaction.modes.insert(mode.into(), jobs);
        auto.compaction.mode_totals.insert(
            mode.into(),
            ModeTotals {
                jobs,
                input_bytes,
                seconds,
            },
        );
    }
    auto.compaction.bandwidth_mb_s = 110.0 / 1.5;
    let mut offloaded = auto.clone();
    offloaded.compaction.shares = Some(vec![ShareReport {
        side: "127.0.0.1:7001".into(),
        input_bytes: 110_000_000,
        seconds: 1.5,
        bandwidth_mb_s: 110.0 / 1.5,
        mode: "sequential".into(),
        cpu_seconds: 1.5,
        check_seconds: 0.1,
        drop_log_bytes: 0,
        retried: false,
    }]);
    let entry = |label: &str, engine| Entry {
        label: label.into(),
        seconds: 2.0,
        per_second: &[],
        latencies: Vec::new(),
        engine,
    };
    let run = Run {
        setup: "mixed".into(),
        entry_kind: "benchmark",
        entries: vec![entry("compact", &auto), entry("offloaded", &offloaded)],
    };

    let local = executors::per_mode(&run).unwrap();
    let bars: Vec<(&str, f64)> = local
        .columns
        .iter()
        .map(|c| (c.label.as_str(), c.value))
        .collect();
    assert_eq!(
        bars,
        [("compact: pipelined", 90.0), ("compact: sequential", 40.0)]
    );

    let out = tempfile::tempdir().unwrap();
    let written = write_run(&run, out.path()).unwrap();
    assert_real_pictures(
        &written,
        &[
            "throughput",
            "latency_cdf",
            "compaction_bandwidth",
            "stage_profile",
            "compaction_executors",
            "compaction_executors_local",
        ],
    );
}

#[test]
fn ycsb_run_draws_a_line_per_phase_and_operation() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let config = YcsbConfig {
        workload: Workload::A,
        records: 2_000,
        operations: 2_000,
        ..YcsbConfig::default()
    };
    let report = run_ycsb(&config, &db, true, true, &AtomicBool::new(false)).unwrap();
    let run = Run {
        setup: String::new(),
        entry_kind: "phase",
        entries: Vec::new(),
    };
    assert!(latency_cdf(&run).lines.is_empty());
    let out = tempfile::tempdir().unwrap();
    let written = write_ycsb_charts(&report, out.path()).unwrap();
    // Default options flush nothing of 2,000 small records: no compaction charts.
    assert_real_pictures(&written, &["throughput", "latency_cdf"]);
}

#[test]
fn charts_of_nothing_still_render() {
    let out = tempfile::tempdir().unwrap();
    let written = write_bench_charts(&[], out.path()).unwrap();
    assert_eq!(written.len(), 4);
    for path in &written {
        assert!(std::fs::metadata(path).unwrap().len() > 0);
    }
}

#[test]
fn latency_ticks_carry_their_unit() {
    assert_eq!(micros_text(0.5), "0.5 µs");
    assert_eq!(micros_text(20.0), "20 µs");
    assert_eq!(micros_text(1_000.0), "1 ms");
    assert_eq!(micros_text(10_000_000.0), "10 s");
    assert_eq!(seconds_text(0.0), "0");
    assert_eq!(seconds_text(2.5), "2.5");
    assert_eq!(seconds_text(10.0), "10");
}
