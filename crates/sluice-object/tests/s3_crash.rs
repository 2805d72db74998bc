//! Crash test with real processes and a real S3 server: a child process writes with `sync`,
//! flushing and compacting small memtables into tables in the bucket, and kills itself with
//! SIGKILL at an exact point, which its file system ([`FaultInjectingFs`] over [`ObjectFs`])
//! raises before a chosen operation:
//!
//! - before the k-th MANIFEST write: the tables of the flush or compaction it would install
//!   are uploaded and acknowledged, and no MANIFEST names them;
//! - before the k-th removal of a table: the MANIFEST no longer names the inputs of a
//!   compaction, and their objects are still in the bucket;
//! - before the k-th table upload: the table's bytes never left the host.
//!
//! After each kill the parent reopens the database without faults: every acknowledged write
//! is there and nothing else (the write in flight may or may not have landed), `check` reads
//! every live object, and the objects a crash left behind (uploaded but never installed, or
//! installed but no longer live) are gone, so the bucket holds exactly the live tables. The
//! database carries over from round to round, so later rounds crash over earlier recoveries.
//!
//! A second test kills an opening process inside its claim of the prefix (`fence.rs`), before
//! and after the directory's record of the next epoch replaces the old one, and once the epoch
//! is made: the database then opens as the prefix's owner, neither stale nor unclaimed.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::{CompactionOptions, Db, MemtableOptions, Options, WriteOptions};
use sluice_object::{ObjectCache, ObjectFs, list_objects};
use sluice_sst::fs::{Fault, FaultInjectingFs, FaultOp, FileSystem, os_fs};

use common::{S3Server, store_at};

const KEYS: u64 = 500;
/// The object prefix of the database.
const PREFIX: &str = "crashdb";
/// Writes a child makes before giving up on reaching its kill point.
const MAX_WRITES: u64 = 20_000;

/// Where a round's child kills itself: the operation, the files it applies to, and how many
/// such operations run first.
const KILL_POINTS: [(FaultOp, &str, u64); 9] = [
    (FaultOp::Write, "MANIFEST-", 3),
    (FaultOp::Remove, ".sst", 0),
    (FaultOp::Sync, ".sst", 1),
    (FaultOp::Write, "MANIFEST-", 8),
    (FaultOp::Remove, ".sst", 4),
    (FaultOp::Sync, ".sst", 6),
    (FaultOp::Write, "MANIFEST-", 15),
    (FaultOp::Remove, ".sst", 11),
    (FaultOp::Sync, ".sst", 14),
];

/// The database's file system: tables in the bucket, read through a cache in `cache` that
/// each process (child or parent) reopens, so a cache a killed child left is reused too.
fn object_fs(endpoint: &str, dir: &Path, cache: &Path) -> ObjectFs {
    ObjectFs::new(os_fs(), store_at(endpoint), dir, PREFIX)
        .unwrap()
        .with_cache(ObjectCache::open(cache, 64 << 20).unwrap())
        .unwrap()
}

fn options(fs: Arc<dyn FileSystem>) -> Options {
    Options {
        fs,
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

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i * 7919 % KEYS).into_bytes()
}

fn value(round: u64, i: u64) -> Vec<u8> {
    let mut v = format!("round{round}-write{i}-").into_bytes();
    // Large enough that a memtable fills in a few dozen writes: each write waits for a sync.
    v.resize(
        v.len() + 1500 + (i * 37 % 2000) as usize,
        b'a' + (i % 26) as u8,
    );
    v
}

/// Write `i` of a round: deletes every 13th, else a put.
fn is_delete(i: u64) -> bool {
    i % 13 == 6
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, round: u64, i: u64) {
    if is_delete(i) {
        model.remove(&key(i));
    } else {
        model.insert(key(i), value(round, i));
    }
}

