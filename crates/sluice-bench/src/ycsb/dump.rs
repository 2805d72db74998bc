//! `sluice ycsb --dump-ycsb-ops N`: the run phase's operation stream as one JSON line, the
//! reference every peer program's `--dump-ycsb-ops` must reproduce byte for byte
//! (benches/peers/STREAM.md section 8.4), so `benches/peers/run` can prove before measuring
//! that every engine will be asked for the same operations on the same keys.
//!
//! The line, with its fields in this order (serde_json's compact form, no spaces):
//!
//! ```text
//! {"workload":"a","distribution":"zipfian","records":u64,"operations":u64,"seed":u64,
//!  "value_size":u64,"load_value_buffer_fnv1a64":"<16 hex>","run_value_buffer_fnv1a64":"<16 hex>",
//!  "op_counts":{"read":u64,"update":u64,"insert":u64,"scan":u64,"read-modify-write":u64},
//!  "ops_fnv1a64":"<16 hex>","first_ops":["<op> <key number>", ...]}
//! ```
//!
//! `ops_fnv1a64` is FNV-1a 64 over every operation in order: its code byte ([`Operation`]'s
//! discriminant, frozen by the spec), then the key number's 8 little-endian bytes.
//!
//! The stream is exactly the one [`super::run::run`] draws with one client thread: the same
//! [`Chooser`], seeded and advanced the same way, and the same value buffers (stream positions
//! 0 and 1 of thread 0). Only what STREAM.md specifies can be dumped: workloads A, B, C and F
//! (no inserts, no scans: the key space never grows, so the stream does not depend on timing),
//! the zipfian distribution, one thread.

use serde::Serialize;
use sluice::{Error, Result};

use super::YcsbConfig;
use super::workload::{Chooser, Distribution, Operation, Request, Workload};
use crate::stream::{SplitMix64, fnv1a64};
use crate::values::ValueGenerator;

/// Stream position of the load phase's value buffer (STREAM.md 8.1). Frozen by the spec.
pub const LOAD_POSITION: u64 = 0;
/// Stream position of the run phase's value buffer (STREAM.md 8.2). Frozen by the spec.
pub const RUN_POSITION: u64 = 1;

/// FNV-1a 64's offset basis and prime (STREAM.md section 6).
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// How many operations of each type the run phase draws, serialized in code order with the
/// report's names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpCounts {
    pub read: u64,
    pub update: u64,
    pub insert: u64,
    pub scan: u64,
    #[serde(rename = "read-modify-write")]
    pub read_modify_write: u64,
}

impl OpCounts {
    fn add(&mut self, op: Operation) {
        let slot = match op {
            Operation::Read => &mut self.read,
            Operation::Update => &mut self.update,
            Operation::Insert => &mut self.insert,
            Operation::Scan => &mut self.scan,
            Operation::ReadModifyWrite => &mut self.read_modify_write,
        };
        *slot += 1;
    }
}

/// The `--dump-ycsb-ops` line. Field order is part of the format: the peers print the same
/// bytes and the run script compares whole lines.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpsDump {
    pub workload: Workload,
    pub distribution: Distribution,
    pub records: u64,
    pub operations: u64,
    pub seed: u64,
    pub value_size: usize,
    /// FNV-1a 64 of the load phase's value buffer, 16 lowercase hex digits.
    pub load_value_buffer_fnv1a64: String,
    /// FNV-1a 64 of the run phase's value buffer, 16 lowercase hex digits.
    pub run_value_buffer_fnv1a64: String,
    /// Counts over the whole run phase.
    pub op_counts: OpCounts,
    /// FNV-1a 64 of the whole operation stream, 16 lowercase hex digits.
    pub ops_fnv1a64: String,
    /// The first operations as `"<op> <key number>"`.
    pub first_ops: Vec<String>,
}

