//! A compaction filter removes and rewrites live values as compactions pass over them, never
//! what a snapshot can see, and compactions with it still account for every entry.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice::compaction::executor::CompactionMode;
use sluice::{
    CompactionFilter, CompactionOptions, Db, FilterDecision, MemtableOptions, Options, ReadOptions,
};

/// Removes values starting with `expired`, upper-cases those starting with `shout:`.
#[derive(Debug, Default)]
struct Janitor {
    seen: AtomicU64,
}

impl CompactionFilter for Janitor {
    fn name(&self) -> &str {
        "janitor"
    }
    fn filter(&self, _key: &[u8], value: &[u8]) -> FilterDecision {
        self.seen.fetch_add(1, Ordering::Relaxed);
        if value.starts_with(b"expired") {
            FilterDecision::Remove
        } else if value.starts_with(b"shout:") {
            FilterDecision::Change(value.to_ascii_uppercase())
        } else {
            FilterDecision::Keep
        }
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    match i % 4 {
        0 => format!("expired-{i}").into_bytes(),
        1 => format!("shout:{i}").into_bytes(),
        _ => format!("plain-{i}").into_bytes(),
    }
}

#[test]
fn every_mode_filters_live_values_and_spares_snapshots() {
    for mode in CompactionMode::ALL {
        let dir = tempfile::tempdir().unwrap();
        let filter = Arc::new(Janitor::default());
        let options = Options {
            compaction_filter: Some(filter.clone()),
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                mode,
                target_file_size_base: 64 << 10,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..4000 {
            db.put(key(i), value(i)).unwrap();
        }
        // Written after the snapshot: the filter may see these (key 4001 is "shout:").
        let snap = db.snapshot();
        for i in 4000..4004 {
            db.put(key(i), value(i)).unwrap();
        }
        db.compact_range(None, None).unwrap();
        assert!(filter.seen.load(Ordering::Relaxed) > 0, "{mode}");
        // Versions the snapshot sees were not shown to the filter.
        let at_snap = ReadOptions {
            snapshot: Some(&snap),
            ..ReadOptions::default()
        };
        for i in (0..4000).step_by(97) {
            assert_eq!(
                db.get_opt(&at_snap, key(i)).unwrap(),
                Some(value(i)),
                "{mode} {i}"
            );
        }
        drop(snap);
        db.compact_range(None, None).unwrap();
        for i in 0..4004 {
            let expected = match i % 4 {
                0 => None,
                1 => Some(value(i).to_ascii_uppercase()),
                _ => Some(value(i)),
            };
            assert_eq!(db.get(key(i)).unwrap(), expected, "{mode} key {i}");
        }
        let m = db.metrics();
        assert_eq!(m.compaction.filter_removed, 1001, "{mode}");
        assert_eq!(m.compaction.filter_changed, 1001, "{mode}");
        db.check().unwrap();
    }
}

/// Data already in the last level (here ingested straight there) is rewritten in place by
/// `compact_range`, so the filter reaches it too.
#[test]
fn compact_range_filters_the_last_level_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.sst");
    let mut w = sluice::SstFileWriter::create(&file, &Default::default()).unwrap();
    for i in 0..100 {
        w.put(&key(i), &value(i)).unwrap();
    }
    w.finish().unwrap();
    let options = Options {
        compaction_filter: Some(Arc::new(Janitor::default())),
        ..Options::default()
    };
    let db = Db::open(dir.path().join("db"), options).unwrap();
    let report = db.ingest(&[&file], &Default::default()).unwrap();
    assert_eq!(report.files[0].level, 6);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(key(0)).unwrap(), None);
    assert_eq!(db.get(key(1)).unwrap(), Some(b"SHOUT:1".to_vec()));
    assert_eq!(db.metrics().compaction.filter_removed, 25);
    db.check().unwrap();
}
