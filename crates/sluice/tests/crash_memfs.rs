//! Crash test without processes: the database runs on a [`MemFs`], and a second thread takes
//! [`MemFs::crash_clone`]s (what a power failure would leave: synced bytes, synced directory
//! entries) while the workload writes, flushes and compacts. Each clone is opened as a
//! database and must hold exactly the state after some prefix of the writes, from at least
//! every write acknowledged with `sync` (or before one) up to at most every write started:
//! nothing acknowledged lost, no batch half-applied, nothing out of order. Every checksum must
//! verify, a second crash just after recovery must change nothing, and the recovered database
//! must take writes.
//!
//! Two workloads in three separate values into blob files. Odd workloads also write two more keyspaces, whose memtables fill at other sizes than the
//! default one's: batches span keyspaces, so a crash must also leave every batch whole across
//! them, whichever keyspaces had flushed.
//!
//! The default run takes a few hundred crash points; `SLUICE_CRASH_MEMFS_POINTS=5000` (or the
//! ignored `many_crash_points`) takes thousands.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sluice::compaction::executor::CompactionMode;
use sluice::{
    CompactionOptions, Db, KeyspaceOptions, MemtableOptions, Options, TableOptions, WriteBatch,
    WriteOptions,
};
use sluice_sst::fs::{FileSystem, MemFs};

const KEYS: u64 = 400;
const DB: &str = "/data/db";

/// One write: a batch of puts (`Some`) and deletes (`None`). A key of another keyspace than
/// the default one is prefixed with its name and `/`.
type Op = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// The keyspaces odd workloads also write.
const KEYSPACES: [&str; 2] = ["ks1", "ks2"];

fn with_keyspaces(round: usize) -> bool {
    round % 2 == 1
}

/// Workloads rotate through layouts, so crashes also test the syncs of directories other than
/// the database's: one table directory (rounds 0 and 1 of every 4), two data directories
/// (round 2), or partitioned over three owners with ranges moving and splitting (round 3).
fn options(fs: &MemFs, round: usize) -> Options {
    let mut options = layout_options(fs, round);
    if with_keyspaces(round) {
        for (i, name) in KEYSPACES.iter().enumerate() {
            let mut ks = KeyspaceOptions::of_default(&options);
            ks.memtable.write_buffer_size = (64 << 10) << (2 * i);
            options.keyspaces.insert(name.to_string(), ks);
        }
        // The first open creates them; a crash may undo that.
        options.create_missing_keyspaces = true;
    }
    options
}

fn layout_options(fs: &MemFs, round: usize) -> Options {
    let modes = CompactionMode::ALL;
    Options {
        fs: Arc::new(fs.clone()),
        data_dirs: if round % 4 == 2 {
            vec!["/data/d1".into(), "/data/d2".into()]
        } else {
            Vec::new()
        },
        partitions: (round % 4 == 3).then(|| sluice::options::PartitionOptions {
            owners: (0..3)
                .map(|i| sluice::options::PartitionOwner {
                    dir: format!("/data/owner{i}").into(),
                    worker: None,
                })
                .collect(),
            boundaries: (1..4)
                .map(|r| format!("key{:04}", r * KEYS / 4).into_bytes())
                .collect(),
            initial_owners: Vec::new(),
            balance: Some(sluice::partition::balance::BalanceOptions {
                max_skew: 0.25,
                min_bytes: 0,
            }),
            load_balance: None,
        }),
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            max_concurrent_compactions: 2,
            // Levels sized from the bottom up in four rounds of five.
            level_compaction_dynamic_level_bytes: round % 5 != 4,
            mode: modes[round % modes.len()],
            sub_task_bytes: 16 << 10,
            ..CompactionOptions::default()
        },
        paranoid_checks: true,
        blob: match with_blobs(round) {
            true => sluice::BlobOptions {
                min_blob_size: 128,
                blob_file_size: 16 << 10,
                // Collect at every chance: kills then land in relocations too.
                gc_min_garbage_ratio: 0.0,
                ..sluice::BlobOptions::default()
            },
            false => sluice::BlobOptions::default(),
        },
        ..Options::default()
    }
}

/// Two workloads in three keep values of 128 bytes or more in blob files (about half of
/// them), in files of 16 KiB: crashes then land between blob files and the tables that
/// reference them, and between compactions that drop the last reference to one.
fn with_blobs(round: usize) -> bool {
    round % 3 != 2
}

