//! End to end: `sluice experiment copro` starts real `sluice worker` processes (this
//! binary's `worker` subcommand), offloads compactions to them and reports every configuration.

mod common;

use std::process::Command;

use serde_json::Value;

const CONFIGURATIONS: [&str; 5] = ["host-only", "co-kv", "copro", "copro+", "dynamic"];

#[test]
fn copro_experiment_offloads_to_real_workers() {
    let run = common::run_experiment(&["experiment", "copro"], &["--num", "64K"], "copro");
    let (out, report) = (&run.out, &run.report);
    assert_eq!(report["settings"]["workers"], 1);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 4 * CONFIGURATIONS.len());
    for workload in ["fillrandom", "ycsb-a"] {
        for size in [100, 1024, 16384, 65536] {
            for configuration in CONFIGURATIONS {
                let run = runs
                    .iter()
                    .find(|r| {
                        r["workload"] == workload
                            && r["value_size"] == size
                            && r["configuration"] == configuration
                    })
                    .unwrap_or_else(|| panic!("{workload} {size} {configuration} missing"));
                let what = format!("{workload} {size} {configuration}: {run}");
                assert!(run["ops_per_sec"].as_f64().unwrap() > 0.0, "{what}");
                assert_eq!(run["retries"], 0, "{what}");
                let workers = run["workers"].as_array().unwrap();
                if configuration == "host-only" {
                    assert!(workers.is_empty(), "{what}");
                    assert_eq!(run["offloaded_jobs"], 0, "{what}");
                } else {
                    assert_eq!(workers.len(), 1, "{what}");
                    assert!(workers[0]["input_bytes"].as_u64().unwrap() > 0, "{what}");
                    assert!(run["host"]["input_bytes"].as_u64().unwrap() > 0, "{what}");
                    assert!(run["offloaded_jobs"].as_u64().unwrap() > 0, "{what}");
                }
            }
        }
    }
    // The JSON file is the document printed, and the charts are there.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("copro.json")).unwrap())
            .unwrap();
    assert_eq!(file["runs"], report["runs"]);
    common::assert_charts(
        out.path(),
        &[
            "copro_throughput",
            "copro_bandwidth_fillrandom",
            "copro_cpu_ycsb_a",
        ],
    );
    // Every worker was stopped, and the scratch directory removed.
    common::assert_cleaned_up(&run.scratch);
}

#[test]
fn copro_flags_are_checked() {
    for args in [
        &[
            "bench",
            "--experiment",
            "pcp",
            "--workers",
            "2",
            "--num",
            "20K",
        ][..],
        &["bench", "--experiment", "copro", "--throttle", "0.5"],
        &["bench", "--experiment", "copro", "--workers", "0"],
        &["experiment", "pcp", "--workers", "2", "--num", "20K"],
        &["experiment", "copro", "--throttle", "0.5"],
        &["experiment", "copro", "--workers", "0"],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("workers") || stderr.contains("throttle"),
            "{args:?}: {stderr}"
        );
    }
}
