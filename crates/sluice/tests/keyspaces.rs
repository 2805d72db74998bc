//! Keyspaces: separate trees with their own options, one WAL, one sequence of snapshots.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{key, small};
use sluice::{
    Db, Error, Keyspace, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions,
};

fn ks_options() -> KeyspaceOptions {
    KeyspaceOptions::of_default(&small())
}

fn contents_of(ks: &Keyspace) -> BTreeMap<Vec<u8>, Vec<u8>> {
    ks.range(..).map(Result::unwrap).collect()
}

fn wal_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count()
}

/// Copies a live database's files (not its LOCK): what a crash at this moment leaves behind
/// when every write so far reached the OS.
fn crash_image(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_dir() {
            crash_image(&path, &to.join(name));
        } else if name != "LOCK" {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

#[test]
fn keyspaces_are_separate_trees_that_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let users = db.create_keyspace("users", &ks_options()).unwrap();
        db.put(b"k", b"default").unwrap();
        users.put(b"k", b"users").unwrap();
        users.put(b"only-in-users", b"1").unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        assert_eq!(users.get(b"k").unwrap().as_deref(), Some(&b"users"[..]));
        assert_eq!(db.get(b"only-in-users").unwrap(), None);
        assert_eq!(db.keyspace_names(), ["default", "users"]);
        assert!(matches!(
            db.create_keyspace("users", &ks_options()),
            Err(Error::InvalidArgument(_))
        ));
        assert!(db.create_keyspace("default", &ks_options()).is_err());
        assert!(db.create_keyspace("", &ks_options()).is_err());
        db.close().unwrap();
    }
    // The WAL alone holds both keyspaces' writes.
    let db = Db::open(dir.path(), small()).unwrap();
    let users = db.keyspace("users").unwrap();
    assert_eq!(users.get(b"k").unwrap().as_deref(), Some(&b"users"[..]));
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(contents_of(&users).len(), 2);
    assert!(db.keyspace("nope").is_none());
    drop(users);
    db.close().unwrap();
    let names = Db::list_keyspaces(dir.path(), &sluice::fs::OsFileSystem).unwrap();
    assert_eq!(names, ["default", "users"]);
}

#[test]
fn a_batch_across_keyspaces_is_atomic_and_a_snapshot_spans_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.create_keyspace("a", &ks_options()).unwrap();
    let b = db.create_keyspace("b", &ks_options()).unwrap();
    let before = db.snapshot();
    let mut batch = WriteBatch::new();
    batch.put_in(&a, b"x", b"1");
    batch.put_in(&b, b"x", b"2");
    batch.put(b"x", b"0");
    batch.delete_range_in(&a, b"y", b"z");
    db.write(&WriteOptions::default(), batch).unwrap();
    let at = ReadOptions {
        snapshot: Some(&before),
        ..ReadOptions::default()
    };
    assert_eq!(a.get_opt(&at, b"x").unwrap(), None);
    assert_eq!(b.get_opt(&at, b"x").unwrap(), None);
    assert_eq!(a.get(b"x").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(b.get(b"x").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"x").unwrap().as_deref(), Some(&b"0"[..]));

    // A crash image holds the whole batch in every keyspace.
    let image = tempfile::tempdir().unwrap();
    crash_image(dir.path(), image.path());
    let recovered = Db::open(image.path(), small()).unwrap();
    assert_eq!(
        recovered
            .keyspace("a")
            .unwrap()
            .get(b"x")
            .unwrap()
            .as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(
        recovered
            .keyspace("b")
            .unwrap()
            .get(b"x")
            .unwrap()
            .as_deref(),
        Some(&b"2"[..])
    );
}

