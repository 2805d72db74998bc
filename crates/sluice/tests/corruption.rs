//! Corruption tests: a flipped byte in a data block, an index block, a footer, the WAL and the
//! MANIFEST each produce a typed error naming the file (never a panic, never a wrong answer);
//! a torn WAL tail recovers up to the last complete record.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sluice::{Db, Error, ErrorKind, Options};
use sluice_sst::format::{FOOTER_LEN, Footer};

fn options() -> Options {
    Options {
        block_cache_bytes: 0, // every read goes to disk
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A database whose data all sits in table files (none in the WAL).
fn db_with_tables(dir: &Path) {
    let db = Db::open(dir, options()).unwrap();
    for i in 0..5000 {
        db.put(key(i), format!("value-{i}-{}", "x".repeat(50)).as_bytes())
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn flip_byte(path: &Path, offset: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    b[0] ^= 0x40;
    f.write_all_at(&b, offset).unwrap();
}

fn footer(path: &Path) -> Footer {
    let bytes = std::fs::read(path).unwrap();
    let at = bytes.len() - FOOTER_LEN;
    Footer::decode(&bytes[at..], path, at as u64).unwrap()
}

/// Reads everything every way; returns the first error.
fn read_all(dir: &Path) -> Result<(), Error> {
    let db = Db::open(dir, options())?;
    for i in (0..5000).step_by(7) {
        db.get(key(i))?;
    }
    for entry in db.iter() {
        entry?;
    }
    db.check()?;
    Ok(())
}

fn assert_corruption_in(err: Error, file: &Path) {
    match &err {
        Error::Corruption { file: f, .. } => {
            assert_eq!(
                f.file_name(),
                file.file_name(),
                "error names the damaged file: {err}"
            );
        }
        other => panic!(
            "expected a corruption error naming {}, got {other}",
            file.display()
        ),
    }
    assert!(err.to_string().contains("corrupt"), "{err}");
}

#[test]
fn flipped_byte_in_a_data_block_is_reported_with_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let table = &files_with_ext(dir.path(), "sst")[0];
    flip_byte(table, 100);
    let err = read_all(dir.path()).unwrap_err();
    assert_corruption_in(err, table);
}

#[test]
fn flipped_byte_in_an_index_block_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let table = &files_with_ext(dir.path(), "sst")[0];
    let index = footer(table).index;
    flip_byte(table, index.offset + index.size / 2);
    let err = read_all(dir.path()).unwrap_err();
    assert_corruption_in(err, table);
}

#[test]
fn flipped_byte_in_a_footer_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let table = &files_with_ext(dir.path(), "sst")[0];
    let len = std::fs::metadata(table).unwrap().len();
    flip_byte(table, len - FOOTER_LEN as u64 + 3);
    let err = read_all(dir.path()).unwrap_err();
    assert_corruption_in(err, table);
}

#[test]
fn truncated_table_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let table = &files_with_ext(dir.path(), "sst")[0];
    let f = OpenOptions::new().write(true).open(table).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len / 2).unwrap();
    let err = read_all(dir.path()).unwrap_err();
    assert_corruption_in(err, table);
}

#[test]
fn missing_table_is_reported_on_open() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let table = &files_with_ext(dir.path(), "sst")[0];
    std::fs::remove_file(table).unwrap();
    let err = Db::open(dir.path(), options())
        .err()
        .expect("open must fail");
    assert_corruption_in(err, table);
}

/// Copies the files of the database in `from` into `to` as a crash would leave them: taken
/// while it is open, so nothing `close` writes (the WAL's final synced length) is in it.
fn crash_image(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "LOCK" {
            std::fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
        }
    }
}

