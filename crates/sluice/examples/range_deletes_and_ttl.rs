//! Deleting many keys at once: `delete_range` removes a whole key range with one tombstone,
//! and `Options::ttl` lets values expire by themselves. Also prefix filters, which make a
//! scan over one key prefix skip the tables that hold none of it.
//!
//! Run it with `cargo run -p sluicedb --example range_deletes_and_ttl`. It works in fresh
//! temporary directories, deleted at the end.

use std::time::Duration;

use sluice::{Db, Options, PrefixExtractor, ReadOptions, TableOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // Keys "user:0042:event:0007": one prefix per user, 10 bytes long.
    let options = Options {
        table: TableOptions {
            prefix_extractor: Some(PrefixExtractor::Fixed(10)),
            ..TableOptions::default()
        },
        ..Options::default()
    };
    let db = Db::open(dir.path().join("events"), options)?;
    // Four tables over the same key range, each holding every fourth user.
    for table in 0..4 {
        for user in (table..100).step_by(4) {
            for event in 0..50 {
                db.put(
                    format!("user:{user:04}:event:{event:04}").as_bytes(),
                    b"payload",
                )?;
            }
        }
        db.flush()?;
    }
    let snapshot = db.snapshot();

    // Forget user 42: one write, however many events it had.
    db.delete_range(b"user:0042:", b"user:0043:")?;
    // Each item is a Result: collecting into one stops at the first failure.
    let entries = |range: sluice::Range| range.collect::<sluice::Result<Vec<_>>>();
    assert_eq!(entries(db.prefix(b"user:0042:"))?.len(), 0);
    assert_eq!(entries(db.prefix(b"user:0041:"))?.len(), 50);
    // A snapshot taken before still sees what it saw.
    let before = ReadOptions {
        snapshot: Some(&snapshot),
        ..ReadOptions::default()
    };
    let seen = entries(db.range_opt(&before, &b"user:0042:"[..]..&b"user:0043:"[..]))?;
    assert_eq!(seen.len(), 50);
    drop(snapshot);
    // Each scan over one user read one table of the four (or none).
    let skipped = db.metrics().prefix_filter_skips;
    println!("prefix scans skipped {skipped} tables by their filters");
    assert!(skipped >= 3);

    // The next compaction drops the deleted events, and then the tombstone itself.
    db.compact_range(None, None)?;
    let m = db.metrics();
    println!(
        "compaction dropped {} deleted events; {} range tombstones left",
        m.compaction.range_covered, m.range_tombstones
    );
    assert_eq!(m.compaction.range_covered, 50);
    assert_eq!(m.range_tombstones, 0);
    db.close()?;

    // Sessions that expire: a database created with a TTL keeps it for good.
    let sessions = Db::open(
        dir.path().join("sessions"),
        Options {
            ttl: Some(Duration::from_secs(3600)),
            ..Options::default()
        },
    )?;
    sessions.put(b"session:abc", b"alice")?;
    assert_eq!(sessions.get(b"session:abc")?, Some(b"alice".to_vec()));
    sessions.close()?;
    // Opening it without a TTL would misread its values, so it is refused.
    assert!(Db::open(dir.path().join("sessions"), Options::default()).is_err());
    Ok(())
}
