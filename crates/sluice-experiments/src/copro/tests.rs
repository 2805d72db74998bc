//! Tests of the experiment as a whole: the configuration, the JSON shape, and real runs
//! (host only, and offload to a stand-in worker that never answers, so every share is re-run
//! on the host). Runs with real `sluice worker` processes are in `sluicedb-cli`'s tests (crates/sluice-cli).

use std::collections::BTreeMap;

use sluice::options::CompactionMode;
use sluice::{CompactionOptions, MemtableOptions};
use sluice_offload::{SideMode, Split};

use super::pin::CpuPlan;
use super::report::{Settings, median};
use super::*;

fn side(name: &str, bandwidth: f64, mode: &str) -> SideReport {
    let mut s = SideReport {
        side: name.into(),
        address: (name != "host").then(|| "127.0.0.1:4000".into()),
        shares: 4,
        input_bytes: 40_000_000,
        seconds: 40.0 / bandwidth,
        cpu_seconds: 30.0 / bandwidth,
        modes: BTreeMap::from([(mode.to_string(), 4)]),
        ..SideReport::default()
    };
    s.finish(
        Some(bandwidth / 10.0),
        10.0,
        Some(usize::from(name != "host")),
    );
    s
}

fn run(workload: Workload, value_size: usize, c: Configuration) -> RunReport {
    // Co-KV 10 MB/s a side, CoPro twice that, the rest in between.
    let bw = match c {
        Configuration::HostOnly => 8.0,
        Configuration::CoKv => 10.0,
        Configuration::CoPro => 20.0,
        _ => 15.0,
    };
    let mode = match c {
        Configuration::HostOnly | Configuration::CoKv => "sequential",
        _ => "pipelined",
    };
    RunReport {
        workload: workload.name().into(),
        separation: Separation::Inline,
        value_size,
        configuration: c,
        label: c.label().into(),
        entries: 1000,
        ops: 1000,
        seconds: 10.0,
        ops_per_sec: 100.0 * bw,
        mb_per_sec: bw / 4.0,
        user_bytes: 100_000_000,
        write_amp: Some(if c.offloaded() { 4.1 } else { 4.0 }),
        compactions: 6,
        compaction_input_bytes: 80_000_000,
        compaction_output_bytes: 70_000_000,
        compaction_bandwidth_mb_s: bw,
        offloaded_jobs: if c.offloaded() { 4 } else { 0 },
        retries: 0,
        races: 0,
        races_won_by_host: 0,
        host_pipelined_decisions: u64::from(c == Configuration::CoProPlus),
        host_sequential_decisions: 0,
        host: side("host", bw, mode),
        workers: if c.offloaded() {
            vec![side("worker1", bw, mode)]
        } else {
            Vec::new()
        },
        runs_ops_per_sec: vec![100.0 * bw],
    }
}

/// A report of both workloads at 100 B and 64 KiB, every configuration.
pub(crate) fn sample_report() -> CoproReport {
    let config = CoproConfig {
        data_bytes: 4 << 20,
        value_sizes: vec![100, 64 << 10],
        ..CoproConfig::default()
    };
    let mut runs = Vec::new();
    for w in Workload::ALL {
        for &v in &config.value_sizes {
            for c in Configuration::ALL {
                runs.push(run(w, v, c));
            }
        }
    }
    CoproReport::new(
        Settings::new(&config, &CpuPlan::new(vec![0, 1], 1)),
        runs,
        12.0,
    )
}

#[test]
fn configurations_follow_the_paper() {
    use Configuration::*;
    assert_eq!(HostOnly.offload(), None);
    let half = Split::Static { host_share: 0.5 };
    let seq = SideMode::Fixed(CompactionMode::Sequential);
    let pipe = SideMode::Fixed(CompactionMode::Pipelined);
    let decide = SideMode::Decide;
    assert_eq!(CoKv.offload(), Some((half, seq, seq)));
    assert_eq!(CoPro.offload(), Some((half, pipe, pipe)));
    assert_eq!(CoProPlus.offload(), Some((half, decide, decide)));
    assert_eq!(Dynamic.offload(), Some((Split::Dynamic, decide, decide)));
    let names: Vec<&str> = Configuration::ALL.iter().map(|c| c.name()).collect();
    assert_eq!(names, ["host-only", "co-kv", "copro", "copro+", "dynamic"]);
    for c in Configuration::ALL {
        assert_eq!(serde_json::to_value(c).unwrap(), c.name());
    }
    for w in Workload::ALL {
        assert_eq!(serde_json::to_value(w).unwrap(), w.name());
    }
}

