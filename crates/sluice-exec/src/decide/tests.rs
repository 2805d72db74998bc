//! Tests of formula (1), the configuration's validation and the counters.

use proptest::prelude::*;

use super::*;

fn share(large_value_share: f64) -> Measurements {
    Measurements {
        large_value_share,
        ..Measurements::default()
    }
}

#[test]
fn document_004_configuration() {
    let host = DecisionConfig::host();
    assert_eq!(
        (host.cpu_weight, host.mem_weight, host.value_weight),
        (0.0, 0.0, 1.0)
    );
    assert_eq!((host.threshold, host.large_value_bytes), (0.7, 32 * 1024));
    let worker = DecisionConfig::worker();
    assert_eq!(worker.large_value_bytes, 16 * 1024);
    assert_eq!(
        DecisionConfig {
            large_value_bytes: host.large_value_bytes,
            ..worker
        },
        host
    );
    host.validate().unwrap();
    worker.validate().unwrap();

    let below = decide(&host, &share(0.69));
    assert_eq!(below.mode, CompactionMode::Pipelined);
    assert!((below.f - 0.69).abs() < 1e-12);
    assert!(
        below.reason.contains("< threshold 0.700"),
        "{}",
        below.reason
    );
    // At the threshold the pipeline is switched off.
    let at = decide(&host, &share(0.7));
    assert_eq!(at.mode, CompactionMode::Sequential);
    assert!(at.reason.contains(">= threshold 0.700"), "{}", at.reason);
    assert_eq!(decide(&host, &share(1.0)).mode, CompactionMode::Sequential);
    // With α = β = 0 a saturated machine still pipelines small values.
    let busy = Measurements {
        cpu_use: 1.0,
        process_cpu_use: 1.0,
        mem_use: 1.0,
        large_value_share: 0.0,
    };
    assert_eq!(decide(&host, &busy).mode, CompactionMode::Pipelined);
}

#[test]
fn weights_combine_the_terms() {
    let cfg = DecisionConfig {
        cpu_weight: 0.5,
        mem_weight: 0.25,
        value_weight: 0.25,
        threshold: 0.6,
        large_value_bytes: 1024,
    };
    let m = Measurements {
        cpu_use: 0.8,
        process_cpu_use: 0.1,
        mem_use: 0.4,
        large_value_share: 0.2,
    };
    let d = decide(&cfg, &m);
    // 0.5 * 0.8 + 0.25 * 0.4 + 0.25 * 0.2
    assert!((d.f - 0.55).abs() < 1e-12, "{}", d.f);
    assert_eq!(d.mode, CompactionMode::Pipelined);
    assert_eq!(d.inputs, m);
    // The system-wide CPU use enters f, the process's does not.
    let busier = decide(&cfg, &Measurements { cpu_use: 1.0, ..m });
    assert!((busier.f - 0.65).abs() < 1e-12);
    assert_eq!(busier.mode, CompactionMode::Sequential);
    let own = decide(
        &cfg,
        &Measurements {
            process_cpu_use: 1.0,
            ..m
        },
    );
    assert_eq!(own.f, d.f);
    // Each term appears in the log line.
    for part in [
        "0.500*cpu 0.800",
        "0.250*mem 0.400",
        "(> 1024 B) 0.200",
        "= 0.550",
    ] {
        assert!(d.reason.contains(part), "{part:?} not in {}", d.reason);
    }
    assert!(d.to_string().starts_with("pipelined (process cpu 0.100)"));

    // All weights 0: always pipelined (the CoPro paper's plain CoPro).
    let off = DecisionConfig {
        value_weight: 0.0,
        ..DecisionConfig::host()
    };
    off.validate().unwrap();
    assert_eq!(decide(&off, &share(1.0)).mode, CompactionMode::Pipelined);
}