#[test]
fn each_keyspace_flushes_and_compacts_on_its_own_and_old_wals_go() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let busy = db.create_keyspace("busy", &ks_options()).unwrap();
    let idle = db.create_keyspace("idle", &ks_options()).unwrap();
    idle.put(b"kept", b"in the WAL, then a table").unwrap();
    // Keys in a scattered order, so that flushes overlap and compactions merge them.
    for i in 0..20_000 {
        busy.put(key(i * 7_919 % 20_000), [b'v'; 100]).unwrap();
    }
    db.wait_for_background_work().unwrap();
    let metrics = busy.metrics().unwrap();
    assert!(metrics.flush.count > 1, "the busy keyspace flushed");
    assert!(metrics.compaction.count > 0, "and compacted");
    // The idle keyspace holds its one write in the oldest WAL until it flushes.
    assert!(wal_files(dir.path()) > 1, "the idle keyspace keeps its WAL");
    idle.flush().unwrap();
    db.flush().unwrap();
    for i in 0..2_000 {
        busy.put(key(i), [b'w'; 100]).unwrap();
    }
    busy.flush().unwrap();
    assert!(
        wal_files(dir.path()) <= 2,
        "once every keyspace flushed, old WALs go ({} left)",
        wal_files(dir.path())
    );
    drop((busy, idle));
    db.close().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let busy = db.keyspace("busy").unwrap();
    assert_eq!(contents_of(&busy).len(), 20_000);
    assert_eq!(busy.get(key(1)).unwrap().unwrap(), vec![b'w'; 100]);
    assert_eq!(busy.get(key(19_999)).unwrap().unwrap(), vec![b'v'; 100]);
    assert!(db.keyspace("idle").unwrap().get(b"kept").unwrap().is_some());
    assert!(db.get(key(1)).unwrap().is_none());
}

#[test]
fn a_dropped_keyspace_is_gone_for_good() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let doomed = db.create_keyspace("doomed", &ks_options()).unwrap();
        for i in 0..5_000 {
            doomed.put(key(i), b"x").unwrap();
        }
        doomed.flush().unwrap();
        doomed.put(b"in-wal", b"x").unwrap();
        let id = doomed.id();
        assert!(dir.path().join("keyspaces").join(id.to_string()).exists());
        db.drop_keyspace("doomed").unwrap();
        assert!(!dir.path().join("keyspaces").join(id.to_string()).exists());
        assert!(matches!(
            doomed.get(b"in-wal"),
            Err(Error::InvalidArgument(_))
        ));
        assert!(doomed.put(b"k", b"v").is_err());
        let mut batch = WriteBatch::new();
        batch.put_in(&doomed, b"k", b"v");
        assert!(db.write(&WriteOptions::default(), batch).is_err());
        // A new keyspace of the same name is a new, empty one.
        let again = db.create_keyspace("doomed", &ks_options()).unwrap();
        assert_ne!(again.id(), id);
        assert_eq!(again.get(b"in-wal").unwrap(), None);
        again.put(b"fresh", b"1").unwrap();
        db.close().unwrap();
    }
    // Replay skips the dropped keyspace's WAL entries.
    let db = Db::open(dir.path(), small()).unwrap();
    let again = db.keyspace("doomed").unwrap();
    assert_eq!(contents_of(&again).len(), 1);
    assert_eq!(db.keyspace_names(), ["default", "doomed"]);
}

#[test]
fn keyspaces_have_their_own_options() {
    let dir = tempfile::tempdir().unwrap();
    let counters = KeyspaceOptions {
        merge_operator: Some(Arc::new(sluice::merge_operator::U64Add)),
        ..ks_options()
    };
    let expiring = KeyspaceOptions {
        ttl: Some(std::time::Duration::from_secs(3600)),
        ..ks_options()
    };
    let reopen_options = || Options {
        keyspaces: BTreeMap::from([
            ("counters".to_string(), counters.clone()),
            ("expiring".to_string(), expiring.clone()),
        ]),
        ..small()
    };
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let c = db.create_keyspace("counters", &counters).unwrap();
        let e = db.create_keyspace("expiring", &expiring).unwrap();
        c.merge(b"hits", 2u64.to_le_bytes()).unwrap();
        c.merge(b"hits", 3u64.to_le_bytes()).unwrap();
        assert!(
            db.merge(b"hits", 1u64.to_le_bytes()).is_err(),
            "default has none"
        );
        e.put(b"session", b"abc").unwrap();
        assert_eq!(e.get(b"session").unwrap().as_deref(), Some(&b"abc"[..]));
        db.close().unwrap();
    }
    // A TTL keyspace reopened without its TTL is refused, as a TTL database is.
    assert!(matches!(
        Db::open(dir.path(), small()),
        Err(Error::InvalidArgument(_))
    ));
    let db = Db::open(dir.path(), reopen_options()).unwrap();
    let c = db.keyspace("counters").unwrap();
    c.flush().unwrap();
    c.merge(b"hits", 5u64.to_le_bytes()).unwrap();
    assert_eq!(c.get(b"hits").unwrap(), Some(10u64.to_le_bytes().to_vec()));
    let e = db.keyspace("expiring").unwrap();
    assert_eq!(e.get(b"session").unwrap().as_deref(), Some(&b"abc"[..]));
    assert_eq!(e.options().ttl, Some(std::time::Duration::from_secs(3600)));
}