#[test]
fn sizing_scales_with_the_data_and_stays_in_bounds() {
    let s = Sizing::for_data(64_000_000);
    assert_eq!(s.write_buffer_size, 3904 << 10);
    assert_eq!(s.min_offload_bytes, s.write_buffer_size as u64);
    assert_eq!(s.sub_task_bytes, s.min_offload_bytes / 8);
    assert_eq!(s.min_chunk_bytes, 4 * s.sub_task_bytes);
    assert_eq!(s.max_bytes_for_level_base, 4 * s.target_file_size);
    assert_eq!(Sizing::for_data(1 << 30).write_buffer_size, 4 << 20);
    let tiny = Sizing::for_data(1 << 20);
    assert_eq!(tiny.write_buffer_size, 256 << 10);
    assert_eq!(tiny.sub_task_bytes, 32 << 10);
    // Every size is one the engine accepts.
    for data in [MIN_DATA_BYTES, 5 << 20, 64_000_000, MAX_DATA_BYTES] {
        let s = Sizing::for_data(data);
        sluice::Options {
            memtable: MemtableOptions {
                write_buffer_size: s.write_buffer_size,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                target_file_size_base: s.target_file_size,
                max_bytes_for_level_base: s.max_bytes_for_level_base,
                sub_task_bytes: s.sub_task_bytes,
                ..CompactionOptions::default()
            },
            ..sluice::Options::default()
        }
        .validate()
        .unwrap();
    }
}

