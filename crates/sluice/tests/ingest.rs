//! Bulk load: tables from `SstFileWriter` ingested into a database read back exactly as if
//! their entries had been written last, survive reopen and compaction, keep snapshots
//! repeatable, and bad files are refused with an error naming them.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{contents, key, small};
use sluice::{Db, ErrorKind, IngestOptions, Options, ReadOptions, SstFileWriter, TableOptions};

/// Writes an external table: `Some(v)` puts, `None` deletes.
fn external(path: &Path, entries: &[(Vec<u8>, Option<Vec<u8>>)]) -> PathBuf {
    let mut w = SstFileWriter::create(path, &TableOptions::default()).unwrap();
    for (k, v) in entries {
        match v {
            Some(v) => w.put(k, v).unwrap(),
            None => w.delete(k).unwrap(),
        }
    }
    w.finish().unwrap().path
}

fn puts(range: std::ops::Range<u32>, tag: &str) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    range
        .map(|i| (key(i), Some(format!("{tag}-{i}").into_bytes())))
        .collect()
}

#[test]
fn a_file_that_overlaps_nothing_moves_to_the_last_level_as_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, small()).unwrap();
    db.put(b"a", b"before").unwrap();
    let file = external(&dir.path().join("bulk.sst"), &puts(0..2000, "bulk"));
    let report = db.ingest(&[&file], &IngestOptions::default()).unwrap();
    assert_eq!(report.sequence, None, "{report:?}");
    assert_eq!(report.files[0].level, 6);
    assert!(!report.files[0].rewritten);
    assert!(file.exists(), "copying leaves the original");
    let mut expected: BTreeMap<_, _> = puts(0..2000, "bulk")
        .into_iter()
        .map(|(k, v)| (k, v.unwrap()))
        .collect();
    expected.insert(b"a".to_vec(), b"before".to_vec());
    assert_eq!(contents(&db), expected);
    db.check().unwrap();
    drop(db);
    let db = Db::open(&db_dir, small()).unwrap();
    assert_eq!(contents(&db), expected);
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), expected);
}

#[test]
fn an_overlapping_file_is_newer_than_everything_it_overlaps() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, small()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..3000 {
        db.put(key(i), b"old").unwrap();
        model.insert(key(i), b"old".to_vec());
    }
    db.wait_for_background_work().unwrap();
    // Some of the range is still in the memtable: it must be flushed, not shadow the file.
    for i in 1000..1010 {
        db.put(key(i), b"memtable").unwrap();
    }
    let mut entries = Vec::new();
    for i in (500..1500).step_by(3) {
        let v = (i % 2 == 0).then(|| format!("new-{i}").into_bytes());
        match &v {
            Some(v) => model.insert(key(i), v.clone()),
            None => model.remove(&key(i)),
        };
        entries.push((key(i), v));
    }
    for i in 1000..1010 {
        if i % 3 != 2 {
            model.insert(key(i), b"memtable".to_vec());
        }
    }
    let before = db.snapshot();
    let old_view: BTreeMap<_, _> = db
        .range_opt(
            &ReadOptions {
                snapshot: Some(&before),
                ..ReadOptions::default()
            },
            ..,
        )
        .map(Result::unwrap)
        .collect();
    let file = external(&dir.path().join("update.sst"), &entries);
    let report = db
        .ingest(&[&file], &IngestOptions { move_files: true })
        .unwrap();
    assert!(report.sequence.is_some(), "{report:?}");
    assert!(report.files[0].rewritten);
    assert!(!file.exists(), "move_files deletes the original");
    assert_eq!(contents(&db), model);
    // The snapshot taken before the ingest does not see it.
    let opts = ReadOptions {
        snapshot: Some(&before),
        ..ReadOptions::default()
    };
    let again: BTreeMap<_, _> = db.range_opt(&opts, ..).map(Result::unwrap).collect();
    assert_eq!(again, old_view);
    drop(before);
    // Later writes are newer than the ingested entries.
    db.put(key(501), b"after").unwrap();
    model.insert(key(501), b"after".to_vec());
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    drop(db);
    let db = Db::open(&db_dir, small()).unwrap();
    assert_eq!(contents(&db), model);
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

#[test]
fn a_live_snapshot_gets_the_files_a_sequence_number_even_without_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db"), small()).unwrap();
    let snap = db.snapshot();
    let file = external(&dir.path().join("x.sst"), &puts(0..10, "x"));
    let report = db.ingest(&[&file], &IngestOptions::default()).unwrap();
    assert!(report.files[0].rewritten);
    let opts = ReadOptions {
        snapshot: Some(&snap),
        ..ReadOptions::default()
    };
    assert_eq!(db.get_opt(&opts, key(3)).unwrap(), None);
    assert_eq!(db.get(key(3)).unwrap().as_deref(), Some(&b"x-3"[..]));
}