/// Writes `n` keys that stay in the WAL (no flush). With `crash`, `dir` ends up holding the
/// crash image of the database taken before close; otherwise the database is closed cleanly.
fn db_with_wal(dir: &Path, n: u32, crash: bool) -> PathBuf {
    let live = tempfile::tempdir().unwrap();
    let db = Db::open(live.path(), options()).unwrap();
    for i in 0..n {
        db.put(key(i), [b'v'; 300]).unwrap();
    }
    if crash {
        crash_image(live.path(), dir);
    }
    db.close().unwrap();
    if !crash {
        crash_image(live.path(), dir);
    }
    files_with_ext(dir, "log").pop().unwrap()
}

/// The bytes of a log up to its last non-zero one. A live WAL is mapped and reserved ahead of
/// its writer, so a crash image of one ends in zeros.
fn written_len(log: &Path) -> u64 {
    let bytes = std::fs::read(log).unwrap();
    bytes
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |i| i as u64 + 1)
}

#[test]
fn the_zeros_a_crash_leaves_after_the_last_record_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let wal = db_with_wal(dir.path(), 1000, true);
    if cfg!(target_os = "linux") {
        let len = std::fs::metadata(&wal).unwrap().len();
        assert!(len > written_len(&wal), "a live WAL is reserved ahead");
    }
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..1000 {
        assert!(db.get(key(i)).unwrap().is_some(), "key {i}");
    }
    let report = db.recovery_report();
    assert!(report.dropped.is_empty(), "{report:?}");
}

#[test]
fn torn_wal_tail_recovers_every_complete_record() {
    let dir = tempfile::tempdir().unwrap();
    let wal = db_with_wal(dir.path(), 1000, true);
    let f = OpenOptions::new().write(true).open(&wal).unwrap();
    f.set_len(written_len(&wal) - 100).unwrap(); // tear the last record
    drop(f);
    let db = Db::open(dir.path(), options()).unwrap();
    let present: Vec<bool> = (0..1000)
        .map(|i| db.get(key(i)).unwrap().is_some())
        .collect();
    let recovered = present.iter().take_while(|p| **p).count();
    assert_eq!(recovered, 999, "all but the torn last write survive");
    assert!(
        present[recovered..].iter().all(|p| !p),
        "no write after a gap"
    );
    let report = db.recovery_report();
    assert_eq!(report.dropped.len(), 1, "{report:?}");
    assert!(report.dropped_bytes() > 0 && report.dropped[0].file == wal);
}

#[test]
fn a_wal_cut_short_after_a_clean_close_is_corruption() {
    // Close syncs the WAL and records its length: every byte of it was promised.
    let dir = tempfile::tempdir().unwrap();
    let wal = db_with_wal(dir.path(), 1000, false);
    let f = OpenOptions::new().write(true).open(&wal).unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 100).unwrap();
    drop(f);
    let err = Db::open(dir.path(), options())
        .err()
        .expect("open must fail");
    assert_corruption_in(err, &wal);
}

#[test]
fn flipped_byte_in_the_middle_of_the_wal_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let wal = db_with_wal(dir.path(), 1000, false);
    flip_byte(&wal, 1000);
    let err = Db::open(dir.path(), options())
        .err()
        .expect("open must fail");
    assert_corruption_in(err, &wal);
}

#[test]
fn flipped_byte_in_unsynced_wal_records_is_dropped_only_at_a_point_in_time() {
    // No write was synced: after a power loss any of them may be gone, so point-in-time
    // recovery stops at the damage (and reports it); tolerating only torn tails refuses.
    let dir = tempfile::tempdir().unwrap();
    let wal = db_with_wal(dir.path(), 1000, true);
    flip_byte(&wal, 1000);
    let strict = Options {
        wal_recovery_mode: sluice::options::WalRecoveryMode::TolerateCorruptedTailRecords,
        ..options()
    };
    let err = Db::open(dir.path(), strict).err().expect("open must fail");
    assert_corruption_in(err, &wal);
    let db = Db::open(dir.path(), options()).unwrap();
    assert!(db.get(key(0)).unwrap().is_some());
    assert!(db.get(key(999)).unwrap().is_none());
    let report = db.recovery_report();
    assert_eq!(report.dropped.len(), 1);
    assert!(report.dropped[0].offset <= 1000, "{report:?}");
}