#[test]
fn a_read_only_open_sees_every_keyspace_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        let ks = db.create_keyspace("ks", &ks_options()).unwrap();
        for i in 0..3_000 {
            ks.put(key(i), b"v").unwrap();
        }
        ks.flush().unwrap();
        ks.put(b"unflushed", b"1").unwrap();
        db.close().unwrap();
    }
    let before = snapshot_files(dir.path());
    let db = Db::open_read_only(dir.path(), small()).unwrap();
    let ks = db.keyspace("ks").unwrap();
    assert_eq!(contents_of(&ks).len(), 3_001);
    assert!(ks.put(b"x", b"y").is_err());
    assert!(db.create_keyspace("new", &ks_options()).is_err());
    assert!(db.drop_keyspace("ks").is_err());
    drop(ks);
    drop(db);
    assert_eq!(snapshot_files(dir.path()), before);
}

/// Every file under `dir` with its length and modification time.
fn snapshot_files(dir: &Path) -> BTreeMap<std::path::PathBuf, (u64, std::time::SystemTime)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                files.insert(entry.path(), (meta.len(), meta.modified().unwrap()));
            }
        }
    }
    files
}

/// Every keyspace's contents, by name.
fn every_keyspace(db: &Db) -> BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>> {
    let mut all = BTreeMap::new();
    all.insert("default".to_string(), common::contents(db));
    for name in db.keyspace_names().into_iter().skip(1) {
        all.insert(name.clone(), contents_of(&db.keyspace(&name).unwrap()));
    }
    all
}

#[test]
fn checkpoints_and_backups_hold_every_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let a = db.create_keyspace("a", &ks_options()).unwrap();
    let b = db.create_keyspace("b", &ks_options()).unwrap();
    for i in 0..4_000 {
        a.put(key(i * 31 % 4_000), b"in a table").unwrap();
        db.put(key(i), b"default").unwrap();
    }
    a.flush().unwrap();
    b.put(b"only in the WAL", b"b").unwrap();
    a.delete_range(key(100), key(200)).unwrap();
    let expected = every_keyspace(&db);
    assert_eq!(expected["a"].len(), 3_900);

    let copy = tempfile::tempdir().unwrap();
    let copy = copy.path().join("checkpoint");
    db.checkpoint(&copy).unwrap();
    let opened = Db::open(&copy, small()).unwrap();
    assert_eq!(every_keyspace(&opened), expected);
    opened.check().unwrap();
    drop(opened);

    let backups = tempfile::tempdir().unwrap();
    let engine =
        sluice::backup::BackupEngine::open(backups.path(), Arc::new(sluice::fs::OsFileSystem))
            .unwrap();
    let first = engine.create(&db).unwrap();
    a.put(b"after the first backup", b"1").unwrap();
    let second = engine.create(&db).unwrap();
    assert!(second.tables_shared > 0, "unchanged tables are shared");
    engine.verify(second.meta.id).unwrap();
    let restored = tempfile::tempdir().unwrap();
    let restored = restored.path().join("restored");
    engine.restore(first.meta.id, &restored).unwrap();
    let opened = Db::open(&restored, small()).unwrap();
    assert_eq!(every_keyspace(&opened), expected);
}

