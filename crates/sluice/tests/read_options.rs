//! Per-read options do what they say: `fill_cache: false` reads without filling the block
//! cache, and `verify_checksums` overrides the database's setting for one read.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{CompressionType, Db, ErrorKind, Options, ReadOptions, TableOptions};

fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

#[test]
fn a_scan_without_fill_cache_leaves_the_cache_empty() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        block_cache_bytes: 8 << 20,
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), options()).unwrap();
        for i in 0..5000 {
            db.put(key(i), [b'v'; 100]).unwrap();
        }
        db.flush().unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    let cold = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    assert_eq!(db.range_opt(&cold, ..).map(Result::unwrap).count(), 5000);
    assert_eq!(db.get_opt(&cold, key(77)).unwrap().unwrap().len(), 100);
    assert_eq!(db.metrics().block_cache_bytes, 0);
    assert_eq!(db.iter().map(Result::unwrap).count(), 5000);
    assert!(db.metrics().block_cache_bytes > 0);
}

#[test]
fn verify_checksums_per_read_catches_what_the_database_default_would_not() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        verify_checksums: false,
        block_cache_bytes: 0,
        table: TableOptions {
            compression: CompressionType::None,
            ..TableOptions::default()
        },
        ..Options::default()
    };
    {
        let db = Db::open(dir.path(), options()).unwrap();
        db.put(b"victim", b"VALUE-THAT-WILL-BE-DAMAGED").unwrap();
        db.flush().unwrap();
    }
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    let at = bytes
        .windows(5)
        .position(|w| w == b"VALUE")
        .expect("the value is stored uncompressed");
    bytes[at] = b'X';
    std::fs::write(&table, bytes).unwrap();

    let db = Db::open(dir.path(), options()).unwrap();
    let verified = ReadOptions {
        verify_checksums: Some(true),
        ..ReadOptions::default()
    };
    let err = db.get_opt(&verified, b"victim").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains(".sst"), "{err}");
    let err = db.range_opt(&verified, ..).next().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    // The database's own setting reads the damaged bytes: that is what turning it off means.
    assert_eq!(
        db.get(b"victim").unwrap().as_deref(),
        Some(&b"XALUE-THAT-WILL-BE-DAMAGED"[..])
    );
}

#[test]
fn ranges_take_rust_range_syntax_and_read_from_both_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    for i in 0..10 {
        db.put(key(i), key(i)).unwrap();
    }
    let keys = |r: sluice::Range| r.map(|e| e.unwrap().0).collect::<Vec<_>>();
    assert_eq!(keys(db.range(key(2)..key(5))), vec![key(2), key(3), key(4)]);
    assert_eq!(
        keys(db.range(key(2)..=key(5))),
        vec![key(2), key(3), key(4), key(5)]
    );
    assert_eq!(keys(db.range(..key(1))), vec![key(0)]);
    assert_eq!(keys(db.range(key(8)..)), vec![key(8), key(9)]);
    assert_eq!(
        db.range(key(2)..=key(5))
            .rev()
            .map(|e| e.unwrap().0)
            .collect::<Vec<_>>(),
        vec![key(5), key(4), key(3), key(2)]
    );
    // Inverted and empty ranges yield nothing (BTreeMap would panic).
    assert_eq!(db.range(key(5)..key(2)).map(Result::unwrap).count(), 0);
    assert_eq!(db.range(key(5)..key(5)).map(Result::unwrap).count(), 0);
    // Both ends meet in the middle, each key once.
    let mut r = db.range(..);
    let mut seen = Vec::new();
    while let (Some(a), b) = (r.next(), r.next_back()) {
        seen.push(a.unwrap().0);
        seen.extend(b.map(|b| b.unwrap().0));
    }
    seen.sort();
    assert_eq!(seen, (0..10).map(key).collect::<Vec<_>>());
    assert!(r.next().is_none() && r.next_back().is_none());
    assert_eq!(db.prefix(b"0000000").map(Result::unwrap).count(), 10);
    assert_eq!(db.prefix(b"\xff").map(Result::unwrap).count(), 0);
}