/// Op `i`: a batch of one to four entries; values name the op, so a value read back says
/// which write it came from.
fn make_op(rng: &mut SmallRng, round: usize, i: usize) -> Op {
    let n = if rng.gen_bool(0.3) {
        rng.gen_range(2..=4)
    } else {
        1
    };
    (0..n)
        .map(|_| {
            let space = match with_keyspaces(round) {
                true => ["", "ks1/", "ks2/"][rng.gen_range(0..3)],
                false => "",
            };
            let key = format!("{space}key{:04}", rng.gen_range(0..KEYS)).into_bytes();
            if rng.gen_bool(0.1) {
                (key, None)
            } else {
                let mut v = format!("op{i}-").into_bytes();
                v.resize(v.len() + rng.gen_range(0..300), b'a' + (i % 26) as u8);
                (key, Some(v))
            }
        })
        .collect()
}

/// What the writer has done, shared with the crashing thread.
#[derive(Default)]
struct Progress {
    ops: Mutex<Vec<Op>>,
    /// Ops whose write has started (they are in `ops`).
    started: AtomicUsize,
    /// Every op before this one is durable: a write acknowledged with `sync` covers them.
    synced: AtomicUsize,
    /// The writer waits before op number `allowed`, so the crashing thread keeps pace and
    /// the workload (and the cost of checking it) stays bounded.
    allowed: AtomicUsize,
    done: AtomicBool,
}

/// Runs `points` crash points over one workload of `round`; returns how many were checked.
fn run_round(round: usize, points: usize) -> usize {
    let fs = MemFs::new();
    let progress = Arc::new(Progress::default());
    let writer = {
        let (fs, progress) = (fs.clone(), Arc::clone(&progress));
        std::thread::spawn(move || write_until_done(&fs, round, &progress))
    };
    let mut rng = SmallRng::seed_from_u64(round as u64 ^ 0xC0FFEE);
    let mut checked = 0;
    while checked < points {
        // Let some writes and background work happen between crashes.
        progress
            .allowed
            .fetch_add(rng.gen_range(1..400), Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_micros(rng.gen_range(0..2000)));
        let lo = progress.synced.load(Ordering::SeqCst);
        let crashed = if rng.gen_bool(0.5) {
            fs.crash_clone()
        } else {
            fs.crash_clone_keeping_some(rng.r#gen())
        };
        let hi = progress.started.load(Ordering::SeqCst);
        // The writer waits for this lock before its next op; that only slows it down.
        verify(&crashed, round, &progress.ops.lock()[..hi], lo, hi, checked);
        checked += 1;
    }
    progress.done.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    checked
}

fn write_until_done(fs: &MemFs, round: usize, progress: &Progress) {
    let db = Db::open(DB, options(fs, round)).unwrap();
    let keyspaces: Vec<_> = KEYSPACES.iter().filter_map(|n| db.keyspace(n)).collect();
    let mut rng = SmallRng::seed_from_u64(round as u64);
    let mut i = 0;
    while !progress.done.load(Ordering::SeqCst) {
        if i >= progress.allowed.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_micros(50));
            continue;
        }
        let op = make_op(&mut rng, round, i);
        let mut batch = WriteBatch::new();
        for (k, v) in &op {
            let keyspace = keyspaces
                .iter()
                .find(|ks| k.starts_with(format!("{}/", ks.name()).as_bytes()));
            match (keyspace, v) {
                (None, Some(v)) => batch.put(k, v),
                (None, None) => batch.delete(k),
                (Some(ks), Some(v)) => batch.put_in(ks, &k[ks.name().len() + 1..], v),
                (Some(ks), None) => batch.delete_in(ks, &k[ks.name().len() + 1..]),
            }
        }
        let sync = rng.gen_bool(0.3);
        progress.ops.lock().push(op);
        progress.started.store(i + 1, Ordering::SeqCst);
        db.write(&WriteOptions { sync }, batch).unwrap();
        if sync {
            progress.synced.store(i + 1, Ordering::SeqCst);
        }
        i += 1;
        if i % 1000 == 0 {
            // Manual compactions too, so crashes land in their installs.
            db.compact_range(None, None).unwrap();
            if let Some(ks) = keyspaces.get(i / 1000 % 2) {
                ks.compact_range(None, None).unwrap();
            }
        }
    }
    db.close().unwrap();
}

