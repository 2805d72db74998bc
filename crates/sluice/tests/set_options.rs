//! `set_options` on a live database: the changed options take effect for writes, flushes and
//! compactions from the call on, bad changes are refused whole, and each keyspace has its own.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use common::{contents, key, small};
use sluice::{Db, Error, ErrorKind, KeyspaceOptions};

fn l0_files(db: &Db) -> usize {
    db.metrics().levels[0].files
}

#[test]
fn auto_compactions_stop_and_start_again() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    db.set_options(&[("disable_auto_compactions", "true")])
        .unwrap();
    assert!(db.current_options().compaction.disable_auto_compactions);
    assert!(
        !db.options().compaction.disable_auto_compactions,
        "as opened"
    );
    for round in 0..6u32 {
        for i in 0..200 {
            db.put(key(i), format!("{round}-{i}")).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    assert_eq!(l0_files(&db), 6, "no compaction ran while they were off");
    db.set_options(&[("disable_auto_compactions", "false")])
        .unwrap();
    db.wait_for_background_work().unwrap();
    assert!(
        l0_files(&db) < 2,
        "they run again: {} L0 files",
        l0_files(&db)
    );
    assert_eq!(db.get(key(7)).unwrap(), Some(b"5-7".to_vec()));
}

#[test]
fn a_smaller_write_buffer_flushes_sooner() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = small();
    options.memtable.write_buffer_size = 8 << 20;
    options.compaction.disable_auto_compactions = true;
    let db = Db::open(dir.path(), options).unwrap();
    let value = vec![b'v'; 1000];
    for i in 0..1000 {
        db.put(key(i), &value).unwrap();
    }
    assert_eq!(db.metrics().flush.count, 0, "1 MB fits in 8 MiB");
    db.set_options(&[("write_buffer_size", "65536")]).unwrap();
    for i in 0..1000 {
        db.put(key(i), &value).unwrap();
    }
    db.wait_for_background_work().unwrap();
    let flushes = db.metrics().flush.count;
    assert!(flushes >= 10, "64 KiB memtables: {flushes} flushes");
    let text = std::fs::read_to_string(dir.path().join(sluice::OPTIONS_FILE)).unwrap();
    assert!(text.contains("write_buffer_size: 65536"), "{text}");
}

#[test]
fn bad_changes_are_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let before = db.current_options();
    for (changes, says) in [
        (
            vec![("write_buffer_size", "1048576"), ("compression", "zstd")],
            "not an option a live database can change",
        ),
        (
            vec![("level0_stop_writes_trigger", "lots")],
            "not a whole number",
        ),
        // Valid alone, invalid together: the stop trigger below the slowdown trigger.
        (
            vec![
                ("level0_slowdown_writes_trigger", "30"),
                ("level0_stop_writes_trigger", "10"),
            ],
            "",
        ),
        (vec![("write_buffer_size", "1024")], "write_buffer_size"),
    ] {
        let e = db.set_options(&changes).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{changes:?}: {e}");
        assert!(e.to_string().contains(says), "{changes:?}: {e}");
        assert_eq!(
            format!("{:?}", db.current_options()),
            format!("{before:?}"),
            "{changes:?} changed something"
        );
    }
    // RocksDB's bulk-load step, L0 triggers too high to reach, in one call: the stall
    // triggers and the file threshold of intra-L0 compactions may not be below the trigger.
    let alone = db.set_options(&[("level0_file_num_compaction_trigger", "1000")]);
    assert!(
        alone
            .unwrap_err()
            .to_string()
            .contains("l0_slowdown_writes_trigger")
    );
    db.set_options(&[
        ("level0_file_num_compaction_trigger", "1000"),
        ("level0_slowdown_writes_trigger", "1000"),
        ("level0_stop_writes_trigger", "1000"),
        ("l0_compaction_file_threshold", "1000"),
    ])
    .unwrap();
    db.close().unwrap();
    let ro = Db::open_read_only(dir.path(), small()).unwrap();
    let e = ro
        .set_options(&[("write_buffer_size", "1048576")])
        .unwrap_err();
    assert!(matches!(e, Error::ReadOnly(_)), "{e}");
}

#[test]
fn each_keyspace_has_its_own_and_data_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let users = db
        .create_keyspace("users", &KeyspaceOptions::of_default(&small()))
        .unwrap();
    users
        .set_options(&[("level0_file_num_compaction_trigger", "10")])
        .unwrap();
    assert_eq!(
        users
            .current_options()
            .unwrap()
            .compaction
            .l0_compaction_trigger,
        10
    );
    assert_eq!(
        db.current_options().compaction.l0_compaction_trigger,
        small().compaction.l0_compaction_trigger
    );
    let mut model = std::collections::BTreeMap::new();
    for round in 0..5u32 {
        for i in 0..300 {
            db.put(key(i), format!("{round}")).unwrap();
            model.insert(key(i), format!("{round}").into_bytes());
        }
        db.set_options(&[(
            "target_file_size_base",
            &(((round + 2) * 32) << 10).to_string(),
        )])
        .unwrap();
        db.flush().unwrap();
    }
    db.wait_for_background_work().unwrap();
    assert_eq!(contents(&db), model);
}