#[test]
fn bad_parameters_are_named() {
    let ok = CoproConfig::default();
    ok.validate().unwrap();
    assert_eq!(ok.entries(100), 64_000_000 / 116);
    assert_eq!(CoproConfig::data_bytes_for_num(1_000_000), 64_000_000);
    let cases: [(&str, CoproConfig); 5] = [
        (
            "data per run",
            CoproConfig {
                data_bytes: 1000,
                ..ok.clone()
            },
        ),
        (
            "workers",
            CoproConfig {
                workers: 0,
                ..ok.clone()
            },
        ),
        (
            "throttle",
            CoproConfig {
                throttle: 0.5,
                ..ok.clone()
            },
        ),
        (
            "throttle",
            CoproConfig {
                throttle: f64::NAN,
                ..ok.clone()
            },
        ),
        (
            "value sizes",
            CoproConfig {
                value_sizes: vec![0],
                ..ok.clone()
            },
        ),
    ];
    for (needle, config) in cases {
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

#[test]
fn json_has_every_run_side_and_comparison() {
    let report = sample_report();
    let v: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(v["experiment"], "copro");
    assert_eq!(v["document"], "004");
    assert_eq!(v["settings"]["sizing"]["write_buffer_size"], 256 << 10);
    assert_eq!(v["settings"]["cpus"]["host"], 0);
    assert_eq!(v["settings"]["configurations"][3], "copro+");
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 2 * 5);
    let copro = &runs[2];
    assert_eq!(copro["configuration"], "copro");
    assert_eq!(copro["workload"], "fillrandom");
    assert_eq!(copro["host"]["bandwidth_mb_s"], 20.0);
    assert_eq!(copro["host"]["modes"]["pipelined"], 4);
    assert_eq!(copro["workers"][0]["side"], "worker1");
    assert_eq!(copro["workers"][0]["address"], "127.0.0.1:4000");
    assert_eq!(copro["workers"][0]["input_bytes"], 40_000_000);
    assert!(copro["host"].get("address").is_none());
    assert_eq!(copro["retries"], 0);
    assert_eq!(runs[0]["workers"].as_array().unwrap().len(), 0);
    let summary = v["summary"].as_array().unwrap();
    assert_eq!(summary.len(), runs.len());
    assert_eq!(summary[2]["host_bandwidth_vs_co_kv"], 2.0);
    assert_eq!(summary[2]["worker_bandwidth_vs_co_kv"], 2.0);
    assert_eq!(summary[1]["throughput_vs_host_only"], 1.25);
    // Host only has no workers to compare.
    assert!(summary[0]["worker_bandwidth_vs_co_kv"].is_null());
}

#[test]
fn derived_side_figures() {
    let s = side("host", 10.0, "sequential");
    assert_eq!(s.bandwidth_mb_s, 10.0);
    assert_eq!(s.mb_per_cpu_second, Some(40.0 / 3.0));
    assert_eq!(s.process_cpu_percent, Some(10.0));
    let mut idle = SideReport::default();
    idle.finish(None, 0.0, None);
    assert_eq!((idle.bandwidth_mb_s, idle.mb_per_cpu_second), (0.0, None));
    let r = run(Workload::FillRandom, 100, Configuration::CoPro);
    let mut two = r.clone();
    two.workers.push(side("worker2", 30.0, "sequential"));
    let total = two.worker_totals().unwrap();
    assert_eq!(total.input_bytes, 80_000_000);
    assert_eq!(total.modes.len(), 2);
    // Summed seconds: the mean bandwidth of one worker, 80 MB over 2 + 4/3 s.
    assert!(
        (total.bandwidth_mb_s - 24.0).abs() < 1e-9,
        "{}",
        total.bandwidth_mb_s
    );
    assert!(
        run(Workload::FillRandom, 100, Configuration::HostOnly)
            .worker_totals()
            .is_none()
    );
}

#[test]
fn median_is_a_real_run_and_lists_all() {
    let runs: Vec<RunReport> = [3.0, 1.0, 2.0]
        .iter()
        .map(|&t| RunReport {
            ops_per_sec: t,
            ..run(Workload::YcsbA, 100, Configuration::CoKv)
        })
        .collect();
    let m = median(runs).unwrap();
    assert_eq!(m.ops_per_sec, 2.0);
    assert_eq!(m.runs_ops_per_sec, vec![3.0, 1.0, 2.0]);
    assert!(median(Vec::new()).is_err());
}

#[test]
fn outputs_and_an_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_outputs(&sample_report(), dir.path()).unwrap();
    assert_eq!(written[0].file_name().unwrap(), "copro.json");
    assert_eq!(written.len(), 11);
    let empty = CoproReport::new(
        Settings::new(&CoproConfig::default(), &CpuPlan::new(vec![0], 1)),
        Vec::new(),
        0.0,
    );
    assert!(table::render(&empty).contains("no data"));
    assert!(table::render(&empty).contains("nothing pinned"));
    write_outputs(&empty, dir.path()).unwrap();
}

fn small(configurations: Vec<Configuration>, worker_program: WorkerProgram) -> CoproConfig {
    CoproConfig {
        data_bytes: 2 << 20,
        value_sizes: vec![1000],
        configurations,
        worker_program,
        ..CoproConfig::default()
    }
}

#[test]
fn host_only_runs_both_workloads() {
    let scratch = tempfile::tempdir().unwrap();
    let config = small(
        vec![Configuration::HostOnly],
        WorkerProgram::sluice("/nonexistent"),
    );
    let report = run_copro(&config, scratch.path()).unwrap();
    assert_eq!(report.runs.len(), 2);
    for r in &report.runs {
        assert!(r.ops >= r.entries && r.entries > 0, "{r:?}");
        assert!(r.user_bytes >= 1 << 20, "{r:?}");
        assert!(r.compactions > 0 && r.host.input_bytes > 0, "{r:?}");
        assert!(r.host.bandwidth_mb_s > 0.0 && r.ops_per_sec > 0.0);
        // Values compress to about half, so tables may hold fewer bytes than were written.
        assert!(
            r.write_amp.unwrap() > 0.2 && r.compaction_output_bytes > 0,
            "{r:?}"
        );
        assert!(r.workers.is_empty() && r.offloaded_jobs == 0);
    }
    assert_eq!(report.runs[1].workload, "ycsb-a");
    // Only the secret is left in the scratch directory.
    let left: Vec<_> = std::fs::read_dir(scratch.path()).unwrap().collect();
    assert_eq!(left.len(), 1);
}

