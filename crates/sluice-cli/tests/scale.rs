//! End to end: `sluice experiment scale` at two tiny sizes (a small memtable, so they still make
//! several L0 tables) prints its JSON, writes the JSON and the charts, and cleans up; its flags
//! are checked in both spellings.

mod common;

use std::process::Command;

use serde_json::Value;

#[test]
fn scale_experiment_measures_every_size() {
    let run = common::run_experiment(
        &["experiment", "scale"],
        &["--sizes", "20K,40K", "--write-buffer-size", "256K"],
        "scale",
    );
    let (out, report) = (&run.out, &run.report);
    let sizes = report["sizes"].as_array().unwrap();
    let entries: Vec<u64> = sizes
        .iter()
        .map(|s| s["entries"].as_u64().unwrap())
        .collect();
    assert_eq!(entries, [20 << 10, 40 << 10]);
    for s in sizes {
        assert_eq!(s["fill"]["ops"], s["entries"], "{s}");
        assert!(s["l0"]["files"].as_u64().unwrap() >= 2, "{s}");
        for executor in ["sequential", "parallel"] {
            let c = &s[executor];
            assert_eq!(c["executor"], executor, "{s}");
            assert_eq!(c["input_bytes"], s["l0"]["bytes"], "{s}");
            let output = c["output_bytes"].as_u64().unwrap();
            assert!(
                output > 0 && output <= c["input_bytes"].as_u64().unwrap(),
                "{s}"
            );
        }
    }
    assert_eq!(report["growth"].as_array().unwrap().len(), 1);
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("scale.json")).unwrap())
            .unwrap();
    assert_eq!(&file, report);
    common::assert_charts(
        out.path(),
        &["scale_seconds", "scale_cpu_seconds", "scale_bandwidth"],
    );
    common::assert_cleaned_up(&run.scratch);
}

#[test]
fn scale_flags_are_checked() {
    for (args, named) in [
        (&["experiment", "scale", "--sizes", "1000"][..], "sizes"),
        (&["experiment", "scale", "--sizes", "1M,x"], "x"),
        (&["experiment", "scale", "--num", "1M"], "--num"),
        (&["bench", "--experiment", "scale", "--num", "1M"], "--num"),
        (
            &["bench", "--experiment", "pcp", "--sizes", "1M"],
            "--sizes",
        ),
        (&["bench", "--sizes", "1M"], "--experiment"),
        (
            &[
                "bench",
                "--experiment",
                "scale",
                "--write-buffer-size",
                "1M",
            ],
            "--write-buffer-size",
        ),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
}
