//! The basics: open a database, put, get and delete single keys, apply several changes
//! atomically (and durably) with a `WriteBatch`, then close and reopen.
//!
//! Run it with `cargo run -p sluicedb --example basics`. It works in a fresh temporary
//! directory, deleted at the end.

use sluice::{Db, Options, WriteBatch, WriteOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");

    // `Options::default()` creates the database if it does not exist.
    let db = Db::open(&path, Options::default())?;

    db.put(b"apple", b"red")?;
    db.put(b"banana", b"yellow")?;
    assert_eq!(db.get(b"apple")?.as_deref(), Some(&b"red"[..]));

    db.delete(b"banana")?;
    assert_eq!(db.get(b"banana")?, None);

    // A batch is applied whole or not at all, and readers see all of it or none of it.
    // `sync: true` also waits until it is on disk (the WAL is synced), so it survives a
    // power failure, not only a crash of this process.
    let mut batch = WriteBatch::new();
    batch.put(b"cherry", b"dark red");
    batch.put(b"grape", b"green");
    batch.delete(b"apple");
    println!(
        "writing a batch of {} changes ({} bytes)",
        batch.count(),
        batch.approximate_size()
    );
    db.write(&WriteOptions { sync: true }, batch)?;

    for key in [&b"apple"[..], b"banana", b"cherry", b"grape"] {
        let value = db.get(key)?;
        println!(
            "{:>8} -> {}",
            String::from_utf8_lossy(key),
            value.map_or("(absent)".into(), |v| String::from_utf8_lossy(&v)
                .into_owned())
        );
    }

    // `close` stops the background threads and syncs the WAL, so every write acknowledged
    // before it is durable. (Dropping the handle does the same, but cannot report an error.)
    db.close()?;

    let db = Db::open(&path, Options::default())?;
    assert_eq!(db.get(b"cherry")?.as_deref(), Some(&b"dark red"[..]));
    assert_eq!(db.get(b"apple")?, None);
    let keys = db.iter().collect::<sluice::Result<Vec<_>>>()?.len();
    println!("reopened: {keys} keys");
    db.close()?;
    Ok(())
}
