//! Range deletes: one tombstone hides a whole key range from every read at once, snapshots
//! taken before keep seeing it, it survives crashes and reopening, compactions drop what it
//! covers, and it goes away once nothing it covers is left.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::compaction::executor::CompactionMode;
use sluice::{CompactionOptions, Db, MemtableOptions, Options, ReadOptions, WriteBatch};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn options(mode: CompactionMode) -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            target_file_size_base: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn keys(db: &Db, opts: &ReadOptions<'_>) -> Vec<Vec<u8>> {
    db.range_opt(opts, ..).map(|e| e.unwrap().0).collect()
}

#[test]
fn a_range_delete_hides_its_keys_and_compaction_then_drops_them_and_itself() {
    for mode in CompactionMode::ALL {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(mode)).unwrap();
        for i in 0..20_000 {
            db.put(key(i), [b'v'; 64]).unwrap();
        }
        db.flush().unwrap();
        let before = db.snapshot();
        db.delete_range(key(5_000), key(15_000)).unwrap();
        // Written after the tombstone: not covered.
        db.put(key(10_000), b"new").unwrap();

        assert_eq!(db.get(key(4_999)).unwrap().map(|v| v.len()), Some(64));
        assert_eq!(db.get(key(5_000)).unwrap(), None, "{mode}");
        assert_eq!(db.get(key(14_999)).unwrap(), None);
        assert_eq!(db.get(key(10_000)).unwrap(), Some(b"new".to_vec()));
        assert_eq!(db.get(key(15_000)).unwrap().map(|v| v.len()), Some(64));
        let now = keys(&db, &ReadOptions::default());
        assert_eq!(now.len(), 10_001, "{mode}");
        let mut back: Vec<_> = db.range(..).rev().map(|e| e.unwrap().0).collect();
        back.reverse();
        assert_eq!(back, now, "{mode}: backward");
        let at_snapshot = ReadOptions {
            snapshot: Some(&before),
            ..ReadOptions::default()
        };
        assert_eq!(
            keys(&db, &at_snapshot).len(),
            20_000,
            "{mode}: the snapshot"
        );
        assert!(db.get_opt(&at_snapshot, key(7_000)).unwrap().is_some());

        // A snapshot keeps the covered versions through compaction.
        db.compact_range(None, None).unwrap();
        assert_eq!(keys(&db, &at_snapshot).len(), 20_000, "{mode}");
        assert_eq!(db.metrics().range_tombstones, 1);
        drop(before);

        // Without it the compaction drops them, then the tombstone itself.
        db.compact_range(None, None).unwrap();
        let m = db.metrics();
        assert!(
            m.compaction.range_covered >= 9_999,
            "{mode}: {:?}",
            m.compaction
        );
        assert_eq!(
            m.range_tombstones, 0,
            "{mode}: the tombstone outlived its keys"
        );
        assert_eq!(keys(&db, &ReadOptions::default()), now);
        db.close().unwrap();
        let db = Db::open(dir.path(), options(mode)).unwrap();
        assert_eq!(keys(&db, &ReadOptions::default()), now);
        db.check().unwrap();
    }
}

#[test]
fn tombstones_survive_reopening_from_the_wal_and_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(CompactionMode::Sequential)).unwrap();
    for i in 0..1_000 {
        db.put(key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    let mut batch = WriteBatch::new();
    batch.delete_range(key(100), key(200));
    batch.put(key(150), b"kept");
    db.write(&Default::default(), batch).unwrap();
    db.delete_range(key(900), key(2_000)).unwrap();
    // Still in the memtable and the WAL: a crash (no close) replays them. Nothing may be
    // writing tables while the crash image is copied.
    db.wait_for_background_work().unwrap();
    std::mem::forget(db);
    let reopened = |dir: &std::path::Path| {
        let db = Db::open(dir, options(CompactionMode::Sequential)).unwrap();
        let got = keys(&db, &ReadOptions::default());
        assert_eq!(got.len(), 1_000 - 100 + 1 - 100);
        assert_eq!(db.get(key(150)).unwrap(), Some(b"kept".to_vec()));
        assert_eq!(db.get(key(950)).unwrap(), None);
        db
    };
    // The lock of the forgotten handle is this process's: reopen in a copy.
    let copy = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.path().join(e.file_name())).unwrap();
    }
    let db = reopened(copy.path());
    // Flushed at open, they are in the MANIFEST now.
    db.close().unwrap();
    reopened(copy.path()).close().unwrap();
}

#[test]
fn a_backward_or_empty_range_is_refused_or_a_no_op() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"b", b"1").unwrap();
    let err = db.delete_range(b"c", b"a").unwrap_err();
    assert!(err.to_string().contains("sorts before"), "{err}");
    db.delete_range(b"b", b"b").unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"1");
    batch.delete_range(b"z", b"y");
    assert!(db.write(&Default::default(), batch).is_err());
    assert_eq!(
        db.get(b"x").unwrap(),
        None,
        "a refused batch writes nothing"
    );
}

#[test]
fn repair_applies_the_tombstones_it_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(CompactionMode::Sequential)).unwrap();
    for i in 0..1_000 {
        db.put(key(i), b"v").unwrap();
    }
    db.flush().unwrap();
    // One tombstone in the MANIFEST, one in the WAL only.
    db.delete_range(key(0), key(100)).unwrap();
    db.flush().unwrap();
    db.delete_range(key(900), key(1_000)).unwrap();
    db.close().unwrap();
    let report = sluice::repair(dir.path(), options(CompactionMode::Sequential)).unwrap();
    assert!(report.manifest_readable);
    let db = Db::open(dir.path(), options(CompactionMode::Sequential)).unwrap();
    assert_eq!(keys(&db, &ReadOptions::default()).len(), 800);
    assert_eq!(
        db.metrics().range_tombstones,
        0,
        "applied, so no longer needed"
    );
}
