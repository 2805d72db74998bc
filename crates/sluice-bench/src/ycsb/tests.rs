//! Load and run phases against real databases, and the JSON schema.

use std::sync::atomic::AtomicBool;

use serde_json::Value;
use sluice::{Db, Options};

use super::*;

fn small(workload: Workload) -> YcsbConfig {
    YcsbConfig {
        workload,
        records: 2_000,
        operations: 2_000,
        ..YcsbConfig::default()
    }
}

fn open(dir: &std::path::Path) -> Db {
    Db::open(dir, Options::default()).unwrap()
}

#[test]
fn every_workload_loads_and_runs_and_reads_find_their_keys() {
    for w in Workload::ALL {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let config = YcsbConfig {
            threads: 2,
            ..small(w)
        };
        let r = run_ycsb(&config, &db, true, true, &AtomicBool::new(false)).unwrap();
        let load = r.load.as_ref().unwrap();
        assert_eq!(load.ops, 2_000, "{w}");
        assert_eq!(load.per_second.iter().sum::<u64>(), 2_000);
        let run = r.run.as_ref().unwrap();
        assert_eq!(run.ops, 2_000, "{w}");
        assert_eq!(run.per_second.iter().sum::<u64>(), 2_000);
        assert!(!run.stopped);
        for o in &run.operations {
            assert!(o.p50_us <= o.p95_us && o.p95_us <= o.p99_us, "{w} {o:?}");
            assert!(
                o.p99_us <= o.p999_us && o.p999_us <= o.max_us * 1.001,
                "{w} {o:?}"
            );
        }
        if w != Workload::D {
            // Only D's reads can race a concurrent insert of the same key.
            assert_eq!(run.not_found, 0, "{w}");
        }
        let ops: Vec<Operation> = run.operations.iter().map(|o| o.op).collect();
        let expected: Vec<Operation> = Operation::ALL
            .into_iter()
            .filter(|&op| w.mix().share(op) > 0.0)
            .collect();
        assert_eq!(ops, expected, "{w}");
        db.close().unwrap();
    }
}

#[test]
fn inserts_extend_the_key_space() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let config = small(Workload::D);
    let r = run_ycsb(&config, &db, true, true, &AtomicBool::new(false)).unwrap();
    let run = r.run.unwrap();
    let inserts = run
        .operations
        .iter()
        .find(|o| o.op == Operation::Insert)
        .map_or(0, |o| o.count);
    assert!(inserts > 0);
    let newest = crate::keys::KeyFormat::new(16, 4_000)
        .unwrap()
        .key(2_000 + inserts - 1);
    assert!(db.get(&newest).unwrap().is_some());
}

#[test]
fn run_alone_uses_the_loaded_database_and_stop_ends_a_phase() {
    let dir = tempfile::tempdir().unwrap();
    let config = small(Workload::C);
    {
        let db = open(dir.path());
        let r = run_ycsb(&config, &db, true, false, &AtomicBool::new(false)).unwrap();
        assert!(r.run.is_none());
        db.close().unwrap();
    }
    let db = open(dir.path());
    let r = run_ycsb(&config, &db, false, true, &AtomicBool::new(false)).unwrap();
    assert!(r.load.is_none());
    let run = r.run.unwrap();
    assert_eq!(run.not_found, 0);
    assert_eq!(run.operations[0].op, Operation::Read);

    let stopped = run::run(&config, &db, &AtomicBool::new(true)).unwrap();
    assert!(stopped.stopped);
    assert_eq!(stopped.ops, 0);
}

