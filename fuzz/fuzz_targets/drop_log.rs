//! The drop log decoder and the host's audit from arbitrary bytes: every failure is an error,
//! never a panic; whatever decodes re-encodes to the same records, and the audit of it
//! (against a few written keys and a spec with a snapshot and a range tombstone) returns.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::compaction_iter::drop_log::{DropLogReader, DropLogWriter, DropReason};
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::range_del::{RangeTombstone, Tombstones};
use sluice_sst::table::TableOptions;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, log)) = data.split_first() else {
        return;
    };
    if let Some(decoded) = records(log) {
        let mut writer = DropLogWriter::default();
        for (key, reason) in &decoded {
            writer.push(key, *reason);
        }
        let again = records(writer.take().as_bytes()).expect("a re-encoded log decodes");
        assert!(again == decoded, "re-encoding changed the records");
    }
    let spec = CompactionSpec {
        inputs: Vec::new(),
        snapshots: vec![u64::from(flags >> 1)],
        bottommost: flags & 1 == 1,
        table: TableOptions::default(),
        storage: Default::default(),
        target_file_size: 1 << 20,
        grandparents: Vec::new(),
        max_grandparent_overlap_bytes: u64::MAX,
        lower: None,
        upper: None,
        filter: None,
        merge_operator: None,
        range_tombstones: Some(Arc::new(Tombstones::new(&[RangeTombstone {
            start: b"a".to_vec(),
            end: b"m".to_vec(),
            seq: 100,
        }]))),
        blob_relocation: None,
        task_nonce: None,
        log_drops: false,
    };
    let Ok(mut audit) = DropAudit::new(&spec, None, None, log) else {
        return;
    };
    for (key, seq) in [(&b"b"[..], 50), (b"b", 0), (b"k", 7), (b"x", 3)] {
        if audit
            .written(&make_internal_key(key, seq, ValueKind::Value))
            .is_err()
        {
            return;
        }
    }
    let _ = audit.finish();
});

/// Every record of `log`, or `None` if it does not decode.
fn records(log: &[u8]) -> Option<Vec<(Vec<u8>, DropReason)>> {
    let mut reader = DropLogReader::new(log);
    let mut out = Vec::new();
    while reader.advance().ok()? {
        out.push((reader.key().to_vec(), reader.reason()));
    }
    Some(out)
}
