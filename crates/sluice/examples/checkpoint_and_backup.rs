//! Copies of a live database: a checkpoint (an openable copy, tables hard-linked) and
//! incremental backups with `BackupEngine` (create, list, verify, restore, purge).
//!
//! Run it with `cargo run -p sluicedb --example checkpoint_and_backup`. It works in a fresh
//! temporary directory, deleted at the end.

use sluice::backup::BackupEngine;
use sluice::{Db, Options};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path().join("db"), Options::default())?;
    for i in 0..1000u32 {
        db.put(format!("key{i:04}").as_bytes(), b"first")?;
    }
    db.flush()?; // some tables on disk, so there is something to link and share

    // A checkpoint is a copy as of the call, made while the database keeps serving reads
    // and writes. The target directory must not exist, or be empty.
    let checkpoint_dir = dir.path().join("checkpoint");
    let report = db.checkpoint(&checkpoint_dir)?;
    println!(
        "checkpoint: {} tables linked, {} copied, {} WALs copied, at sequence {}",
        report.tables_linked, report.tables_copied, report.wals_copied, report.sequence
    );
    let copy = Db::open(&checkpoint_dir, Options::default())?;
    assert_eq!(copy.get(b"key0007")?.as_deref(), Some(&b"first"[..]));
    copy.close()?;

    // Backups are full, restorable copies; tables an earlier backup stored are not copied
    // again. The backup directory can live on another disk (another `FileSystem`, too).
    let backups = BackupEngine::open(dir.path().join("backups"), sluice::fs::os_fs())?;
    let first = backups.create(&db)?;
    for i in 0..100u32 {
        db.put(format!("key{i:04}").as_bytes(), b"second")?;
    }
    let second = backups.create(&db)?;
    for report in [&first, &second] {
        println!(
            "backup {}: {} tables copied, {} shared with earlier backups, {} bytes copied",
            report.meta.id, report.tables_copied, report.tables_shared, report.bytes_copied
        );
    }

    for meta in backups.list()? {
        let verified = backups.verify(meta.id)?; // reads every file, checks size and CRC32C
        println!(
            "backup {} (sequence {}, {} files, {} bytes): verified {} files",
            meta.id,
            meta.sequence,
            meta.files.len(),
            meta.size(),
            verified.files
        );
    }

    // Restore the first backup into a new directory and open it: the later writes are not in it.
    let restored_dir = dir.path().join("restored");
    backups.restore(first.meta.id, &restored_dir)?;
    let restored = Db::open(&restored_dir, Options::default())?;
    assert_eq!(restored.get(b"key0007")?.as_deref(), Some(&b"first"[..]));
    assert_eq!(db.get(b"key0007")?.as_deref(), Some(&b"second"[..]));
    restored.close()?;

    // Keep the newest backup only; tables no remaining backup needs are deleted.
    let deleted = backups.purge_old(1)?;
    println!(
        "purged {deleted} old backup(s); {} left",
        backups.list()?.len()
    );
    db.close()?;
    Ok(())
}
