//! Tests of the experiment's parts and of whole runs against stand-in workers that never
//! answer (every share is re-run on the host, so the balancers, the reader and the sampler all
//! run for real). Runs with real `sluice worker` processes are in `sluicedb-cli`'s tests (crates/sluice-cli).

use sluice_bench::keys::KeyFormat;
use sluice_bench::stream::SplitMix64;

use super::report::{Comparison, Settings, median, skew};
use super::workload::{self, ReadCheck, Reference, Values};
use super::*;
use crate::copro::tests::unreachable_worker;

fn small(worker_program: WorkerProgram) -> MstoreConfig {
    MstoreConfig {
        num: 48 << 10,
        worker_program,
        ..MstoreConfig::default()
    }
}

#[test]
fn bad_parameters_are_named() {
    let ok = MstoreConfig::default();
    ok.validate().unwrap();
    let cases: Vec<(MstoreConfig, &str)> = vec![
        (
            MstoreConfig {
                num: 10,
                ..ok.clone()
            },
            "num",
        ),
        (
            MstoreConfig {
                workers: 1,
                ..ok.clone()
            },
            "workers",
        ),
        (
            MstoreConfig {
                ranges_per_owner: 0,
                ..ok.clone()
            },
            "ranges",
        ),
        (
            MstoreConfig {
                reference_every: 0,
                ..ok.clone()
            },
            "reference_every",
        ),
        (
            MstoreConfig {
                value_size: 8,
                ..ok.clone()
            },
            "value size",
        ),
        (
            MstoreConfig {
                throttle: 0.5,
                ..ok.clone()
            },
            "throttle",
        ),
        (
            MstoreConfig {
                repeat: 0,
                ..ok.clone()
            },
            "repeat",
        ),
        (
            MstoreConfig {
                variants: Vec::new(),
                ..ok.clone()
            },
            "variants",
        ),
        (
            MstoreConfig {
                key_size: 4,
                ..ok.clone()
            },
            "key_size",
        ),
    ];
    for (config, name) in cases {
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains(name), "{name}: {err}");
    }
}

#[test]
fn values_name_their_key_and_the_reader_notices_otherwise() {
    let mut rng = SplitMix64::for_benchmark(1, 0, 0);
    let mut values = Values::new(40, &mut rng);
    let v = values.value(12345).to_vec();
    assert_eq!(v.len(), 40);
    assert!(workload::names_key(&v, 12345, 40));
    assert!(!workload::names_key(&v, 12346, 40));
    assert!(!workload::names_key(&v[..39], 12345, 40));

    let dir = tempfile::tempdir().unwrap();
    let db = sluice::Db::open(dir.path(), sluice::Options::default()).unwrap();
    let keys = KeyFormat::new(16, 1000).unwrap();
    let reference = Reference {
        num: 1000,
        every: 10,
    };
    assert_eq!(reference.len(), 100);
    assert_eq!(
        workload::load(&db, keys, &mut values, reference).unwrap(),
        100
    );
    let all = workload::check_all(&db, keys, reference, 40);
    assert_eq!((all.checked, all.misses), (100, 0));
    // One key lost, one key holding another's value: two misses, the first one named.
    db.delete(keys.key(10)).unwrap();
    db.put(keys.key(20), values.value(21)).unwrap();
    let found = workload::check_all(&db, keys, reference, 40);
    assert_eq!((found.checked, found.misses), (100, 2));
    assert_eq!(found.first_miss.as_deref(), Some("key 10: not found"));
    let mut sum = ReadCheck::default();
    sum.merge(found.clone());
    sum.merge(all);
    assert_eq!((sum.checked, sum.misses), (200, 2));
    assert_eq!(sum.first_miss, found.first_miss);
}

#[test]
fn zipfian_writes_are_hot_in_the_first_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = sluice::Db::open(dir.path(), sluice::Options::default()).unwrap();
    let keys = KeyFormat::new(16, 10_000).unwrap();
    let mut rng = SplitMix64::for_benchmark(3, 0, 0);
    let mut values = Values::new(16, &mut rng);
    workload::write_zipfian(&db, keys, &mut values, 10_000, 20_000, &mut rng).unwrap();
    let bounds = workload::boundaries(keys, 10_000, 4).unwrap();
    assert_eq!(bounds, vec![keys.key(2500), keys.key(5000), keys.key(7500)]);
    let first = db.range(..&bounds[0]).map(Result::unwrap).count();
    let last = db.range(&bounds[2]..).map(Result::unwrap).count();
    assert!(first > 2 * last, "first quarter {first}, last {last}");
    assert!(workload::boundaries(keys, 3, 4).is_err());
}

#[test]
fn skew_and_median() {
    assert_eq!(skew(&[300, 100]), Some(3.0));
    assert_eq!(skew(&[0, 0]), Some(1.0));
    assert_eq!(skew(&[5, 0]), None);
    let run = |ops: f64| VariantReport {
        ops_per_sec: ops,
        ..sample_variant(Variant::Basic, ops)
    };
    let m = median(vec![run(3.0), run(1.0), run(2.0), run(4.0)]).unwrap();
    assert_eq!(m.ops_per_sec, 2.0);
    assert_eq!(m.runs_ops_per_sec, vec![3.0, 1.0, 2.0, 4.0]);
    assert!(median(Vec::new()).is_err());
}

