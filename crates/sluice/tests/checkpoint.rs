//! Checkpoints: a copy made while the database works opens elsewhere and holds exactly the
//! state of one moment, no earlier than the call, and making it changes nothing in the source.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use common::{contents, key};
use sluice::{Db, ErrorKind, Options, TableOptions};
use sluice_sst::fs::{FileSystem, MemFs};

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{i}-{round}-{}", "v".repeat(60)).into_bytes()
}

/// The shared small tree, with small blocks too.
fn small() -> Options {
    Options {
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        ..common::small()
    }
}

/// Every file of `dir` (but LOCK) and its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap() != "LOCK")
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), bytes)
        })
        .collect()
}

#[test]
fn a_checkpoint_opens_elsewhere_with_the_state_of_its_moment() {
    let root = tempfile::tempdir().unwrap();
    let (src, cp) = (root.path().join("db"), root.path().join("cp"));
    let db = Db::open(&src, small()).unwrap();
    for i in 0..6000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.wait_for_background_work().unwrap();
    for i in (0..6000).step_by(7) {
        db.delete(key(i)).unwrap();
    }
    // The last writes stay in the memtable: the checkpoint must take them from the WAL.
    for i in 100..150 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    let expected = contents(&db);
    let report = db.checkpoint(&cp).unwrap();
    assert!(report.tables_linked > 0, "{report:?}");
    assert_eq!(
        report.tables_copied, 0,
        "one file system: every table links"
    );
    assert!(report.wals_copied >= 1, "{report:?}");
    let linked = std::fs::read_dir(&cp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect::<Vec<_>>();
    assert_eq!(linked.len(), report.tables_linked);
    // Hard links: the source's name and the checkpoint's share the bytes.
    assert!(linked.iter().all(|p| p.metadata().unwrap().nlink() == 2));
    // The source moves on; the checkpoint does not.
    for i in 0..500 {
        db.put(key(i), value(i, 2)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    assert_ne!(contents(&db), expected);

    let copy = Db::open(&cp, Options::default()).unwrap();
    assert_eq!(contents(&copy), expected);
    copy.check().unwrap();
    // The checkpoint is a database of its own: writes to it do not reach the source, and it
    // outlives the source.
    copy.put(b"only-in-the-copy", b"1").unwrap();
    drop(copy);
    assert_eq!(db.get(b"only-in-the-copy").unwrap(), None);
    drop(db);
    std::fs::remove_dir_all(&src).unwrap();
    let reopened = Db::open(&cp, Options::default()).unwrap();
    assert_eq!(
        reopened.iter().map(Result::unwrap).count(),
        expected.len() + 1
    );
    assert_eq!(
        reopened.get(b"only-in-the-copy").unwrap().as_deref(),
        Some(&b"1"[..])
    );
}

#[test]
fn a_checkpoint_taken_under_load_holds_a_prefix_of_the_writes() {
    let root = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(root.path().join("db"), small()).unwrap());
    let acknowledged = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, acknowledged, stop) = (db.clone(), acknowledged.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                db.put(key(i), value(i, 0)).unwrap();
                i += 1;
                acknowledged.store(i, Ordering::Release);
            }
        })
    };
    for round in 0..4 {
        while acknowledged.load(Ordering::Acquire) < 2000 * (round + 1) {
            std::thread::yield_now();
        }
        let before = acknowledged.load(Ordering::Acquire);
        let cp = root.path().join(format!("cp{round}"));
        let report = db.checkpoint(&cp).unwrap();
        let copy = Db::open(&cp, Options::default()).unwrap();
        let got = contents(&copy);
        // One writer, keys in order: the copy holds keys 0..n for some n >= before.
        let n = got.len() as u32;
        assert!(
            n >= before,
            "round {round}: {n} keys, {before} acknowledged before"
        );
        for (i, (k, v)) in got.iter().enumerate() {
            assert_eq!(
                (k, v),
                (&key(i as u32), &value(i as u32, 0)),
                "round {round}"
            );
        }
        assert!(report.sequence >= u64::from(before), "{report:?}");
        copy.check().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    db.check().unwrap();
}

#[test]
fn a_checkpoint_refuses_a_directory_that_holds_anything() {
    let root = tempfile::tempdir().unwrap();
    let db = Db::open(root.path().join("db"), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    let cp = root.path().join("cp");
    std::fs::create_dir(&cp).unwrap();
    std::fs::write(cp.join("precious"), b"x").unwrap();
    let err = db.checkpoint(&cp).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(std::fs::read(cp.join("precious")).unwrap(), b"x");
    // An empty directory is fine.
    std::fs::remove_file(cp.join("precious")).unwrap();
    db.checkpoint(&cp).unwrap();
    // And the checkpoint itself is not empty any more.
    assert!(db.checkpoint(&cp).is_err());
}

#[test]
fn a_read_only_database_is_checkpointed_without_a_byte_changing() {
    let root = tempfile::tempdir().unwrap();
    let (src, cp) = (root.path().join("db"), root.path().join("cp"));
    {
        // What a crash leaves: the files of a database that was never closed, with its last
        // writes in the WAL only.
        let live = root.path().join("live");
        let db = Db::open(&live, small()).unwrap();
        for i in 0..2000 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.wait_for_background_work().unwrap();
        for i in 0..20 {
            db.put(key(i), value(i, 1)).unwrap();
        }
        std::fs::create_dir(&src).unwrap();
        for (name, bytes) in files(&live) {
            std::fs::write(src.join(name), bytes).unwrap();
        }
    }
    let before = files(&src);
    let ro = Db::open_read_only(&src, Options::default()).unwrap();
    let expected = contents(&ro);
    assert_eq!(expected.get(&key(3)), Some(&value(3, 1)));
    ro.checkpoint(&cp).unwrap();
    drop(ro);
    assert_eq!(
        files(&src),
        before,
        "a read-only checkpoint changed the source"
    );
    let copy = Db::open(&cp, Options::default()).unwrap();
    assert_eq!(contents(&copy), expected);
    copy.check().unwrap();
}

#[test]
fn tables_of_every_data_dir_land_in_the_checkpoint() {
    let root = tempfile::tempdir().unwrap();
    let (src, cp) = (root.path().join("db"), root.path().join("cp"));
    let options = Options {
        data_dirs: vec![root.path().join("d1"), root.path().join("d2")],
        ..small()
    };
    let db = Db::open(&src, options).unwrap();
    for i in 0..6000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let expected = contents(&db);
    let report = db.checkpoint(&cp).unwrap();
    assert!(report.tables_linked > 1);
    // Opened with default options: no data dirs.
    let copy = Db::open(&cp, Options::default()).unwrap();
    assert_eq!(contents(&copy), expected);
    copy.check().unwrap();
}

/// A checkpoint is durable when the call returns: a power failure right after leaves it whole.
#[test]
fn a_finished_checkpoint_survives_a_crash() {
    let fs = MemFs::new();
    let options = || Options {
        fs: Arc::new(fs.clone()),
        ..small()
    };
    let db = Db::open("/data/db", options()).unwrap();
    for i in 0..2500 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let expected = contents(&db);
    db.checkpoint("/data/cp").unwrap();
    let crashed = fs.crash_clone();
    drop(db);
    let copy = Db::open(
        "/data/cp",
        Options {
            fs: Arc::new(crashed.clone()),
            ..small()
        },
    )
    .unwrap();
    assert_eq!(contents(&copy), expected);
    copy.check().unwrap();
    assert!(crashed.exists(Path::new("/data/cp/CURRENT")).unwrap());
}