#[test]
fn flipped_byte_in_the_manifest_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    let manifest = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    flip_byte(&manifest, 20);
    let err = Db::open(dir.path(), options())
        .err()
        .expect("open must fail");
    assert_corruption_in(err, &manifest);
}

#[test]
fn oversized_keys_and_values_are_rejected_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options {
        max_key_size: 100,
        max_value_size: 1000,
        ..options()
    };
    let db = Db::open(dir.path(), opts).unwrap();
    db.put(b"ok", b"v").unwrap();
    assert!(matches!(
        db.put([b'k'; 101], b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        db.put(b"k", [0; 1001]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.get(b"ok").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn bad_options_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options();
    opts.table.block_size = 0;
    let err = Db::open(dir.path(), opts).err().expect("open must fail");
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("block_size")),
        "{err}"
    );
}

#[test]
fn unwritten_page_in_the_newest_wal_recovers_to_the_point_before_it() {
    // After a power loss the unsynced tail of the newest WAL can reach the disk out of order:
    // a page that was never written reads as zeros while a later page survived.
    let dir = tempfile::tempdir().unwrap();
    let live = tempfile::tempdir().unwrap();
    let wal = {
        let db = Db::open(live.path(), options()).unwrap();
        db.put_opt(&sluice::WriteOptions { sync: true }, b"synced", b"1")
            .unwrap();
        for i in 0..80u32 {
            db.put(key(i), [b'x'; 2000]).unwrap();
        }
        crash_image(live.path(), dir.path());
        files_with_ext(dir.path(), "log").pop().unwrap()
    };
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[32768..32768 + 4096].fill(0);
    std::fs::write(&wal, &bytes).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"synced").unwrap().as_deref(), Some(&b"1"[..]));
    let present: Vec<bool> = (0..80).map(|i| db.get(key(i)).unwrap().is_some()).collect();
    let kept = present.iter().take_while(|p| **p).count();
    assert!(kept > 0 && kept < 80, "recovered a prefix: {kept}");
    assert!(present[kept..].iter().all(|p| !p), "nothing after the gap");
}

#[test]
fn a_stray_file_with_a_huge_number_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    drop(Db::open(dir.path(), options()).unwrap());
    std::fs::write(dir.path().join(format!("{}.log", u64::MAX)), b"").unwrap();
    let err = Db::open(dir.path(), options())
        .err()
        .expect("open must fail");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn a_corruption_a_background_compaction_finds_stays_a_corruption_for_later_calls() {
    let dir = tempfile::tempdir().unwrap();
    db_with_tables(dir.path());
    for table in files_with_ext(dir.path(), "sst") {
        flip_byte(&table, 100);
    }
    let db = Db::open(dir.path(), {
        let mut opts = options();
        opts.compaction.l0_compaction_trigger = 2;
        opts
    })
    .unwrap();
    // Two L0 tables over the damaged tables below start an automatic L0 compaction into the
    // base level, which reads the damaged block and fails in the background. A flush cut at
    // the base level's boundaries can make
    // the first round's flush two tables already: its compaction may fail while the second
    // round writes, which then sees the failure first.
    let mut seen = None;
    'rounds: for round in 0..2 {
        for i in (0..5000).step_by(50) {
            if let Err(e) = db.put(key(i), format!("round-{round}").as_bytes()) {
                seen = Some(e);
                break 'rounds;
            }
        }
        if let Err(e) = db.flush() {
            seen = Some(e);
            break;
        }
    }
    let err = match seen {
        Some(e) => e,
        None => db.wait_for_background_work().unwrap_err(),
    };
    assert!(matches!(err, Error::Background(_)), "{err}");
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(".sst"), "names the table: {err}");
    // Every later write is refused with the same kind.
    let refused = db.put(b"after", b"failure").unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::Corruption, "{refused}");
}