impl OpsDump {
    /// The one JSON line (without its newline).
    pub fn to_json(&self) -> String {
        // A struct of strings and integers always serializes; the fallback is unreachable.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Checks that `config` describes a stream STREAM.md section 8 specifies; the error says which
/// parameter does not.
pub fn check_dumpable(config: &YcsbConfig) -> Result<()> {
    config.validate()?;
    if matches!(config.workload, Workload::D | Workload::E) {
        return Err(Error::InvalidArgument(format!(
            "workload {} inserts keys, so its stream depends on timing and is not specified \
             (STREAM.md section 8 covers a, b, c and f)",
            config.workload
        )));
    }
    if config.distribution() != Distribution::Zipfian {
        return Err(Error::InvalidArgument(format!(
            "the {} distribution's stream is not specified (STREAM.md section 8 covers zipfian)",
            config.distribution()
        )));
    }
    if config.threads != 1 {
        return Err(Error::InvalidArgument(format!(
            "the dump is the stream of one client thread; {} threads would each draw their own",
            config.threads
        )));
    }
    Ok(())
}

/// Draws the whole run phase of `config` and returns its dump with the first `first`
/// operations listed. Costs one zipfian draw per operation and no I/O.
pub fn dump_ops(config: &YcsbConfig, first: u64) -> Result<OpsDump> {
    check_dumpable(config)?;
    let mut chooser = Chooser::new(
        config.workload,
        config.distribution(),
        config.records,
        config.operations,
        config.seed,
    );
    let mut counts = OpCounts::default();
    let mut digest = FNV_OFFSET;
    let mut first_ops = Vec::new();
    for i in 0..config.operations {
        // No inserts (checked above): the key space stays `records` keys.
        let (op, key) = match chooser.next(config.records) {
            Request::Point(op, key) => (op, key),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "workload {} drew {other:?}, which the dump cannot describe",
                    config.workload
                )));
            }
        };
        counts.add(op);
        for b in std::iter::once(op as u8).chain(key.to_le_bytes()) {
            digest = (digest ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        if i < first {
            first_ops.push(format!("{} {key}", op.name()));
        }
    }
    let buffer = |position| {
        let mut stream = SplitMix64::for_benchmark(config.seed, position, 0);
        let values = ValueGenerator::from_stream(&mut stream, config.value_size);
        format!("{:016x}", fnv1a64(values.buffer()))
    };
    Ok(OpsDump {
        workload: config.workload,
        distribution: config.distribution(),
        records: config.records,
        operations: config.operations,
        seed: config.seed,
        value_size: config.value_size,
        load_value_buffer_fnv1a64: buffer(LOAD_POSITION),
        run_value_buffer_fnv1a64: buffer(RUN_POSITION),
        op_counts: counts,
        ops_fnv1a64: format!("{digest:016x}"),
        first_ops,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::ycsb::generator::ycsb_fnv64;

    fn config(workload: Workload, records: u64, operations: u64) -> YcsbConfig {
        YcsbConfig {
            workload,
            records,
            operations,
            ..YcsbConfig::default()
        }
    }

    /// STREAM.md 8.4's table: `--dump-ycsb-ops 5 --records 1000000 --operations 1000000`,
    /// seed 301, 100-byte values; the same lines the peers' tests assert.
    #[test]
    fn dumps_match_stream_md_test_vectors() {
        let vectors = [
            (
                Workload::A,
                r#"{"workload":"a","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":500317,"insert":0,"scan":0,"read-modify-write":0},"ops_fnv1a64":"404df34d30a68eca","first_ops":["update 49015","update 291577","update 842051","read 342734","read 213555"]}"#,
            ),
            (
                Workload::F,
                r#"{"workload":"f","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":0,"insert":0,"scan":0,"read-modify-write":500317},"ops_fnv1a64":"1fa7a5825029d1cf","first_ops":["read-modify-write 49015","read-modify-write 291577","read-modify-write 842051","read 342734","read 213555"]}"#,
            ),
        ];
        for (workload, want) in vectors {
            let dump = dump_ops(&config(workload, 1_000_000, 1_000_000), 5).unwrap();
            assert_eq!(dump.to_json(), want, "{workload}");
        }
        assert_eq!(ycsb_fnv64(0), 0x5738_07cd_d7e5_c63b);
    }

    /// STREAM.md 8.4's "other sizes".
    #[test]
    fn other_sizes_match_stream_md() {
        let d = dump_ops(&config(Workload::A, 100_000, 100_000), 0).unwrap();
        assert_eq!((d.op_counts.read, d.op_counts.update), (50_086, 49_914));
        assert_eq!(d.ops_fnv1a64, "641351126abda989");
        assert!(d.first_ops.is_empty());
        let d = dump_ops(&config(Workload::F, 1_000, 500_000), 0).unwrap();
        assert_eq!(d.ops_fnv1a64, "cfa71c891be98a0d");
        let d = dump_ops(&config(Workload::A, 2_000_000, 2_000_000), 0).unwrap();
        assert_eq!(d.ops_fnv1a64, "dd48e8cc6aea9737");
        let d = dump_ops(&config(Workload::B, 1_000_000, 300_000), 0).unwrap();
        assert_eq!((d.op_counts.read, d.op_counts.update), (285_013, 14_987));
        assert_eq!(d.ops_fnv1a64, "c02c76510fa18266");
    }

    #[test]
    fn the_dump_counts_what_the_run_phase_executes() {
        let dir = tempfile::tempdir().unwrap();
        let db = sluice::Db::open(dir.path(), sluice::Options::default()).unwrap();
        for workload in [Workload::A, Workload::F] {
            let c = config(workload, 2_000, 3_000);
            let report = super::super::run_ycsb(&c, &db, true, true, &AtomicBool::new(false));
            let run = report.unwrap().run.unwrap();
            let dump = dump_ops(&c, 3).unwrap();
            let mut counts = OpCounts::default();
            for o in &run.operations {
                for _ in 0..o.count {
                    counts.add(o.op);
                }
            }
            assert_eq!(counts, dump.op_counts, "{workload}");
            assert_eq!(dump.first_ops.len(), 3);
        }
        db.close().unwrap();
    }

    #[test]
    fn unspecified_streams_are_refused_with_the_reason() {
        let why = |c: YcsbConfig| dump_ops(&c, 1).unwrap_err().to_string();
        assert!(why(config(Workload::D, 10, 10)).contains("workload d"));
        assert!(why(config(Workload::E, 10, 10)).contains("workload e"));
        let uniform = YcsbConfig {
            distribution: Some(Distribution::Uniform),
            ..config(Workload::A, 10, 10)
        };
        assert!(why(uniform).contains("uniform"));
        let threads = YcsbConfig {
            threads: 2,
            ..config(Workload::A, 10, 10)
        };
        assert!(why(threads).contains("2 threads"));
        assert!(why(config(Workload::A, 0, 10)).contains("records"));
    }

    #[test]
    fn first_ops_stop_at_the_operation_count() {
        let d = dump_ops(&config(Workload::C, 50, 4), 10).unwrap();
        assert_eq!(d.first_ops.len(), 4);
        assert!(d.first_ops.iter().all(|o| o.starts_with("read ")));
        assert_eq!(d.op_counts.read, 4);
        let empty = dump_ops(&config(Workload::C, 50, 0), 10).unwrap();
        assert_eq!(empty.ops_fnv1a64, format!("{FNV_OFFSET:016x}"));
    }
}