/// The child: writes until its file system kills it, acknowledging each synced write on
/// stdout. Reaching `MAX_WRITES` alive is a failure the parent reports.
#[test]
fn s3_crash_child() {
    let Ok(dir) = std::env::var("SLUICE_S3_CRASH_CHILD") else {
        return;
    };
    let endpoint = std::env::var("SLUICE_S3_CRASH_ENDPOINT").unwrap();
    let cache = std::env::var("SLUICE_S3_CRASH_CACHE").unwrap();
    let round: u64 = std::env::var("SLUICE_S3_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let (op, files, after) = KILL_POINTS[round as usize % KILL_POINTS.len()];
    let fs = FaultInjectingFs::new(Arc::new(object_fs(
        &endpoint,
        Path::new(&dir),
        Path::new(&cache),
    )));
    fs.inject(Fault::kill(op).on_paths_containing(files).after(after));
    let db = Db::open(&dir, options(fs)).unwrap();
    let sync = WriteOptions { sync: true };
    let mut out = std::io::stdout().lock();
    for i in 0..MAX_WRITES {
        if is_delete(i) {
            db.delete_opt(&sync, key(i)).unwrap();
        } else {
            db.put_opt(&sync, key(i), value(round, i)).unwrap();
        }
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
        if i % 300 == 299 {
            db.compact_range(None, None).unwrap();
        }
    }
}

/// This test binary, to run only `test`: a child's body, which does nothing unless its
/// environment says what to do.
fn child(test: &str) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--exact", test, "--nocapture", "--test-threads=1"]);
    command
}

/// Reopens the database after a crash and checks it against the acknowledged writes (and the
/// one in flight, `maybe`), and the bucket against the live tables.
fn verify(
    server: &S3Server,
    dir: &Path,
    cache: &Path,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    maybe: (u64, u64),
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let fs = object_fs(&server.endpoint, dir, cache);
    let db = Db::open(dir, options(Arc::new(fs.clone()))).expect("reopen after crash");
    // No compaction may be uploading a table the listing below would see before its install.
    db.wait_for_background_work().unwrap();
    let report = db
        .check()
        .expect("every live object verifies after a crash");
    let objects = list_objects(&fs).unwrap();
    assert_eq!(
        objects.len(),
        report.files,
        "the bucket holds exactly the live tables after recovery: {objects:?}"
    );
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().collect::<Result<_, _>>().unwrap();
    db.close().unwrap();
    // The open took an epoch and deleted those before it, whatever a kill left behind.
    let epochs = server.list(&format!("{PREFIX}/{}", sluice_object::EPOCHS));
    assert_eq!(epochs.len(), 1, "one epoch after an open: {epochs:?}");
    if &got == model {
        return got;
    }
    let mut with_inflight = model.clone();
    apply(&mut with_inflight, maybe.0, maybe.1);
    assert_eq!(got, with_inflight, "database holds something never written");
    got
}

#[test]
fn killed_writers_lose_nothing_acknowledged_and_leave_no_stray_object() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    for round in 0..KILL_POINTS.len() as u64 {
        let mut child = child("s3_crash_child")
            .env("SLUICE_S3_CRASH_CHILD", dir.path())
            .env("SLUICE_S3_CRASH_ENDPOINT", &server.endpoint)
            .env("SLUICE_S3_CRASH_CACHE", cache.path())
            .env("SLUICE_S3_CRASH_ROUND", round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The first ack shares its line with libtest's `test s3_crash_child ... `.
                if let Some((_, n)) = line.rsplit_once("ack ") {
                    last = n.trim().parse::<u64>().ok();
                }
            }
            last
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("round {round}: the child neither died nor finished in time");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let last_ack = reader.join().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child must die at its kill point {:?} (status {status}, last \
             ack {last_ack:?}); run it alone to see why",
            KILL_POINTS[round as usize]
        );
        let acked = last_ack.map_or(0, |n| n + 1);
        for i in 0..acked {
            apply(&mut model, round, i);
        }
        model = verify(&server, dir.path(), cache.path(), &model, (round, acked));
    }
    assert!(!model.is_empty());
}

