//! The scale experiment end to end at tiny sizes (with a small memtable, so a few tens of
//! thousands of keys still make several L0 tables), and its report's parts. No timing is
//! asserted: only the structure and what must hold whatever the machine's speed.

use serde_json::Value;
use sluice_bench::charts::testing::distinct_colors;

use super::report::{Growth, L0Load, Settings};
use super::*;

/// Asserts `report`'s JSON reads back into the same report: every field, integers exactly,
/// floats to the last digit or so (serde_json's default float parsing is not always exact).
fn assert_reads_back(report: &ScaleReport) {
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
                match (x.as_f64(), y.as_f64()) {
                    (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                    _ => false,
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
            }
            (Value::Object(x), Value::Object(y)) => {
                x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
            }
            _ => a == b,
        }
    }
    let json = report.to_json();
    let back = ScaleReport::from_json(&json).unwrap();
    let (original, read) = (
        serde_json::to_value(report).unwrap(),
        serde_json::to_value(&back).unwrap(),
    );
    assert!(same(&original, &read), "{original}\nread back as\n{read}");
}

fn tiny() -> ScaleConfig {
    ScaleConfig {
        sizes: vec![50_000, 20_000],
        write_buffer_size: 256 << 10,
        target_file_size: 1 << 20,
        repeat: 2,
        ..ScaleConfig::default()
    }
}

#[test]
fn tiny_run_measures_every_size_and_writes_every_output() {
    let scratch = tempfile::tempdir().unwrap();
    let config = tiny();
    let report = run_scale(&config, scratch.path()).unwrap();
    assert_eq!(
        std::fs::read_dir(scratch.path()).unwrap().count(),
        0,
        "scratch not cleaned"
    );
    assert_eq!(report.experiment, "scale");
    assert_eq!(report.settings.sizes, vec![20_000, 50_000]);
    let sizes: Vec<u64> = report.sizes.iter().map(|r| r.entries).collect();
    assert_eq!(sizes, vec![20_000, 50_000], "every size, ascending");
    for r in &report.sizes {
        let n = r.entries;
        let what = format!("{n} keys");
        let f = &r.fill;
        assert_eq!(f.ops, n, "{what}: the fill wrote N keys");
        assert_eq!(f.user_bytes, n * 116, "{what}");
        assert_eq!(f.runs_ops_per_sec.len(), 2, "{what}");
        assert!(f.ops_per_sec > 0.0 && f.mb_per_sec > 0.0, "{what}: {f:?}");
        assert!(f.write_amp.is_some_and(|w| w > 0.0), "{what}: {f:?}");
        assert!(f.flushes > 0, "{what}: {f:?}");
        assert!(
            (f.write_seconds + f.wait_seconds - f.seconds).abs() < 1e-6,
            "{what}: {f:?}"
        );
        assert!(f.lsm.total_bytes > 0, "{what}: {f:?}");

        assert!(r.l0.files >= 2 && r.l0.bytes > 0, "{what}: {:?}", r.l0);
        for (c, executor) in [(&r.sequential, "sequential"), (&r.parallel, "parallel")] {
            let what = format!("{what}, {executor}");
            assert_eq!(c.executor, executor);
            assert_eq!(c.runs_seconds.len(), 2, "{what}");
            assert!(c.jobs >= 1, "{what}: {c:?}");
            assert_eq!(c.input_bytes, r.l0.bytes, "{what}: reads all of L0 once");
            assert!(c.output_bytes > 0, "{what}: {c:?}");
            assert!(
                c.output_bytes <= c.input_bytes,
                "{what}: fillrandom repeats keys, so the merge drops versions: {c:?}"
            );
            // About 63% of N uniform draws from [0, N) are distinct.
            assert!(
                c.output_entries > n / 2 && c.output_entries < n,
                "{what}: {c:?}"
            );
            assert!(c.seconds > 0.0 && c.bandwidth_mb_s > 0.0, "{what}: {c:?}");
        }
        assert_eq!(
            r.sequential.output_entries, r.parallel.output_entries,
            "both executors keep the same entries"
        );
        assert_eq!(r.parallel.threads, report.settings.cpus);
    }
    let [growth] = &report.growth[..] else {
        panic!("{:?}", report.growth)
    };
    assert_eq!((growth.from_entries, growth.to_entries), (20_000, 50_000));

    let json = report.to_json();
    assert_reads_back(&report);

    let out = tempfile::tempdir().unwrap();
    let written = write_outputs(&report, out.path()).unwrap();
    assert_eq!(written.len(), 1 + 2 * 3);
    assert_eq!(
        std::fs::read_to_string(&written[0]).unwrap(),
        json.clone() + "\n"
    );
    for stem in ["scale_seconds", "scale_cpu_seconds", "scale_bandwidth"] {
        let png = out.path().join(format!("{stem}.png"));
        assert!(distinct_colors(&png) > 3, "{stem}.png is blank");
        let svg = std::fs::read_to_string(out.path().join(format!("{stem}.svg"))).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("vs keys"),
            "{stem}.svg"
        );
    }

    let text = table::render(&report);
    for heading in ["fillrandom", "inverted LSM", "growth", "20000 ", "50000 "] {
        assert!(text.contains(heading), "{heading:?} missing:\n{text}");
    }
}

