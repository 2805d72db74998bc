//! After a crash or damage: what an open recovered (`recovery_report`), verifying every
//! checksum (`check`), inspecting a database without changing it (`Db::open_read_only`), and
//! rebuilding one whose MANIFEST is damaged (`sluice::repair`).
//!
//! Run it with `cargo run -p sluicedb --example read_only_and_recovery`. It works in a fresh
//! temporary directory, deleted at the end.

use sluice::{Db, ErrorKind, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("db");
    let db = Db::open(&path, Options::default())?;
    for i in 0..2000u32 {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("value {i}").as_bytes(),
        )?;
    }
    db.flush()?; // into a table
    db.put(b"key99999", b"only in the WAL")?; // not flushed: recovered from the WAL
    db.close()?;

    // A read-only open writes nothing: the WAL is replayed into memory, not into tables, and
    // the LOCK is taken shared, so several read-only handles may be open at once.
    let ro = Db::open_read_only(&path, Options::default())?;
    assert!(ro.is_read_only());
    assert_eq!(
        ro.get(b"key99999")?.as_deref(),
        Some(&b"only in the WAL"[..])
    );
    let refused = ro.put(b"k", b"v").err().map(|e| e.kind());
    assert_eq!(refused, Some(ErrorKind::ReadOnly));

    // What the open read, and what (if anything) it did not apply: only a torn tail that no
    // sync covered may be dropped, and every dropped byte is reported here.
    let recovery = ro.recovery_report();
    println!(
        "recovered {} MANIFEST edits, {} WAL records from {} WAL files; {} bytes dropped",
        recovery.manifest_edits,
        recovery.wal_records,
        recovery.wal_files,
        recovery.dropped_bytes()
    );

    // `check` reads every block of every table and verifies its checksum.
    let check = ro.check()?;
    println!(
        "check: {} tables, {} blocks, {} bytes verified",
        check.files, check.blocks, check.bytes
    );
    if !check.recovery.dropped.is_empty() {
        return Err("recovery dropped data".into());
    }
    drop(ro);

    // Damage the MANIFEST (the file that lists the tables): opening now fails with a
    // corruption error naming the file and offset, rather than returning a wrong state.
    let manifest = std::fs::read_dir(&path)?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
        })
        .ok_or("no MANIFEST")?;
    let mut bytes = std::fs::read(&manifest)?;
    *bytes.get_mut(20).ok_or("MANIFEST too short")? ^= 0x55;
    std::fs::write(&manifest, bytes)?;
    match Db::open(&path, Options::default()) {
        Err(e) if e.kind() == ErrorKind::Corruption => println!("open refused: {e}"),
        Err(e) => return Err(e.into()),
        Ok(_) => return Err("a damaged MANIFEST was accepted".into()),
    }

    // Repair rebuilds the database from every table block and WAL record it can read (the
    // database must not be open). What it could not use goes to `lost/`, and is reported.
    let report = sluice::repair(&path, Options::default())?;
    println!(
        "repair: MANIFEST readable: {}, {} tables merged whole, {} WAL records, {} entries kept, {} files set aside in lost/",
        report.manifest_readable,
        report.tables_whole,
        report.wal_records,
        report.output_entries,
        report.lost.len()
    );
    let db = Db::open(&path, Options::default())?;
    assert_eq!(db.get(b"key00042")?.as_deref(), Some(&b"value 42"[..]));
    assert_eq!(
        db.get(b"key99999")?.as_deref(),
        Some(&b"only in the WAL"[..])
    );
    db.close()?;
    Ok(())
}