#[test]
fn separated_runs_move_references_and_face_their_inline_twins() {
    let scratch = tempfile::tempdir().unwrap();
    let config = CoproConfig {
        workloads: vec![Workload::FillRandom],
        separations: Separation::ALL.to_vec(),
        value_sizes: vec![8 << 10],
        min_blob_size: 4 << 10,
        ..small(
            vec![Configuration::HostOnly],
            WorkerProgram::sluice("/nonexistent"),
        )
    };
    let report = run_copro(&config, scratch.path()).unwrap();
    let [inline, blobs] = &report.runs[..] else {
        panic!("{:?}", report.runs)
    };
    assert_eq!(
        (inline.separation, blobs.separation),
        (Separation::Inline, Separation::Blobs)
    );
    // Both compacted; the separated run's compactions read references, and the values of
    // the oldest blob files they collect, not every 8 KiB value.
    assert!(
        inline.compactions > 0 && blobs.compactions > 0,
        "{report:?}"
    );
    assert!(
        blobs.compaction_input_bytes < inline.compaction_input_bytes,
        "{blobs:?}\n{inline:?}"
    );
    let c = report.comparison(blobs).unwrap();
    assert!(c.throughput_vs_inline.is_some() && c.write_amp_vs_inline.is_some());
    assert!(
        report
            .comparison(inline)
            .unwrap()
            .throughput_vs_inline
            .is_none()
    );
    let text = table::render(&report);
    for needle in [
        "fillrandom, 8 KiB values, values from 4 KiB in blob files",
        "Values in blob files against inline (from 4 KiB; ratios)",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    let dir = tempfile::tempdir().unwrap();
    let written = write_outputs(&report, dir.path()).unwrap();
    assert!(
        written
            .iter()
            .any(|p| p.ends_with("copro_bandwidth_fillrandom_blobs.png")),
        "{written:?}"
    );
}

#[test]
fn separation_needs_a_size() {
    let config = CoproConfig {
        separations: vec![Separation::Blobs],
        min_blob_size: 0,
        ..CoproConfig::default()
    };
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("min blob size"), "{err}");
    assert_eq!(Separation::from_name("blobs"), Some(Separation::Blobs));
    assert_eq!(Separation::from_name("both"), None);
    assert_eq!(Workload::from_name("ycsb-a"), Some(Workload::YcsbA));
    assert_eq!(
        Configuration::from_name("copro+"),
        Some(Configuration::CoProPlus)
    );
}

#[test]
fn an_unreachable_worker_costs_retries_not_the_run() {
    let scratch = tempfile::tempdir().unwrap();
    let fake = unreachable_worker();
    let config = CoproConfig {
        workloads: vec![Workload::FillRandom],
        ..small(vec![Configuration::CoKv], fake)
    };
    let report = run_copro(&config, scratch.path()).unwrap();
    let r = &report.runs[0];
    assert!(r.offloaded_jobs > 0, "{r:?}");
    assert_eq!(r.retries, r.offloaded_jobs * config.workers as u64, "{r:?}");
    assert_eq!(r.workers.len(), 1);
    assert_eq!(r.workers[0].address.as_deref(), Some("127.0.0.1:1"));
    assert!(r.host.modes.contains_key("sequential"), "{r:?}");
}

/// A stand-in worker that announces a port nothing listens on, then waits for SIGTERM: every
/// share sent to it fails and is re-run on the host.
pub(crate) fn unreachable_worker() -> WorkerProgram {
    WorkerProgram {
        program: "/bin/sh".into(),
        leading_args: vec![
            "-c".into(),
            "trap 'exit 0' TERM; echo 'sluice worker listening on 127.0.0.1:1'; \
             while true; do sleep 0.05; done"
                .into(),
            "worker".into(),
        ],
    }
}
