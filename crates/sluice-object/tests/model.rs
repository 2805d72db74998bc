//! Model test with the tables in a real S3 server: random operation sequences (puts, deletes,
//! range deletes, flushes, compactions, reopens, crashes, that is, drops without a close, and
//! copies of the running database's directory that carry on in its place) run against a
//! database on `ObjectFs` and against a `BTreeMap`; every read and a full scan at the end must
//! agree, and after a last reopen the bucket must hold exactly the live tables. Half the cases
//! read through an object cache, the other half with ranged GETs.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use proptest::prelude::*;
use proptest::test_runner::TestRunner;
use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectCache, ObjectFs, list_objects};
use sluice_sst::fs::os_fs;

use common::S3Server;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    /// A put of [`value`]`(.1)`.
    Put(u16, u16),
    Delete(u16),
    /// `delete_range(key(a), key(b))` (nothing when `a >= b`).
    DeleteRange(u16, u16),
    Get(u16),
    Flush,
    Compact,
    /// Close and open again.
    Reopen,
    /// Drop without closing (what a crash leaves of the process's state), then open again.
    Crash,
    /// Copy the directory of the running database (its background work done) and open the
    /// copy on the same prefix, which fences the original: its next flush must fail.
    Copy,
}

fn key(k: u16) -> Vec<u8> {
    format!("key{:05}", k % 400).into_bytes()
}

/// Up to 1.5 KB that compress a little, named by `n` (so a failing case prints short).
fn value(n: u16) -> Vec<u8> {
    let mut x = u64::from(n) + 1;
    (0..n % 1500)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b'a' + (x >> 60) as u8
        })
        .collect()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (any::<u16>(), any::<u16>()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => any::<u16>().prop_map(Op::Delete),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::DeleteRange(a, b)),
        3 => any::<u16>().prop_map(Op::Get),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Copy),
    ]
}

fn object_fs(server: &S3Server, dir: &Path, prefix: &str, cache: Option<&Path>) -> ObjectFs {
    let fs = ObjectFs::new(os_fs(), server.store(), dir, prefix).unwrap();
    match cache {
        Some(c) => fs
            .with_cache(ObjectCache::open(c, 32 << 20).unwrap())
            .unwrap(),
        None => fs,
    }
}

fn options(fs: &ObjectFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        paranoid_checks: true,
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

fn run(server: &S3Server, ops: Vec<Op>, cached: bool) -> Result<(), TestCaseError> {
    static CASE: AtomicU64 = AtomicU64::new(0);
    let prefix = format!("model{}", CASE.fetch_add(1, Ordering::Relaxed));
    let dirs = tempfile::tempdir().unwrap();
    let caches = tempfile::tempdir().unwrap();
    // The database's directory: a copy takes over from the original.
    let mut dir = dirs.path().join("0");
    std::fs::create_dir(&dir).unwrap();
    // Each open has a cache of its own: a dropped database's cache may still be locked by a
    // background thread finishing, as a crashed process's would be gone.
    let mut opens = 0;
    let mut open = |dir: &Path| {
        opens += 1;
        let cache = caches.path().join(opens.to_string());
        let fs = object_fs(server, dir, &prefix, cached.then_some(cache.as_path()));
        (Db::open(dir, options(&fs)).unwrap(), fs)
    };
    let (mut db, _) = open(&dir);
    let mut copies = 0;
    let mut model = Model::new();
    for op in ops {
        match op {
            Op::Put(k, v) => {
                db.put(key(k), value(v)).unwrap();
                model.insert(key(k), value(v));
            }
            Op::Delete(k) => {
                db.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            Op::DeleteRange(a, b) => {
                let (a, b) = (key(a), key(b));
                if a < b {
                    db.delete_range(&a, &b).unwrap();
                    model.retain(|k, _| k < &a || k >= &b);
                }
            }
            Op::Get(k) => {
                prop_assert_eq!(db.get(key(k)).unwrap(), model.get(&key(k)).cloned());
            }
            Op::Flush => db.flush().unwrap(),
            Op::Compact => db.compact_range(None, None).unwrap(),
            Op::Reopen => {
                db.close().unwrap();
                (db, _) = open(&dir);
            }
            Op::Crash => {
                drop(db);
                (db, _) = open(&dir);
            }
            Op::Copy => {
                db.wait_for_background_work().unwrap();
                copies += 1;
                let copy = dirs.path().join(format!("copy{copies}"));
                copy_dir(&dir, &copy);
                let original = std::mem::replace(&mut db, open(&copy).0);
                let original_dir = std::mem::replace(&mut dir, copy);
                original.put(b"only in the original", b"x").unwrap();
                let flushed = original.flush().map_err(|e| e.to_string());
                prop_assert!(
                    flushed.as_ref().is_err_and(|e| e.contains("fenced")),
                    "the original's flush after the copy opened: {flushed:?}"
                );
                drop(original);
                // Nor may it open again: its sweep would delete the copy's tables.
                let fs = object_fs(server, &original_dir, &prefix, None);
                let reopened = Db::open(&original_dir, options(&fs)).map(drop);
                prop_assert!(
                    reopened
                        .as_ref()
                        .is_err_and(|e| e.to_string().contains("stale")),
                    "the original reopened after the copy: {:?}",
                    reopened.err()
                );
            }
        }
    }
    let scanned: Model = db.iter().map(|e| e.unwrap()).collect();
    prop_assert_eq!(&scanned, &model);
    // Obsolete tables go at the next collection once nothing pins them (an iterator, a
    // running job), and the open's sweep collects every one: after a reopen the bucket holds
    // exactly the live tables, and every one of them checks.
    db.close().unwrap();
    let fs = object_fs(server, &dir, &prefix, None);
    let mut quiet = options(&fs);
    // No compaction may start and pin its inputs while the bucket is compared.
    quiet.compaction.disable_auto_compactions = true;
    let db = Db::open(&dir, quiet).unwrap();
    let report = db.check().unwrap();
    prop_assert_eq!(list_objects(&fs).unwrap().len(), report.files);
    let scanned: Model = db.iter().map(|e| e.unwrap()).collect();
    prop_assert_eq!(&scanned, &model);
    db.close().unwrap();
    Ok(())
}

/// Copies the files of directory `from` into a new directory `to`, as a disk snapshot would.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

#[test]
fn a_database_in_a_bucket_holds_what_the_model_holds() {
    // One server for every case, each case under a prefix of its own; stopped when the test
    // ends (a static would never be dropped, and its server would outlive the test binary).
    let server = S3Server::start();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 8,
        // A failure prints its shrunk operations; nothing is written beside the tests.
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let cases = (prop::collection::vec(op(), 1..100), any::<bool>());
    if let Err(e) = runner.run(&cases, |(ops, cached)| run(&server, ops, cached)) {
        panic!("{e}");
    }
}
