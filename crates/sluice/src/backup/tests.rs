#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;

use super::*;
use crate::{CompactionOptions, ErrorKind, MemtableOptions, Options};

fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

fn small() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(Result::unwrap).collect()
}

fn fill(db: &Db, keys: std::ops::Range<u32>, round: u8) {
    for i in keys {
        db.put(key(i), [round; 80]).unwrap();
    }
}

fn os() -> Arc<dyn FileSystem> {
    Arc::new(sluice_sst::fs::OsFileSystem)
}

fn restored(engine: &BackupEngine, id: u64, dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    engine.restore(id, dir).unwrap();
    let db = Db::open(dir, Options::default()).unwrap();
    db.check().unwrap();
    contents(&db)
}

#[test]
fn a_second_backup_copies_only_new_tables_and_each_restores_its_moment() {
    let root = tempfile::tempdir().unwrap();
    let db = Db::open(root.path().join("db"), small()).unwrap();
    let engine = BackupEngine::open(root.path().join("backups"), os()).unwrap();
    fill(&db, 0..5000, 1);
    db.wait_for_background_work().unwrap();
    // A last write only the WAL holds.
    db.put(b"wal-only", b"1").unwrap();
    let first_state = contents(&db);
    let first = engine.create(&db).unwrap();
    assert_eq!(first.meta.id, 1);
    assert!(
        first.tables_copied > 1 && first.tables_shared == 0,
        "{first:?}"
    );

    fill(&db, 5000..5300, 2);
    db.flush().unwrap();
    let second_state = contents(&db);
    let second = engine.create(&db).unwrap();
    assert_eq!(second.meta.id, 2);
    assert!(second.tables_shared > 0, "{second:?}");
    assert!(second.tables_copied < first.tables_copied, "{second:?}");
    assert!(second.bytes_copied < first.bytes_copied / 2, "{second:?}");

    let ids: Vec<u64> = engine.list().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [1, 2]);
    for id in [1, 2] {
        let report = engine.verify(id).unwrap();
        assert_eq!(
            report.files,
            engine.list().unwrap()[id as usize - 1].files.len()
        );
    }
    assert_eq!(restored(&engine, 1, &root.path().join("r1")), first_state);
    assert_eq!(restored(&engine, 2, &root.path().join("r2")), second_state);
    // Restoring over something is refused.
    let err = engine.restore(1, root.path().join("r1")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn a_damaged_backup_file_fails_verify_and_restore_naming_it() {
    let root = tempfile::tempdir().unwrap();
    let db = Db::open(root.path().join("db"), small()).unwrap();
    fill(&db, 0..3000, 1);
    db.flush().unwrap();
    let engine = BackupEngine::open(root.path().join("backups"), os()).unwrap();
    let meta = engine.create(&db).unwrap().meta;
    let victim = meta
        .files
        .iter()
        .find(|f| f.name.ends_with(".sst"))
        .unwrap();
    let path = root.path().join("backups").join(&victim.stored);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    for err in [
        engine.verify(1).unwrap_err(),
        engine.restore(1, root.path().join("r")).unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
        assert!(err.to_string().contains(&victim.stored), "{err}");
    }
    // A description changed by one byte is refused too.
    let meta_path = root.path().join("backups/meta/1");
    let mut text = std::fs::read(&meta_path).unwrap();
    text[20] ^= 0x01;
    std::fs::write(&meta_path, text).unwrap();
    let err = engine.verify(1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Corruption, "{err}");
    assert!(err.to_string().contains("meta"), "{err}");
}

#[test]
fn deleting_a_backup_keeps_what_the_others_share_and_collects_the_rest() {
    let root = tempfile::tempdir().unwrap();
    let backups = root.path().join("backups");
    let db = Db::open(root.path().join("db"), small()).unwrap();
    let engine = BackupEngine::open(&backups, os()).unwrap();
    fill(&db, 0..4000, 1);
    db.flush().unwrap();
    engine.create(&db).unwrap();
    // Rewrite everything, so the next backup shares nothing with the first.
    fill(&db, 0..4000, 2);
    db.compact_range(None, None).unwrap();
    let state = contents(&db);
    engine.create(&db).unwrap();
    fill(&db, 4000..4100, 3);
    engine.create(&db).unwrap();
    let stored = |sub: &str| std::fs::read_dir(backups.join(sub)).unwrap().count();
    let shared_before = stored("shared");

    assert_eq!(engine.purge_old(2).unwrap(), 1);
    let ids: Vec<u64> = engine.list().unwrap().iter().map(|m| m.id).collect();
    assert_eq!(ids, [2, 3]);
    assert!(
        stored("shared") < shared_before,
        "the first backup's tables are gone"
    );
    let needed: BTreeSet<String> = engine
        .list()
        .unwrap()
        .into_iter()
        .flat_map(|m| m.files.into_iter().map(|f| f.stored))
        .collect();
    assert_eq!(stored("shared") + stored("private"), needed.len());
    engine.verify(2).unwrap();
    assert_eq!(restored(&engine, 2, &root.path().join("r2")), state);
    let err = engine.delete(1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn an_unfinished_backup_leaves_nothing_the_next_open_keeps() {
    let root = tempfile::tempdir().unwrap();
    let backups = root.path().join("backups");
    let db = Db::open(root.path().join("db"), small()).unwrap();
    fill(&db, 0..2000, 1);
    {
        let engine = BackupEngine::open(&backups, os()).unwrap();
        engine.create(&db).unwrap();
    }
    // What a crash in the middle of backup 2 leaves: copies and a description not yet renamed.
    std::fs::write(backups.join("shared/000999_00000000_5.sst"), b"12345").unwrap();
    std::fs::write(backups.join("private/2-000998.log"), b"x").unwrap();
    std::fs::write(backups.join("meta/2.tmp"), b"sluice-backup 1\n").unwrap();
    let engine = BackupEngine::open(&backups, os()).unwrap();
    assert!(!backups.join("shared/000999_00000000_5.sst").exists());
    assert!(!backups.join("private/2-000998.log").exists());
    assert!(!backups.join("meta/2.tmp").exists());
    assert_eq!(engine.list().unwrap().len(), 1);
    engine.verify(1).unwrap();
    assert_eq!(engine.create(&db).unwrap().meta.id, 2);
}

#[test]
fn one_engine_changes_a_backup_directory_at_a_time() {
    let root = tempfile::tempdir().unwrap();
    let backups = root.path().join("backups");
    let err = BackupEngine::open_read_only(&backups, os()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let engine = BackupEngine::open(&backups, os()).unwrap();
    let err = BackupEngine::open(&backups, os()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    let err = BackupEngine::open_read_only(&backups, os()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    drop(engine);
    let reader = BackupEngine::open_read_only(&backups, os()).unwrap();
    assert!(reader.list().unwrap().is_empty());
    let db = Db::open(root.path().join("db"), small()).unwrap();
    let err = reader.create(&db).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ReadOnly, "{err}");
    let _second_reader = BackupEngine::open_read_only(&backups, os()).unwrap();
}

/// Two databases whose tables have the same numbers and sizes but other entries: the second
/// backup must copy its own, not take the first one's as already stored.
#[test]
fn a_table_of_the_same_number_and_size_with_other_entries_is_not_shared() {
    let root = tempfile::tempdir().unwrap();
    let engine = BackupEngine::open(root.path().join("backups"), os()).unwrap();
    let mut states = Vec::new();
    for (name, round) in [("a", 1), ("b", 2)] {
        // Uncompressed, so that equal-length values make equal-size tables.
        let options = Options {
            table: crate::TableOptions {
                compression: crate::CompressionType::None,
                ..crate::TableOptions::default()
            },
            ..Options::default()
        };
        let db = Db::open(root.path().join(name), options).unwrap();
        fill(&db, 0..1000, round);
        db.flush().unwrap();
        states.push(contents(&db));
        let report = engine.create(&db).unwrap();
        assert_eq!(report.tables_shared, 0, "{name}: {report:?}");
    }
    let tables = |id: usize| -> Vec<(String, u64)> {
        engine.list().unwrap()[id]
            .files
            .iter()
            .filter(|f| f.name.ends_with(".sst"))
            .map(|f| (f.name.clone(), f.size))
            .collect()
    };
    assert_eq!(
        tables(0),
        tables(1),
        "same numbers and sizes: the attack this test is about"
    );
    assert_ne!(states[0], states[1]);
    assert_eq!(restored(&engine, 1, &root.path().join("r1")), states[0]);
    assert_eq!(restored(&engine, 2, &root.path().join("r2")), states[1]);
}