#[test]
fn an_ingested_table_lands_in_its_keyspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let ks = db.create_keyspace("bulk", &ks_options()).unwrap();
    ks.put(key(5), b"older").unwrap();
    db.put(key(5), b"default").unwrap();
    let before = db.snapshot();
    let path = scratch.path().join("bulk.sst");
    let mut writer = sluice::SstFileWriter::create(&path, &Default::default()).unwrap();
    for i in 0..1_000 {
        writer.put(&key(i), b"ingested").unwrap();
    }
    writer.finish().unwrap();
    ks.ingest(&[&path], &sluice::IngestOptions { move_files: true })
        .unwrap();
    assert_eq!(ks.get(key(5)).unwrap().as_deref(), Some(&b"ingested"[..]));
    assert_eq!(db.get(key(5)).unwrap().as_deref(), Some(&b"default"[..]));
    let then = ReadOptions {
        snapshot: Some(&before),
        ..ReadOptions::default()
    };
    assert_eq!(
        ks.get_opt(&then, key(5)).unwrap().as_deref(),
        Some(&b"older"[..])
    );
    // Later writes take later sequence numbers in every keyspace.
    ks.put(key(6), b"after").unwrap();
    drop((ks, before));
    db.close().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let ks = db.keyspace("bulk").unwrap();
    assert_eq!(contents_of(&ks).len(), 1_000);
    assert_eq!(ks.get(key(6)).unwrap().as_deref(), Some(&b"after"[..]));
    assert_eq!(ks.get(key(7)).unwrap().as_deref(), Some(&b"ingested"[..]));
}

#[test]
fn the_default_keyspace_has_a_handle_like_every_other() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let default = db.keyspace("default").unwrap();
    let other = db.create_keyspace("other", &ks_options()).unwrap();
    assert_eq!((default.id(), default.name()), (0, "default"));
    default.put(b"k", b"through the handle").unwrap();
    assert_eq!(
        db.get(b"k").unwrap().as_deref(),
        Some(&b"through the handle"[..])
    );
    let mut batch = WriteBatch::new();
    for ks in [&default, &other] {
        batch.put_in(ks, b"both", ks.name().as_bytes());
    }
    db.write(&WriteOptions::default(), batch).unwrap();
    assert_eq!(db.get(b"both").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(other.get(b"both").unwrap().as_deref(), Some(&b"other"[..]));
    assert!(matches!(
        db.drop_keyspace("default"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(default.get(b"k").unwrap().is_some());
}

#[test]
fn handles_that_outlive_close_fail_and_hold_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let default = db.keyspace("default").unwrap();
    let other = db.create_keyspace("other", &ks_options()).unwrap();
    other.put(b"k", b"v").unwrap();
    db.close().unwrap();
    assert!(matches!(default.get(b"k"), Err(Error::Closed)));
    assert!(matches!(other.put(b"k", b"w"), Err(Error::Closed)));
    // The directory lock went with the close, not with the last handle.
    let again = Db::open(dir.path(), small()).unwrap();
    assert_eq!(
        again
            .keyspace("other")
            .unwrap()
            .get(b"k")
            .unwrap()
            .as_deref(),
        Some(&b"v"[..])
    );
}

#[test]
fn a_crash_leftover_in_a_keyspace_is_deleted_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let db = Db::open(dir.path(), small()).unwrap();
        let ks = db.create_keyspace("ks", &ks_options()).unwrap();
        ks.put(b"k", b"v").unwrap();
        ks.flush().unwrap();
        let id = ks.id();
        drop(ks);
        db.close().unwrap();
        id
    };
    // A table a crashed compaction left behind: numbered, named in no MANIFEST.
    let tree = dir.path().join("keyspaces").join(id.to_string());
    let orphan = tree.join("999990.sst");
    std::fs::write(&orphan, b"half a table").unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    assert!(!orphan.exists());
    assert!(db.recovery_report().orphans_deleted >= 1);
    assert_eq!(
        db.keyspace("ks").unwrap().get(b"k").unwrap().as_deref(),
        Some(&b"v"[..])
    );
}