#[test]
fn defaults_are_the_issues_sizes_and_bad_parameters_are_named() {
    let d = ScaleConfig::default();
    d.validate().unwrap();
    assert_eq!(d.sizes(), vec![1 << 20, 4 << 20, 16 << 20, 64 << 20]);
    assert_eq!(d.background_compactions, 2);
    assert_eq!(d.write_buffer_size, 64 << 20);
    assert_eq!(d.steps(), 4 * 4);
    assert_eq!(d.user_bytes(1000), 116_000);
    let cases: Vec<(ScaleConfig, &str)> = vec![
        (
            ScaleConfig {
                sizes: Vec::new(),
                ..d.clone()
            },
            "sizes",
        ),
        (
            ScaleConfig {
                sizes: vec![1 << 20, 100],
                ..d.clone()
            },
            "sizes",
        ),
        (
            ScaleConfig {
                repeat: 0,
                ..d.clone()
            },
            "repeat",
        ),
        (
            ScaleConfig {
                background_compactions: 0,
                ..d.clone()
            },
            "background compactions",
        ),
        (
            ScaleConfig {
                value_size: 2 << 20,
                ..d.clone()
            },
            "value size",
        ),
        (
            ScaleConfig {
                key_size: 4,
                ..d.clone()
            },
            "key_size",
        ),
        (
            ScaleConfig {
                write_buffer_size: 1000,
                ..d.clone()
            },
            "write_buffer_size",
        ),
    ];
    for (config, name) in cases {
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
    }
}

#[test]
fn a_size_too_small_to_merge_is_refused_and_cleaned_up() {
    let scratch = tempfile::tempdir().unwrap();
    let config = ScaleConfig {
        sizes: vec![MIN_SIZE],
        ..ScaleConfig::default()
    };
    let err = run_scale(&config, scratch.path()).unwrap_err().to_string();
    assert!(err.contains("too few to merge"), "{err}");
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);
}

fn run(executor: &str, seconds: f64, cpu: f64) -> CompactionRun {
    CompactionRun {
        executor: executor.into(),
        threads: 1,
        seconds,
        cpu_seconds: Some(cpu),
        job_cpu_seconds: cpu,
        jobs: 1,
        input_bytes: 1_000_000,
        output_bytes: 900_000,
        output_entries: 6_300,
        bandwidth_mb_s: 1.0 / seconds,
        runs_seconds: vec![seconds],
    }
}

