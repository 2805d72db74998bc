//! End to end: `sluice bench --experiment mstore` (the older spelling of `sluice experiment
//! mstore`, kept working) starts one real `sluice worker` process per owner (this binary's
//! `worker` subcommand), runs MStore-basic and MStore, and reports both.

mod common;

use std::process::Command;

use serde_json::Value;

#[test]
fn mstore_experiment_runs_both_variants_on_real_workers() {
    let run = common::run_experiment(
        &["bench", "--experiment", "mstore"],
        &["--num", "64K"],
        "mstore",
    );
    let (out, report) = (&run.out, &run.report);
    assert_eq!(report["settings"]["workers"], 2);
    assert_eq!(report["settings"]["throttle"], 4.0);
    let variants = report["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    for (v, name) in variants.iter().zip(["mstore-basic", "mstore"]) {
        let what = format!("{name}: {v}");
        assert_eq!(v["name"], name, "{what}");
        assert!(v["ops_per_sec"].as_f64().unwrap() > 0.0, "{what}");
        assert_eq!(v["read_misses"], 0, "{what}");
        assert!(v["reads_checked"].as_u64().unwrap() >= 8192, "{what}");
        assert_eq!(v["retries"], 0, "{what}");
        let owner_bytes = v["owner_bytes"].as_array().unwrap();
        assert_eq!(owner_bytes.len(), 2, "{what}");
        assert!(
            owner_bytes.iter().all(|b| b.as_u64().unwrap() > 0),
            "{what}"
        );
        // Both owners' workers compacted: each owner's own ranges at least.
        let shares = v["owner_shares"].as_array().unwrap();
        assert!(shares.iter().all(|s| s.as_u64().unwrap() > 0), "{what}");
        assert!(v["skew"].as_f64().unwrap() >= 1.0, "{what}");
    }
    assert_eq!(variants[0]["moves"], 0);
    assert!(report["comparison"]["throughput_ratio"].as_f64().unwrap() > 0.0);
    // The JSON file is the document printed, and the charts are there.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("mstore.json")).unwrap())
            .unwrap();
    assert_eq!(file["variants"], report["variants"]);
    common::assert_charts(
        out.path(),
        &[
            "mstore_throughput",
            "mstore_owner_bytes",
            "mstore_compaction_basic",
        ],
    );
    // Every worker was stopped, and the scratch directory removed.
    common::assert_cleaned_up(&run.scratch);
}

#[test]
fn mstore_flags_are_checked() {
    for (args, what) in [
        (
            &["bench", "--experiment", "mstore", "--workers", "1"][..],
            "workers",
        ),
        (
            &["bench", "--experiment", "mstore", "--throttle", "0.5"],
            "throttle",
        ),
        (
            &["bench", "--experiment", "mstore", "--value-size", "8"],
            "value size",
        ),
        (&["bench", "--experiment", "mstore", "--num", "1000"], "num"),
        (&["experiment", "mstore", "--workers", "0"], "workers"),
        (&["experiment", "mstore", "--value-size", "8"], "value size"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(what), "{args:?}: {stderr}");
    }
}
