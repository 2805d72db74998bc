//! End-to-end tests of `sluice ycsb`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

use std::process::{Command, Output};

use serde_json::Value;

fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run sluice")
}

fn ok(args: &[&str]) -> String {
    let o = sluice(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{args:?}: stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn workload_a_json_reports_both_phases() {
    let out = ok(&[
        "ycsb",
        "--workload",
        "a",
        "--records",
        "2000",
        "--operations",
        "2000",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workload"], "a");
    assert_eq!(v["distribution"], "zipfian");
    assert_eq!(v["records"], 2000);
    assert_eq!(v["operations"], 2000);
    assert_eq!(v["load"]["ops"], 2000);
    assert_eq!(v["load"]["operations"][0]["op"], "insert");
    let run = &v["run"];
    assert_eq!(run["ops"], 2000);
    assert_eq!(run["not_found"], 0);
    assert_eq!(run["stopped"], false);
    let per_second: u64 = run["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 2000);
    let ops = run["operations"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "update"]);
    let counts: u64 = ops.iter().map(|o| o["count"].as_u64().unwrap()).sum();
    assert_eq!(counts, 2000);
    for o in ops {
        // 50/50 within a few percent at 2000 operations.
        let c = o["count"].as_u64().unwrap();
        assert!((900..=1100).contains(&c), "{o}");
        let p = |f: &str| o[f].as_f64().unwrap();
        assert!(p("p50_us") > 0.0 && p("p50_us") <= p("p95_us"), "{o}");
        assert!(
            p("p95_us") <= p("p99_us") && p("p99_us") <= p("p999_us"),
            "{o}"
        );
    }
}

#[test]
fn load_then_run_on_a_named_database_and_table_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    // --run alone needs a loaded database.
    let o = sluice(&["ycsb", "--run", "--db", &db, "--records", "500"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no database"));
    let out = ok(&["ycsb", "--load", "--db", &db, "--records", "500", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["load"]["ops"], 500);
    assert!(v["run"].is_null());
    let out = ok(&[
        "ycsb",
        "--run",
        "--db",
        &db,
        "--workload",
        "c",
        "--distribution",
        "uniform",
        "--records",
        "500",
        "--operations",
        "300",
    ]);
    assert!(out.contains("workload c (uniform distribution)"), "{out}");
    assert!(out.contains("p99.9 us"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("read") && l.contains(" 300 ")),
        "{out}"
    );
    assert!(!out.contains("\nload:"), "{out}");
    // Bad names are usage errors.
    let o = sluice(&["ycsb", "--workload", "g"]);
    assert_eq!(o.status.code(), Some(2));
}
