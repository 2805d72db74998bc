//! Time to live: expired values vanish from reads at once and from the files at the next
//! compaction over them, snapshots keep what they saw until released, and a database is
//! created with or without a TTL for good. Expiry is whole seconds, so the tests wait for
//! the clock to pass a second boundary instead of faking time.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::time::Duration;

use sluice::compaction::executor::CompactionMode;
use sluice::{
    CompactionFilter, CompactionOptions, Db, FilterDecision, Options, ReadOptions, WriteBatch,
    WriteOptions,
};

fn options(ttl: Option<u64>) -> Options {
    Options {
        ttl: ttl.map(Duration::from_secs),
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Sleeps until the Unix time in seconds has passed `secs`.
fn wait_past(secs: u64) {
    while now() <= secs {
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter().map(Result::unwrap).collect()
}

#[test]
fn expired_values_vanish_from_reads_and_then_from_the_files() {
    for mode in [CompactionMode::Sequential, CompactionMode::Parallel] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(
            dir.path(),
            Options {
                compaction: CompactionOptions {
                    mode,
                    disable_auto_compactions: true,
                    ..CompactionOptions::default()
                },
                ..options(Some(1))
            },
        )
        .unwrap();
        for i in 0..1000u32 {
            db.put(format!("old{i:04}").as_bytes(), b"value").unwrap();
        }
        let written = now();
        db.flush().unwrap();
        // Readers see values as written, without their write time.
        assert_eq!(db.get(b"old0007").unwrap(), Some(b"value".to_vec()));
        let snapshot = db.snapshot();
        // A TTL of one second has passed once the clock is two seconds on.
        wait_past(written + 1);
        let mut batch = WriteBatch::new();
        batch.put(b"new", b"fresh");
        batch.delete(b"old0001");
        db.write(&WriteOptions::default(), batch).unwrap();
        assert_eq!(db.get(b"old0007").unwrap(), None, "{mode}");
        assert_eq!(scan(&db), [(b"new".to_vec(), b"fresh".to_vec())], "{mode}");
        let mut back = db.range(..);
        assert_eq!(back.next_back().transpose().unwrap().unwrap().0, b"new");
        assert!(back.next_back().is_none());
        // A snapshot is a read too: values expire for it as well.
        let at = ReadOptions {
            snapshot: Some(&snapshot),
            ..ReadOptions::default()
        };
        assert_eq!(db.get_opt(&at, b"old0007").unwrap(), None);
        drop(snapshot);

        // Compaction removes them from the files.
        let before = db.metrics().levels[0].size_bytes;
        db.compact_range(None, None).unwrap();
        let m = db.metrics();
        assert!(
            m.compaction.filter_removed >= 999,
            "{mode}: {:?}",
            m.compaction
        );
        let after: u64 = m.levels.iter().map(|l| l.size_bytes).sum();
        assert!(after < before / 4, "{mode}: {after} bytes left of {before}");
        assert_eq!(scan(&db), [(b"new".to_vec(), b"fresh".to_vec())]);
        db.close().unwrap();
    }
}

#[test]
fn a_database_keeps_the_ttl_it_was_created_with() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options(Some(3600))).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    // Without a TTL its values would read with eight bytes of write time appended.
    let Err(err) = Db::open(dir.path(), options(None)) else {
        panic!("a TTL database opened without a TTL");
    };
    assert!(
        err.to_string().contains("open it with Options::ttl"),
        "{err}"
    );
    let Err(err) = Db::open_read_only(dir.path(), options(None)) else {
        panic!("a TTL database opened read-only without a TTL");
    };
    assert!(err.to_string().contains("ttl"), "{err}");
    // Any length will do, and the values are intact.
    let db = Db::open(dir.path(), options(Some(7200))).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    // A checkpoint carries the format.
    let copy = dir.path().join("copy");
    db.checkpoint(&copy).unwrap();
    db.close().unwrap();
    assert!(Db::open(&copy, options(None)).is_err());
    assert_eq!(
        Db::open(&copy, options(Some(60)))
            .unwrap()
            .get(b"k")
            .unwrap(),
        Some(b"v".to_vec())
    );

    // And one written without a TTL cannot take one.
    let plain = tempfile::tempdir().unwrap();
    Db::open(plain.path(), options(None))
        .unwrap()
        .close()
        .unwrap();
    let Err(err) = Db::open(plain.path(), options(Some(60))) else {
        panic!("a TTL was added to a database written without one");
    };
    assert!(err.to_string().contains("cannot be added"), "{err}");
}

#[test]
fn what_a_ttl_does_not_combine_with_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let with_merge = Options {
        merge_operator: Some(std::sync::Arc::new(sluice::merge_operator::U64Add)),
        ..options(Some(60))
    };
    assert!(Db::open(dir.path(), with_merge).is_err());
    assert!(Db::open(dir.path(), options(Some(0))).is_err());
    let db = Db::open(dir.path(), options(Some(60))).unwrap();
    let sst = dir.path().join("external.sst");
    let mut w = sluice::SstFileWriter::create(&sst, &Default::default()).unwrap();
    w.put(b"a", b"1").unwrap();
    w.finish().unwrap();
    let err = db.ingest(&[&sst], &Default::default()).unwrap_err();
    assert!(err.to_string().contains("write times"), "{err}");
}

/// Upper-cases every value it sees.
#[derive(Debug)]
struct Shout;

impl CompactionFilter for Shout {
    fn name(&self) -> &str {
        "shout"
    }
    fn filter(&self, _key: &[u8], value: &[u8]) -> FilterDecision {
        FilterDecision::Change(value.to_ascii_uppercase())
    }
}

#[test]
fn the_users_filter_sees_values_without_their_write_time() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            compaction_filter: Some(std::sync::Arc::new(Shout)),
            ..options(Some(3600))
        },
    )
    .unwrap();
    db.put(b"k", b"quiet").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Changed, and still carrying its write time: readable and not expired.
    assert_eq!(db.get(b"k").unwrap(), Some(b"QUIET".to_vec()));
}
