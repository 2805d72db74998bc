//! The PCP experiment end to end at a tiny scale: every figure measured, the JSON complete, the
//! charts real pictures.

use sluice::options::CompactionMode;
use sluice_bench::charts::testing::distinct_colors;

use super::*;

/// A configuration small enough for a debug build: fewer points per sweep than the default.
fn tiny() -> PcpConfig {
    PcpConfig {
        num: 20_000,
        value_sizes: vec![64, 512],
        sub_task_sizes: vec![64 << 10, 512 << 10],
        max_threads: 2,
        max_dirs: 2,
        ..PcpConfig::default()
    }
}

#[test]
fn tiny_run_fills_every_figure_and_draws_every_chart() {
    let scratch = tempfile::tempdir().unwrap();
    let config = tiny();
    let report = run_pcp(&config, scratch.path()).unwrap();
    assert_eq!(
        std::fs::read_dir(scratch.path()).unwrap().count(),
        0,
        "scratch not cleaned"
    );

    let out = tempfile::tempdir().unwrap();
    let written = write_outputs(&report, out.path()).unwrap();
    assert_eq!(written.len(), 1 + 2 * 4);

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("pcp.json")).unwrap())
            .unwrap();
    assert_eq!(json["experiment"], "pcp");
    let figures = json["figures"].as_array().unwrap();
    let ids: Vec<&str> = figures.iter().map(|f| f["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["fig8", "fig10", "fig11", "fig12a", "fig12b"]);
    let expected_points = |id: &str| match id {
        "fig8" => config.value_sizes.len(),
        "fig10" => 3,
        "fig11" => config.sub_task_sizes.len(),
        "fig12a" => config.max_threads,
        _ => config.max_dirs,
    };
    for fig in figures {
        let id = fig["id"].as_str().unwrap();
        let series = fig["series"].as_array().unwrap();
        assert!(!series.is_empty(), "{id}");
        for s in series {
            let points = s["points"].as_array().unwrap();
            assert_eq!(points.len(), expected_points(id), "{id} {}", s["label"]);
            for p in points {
                assert!(p["bandwidth_mb_s"].as_f64().unwrap() > 0.0, "{id}: {p}");
                assert!(p["input_bytes"].as_u64().unwrap() > 0, "{id}: {p}");
                let stages = p["stage_profile"].as_object().unwrap();
                assert_eq!(stages.len(), 7, "{id}");
                assert!(stages["merge"].as_f64().unwrap() > 0.0, "{id}: {p}");
            }
        }
    }
    // Fig. 10 and the summary cover every executor, SCP first at ratio 1.
    let fig10: Vec<&str> = figures[1]["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["executor"].as_str().unwrap())
        .collect();
    let all: Vec<&str> = CompactionMode::ALL.iter().map(|m| m.name()).collect();
    assert_eq!(fig10, all);
    let summary = json["summary"].as_array().unwrap();
    assert_eq!(summary.len(), all.len());
    assert_eq!(summary[0]["ratio_to_scp"], 1.0);
    assert_eq!(summary[0]["entries"], config.num);
    // Fig. 12b spread tables over 1 and 2 directories.
    let dirs: Vec<u64> = figures[4]["series"][0]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["data_dirs"].as_u64().unwrap())
        .collect();
    assert_eq!(dirs, [1, 2]);

    for stem in [
        "fig8_breakdown",
        "fig10_bandwidth_vs_size",
        "fig11_subtask_size",
        "fig12_threads_dirs",
    ] {
        let png = out.path().join(format!("{stem}.png"));
        let bytes = std::fs::metadata(&png).unwrap().len();
        assert!(bytes > 5_000, "{stem}.png is {bytes} bytes");
        assert!(distinct_colors(&png) > 2, "{stem}.png is blank");
        let svg = std::fs::read_to_string(out.path().join(format!("{stem}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("Fig. "), "{stem}.svg");
    }

    let text = table::render(&report);
    for heading in [
        "Fig. 8", "Fig. 10", "Fig. 11", "Fig. 12a", "Fig. 12b", "Summary",
    ] {
        assert!(text.contains(heading), "{heading} missing:\n{text}");
    }
}

#[test]
fn experiment_names_round_trip() {
    for e in Experiment::ALL {
        assert_eq!(e.name().parse::<Experiment>(), Ok(e));
        assert_eq!(e.to_string(), e.name());
    }
    let err = "pipelined".parse::<Experiment>().unwrap_err();
    assert!(err.contains("pcp"), "{err}");
}

#[test]
fn charts_of_an_empty_report_still_render() {
    let report = PcpReport {
        experiment: "pcp".into(),
        document: "000".into(),
        settings: results::Settings {
            num: 0,
            key_size: 16,
            value_size: 100,
            compression: "lz4".into(),
            seed: 0,
            repeat: 1,
            direct_io: false,
            block_size: 4096,
            target_file_size: 2 << 20,
            sub_task_bytes: 512 << 10,
            compute_threads: 2,
            executors: Vec::new(),
            cpus: 1,
        },
        figures: Vec::new(),
        summary: Vec::new(),
        machine_limit: None,
        elapsed_seconds: 0.0,
    };
    let out = tempfile::tempdir().unwrap();
    let written = write_outputs(&report, out.path()).unwrap();
    assert!(written.iter().all(|p| p.exists()));
    assert!(table::render(&report).contains("no data"));
}