/// A size whose every cost is `scale` times that of 1M keys.
fn size(entries: u64, scale: f64) -> SizeReport {
    SizeReport {
        entries,
        fill: FillRun {
            ops: entries,
            user_bytes: entries * 116,
            seconds: 3.0 * scale,
            write_seconds: 2.5 * scale,
            wait_seconds: 0.5 * scale,
            cpu_seconds: None,
            ops_per_sec: entries as f64 / (3.0 * scale),
            mb_per_sec: 35.0,
            write_amp: Some(1.6),
            flushes: 4,
            compactions: 3,
            compaction_input_bytes: 10,
            compaction_output_bytes: 9,
            write_stall_seconds: 0.0,
            lsm: Default::default(),
            runs_ops_per_sec: vec![1.0],
        },
        l0: L0Load {
            files: 4,
            bytes: 1_000_000,
            sublevels: 4,
            seconds: 1.0,
        },
        sequential: run("sequential", 1.0 * scale, 1.0 * scale),
        parallel: run("parallel", 0.5 * scale, 1.2 * scale),
    }
}

#[test]
fn growth_is_the_exponent_between_sizes_and_medians_are_real_runs() {
    // Fill and sequential linear, parallel costing twice per key at four times the keys.
    let mut big = size(4 << 20, 4.0);
    big.parallel = run("parallel", 0.5 * 16.0, 1.2 * 16.0);
    let g = Growth::between(&size(1 << 20, 1.0), &big);
    let close = |k: Option<f64>, want: f64| k.is_some_and(|k| (k - want).abs() < 1e-9);
    assert!(close(g.fill_seconds, 1.0), "{g:?}");
    assert!(close(g.sequential_seconds, 1.0), "{g:?}");
    assert!(close(g.sequential_cpu_seconds, 1.0), "{g:?}");
    assert!(close(g.parallel_seconds, 2.0), "{g:?}");
    assert_eq!(g.fill_cpu_seconds, None, "no CPU figure, no exponent");

    let m = report::median_compaction(vec![
        run("sequential", 3.0, 1.0),
        run("sequential", 1.0, 1.0),
        run("sequential", 2.0, 1.0),
        run("sequential", 4.0, 1.0),
    ])
    .unwrap();
    assert_eq!(m.seconds, 2.0);
    assert_eq!(m.runs_seconds, vec![3.0, 1.0, 2.0, 4.0]);
    assert!(report::median_compaction(Vec::new()).is_err());
    let fills: Vec<FillRun> = [2.0, 1.0, 3.0]
        .iter()
        .map(|&s| size(1000, s).fill)
        .collect();
    let m = report::median_fill(fills).unwrap();
    assert_eq!(m.seconds, 6.0, "the middle throughput");
    assert_eq!(m.runs_ops_per_sec.len(), 3);
}

#[test]
fn a_report_renders_reads_back_and_draws_without_every_figure() {
    let config = ScaleConfig::default();
    let report = ScaleReport::new(
        Settings::new(&config),
        vec![size(1 << 20, 1.0), size(4 << 20, 4.2), size(16 << 20, 18.0)],
        100.0,
    );
    assert_eq!(report.growth.len(), 2);
    assert_reads_back(&report);
    let text = table::render(&report);
    for row in [
        "1M -> 4M",
        "4M -> 16M",
        "16M ",
        "2.00x",
        "One run per point",
    ] {
        assert!(text.contains(row), "{row:?} missing:\n{text}");
    }
    let out = tempfile::tempdir().unwrap();
    let written = write_outputs(&report, out.path()).unwrap();
    assert!(written.iter().all(|p| p.exists()));

    let empty = ScaleReport::new(Settings::new(&config), Vec::new(), 0.0);
    assert!(table::render(&empty).contains("no data"));
    let written = write_outputs(&empty, out.path()).unwrap();
    assert_eq!(written.len(), 7);
    assert!(ScaleReport::from_json("{}").is_err());
}