#[test]
fn json_has_the_documented_schema() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let config = small(Workload::E);
    let r = run_ycsb(&config, &db, true, true, &AtomicBool::new(false)).unwrap();
    let v: Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["workload"], "e");
    assert_eq!(v["distribution"], "zipfian");
    assert_eq!(v["records"], 2_000);
    assert_eq!(v["operations"], 2_000);
    assert_eq!(v["threads"], 1);
    assert_eq!(v["value_size"], 100);
    for phase in ["load", "run"] {
        let p = &v[phase];
        assert_eq!(p["phase"], phase);
        for field in ["ops", "seconds", "ops_per_sec", "not_found"] {
            assert!(p[field].is_number(), "{phase}.{field}: {p}");
        }
        assert!(p["stopped"].is_boolean());
        assert!(p["per_second"].is_array());
        // What the engine and the process did, named as in a bench object.
        for field in ["user_bytes", "disk_bytes_written", "wal_bytes_written"] {
            assert!(p[field].is_u64(), "{phase}.{field}: {p}");
        }
        assert!(p["write_amp"].is_f64() || p["write_amp"].is_null());
        assert!(p["flush"]["cpu_seconds"].is_f64(), "{p}");
        assert!(p["compaction"]["stage_profile"]["merge"].is_f64(), "{p}");
        assert!(p["cpu"]["flush_seconds"].is_f64(), "{p}");
        if cfg!(target_os = "linux") {
            assert!(p["cpu"]["total_seconds"].is_f64(), "{p}");
            assert!(p["peak_rss_bytes"].as_u64().unwrap() > 0, "{p}");
        }
        assert_eq!(p["lsm"]["levels"].as_array().unwrap().len(), 7, "{p}");
        assert!(p.get("histogram").is_none());
        for o in p["operations"].as_array().unwrap() {
            assert!(o["op"].is_string());
            for field in [
                "count",
                "ops_per_sec",
                "p50_us",
                "p95_us",
                "p99_us",
                "p999_us",
                "max_us",
                "mean_us",
            ] {
                assert!(o[field].is_number(), "{field}: {o}");
            }
        }
    }
    let ops: Vec<&str> = v["run"]["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["insert", "scan"]);
    // A phase that did not run is null.
    let r = run_ycsb(&config, &db, false, true, &AtomicBool::new(false)).unwrap();
    let v: Value = serde_json::from_str(&r.to_json()).unwrap();
    assert!(v["load"].is_null());
    // Table output names every operation.
    let table = report::phase_table(r.run.as_ref().unwrap());
    assert!(
        table.contains("scan") && table.contains("p99.9 us"),
        "{table}"
    );
    for line in ["\n  w-amp ", "\n  cpu ", "\n  tree: "] {
        assert!(table.contains(line), "{line:?} in {table}");
    }
}

#[test]
fn bad_configs_are_rejected() {
    let c = YcsbConfig {
        records: 0,
        ..YcsbConfig::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("records"));
    let c = YcsbConfig {
        threads: 0,
        ..YcsbConfig::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("threads"));
    let c = YcsbConfig {
        key_size: 3,
        ..YcsbConfig::default()
    };
    assert!(c.validate().unwrap_err().to_string().contains("key_size"));
}

/// A phase of 2.5 s: two whole seconds and a last half second of 50 operations.
fn phase_of_two_and_a_half_seconds() -> report::PhaseReport {
    report::PhaseReport {
        phase: "run".into(),
        ops: 350,
        seconds: 2.5,
        ops_per_sec: 140.0,
        not_found: 0,
        stopped: false,
        per_second: vec![100, 200, 50],
        operations: Vec::new(),
        engine: crate::delta::MetricsDelta {
            write_amp: Some(0.41),
            ..Default::default()
        },
        process: Default::default(),
        lsm: Default::default(),
    }
}

#[test]
fn the_table_rates_the_last_partial_second_as_the_chart_does() {
    let p = phase_of_two_and_a_half_seconds();
    let table = report::phase_table(&p);
    // 50 operations in 0.5 s: 100 ops/s, marked partial; not "50" as if a whole second.
    assert!(
        table.contains("\nops/s in each second: [100, 200, 100 (partial: 50 ops in 0.50 s)]\n"),
        "{table}"
    );
    // The chart's point for that second has the same rate.
    let points = crate::timeline::rates(&p.per_second, p.seconds);
    assert_eq!(points.last(), Some(&(2.25, 100.0)));
    // The w-amp says what it divides, so 0.41 is not read as an error.
    assert!(
        table.contains("w-amp 0.41 (table bytes / user bytes)"),
        "{table}"
    );
}