#[test]
fn out_of_range_inputs_are_clamped() {
    let host = DecisionConfig::host();
    let d = decide(&host, &share(5.0));
    assert_eq!((d.f, d.mode), (1.0, CompactionMode::Sequential));
    assert!(d.reason.contains("clamped"), "{}", d.reason);
    assert_eq!(d.inputs.large_value_share, 5.0);
    assert_eq!(decide(&host, &share(-3.0)).f, 0.0);
    let nan = decide(&host, &share(f64::NAN));
    assert_eq!((nan.f, nan.mode), (0.0, CompactionMode::Pipelined));
    assert_eq!(decide(&host, &share(f64::INFINITY)).f, 1.0);
    // An unvalidated NaN weight makes f NaN: the cheaper, sequential choice.
    let bad = DecisionConfig {
        cpu_weight: f64::NAN,
        ..host
    };
    assert_eq!(
        decide(&bad, &Measurements::default()).mode,
        CompactionMode::Sequential
    );
}

#[test]
fn validation() {
    let host = DecisionConfig::host();
    let invalid = [
        DecisionConfig {
            cpu_weight: f64::NAN,
            ..host
        },
        DecisionConfig {
            mem_weight: -0.1,
            ..host
        },
        DecisionConfig {
            value_weight: f64::INFINITY,
            ..host
        },
        DecisionConfig {
            threshold: 0.0,
            ..host
        },
        DecisionConfig {
            threshold: -1.0,
            ..host
        },
        DecisionConfig {
            threshold: f64::NAN,
            ..host
        },
        DecisionConfig {
            threshold: f64::INFINITY,
            ..host
        },
    ];
    for cfg in invalid {
        match cfg.validate() {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("decision"), "{msg}"),
            other => panic!("{cfg:?}: {other:?}"),
        }
    }
    for cfg in [
        DecisionConfig {
            threshold: 1e-9,
            ..host
        },
        DecisionConfig {
            threshold: 2.5,
            cpu_weight: 3.0,
            mem_weight: 0.0,
            large_value_bytes: 0,
            ..host
        },
    ] {
        cfg.validate().unwrap();
    }
}

#[test]
fn counters() {
    let c = DecisionCounters::default();
    let host = DecisionConfig::host();
    for s in [0.1, 0.9, 0.2, 0.7, 0.0] {
        c.record(&decide(&host, &share(s)));
    }
    assert_eq!((c.pipelined(), c.sequential()), (3, 2));
}

fn valid_config() -> impl Strategy<Value = DecisionConfig> {
    (
        0.0..1e6f64,
        0.0..1e6f64,
        0.0..1e6f64,
        1e-9..1e6f64,
        any::<u64>(),
    )
        .prop_map(|(a, b, c, t, bytes)| DecisionConfig {
            cpu_weight: a,
            mem_weight: b,
            value_weight: c,
            threshold: t,
            large_value_bytes: bytes,
        })
}

fn finite() -> impl Strategy<Value = f64> {
    prop_oneof![0.0..=1.0f64, -1e300..1e300f64]
}

proptest! {
    #[test]
    fn decide_finite_and_consistent(
        cfg in valid_config(),
        (cpu, proc_cpu, mem, large) in (finite(), finite(), finite(), finite()),
    ) {
        prop_assert!(cfg.validate().is_ok());
        let m = Measurements {
            cpu_use: cpu,
            process_cpu_use: proc_cpu,
            mem_use: mem,
            large_value_share: large,
        };
        let d = decide(&cfg, &m);
        prop_assert!(d.f.is_finite());
        prop_assert!(d.f >= 0.0 && d.f <= cfg.cpu_weight + cfg.mem_weight + cfg.value_weight);
        let expected = if d.f >= cfg.threshold {
            CompactionMode::Sequential
        } else {
            CompactionMode::Pipelined
        };
        prop_assert_eq!(d.mode, expected);
        prop_assert_eq!(d, decide(&cfg, &m));
    }

    #[test]
    fn decide_never_panics(
        w in proptest::array::uniform4(any::<f64>()),
        m in proptest::array::uniform4(any::<f64>()),
        bytes: u64,
    ) {
        let cfg = DecisionConfig {
            cpu_weight: w[0],
            mem_weight: w[1],
            value_weight: w[2],
            threshold: w[3],
            large_value_bytes: bytes,
        };
        let _ = cfg.validate();
        let d = decide(&cfg, &Measurements {
            cpu_use: m[0],
            process_cpu_use: m[1],
            mem_use: m[2],
            large_value_share: m[3],
        });
        prop_assert!(matches!(d.mode, CompactionMode::Pipelined | CompactionMode::Sequential));
    }
}
