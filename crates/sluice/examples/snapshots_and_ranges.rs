//! Reading: snapshots, ranges in both directions, prefixes, several keys at once, a scan
//! that leaves the block cache alone, and the low-level cursor (`DbIterator`).
//!
//! Run it with `cargo run -p sluicedb --example snapshots_and_ranges`. It works in a fresh
//! temporary directory, deleted at the end.

use sluice::{Db, Options, ReadOptions};

/// Keys and values as text, for printing.
fn show(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    entries
        .iter()
        .map(|(k, v)| format!("{}={}", text(k), text(v)))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path().join("db"), Options::default())?;
    for (key, value) in [
        ("user:1", "ada"),
        ("user:2", "bob"),
        ("user:3", "cy"),
        ("zone:eu", "1"),
    ] {
        db.put(key.as_bytes(), value.as_bytes())?;
    }

    // A snapshot pins the current state: later writes are invisible through it.
    let snapshot = db.snapshot();
    db.put(b"user:2", b"bea")?;
    db.delete(b"user:3")?;
    let at_snapshot = ReadOptions {
        snapshot: Some(&snapshot),
        ..ReadOptions::default()
    };
    assert_eq!(
        db.get_opt(&at_snapshot, b"user:2")?.as_deref(),
        Some(&b"bob"[..])
    );
    assert_eq!(db.get(b"user:2")?.as_deref(), Some(&b"bea"[..]));
    let then: Vec<_> = db
        .range_opt(&at_snapshot, &b"user:"[..]..)
        .collect::<sluice::Result<_>>()?;
    println!("at the snapshot: {:?}", show(&then));
    drop(snapshot); // releases what it pinned: compactions may drop the old versions now

    // Ranges take any Rust range of keys, and run from either end (`DoubleEndedIterator`).
    let forward: Vec<_> = db
        .range(&b"user:1"[..]..=&b"user:2"[..])
        .collect::<sluice::Result<_>>()?;
    let backward: Vec<_> = db.range(..).rev().collect::<sluice::Result<_>>()?;
    println!("user:1..=user:2: {:?}", show(&forward));
    println!("everything, last first: {:?}", show(&backward));

    // Every key starting with a prefix.
    let users: Vec<_> = db.prefix("user:").collect::<sluice::Result<_>>()?;
    println!("prefix user:: {:?}", show(&users));

    // Several point reads at one consistent moment; each key has its own result.
    let values = db.multi_get(&ReadOptions::default(), ["user:1", "user:3", "zone:eu"]);
    for (key, value) in ["user:1", "user:3", "zone:eu"].iter().zip(values) {
        println!(
            "multi_get {key}: {:?}",
            value?.map(|v| String::from_utf8_lossy(&v).into_owned())
        );
    }

    // A one-off full scan (an export, a backfill) should not push hot blocks out of the
    // block cache: `fill_cache: false` reads around it.
    let one_off = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    let total = db
        .range_opt(&one_off, ..)
        .collect::<sluice::Result<Vec<_>>>()?
        .len();
    println!("one-off scan saw {total} keys");

    // The cursor underneath: seek to a key, step either way. Moves return a Result because
    // they may read from disk; `key()`/`value()` are only valid while `valid()` is true.
    let mut it = db.raw_iter(&ReadOptions::default())?;
    it.seek(b"user:15")?; // first key >= "user:15"
    assert!(it.valid() && it.key() == b"user:2");
    it.prev()?;
    assert!(it.valid() && it.key() == b"user:1");
    it.seek_for_prev(b"user:9")?; // last key <= "user:9"
    assert!(it.valid() && it.key() == b"user:2");
    it.next()?;
    assert!(it.valid() && it.key() == b"zone:eu");
    it.next()?;
    assert!(!it.valid(), "past the last key");

    // Bounds in ReadOptions limit a cursor (RocksDB's iterate_lower/upper_bound).
    let bounded = ReadOptions {
        lower_bound: Some(b"user:2"),
        upper_bound: Some(b"zone:"),
        ..ReadOptions::default()
    };
    let mut it = db.raw_iter(&bounded)?;
    it.seek_to_first()?;
    while it.valid() {
        println!("bounded cursor: {}", String::from_utf8_lossy(it.key()));
        it.next()?;
    }
    db.close()?;
    Ok(())
}