#[test]
fn bad_files_are_refused_naming_them_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, small()).unwrap();
    db.put(b"k", b"v").unwrap();
    let expect_err = |files: &[&Path], kind: ErrorKind, needle: &str| {
        let err = db.ingest(files, &IngestOptions::default()).unwrap_err();
        assert_eq!(err.kind(), kind, "{err}");
        assert!(err.to_string().contains(needle), "{needle}: {err}");
    };
    // Two files of one ingest that overlap.
    let a = external(&dir.path().join("a.sst"), &puts(0..10, "a"));
    let b = external(&dir.path().join("b.sst"), &puts(5..15, "b"));
    expect_err(&[&a, &b], ErrorKind::InvalidArgument, "overlap");
    // A table of a database (its entries have sequence numbers).
    let other = Db::open(dir.path().join("other"), Options::default()).unwrap();
    other.put(b"x", b"y").unwrap();
    other.flush().unwrap();
    let foreign = std::fs::read_dir(dir.path().join("other"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    expect_err(&[&foreign], ErrorKind::InvalidArgument, "sequence number");
    // A damaged block.
    let damaged = external(&dir.path().join("d.sst"), &puts(0..100, "d"));
    let mut bytes = std::fs::read(&damaged).unwrap();
    bytes[20] ^= 0x10;
    std::fs::write(&damaged, bytes).unwrap();
    expect_err(&[&damaged], ErrorKind::Corruption, "d.sst");
    // Not a table at all.
    let junk = dir.path().join("junk.sst");
    std::fs::write(&junk, b"definitely not a table").unwrap();
    expect_err(&[&junk], ErrorKind::Corruption, "junk.sst");
    assert_eq!(
        contents(&db),
        BTreeMap::from([(b"k".to_vec(), b"v".to_vec())])
    );
    db.check().unwrap();
}

#[test]
fn the_writer_refuses_keys_out_of_order_and_empty_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.sst");
    let mut w = SstFileWriter::create(&path, &TableOptions::default()).unwrap();
    w.put(b"b", b"1").unwrap();
    let err = w.put(b"a", b"2").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = w.put(b"b", b"2").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    w.put(b"c", b"3").unwrap();
    assert_eq!(w.finish().unwrap().entries, 2);
    let empty = SstFileWriter::create(dir.path().join("e.sst"), &TableOptions::default()).unwrap();
    let err = empty.finish().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(
        !dir.path().join("e.sst").exists(),
        "no partial file is left"
    );
    drop(SstFileWriter::create(dir.path().join("dropped.sst"), &TableOptions::default()).unwrap());
    assert!(!dir.path().join("dropped.sst").exists());
}

/// Found by the model test: writes before an ingest that takes a sequence number, and writes
/// after it, must never end up in one L0 file (a memtable flushed later, or a WAL replayed at
/// open), whose sequence numbers would straddle the ingested file's.
#[test]
fn writes_around_an_ingest_reopen_without_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, small()).unwrap();
    db.put(key(10), b"old").unwrap();
    db.flush().unwrap();
    // In the memtable, outside the file's range: no flush is needed for overlap.
    db.put(key(900), b"before").unwrap();
    let file = external(&dir.path().join("x.sst"), &puts(5..20, "x"));
    let report = db.ingest(&[&file], &IngestOptions::default()).unwrap();
    assert_eq!(report.files[0].level, 0, "{report:?}");
    db.put(key(15), b"after").unwrap();
    db.put(key(901), b"after").unwrap();
    let expected = contents(&db);
    assert_eq!(expected.get(&key(10)), Some(&b"x-10".to_vec()));
    assert_eq!(expected.get(&key(15)), Some(&b"after".to_vec()));
    // Reopen with the last writes in the WAL only, as a crash leaves them.
    std::mem::drop(db);
    let db = Db::open(&db_dir, small()).unwrap();
    assert_eq!(contents(&db), expected);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), expected);
    db.check().unwrap();
}

/// A merge operand the database's operator refuses is refused at ingest, as it is at a write,
/// rather than failing every later read of its key.
#[test]
fn a_merge_operand_the_operator_refuses_is_refused_at_ingest() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        merge_operator: Some(std::sync::Arc::new(sluice::merge_operator::U64Add)),
        ..small()
    };
    let db = Db::open(dir.path().join("db"), options).unwrap();
    let path = dir.path().join("bad.sst");
    let mut w = SstFileWriter::create(&path, &TableOptions::default()).unwrap();
    w.merge(b"hits", &5u64.to_le_bytes()).unwrap();
    w.merge(b"misses", b"five").unwrap();
    w.finish().unwrap();
    let e = db.ingest(&[&path], &IngestOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let text = e.to_string();
    assert!(text.contains("refuses the operand of key misses"), "{text}");
    assert_eq!(
        db.get("hits").unwrap(),
        None,
        "nothing of the file was ingested"
    );
    // Operands the operator takes are combined with what the database holds.
    db.merge("hits", 2u64.to_le_bytes()).unwrap();
    let good = dir.path().join("good.sst");
    let mut w = SstFileWriter::create(&good, &TableOptions::default()).unwrap();
    w.merge(b"hits", &5u64.to_le_bytes()).unwrap();
    w.finish().unwrap();
    db.ingest(&[&good], &IngestOptions::default()).unwrap();
    assert_eq!(db.get("hits").unwrap(), Some(7u64.to_le_bytes().to_vec()));
}

/// With levels sized dynamically the levels above the base level stay empty, ingests
/// included: a file overlapping the base level goes to L0, as RocksDB places it, not into the
/// empty level just above it.
#[test]
fn a_file_over_the_base_level_goes_to_l0() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir, small()).unwrap();
    for i in 0..500 {
        db.put(key(i), b"old").unwrap();
    }
    db.compact_range(None, None).unwrap();
    let files = |db: &Db| -> Vec<usize> { db.metrics().levels.iter().map(|l| l.files).collect() };
    assert_eq!(db.metrics().base_level, 6);
    assert!(files(&db)[6] > 0 && files(&db)[..6].iter().all(|&n| n == 0));
    let file = external(&dir.path().join("x.sst"), &puts(100..200, "x"));
    let report = db.ingest(&[&file], &IngestOptions::default()).unwrap();
    assert_eq!(report.files[0].level, 0, "{report:?}");
    assert!(files(&db)[1..6].iter().all(|&n| n == 0), "{:?}", files(&db));
    assert_eq!(db.get(key(150)).unwrap().as_deref(), Some(&b"x-150"[..]));
    assert_eq!(db.get(key(300)).unwrap().as_deref(), Some(&b"old"[..]));
}