/// Where a claim-killing child dies: before the record of the next epoch replaces the old one
/// (the epoch is then never made); after it is renamed into place but before the directory
/// sync and the epoch's PUT (the record names an epoch above every one in the bucket); and at
/// the first read of `CURRENT`, after the claim (the epoch made, the older ones deleted).
const CLAIM_KILL_POINTS: [(FaultOp, &str); 3] = [
    (FaultOp::Rename, "OBJECT-STORE-OWNER.new"),
    (FaultOp::SyncDir, ""),
    // After the claim: the epoch was made and the older ones deleted.
    (FaultOp::Open, "CURRENT"),
];

/// A child that opens the database and dies inside the claim of the prefix: its local file
/// system (the one `ObjectFs` keeps the claim's record on) kills it.
#[test]
fn s3_claim_crash_child() {
    let Ok(dir) = std::env::var("SLUICE_S3_CLAIM_CHILD") else {
        return;
    };
    let endpoint = std::env::var("SLUICE_S3_CRASH_ENDPOINT").unwrap();
    let round: usize = std::env::var("SLUICE_S3_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let (op, files) = CLAIM_KILL_POINTS[round];
    let local = FaultInjectingFs::new(os_fs());
    // The directory's own sync is the one after the record's rename.
    let files = if files.is_empty() {
        dir.as_str()
    } else {
        files
    };
    local.inject(Fault::kill(op).on_paths_containing(files));
    let fs = ObjectFs::new(local, store_at(&endpoint), Path::new(&dir), PREFIX).unwrap();
    let _ = Db::open(&dir, options(Arc::new(fs)));
}

/// A process killed while it claims the prefix leaves a database that opens as the owner
/// (neither stale nor unclaimed), holds every write, and one epoch in the bucket.
#[test]
fn a_claim_killed_midway_leaves_the_prefix_to_its_database() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let fs = object_fs(&server.endpoint, dir.path(), cache.path());
    let db = Db::open(dir.path(), options(Arc::new(fs))).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..KEYS {
        if is_delete(i) {
            db.delete(key(i)).unwrap();
        } else {
            db.put(key(i), value(0, i)).unwrap();
        }
        apply(&mut model, 0, i);
    }
    db.close().unwrap();
    let epochs_dir = format!("{PREFIX}/{}", sluice_object::EPOCHS);
    // The epoch the directory's record names.
    let recorded = || {
        let record = std::fs::read_to_string(dir.path().join(sluice_object::LOCAL_ID)).unwrap();
        let line = record
            .lines()
            .find_map(|l| l.strip_prefix("epoch "))
            .unwrap();
        line.split(' ').next().unwrap().parse::<u64>().unwrap()
    };
    let newest = || {
        let epochs = server.list(&epochs_dir);
        epochs
            .last()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    for (round, (op, _)) in CLAIM_KILL_POINTS.iter().enumerate() {
        let before = (recorded(), newest());
        assert_eq!(
            before.0, before.1,
            "round {round}: opened as the owner before"
        );
        let status = child("s3_claim_crash_child")
            .env("SLUICE_S3_CLAIM_CHILD", dir.path())
            .env("SLUICE_S3_CRASH_ENDPOINT", &server.endpoint)
            .env("SLUICE_S3_CRASH_ROUND", round.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child must die in its claim, at {op:?} (status {status})"
        );
        // Killed before the record was replaced, or after, with no epoch made either way, or
        // once the epoch the record names was made.
        let (record_moved, epoch_made) = match op {
            FaultOp::Rename => (false, false),
            FaultOp::SyncDir => (true, false),
            _ => (true, true),
        };
        let after = (recorded(), newest());
        assert_eq!(after.1, before.1 + u64::from(epoch_made), "round {round}");
        assert_eq!(after.0, before.0 + u64::from(record_moved), "round {round}");
        model = verify(&server, dir.path(), cache.path(), &model, (0, KEYS));
    }
}