fn sample_variant(variant: Variant, ops_per_sec: f64) -> VariantReport {
    let balanced = variant.balanced();
    VariantReport {
        name: variant.name().into(),
        ops: 1000,
        seconds: 1000.0 / ops_per_sec,
        ops_per_sec,
        mb_per_sec: ops_per_sec * 116.0 / 1e6,
        write_amp: Some(if balanced { 4.4 } else { 4.0 }),
        owner_bytes: if balanced { vec![11, 10] } else { vec![30, 10] },
        skew: Some(if balanced { 1.1 } else { 3.0 }),
        moves: u64::from(balanced) * 2,
        splits: u64::from(balanced),
        relocations: u64::from(balanced) * 5,
        read_misses: 0,
        reads_checked: 500,
        first_miss: None,
        range_owners: vec![0, if balanced { 1 } else { 0 }, 1, 1],
        compactions: 7,
        compaction_input_bytes: 70,
        owner_shares: vec![5, 2],
        owner_compaction_bytes: vec![50, 20],
        retries: 0,
        write_stall_seconds: 0.5,
        samples: (0..4u32)
            .map(|i| Sample {
                seconds: f64::from(i) * 0.25,
                owner_bytes: vec![10 * u64::from(i + 1), 10],
                owner_compaction_mb_s: vec![f64::from(i), 1.0],
            })
            .collect(),
        runs_ops_per_sec: vec![ops_per_sec],
    }
}

fn sample_report() -> MstoreReport {
    let config = MstoreConfig::default();
    let plan = CpuPlan::new(vec![0, 1], 2);
    MstoreReport::new(
        Settings::new(&config, &plan),
        vec![
            sample_variant(Variant::Basic, 1000.0),
            sample_variant(Variant::Balanced, 1150.0),
        ],
        3.0,
    )
}

#[test]
fn json_has_the_fields_the_issue_names_and_the_comparison() {
    let report = sample_report();
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["experiment"], "mstore");
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    for (v, name) in variants.iter().zip(["mstore-basic", "mstore"]) {
        assert_eq!(v["name"], name);
        for field in ["ops_per_sec", "owner_bytes", "skew", "moves", "read_misses"] {
            assert!(!v[field].is_null(), "{name} lacks {field}");
        }
        assert_eq!(v["samples"].as_array().unwrap().len(), 4);
    }
    let c: &Comparison = report.comparison.as_ref().unwrap();
    assert!((c.throughput_ratio.unwrap() - 1.15).abs() < 1e-9);
    assert!((c.write_amp_ratio.unwrap() - 1.1).abs() < 1e-9);
    let text = table::render(&report);
    assert!(text.contains("throughput 1.15x"), "{text}");
    assert!(text.contains("skew 3.00 -> 1.10"), "{text}");
    assert!(text.contains("One run per variant"), "{text}");
}

#[test]
fn outputs_are_the_json_and_every_chart() {
    let dir = tempfile::tempdir().unwrap();
    let written = write_outputs(&sample_report(), dir.path()).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names[0], "mstore.json");
    for stem in [
        "mstore_owner_bytes_basic",
        "mstore_owner_bytes",
        "mstore_compaction_basic",
        "mstore_compaction",
        "mstore_throughput",
    ] {
        for ext in ["png", "svg"] {
            let name = format!("{stem}.{ext}");
            assert!(names.contains(&name), "{name} missing from {names:?}");
        }
    }
    let png = dir.path().join("mstore_owner_bytes_basic.png");
    assert!(sluice_bench::charts::testing::distinct_colors(&png) >= 3);
}

#[test]
fn both_variants_run_and_only_the_balanced_one_moves_ranges() {
    let scratch = tempfile::tempdir().unwrap();
    let config = small(unreachable_worker());
    let report = run_mstore(&config, scratch.path()).unwrap();
    let [basic, balanced] = &report.variants[..] else {
        panic!("{:?}", report.variants);
    };
    for v in [basic, balanced] {
        assert_eq!(v.read_misses, 0, "{v:?}");
        assert!(
            v.reads_checked > config.num / config.reference_every,
            "{v:?}"
        );
        assert_eq!(v.owner_bytes.len(), 2);
        assert!(v.owner_bytes.iter().all(|b| *b > 0), "{v:?}");
        assert!(v.ops_per_sec > 0.0 && v.write_amp.unwrap() > 0.5, "{v:?}");
        assert!(v.compactions > 0, "{v:?}");
        // Every share went to a worker that never answers and was re-run on the host.
        assert!(v.retries > 0, "{v:?}");
        assert!(!v.samples.is_empty(), "{v:?}");
        assert_eq!(v.range_owners.len(), config.ranges());
    }
    assert_eq!((basic.moves, basic.relocations), (0, 0));
    assert_eq!(basic.range_owners, vec![0, 0, 0, 0, 1, 1, 1, 1]);
    // The hot keys make owner 0 the fullest; the balancer moves some of its ranges away.
    assert!(basic.skew.unwrap() > 1.25, "{basic:?}");
    assert!(balanced.moves > 0, "{balanced:?}");
    assert!(balanced.range_owners.iter().filter(|o| **o == 1).count() > 4);
    assert!(report.comparison.is_some());
    // Only the secret and the workers' logs are left in the scratch directory.
    let left: Vec<String> = std::fs::read_dir(scratch.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter()
            .all(|n| n == "worker-secret" || n.starts_with("worker-")),
        "{left:?}"
    );
}
