//! A table is pinned to what was installed (`sluice::internals::version::pin`): a valid table renamed
//! over a live one, of another size or of the same size, or a symbolic link put in its place,
//! is `Corruption` naming the file at the next open of the table and in `check`, never read
//! as valid; whole-file checksums catch any changed byte; backups refuse to copy a changed
//! table.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::{Path, PathBuf};

use sluice::backup::BackupEngine;
use sluice::{Db, Error, Options};

/// No block cache, so every read goes to the file; no compression, so that two tables of
/// the same keys and same-length values have the same size.
fn options() -> Options {
    let mut options = Options {
        block_cache_bytes: 0,
        ..Options::default()
    };
    options.table.compression = sluice::CompressionType::None;
    options
}

/// Puts keys `{prefix}00000..` with values of `value_len` bytes and flushes them into one
/// table; returns that table's path.
fn flushed_table(db: &Db, dir: &Path, prefix: &str, keys: u32, value_len: usize) -> PathBuf {
    let before = tables(dir);
    for i in 0..keys {
        let value = format!("{prefix}{i}").repeat(value_len);
        db.put(
            format!("{prefix}{i:05}").as_bytes(),
            &value.as_bytes()[..value_len],
        )
        .unwrap();
    }
    db.flush().unwrap();
    let new: Vec<PathBuf> = tables(dir)
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    assert_eq!(new.len(), 1, "one flush, one table: {new:?}");
    new.into_iter().next().unwrap()
}

fn tables(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    v
}

fn assert_corruption_in(result: Result<impl std::fmt::Debug, Error>, file: &Path, what: &str) {
    match result {
        Err(Error::Corruption {
            file: f, reason, ..
        }) => {
            assert_eq!(f, file, "{what}: names another file ({reason})");
        }
        other => panic!(
            "{what}: expected Corruption naming {}, got {other:?}",
            file.display()
        ),
    }
}

/// Reads a key of the table at `victim` (prefix `a`), scans, and checks: each must fail naming
/// the table.
fn every_read_refuses(dir: &Path, victim: &Path) {
    let db = Db::open(dir, options()).unwrap();
    assert_corruption_in(db.get(b"a00003"), victim, "get");
    let scan: Result<Vec<_>, Error> = db.iter().collect();
    assert_corruption_in(scan, victim, "scan");
    assert_corruption_in(db.check(), victim, "check");
    assert_corruption_in(db.verify_file_checksums(), victim, "verify_file_checksums");
    db.close().unwrap();
    let ro = Db::open_read_only(dir, options()).unwrap();
    assert_corruption_in(ro.check(), victim, "check, read-only");
}

/// A database with two tables: `a` (100 keys) and `b`; returns their paths.
fn two_tables(dir: &Path, b_keys: u32, b_value_len: usize) -> (PathBuf, PathBuf) {
    let db = Db::open(dir, options()).unwrap();
    let a = flushed_table(&db, dir, "a", 100, 20);
    let b = flushed_table(&db, dir, "b", b_keys, b_value_len);
    let report = db.check().unwrap();
    assert_eq!(report.files, 2);
    assert_eq!(
        report.file_checksums, 2,
        "every new table records its checksum"
    );
    db.close().unwrap();
    (a, b)
}

#[test]
fn another_valid_table_of_another_size_in_its_place_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_tables(dir.path(), 40, 20);
    assert_ne!(
        std::fs::metadata(&a).unwrap().len(),
        std::fs::metadata(&b).unwrap().len()
    );
    std::fs::copy(&b, &a).unwrap();
    every_read_refuses(dir.path(), &a);
}

#[test]
fn another_valid_table_of_the_same_size_in_its_place_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_tables(dir.path(), 1, 1);
    // The same keys with every value one byte different: a table of exactly the same size
    // and layout, valid in every block.
    let scratch = tempfile::tempdir().unwrap();
    let other = Db::open(scratch.path(), options()).unwrap();
    for i in 0..100u32 {
        let value = format!("a{i}").repeat(20);
        let mut value = value.as_bytes()[..20].to_vec();
        value[0] = b'z';
        other.put(format!("a{i:05}").as_bytes(), &value).unwrap();
    }
    other.flush().unwrap();
    other.close().unwrap();
    let twin = tables(scratch.path()).pop().unwrap();
    assert_eq!(
        std::fs::metadata(&twin).unwrap().len(),
        std::fs::metadata(&a).unwrap().len(),
        "the twin must have the victim's size for this test to mean anything"
    );
    std::fs::copy(&twin, &a).unwrap();
    every_read_refuses(dir.path(), &a);
}

#[test]
fn a_symbolic_link_in_a_tables_place_is_refused_even_to_its_own_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_tables(dir.path(), 40, 20);
    let outside = tempfile::tempdir().unwrap();
    let copy = outside.path().join("elsewhere.sst");
    std::fs::copy(&a, &copy).unwrap();
    std::fs::remove_file(&a).unwrap();
    std::os::unix::fs::symlink(&copy, &a).unwrap();
    every_read_refuses(dir.path(), &a);
}

#[test]
fn a_changed_byte_anywhere_fails_the_whole_file_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = two_tables(dir.path(), 40, 20);
    // A byte inside a data block's contents: the table still opens (footer, index and
    // properties intact), so only a read of that block or of the whole file sees it.
    let mut bytes = std::fs::read(&a).unwrap();
    bytes[20] ^= 0x01;
    std::fs::write(&a, &bytes).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    match db.verify_file_checksums() {
        Err(Error::Corruption { file, reason, .. }) => {
            assert_eq!(file, a);
            assert!(reason.contains("file checksum"), "{reason}");
        }
        other => panic!("expected the file checksum to differ, got {other:?}"),
    }
    assert_corruption_in(db.check(), &a, "check");
}

#[test]
fn backups_refuse_a_changed_table() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_tables(dir.path(), 40, 20);
    let db = Db::open(dir.path(), options()).unwrap();
    let backups = tempfile::tempdir().unwrap();
    let engine = BackupEngine::open(backups.path(), sluice_sst::fs::os_fs()).unwrap();
    engine.create(&db).unwrap();
    let report = db.verify_file_checksums().unwrap();
    assert_eq!((report.files, report.unrecorded), (2, 0));
    db.close().unwrap();

    std::fs::copy(&b, &a).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_corruption_in(engine.create(&db), &a, "backup create");
    db.close().unwrap();
}

#[test]
fn identity_and_checksum_survive_reopen_compaction_and_a_new_manifest() {
    let dir = tempfile::tempdir().unwrap();
    two_tables(dir.path(), 40, 20);
    for _ in 0..2 {
        // Each open writes a new MANIFEST whose first edit lists every table again.
        let db = Db::open(dir.path(), options()).unwrap();
        db.compact_range(None, None).unwrap();
        let report = db.verify_file_checksums().unwrap();
        assert!(report.files >= 1 && report.unrecorded == 0, "{report:?}");
        db.close().unwrap();
    }
}