/// Opens the crashed copy and checks it holds the state after some prefix of `ops` of a
/// length in `lo..=hi`.
fn verify(crashed: &MemFs, round: usize, ops: &[Op], lo: usize, hi: usize, point: usize) {
    let db = Db::open(DB, options(crashed, round))
        .unwrap_or_else(|e| panic!("round {round} point {point}: open after crash: {e}"));
    db.check()
        .unwrap_or_else(|e| panic!("round {round} point {point}: check after crash: {e}"));
    let found = everything(&db);
    if let Err(why) = matches_some_prefix(&found, ops, lo, hi) {
        panic!(
            "round {round} point {point}: the recovered state is no prefix of the writes \
             between {lo} (synced) and {hi} (started): {why}"
        );
    }
    // A second crash right after recovery (which replayed the WALs into tables, started a
    // new MANIFEST and deleted the old WALs) must leave the same state.
    let again = crashed.crash_clone();
    let reopened = Db::open(DB, options(&again, round))
        .unwrap_or_else(|e| panic!("round {round} point {point}: open after 2nd crash: {e}"));
    let found_again = everything(&reopened);
    assert!(
        found_again == found,
        "round {round} point {point}: a crash after recovery changed the state"
    );
    drop(reopened);
    // The recovered database takes writes and survives a clean reopen.
    db.write(&WriteOptions { sync: true }, {
        let mut b = WriteBatch::new();
        b.put(b"after-crash", b"1");
        b
    })
    .unwrap();
    db.close().unwrap();
    let db = Db::open(DB, options(crashed, round)).unwrap();
    assert_eq!(db.get(b"after-crash").unwrap().as_deref(), Some(&b"1"[..]));
}

/// Every key and value, those of other keyspaces prefixed with the keyspace's name and `/`
/// (a keyspace whose creation the crash undid holds nothing).
fn everything(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut all: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|entry| entry.unwrap()).collect();
    for name in KEYSPACES {
        let Some(ks) = db.keyspace(name) else {
            continue;
        };
        for entry in ks.range(..) {
            let (k, v) = entry.unwrap();
            all.insert([format!("{name}/").as_bytes(), &k].concat(), v);
        }
    }
    all
}

/// `Ok` if applying `ops[..k]` to an empty database gives `found` for some `k` in `lo..=hi`.
/// Walks `k` up from `lo`, keeping the number of keys where the model and `found` differ.
fn matches_some_prefix(
    found: &BTreeMap<Vec<u8>, Vec<u8>>,
    ops: &[Op],
    lo: usize,
    hi: usize,
) -> Result<(), String> {
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for op in &ops[..lo] {
        apply(&mut model, op);
    }
    let differs = |model: &BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8]| model.get(key) != found.get(key);
    let mut mismatches = model
        .keys()
        .chain(found.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|k| differs(&model, k))
        .count();
    for k in lo..=hi {
        if mismatches == 0 {
            return Ok(());
        }
        let Some(op) = ops.get(k) else { break };
        for (key, value) in op {
            mismatches -= usize::from(differs(&model, key));
            match value {
                Some(v) => model.insert(key.clone(), v.clone()),
                None => model.remove(key),
            };
            mismatches += usize::from(differs(&model, key));
        }
    }
    let sample: Vec<_> = model
        .iter()
        .filter(|(k, v)| found.get(*k) != Some(v))
        .take(3)
        .map(|(k, v)| {
            format!(
                "{}: expected {:?}, found {:?}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(&v[..v.len().min(12)]),
                found
                    .get(k)
                    .map(|f| String::from_utf8_lossy(&f[..f.len().min(12)]).into_owned())
            )
        })
        .collect();
    Err(format!(
        "{mismatches} keys differ from the state after {hi} writes, e.g. {sample:?}"
    ))
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, op: &Op) {
    for (key, value) in op {
        match value {
            Some(v) => model.insert(key.clone(), v.clone()),
            None => model.remove(key),
        };
    }
}

