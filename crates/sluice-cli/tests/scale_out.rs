//! End to end: `sluice experiment scale-out` on a tiny data set in the store's local backend
//! (no server needed): the host alone and 1 and 2 real worker processes, each share computed
//! by its worker from the bucket, a calibration from what was measured, predictions for the
//! asked worker counts, the JSON, the chart, and nothing left behind; its flags are checked.

mod common;

use std::process::Command;

use serde_json::Value;

#[test]
fn scale_out_measures_one_and_two_workers_and_predicts() {
    let run = common::run_experiment(
        &["experiment", "scale-out"],
        &[
            "--num",
            "40000",
            "--table-size",
            "256K",
            "--predicted-workers",
            "1,4,64",
            "--predicted-bytes",
            "1G",
        ],
        "scale-out",
    );
    let (out, report) = (&run.out, &run.report);
    let host = &report["host_only"];
    let input = host["input_bytes"].as_u64().unwrap();
    assert!(host["input_tables"].as_u64().unwrap() >= 2, "{host}");
    assert!(
        host["host_requests"]["puts"].as_u64().unwrap() > 0,
        "{host}"
    );
    assert!(
        report["object_store"]
            .as_str()
            .unwrap()
            .starts_with("file://")
    );

    let checked = report["checked"].as_array().unwrap();
    let workers: Vec<u64> = checked
        .iter()
        .map(|c| c["measured"]["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(workers, [1, 2]);
    for c in checked {
        let m = &c["measured"];
        assert_eq!(m["input_bytes"].as_u64(), Some(input), "{m}");
        let shares = m["shares"].as_array().unwrap();
        assert_eq!(shares.len() as u64, m["workers"].as_u64().unwrap(), "{m}");
        for s in shares {
            assert_ne!(s["side"], "host", "the host takes no share: {m}");
            assert!(s["input_bytes"].as_u64().unwrap() > 0, "{m}");
            assert_eq!(s["retried"], false, "{m}");
            assert!(s["check_seconds"].as_f64().unwrap() > 0.0, "{m}");
        }
        assert_eq!(
            m["worker_cpu_seconds"].as_array().unwrap().len(),
            shares.len(),
            "{m}"
        );
        assert!(c["predicted"]["seconds"].as_f64().unwrap() > 0.0, "{c}");
    }
    // How close the model comes is measured, not asserted (a tiny run's CPU seconds are a few
    // 10 ms ticks); that it compares is.
    for c in checked {
        assert!(c["error"].as_f64().unwrap().is_finite(), "{c}");
    }
    let half = &report["one_worker_half"];
    assert_eq!(half["workers"], 1, "{half}");
    assert!(half["input_bytes"].as_u64().unwrap() < input, "{half}");

    let cal = &report["calibration"];
    for field in [
        "requests_per_open",
        "request_seconds",
        "check_seconds_per_byte",
        "bytes_moved_per_byte",
    ] {
        assert!(cal[field].as_f64().unwrap() > 0.0, "{field}: {cal}");
    }
    assert_eq!(
        report["predicted_job"]["input_bytes"].as_u64(),
        Some(1 << 30)
    );
    for key in ["predicted", "predicted_parallel_checks"] {
        let p = report[key].as_array().unwrap();
        let counts: Vec<u64> = p.iter().map(|p| p["workers"].as_u64().unwrap()).collect();
        assert_eq!(counts, [1, 4, 64], "{key}");
        assert!(
            (p[0]["efficiency"].as_f64().unwrap() - 1.0).abs() < 1e-9,
            "{key}"
        );
        for p in p {
            assert!(p["seconds"].as_f64().unwrap() > 0.0, "{key}: {p}");
        }
    }

    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("scale-out.json")).unwrap())
            .unwrap();
    assert_eq!(&file, report);
    common::assert_charts(out.path(), &["scale_out_throughput"]);
    common::assert_cleaned_up(&run.scratch);
}

#[test]
fn scale_out_flags_are_checked() {
    for (args, named) in [
        (
            &["experiment", "scale-out", "--measured-workers", "2"][..],
            "include 1",
        ),
        (
            &["experiment", "scale-out", "--predicted-workers", "0"],
            "--predicted-workers",
        ),
        (&["experiment", "scale-out", "--num", "10"], "--num"),
        (
            &["experiment", "scale-out", "--object-store", "ftp://x/y"],
            "ftp",
        ),
        (&["bench", "--experiment", "scale-out"], "sluice experiment"),
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
