//! Reading a database while another handle (usually another process) writes it: a secondary
//! instance (`Db::open_secondary`) that catches up with its primary when asked
//! (`try_catch_up`), sees every write up to one sequence number, and keeps reading the files
//! the primary's compactions delete.
//!
//! Run it with `cargo run -p sluicedb --example secondary`. It works in a fresh temporary
//! directory, deleted at the end.

use sluice::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let primary = Db::open(&path, Options::default())?;
    for i in 0..1000u32 {
        primary.put(format!("order{i:04}"), format!("placed {i}"))?;
    }
    primary.flush()?; // into a table

    // The secondary takes no lock and writes nothing in the primary's directory: its own
    // directory holds its LOG. Opening it reads the primary's state once.
    let follower = Db::open_secondary(&path, dir.path().join("follower"), Options::default())?;
    assert_eq!(
        follower.get("order0999")?.as_deref(),
        Some(&b"placed 999"[..])
    );

    // An iterator made now reads this state to its end, whatever happens after.
    let mut before = follower.range("order0000".."order0010");

    primary.put("order0000", "shipped")?;
    primary.flush()?;
    primary.compact_range(None, None)?; // rewrites (and deletes) every table
    assert_eq!(
        follower.get("order0000")?.as_deref(),
        Some(&b"placed 0"[..])
    );

    // Catch up: every write the primary made is now visible, as of one sequence number.
    let seq = follower.try_catch_up()?;
    assert_eq!(seq, primary.snapshot().sequence());
    assert_eq!(follower.get("order0000")?.as_deref(), Some(&b"shipped"[..]));

    // The old iterator still reads the files the compaction deleted: the secondary held them.
    let (key, value) = before.next().ok_or("the old iterator is empty")??;
    assert_eq!(
        (&key[..], &value[..]),
        (&b"order0000"[..], &b"placed 0"[..])
    );
    println!(
        "caught up to sequence {seq}; the old iterator still reads {} more",
        before.count()
    );

    // A secondary takes no writes.
    assert!(follower.put("k", "v").is_err());
    Ok(())
}