fn crash_points(default: usize) -> usize {
    std::env::var("SLUICE_CRASH_MEMFS_POINTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Crash points per workload: more rounds rather than longer ones, since checking a crash
/// point replays the workload so far.
const POINTS_PER_ROUND: usize = 50;

fn run(total: usize) {
    let rounds = total.div_ceil(POINTS_PER_ROUND);
    let start = std::time::Instant::now();
    let checked: usize = (0..rounds)
        .map(|round| run_round(round, POINTS_PER_ROUND))
        .sum();
    eprintln!(
        "{checked} crash points in {rounds} workloads verified in {:.1} s",
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn every_synced_write_survives_a_crash_at_any_point() {
    run(crash_points(300));
}

#[test]
#[ignore = "thousands of crash points: minutes; run with --ignored"]
fn many_crash_points() {
    run(crash_points(5000));
}

/// Regression, found by `many_crash_points`: a flush or compaction whose blob file went to a
/// data directory holding none of its new tables installed without syncing that directory,
/// so a crash could lose the blob file the MANIFEST names. Round 6 is the first with both
/// data directories and blob files (rounds 0-5 of the default run have one or the other).
#[test]
fn blob_files_in_data_directories_survive_a_crash() {
    assert!(with_blobs(6) && layout_options(&MemFs::new(), 6).data_dirs.len() > 1);
    run_round(6, POINTS_PER_ROUND);
}

/// Regression: open created the database directory without syncing its parent, so a power
/// failure could take the directory, and every synced write in it, away.
#[test]
fn a_new_database_directory_survives_a_crash() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs, 0)).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"v");
    db.write(&WriteOptions { sync: true }, batch).unwrap();
    let crashed = fs.crash_clone();
    drop(db);
    let db = Db::open(DB, options(&crashed, 0)).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Unsynced writes may be lost by a crash, but a write synced later makes them durable.
#[test]
fn a_later_sync_makes_earlier_writes_durable() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs, 0)).unwrap();
    let put = |k: &[u8], sync: bool| {
        let mut b = WriteBatch::new();
        b.put(k, b"v");
        db.write(&WriteOptions { sync }, b).unwrap();
    };
    put(b"a", false);
    let lost = fs.crash_clone();
    put(b"b", true);
    let kept = fs.crash_clone();
    drop(db);
    let db = Db::open(DB, options(&lost, 0)).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    drop(db);
    let db = Db::open(DB, options(&kept, 0)).unwrap();
    assert!(db.get(b"a").unwrap().is_some() && db.get(b"b").unwrap().is_some());
}

/// `sync_wal` makes unsynced writes of every keyspace durable; `flush_wal(false)` does not.
#[test]
fn sync_wal_makes_earlier_writes_durable() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs, 0)).unwrap();
    let users = db
        .create_keyspace("users", &sluice::KeyspaceOptions::default())
        .unwrap();
    db.put("a", "v").unwrap();
    users.put("u", "v").unwrap();
    db.flush_wal(false).unwrap();
    let flushed_only = fs.crash_clone();
    db.sync_wal().unwrap();
    let synced = fs.crash_clone();
    drop(db);
    let db = Db::open(DB, options(&flushed_only, 0)).unwrap();
    assert_eq!(db.get("a").unwrap(), None, "handed to the OS, not synced");
    drop(db);
    let db = Db::open(DB, options(&synced, 0)).unwrap();
    let users = db.keyspace("users").unwrap();
    assert!(db.get("a").unwrap().is_some() && users.get("u").unwrap().is_some());
    drop(db);
    let read_only = Db::open_read_only(DB, options(&synced, 0)).unwrap();
    assert!(matches!(
        read_only.sync_wal(),
        Err(sluice::Error::ReadOnly(_))
    ));
}

/// The LOCK is taken through the file system: a second writer in this process is refused,
/// and readers share.
#[test]
fn the_lock_goes_through_the_file_system() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs, 0)).unwrap();
    let err = Db::open(DB, options(&fs, 0)).err().unwrap();
    assert!(err.to_string().contains("locked"), "{err}");
    db.close().unwrap();
    let r1 = Db::open_read_only(DB, options(&fs, 0)).unwrap();
    let _r2 = Db::open_read_only(DB, options(&fs, 0)).unwrap();
    assert!(Db::open(DB, options(&fs, 0)).is_err());
    drop(r1);
    assert!(fs.exists(Path::new("/data/db/LOCK")).unwrap());
}

/// Regression: open replayed the WALs into tables in the data directories and named them in a
/// new MANIFEST after syncing only the database directory, so a crash soon after could leave a
/// MANIFEST naming tables whose names were lost, with their WALs no longer replayed: the
/// database refused to open ("table file listed in the MANIFEST is missing").
#[test]
fn tables_replayed_into_data_directories_at_open_survive_a_crash() {
    let fs = MemFs::new();
    let with_data_dirs = 2;
    let db = Db::open(DB, options(&fs, with_data_dirs)).unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"v");
    db.write(&WriteOptions { sync: true }, batch).unwrap();
    db.close().unwrap();
    // This open replays the WAL into a table and retires the WAL.
    let db = Db::open(DB, options(&fs, with_data_dirs)).unwrap();
    let crashed = fs.crash_clone();
    drop(db);
    let db = Db::open(DB, options(&crashed, with_data_dirs)).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}
