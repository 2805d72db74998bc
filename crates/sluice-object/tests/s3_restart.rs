//! The S3 server goes away during a compaction: with the store's retries, the compaction waits
//! the server out and finishes; with retries too short for the outage, it fails with an error.
//! Either way nothing acknowledged is lost: reads work again once the server is back, and a
//! reopen finds every write, `check` passes, and the bucket holds exactly the live tables.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectFs, list_objects};
use sluice_sst::fs::os_fs;

use common::{S3Server, store_retrying};

/// The database's file system, its requests retried as `retry` says. No object cache: every
/// read of the compaction goes to the server.
fn object_fs(server: &S3Server, dir: &Path, retry: object_store::RetryConfig) -> ObjectFs {
    ObjectFs::new(os_fs(), store_retrying(&server.endpoint, retry), dir, "db").unwrap()
}

fn options(fs: &ObjectFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 256 << 10,
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Writes four flushed rounds of overlapping keys: four L0 tables for a compaction to merge.
fn fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..4u32 {
        for i in 0..4000u32 {
            let k = format!("key{:06}", (i * 7919 + round) % 10_000).into_bytes();
            let v = format!("{round}-{i}-{}", "v".repeat((i % 90) as usize)).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
    }
    model
}

fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|e| e.unwrap()).collect()
}

/// Reopens with default retries: every write is there, every object checks, and no object
/// is left that no table of the MANIFEST names.
fn reopen_and_verify(server: &S3Server, dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let fs = object_fs(server, dir, object_store::RetryConfig::default());
    let db = Db::open(dir, options(&fs)).unwrap();
    assert_eq!(&scan(&db), model);
    let report = db.check().unwrap();
    assert_eq!(list_objects(&fs).unwrap().len(), report.files);
    db.close().unwrap();
}

#[test]
fn a_compaction_waits_out_a_server_restart() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    // The default's 10 retries can be spent in 1.5 s of backoff, about the restart's time on
    // a loaded machine: retry for as long as the restart could take.
    let patient = object_store::RetryConfig {
        max_retries: 1_000,
        retry_timeout: Duration::from_secs(60),
        ..object_store::RetryConfig::default()
    };
    let fs = object_fs(&server, dir.path(), patient);
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let model = fill(&db);
    // Down when the compaction starts, back 1.5 s later: its first requests are refused and
    // retried with backoff until the server answers.
    server.stop();
    let restarting = AtomicBool::new(false);
    let server = std::thread::scope(|s| {
        let back = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(1500));
            restarting.store(true, Ordering::SeqCst);
            server.restart();
            server
        });
        db.compact_range(None, None)
            .expect("the compaction retries until the server is back");
        // It could not have finished without the server.
        assert!(restarting.load(Ordering::SeqCst));
        back.join().unwrap()
    });
    assert_eq!(db.metrics().levels[0].files, 0, "L0 was compacted");
    assert_eq!(scan(&db), model);
    db.close().unwrap();
    reopen_and_verify(&server, dir.path(), &model);
}

#[test]
fn a_compaction_fails_cleanly_when_the_server_stays_away() {
    let mut server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    // Two quick retries: the outage outlasts them.
    let retry = object_store::RetryConfig {
        max_retries: 2,
        retry_timeout: Duration::from_secs(2),
        backoff: object_store::BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(200),
            base: 2.0,
        },
    };
    let fs = object_fs(&server, dir.path(), retry);
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let model = fill(&db);
    let before = list_objects(&fs).unwrap();
    server.stop();
    let err = db.compact_range(None, None).unwrap_err();
    assert!(
        matches!(err, sluice::Error::Io { .. }) && err.to_string().contains(".sst"),
        "an I/O error naming the table it could not read: {err}"
    );
    server.restart();
    // Nothing reached the bucket, and nothing in it was deleted.
    assert_eq!(list_objects(&fs).unwrap(), before);
    // The failed compaction changed nothing: the tables it read are still the live ones.
    assert_eq!(scan(&db), model);
    let _ = db.close();
    reopen_and_verify(&server, dir.path(), &model);
}
