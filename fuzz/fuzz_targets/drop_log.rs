//! The drop log decoder and the host's audit from arbitrary bytes: every failure is an error,
//! never a panic; whatever decodes re-encodes to the same records and a canonical log that
//! re-encodes to itself, and the audit of it (against a few written keys and a spec with a snapshot and a range
//! tombstone) returns.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::compaction_iter::drop_log::{
    DropLog, DropLogWriter, DropReason, merged_with_written,
};
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::range_del::{RangeTombstone, Tombstones};

/// The written entries the log is placed among.
const WRITTEN: [(&[u8], u64); 4] = [(b"b", 50), (b"b", 0), (b"k", 7), (b"x", 3)];

fuzz_target!(|data: &[u8]| {
    let Some((&flags, log)) = data.split_first() else {
        return;
    };
    let written: Vec<Vec<u8>> = WRITTEN
        .iter()
        .map(|&(key, seq)| make_internal_key(key, seq, ValueKind::Value))
        .collect();
    // A log that decodes re-encodes canonically: encoding what the canonical log decodes to
    // gives the same bytes.
    if let Ok(merged) = merged_with_written(log, &written) {
        let canonical = encode(&merged);
        let again = merged_with_written(canonical.as_bytes(), &written)
            .expect("a re-encoded log decodes");
        assert!(again == merged, "re-encoding changed the records");
        assert!(encode(&again) == canonical, "re-encoding is not stable");
    }
    let spec = CompactionSpec {
        snapshots: vec![u64::from(flags >> 1)],
        bottommost: flags & 1 == 1,
        target_file_size: 1 << 20,
        range_tombstones: Some(Arc::new(Tombstones::new(&[RangeTombstone {
            start: b"a".to_vec(),
            end: b"m".to_vec(),
            seq: 100,
        }]))),
        ..CompactionSpec::default()
    };
    let Ok(mut audit) = DropAudit::new(&spec, None, None, log) else {
        return;
    };
    for key in &written {
        if audit.written(key, None).is_err() {
            return;
        }
    }
    let _ = audit.finish();
});

/// A writer's log of the entries of a merged order.
fn encode(merged: &[(Vec<u8>, Option<DropReason>)]) -> DropLog {
    let mut writer = DropLogWriter::in_order();
    for (key, reason) in merged {
        match reason {
            Some(reason) => writer.push(key, *reason),
            None => writer.written(key),
        }
    }
    writer.take()
}
