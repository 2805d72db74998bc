//! Everything at once, for a bounded time: writers (puts and deletes), readers, snapshot
//! iterators, explicit flushes, automatic and manual compactions (serial, parallel and
//! cancelled), then a reopen. Readers check every answer against what the writers had
//! acknowledged and begun when the read ran; at the end the database must equal the writers'
//! model exactly, before and after reopening, and pass `check`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice::{
    CompactOptions, CompactionMode, CompactionOptions, Db, Error, MemtableOptions, Options,
    ReadOptions, TableOptions,
};

const KEYS: u64 = 2000;
const WRITERS: u64 = 2;
const RUN_FOR: Duration = Duration::from_secs(3);

fn key(k: u64) -> Vec<u8> {
    format!("key{k:06}").into_bytes()
}

/// Version `n` of a key: a delete every fifth version, else a value naming the version.
fn is_delete(n: u64) -> bool {
    n.is_multiple_of(5)
}

fn value(k: u64, n: u64) -> Vec<u8> {
    format!("k{k}-v{n}-{}", "x".repeat((k % 7 * 20) as usize)).into_bytes()
}

fn version_of(v: &[u8]) -> u64 {
    let s = std::str::from_utf8(v).unwrap();
    let n = s.split('-').nth(1).unwrap();
    n.trim_start_matches('v').parse().unwrap()
}

/// Per key: the last version whose write returned, and the last one begun. Versions of one key
/// come from one writer, in order.
struct Versions {
    acked: Vec<AtomicU64>,
    started: Vec<AtomicU64>,
}

impl Versions {
    fn new() -> Self {
        Versions {
            acked: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
            started: (0..KEYS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Checks what a read of `k` returned, given the versions acknowledged before it started
    /// (`low`) and begun by the time it ended (`high`).
    fn check(&self, k: u64, got: Option<&[u8]>, low: u64, high: u64) {
        match got {
            None => assert!(
                (low..=high).any(|n| n == 0 || is_delete(n)),
                "key {k}: absent, but versions {low}..={high} are all values"
            ),
            Some(v) => {
                let n = version_of(v);
                assert!(
                    (low..=high).contains(&n) && !is_delete(n),
                    "key {k}: read version {n}, expected one of {low}..={high}"
                );
                assert_eq!(v, value(k, n).as_slice(), "key {k}: wrong bytes");
            }
        }
    }
}

fn options(mode: CompactionMode) -> Options {
    Options {
        block_cache_bytes: 256 << 10,
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            // Flushes cut at L1 boundaries: L0 compactions by interval.
            l0_flush_split_bytes: 64 << 10,
            sub_task_bytes: 16 << 10,
            max_concurrent_compactions: 3,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn run(mode: CompactionMode) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path(), options(mode)).unwrap());
    let versions = Arc::new(Versions::new());
    let stop = Arc::new(AtomicBool::new(false));
    // Reads, scans and manual compactions done, so the test knows each kind really ran.
    let (reads, scans, manual) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let deadline = Instant::now() + RUN_FOR;
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, versions, stop) = (&db, &versions, &stop);
            s.spawn(move || {
                let mut x = w + 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    // Writer w owns the keys equal to w modulo WRITERS.
                    let k = (x >> 33) % (KEYS / WRITERS) * WRITERS + w;
                    let n = versions.started[k as usize].load(Ordering::Relaxed) + 1;
                    versions.started[k as usize].store(n, Ordering::Relaxed);
                    if is_delete(n) {
                        db.delete(key(k)).unwrap();
                    } else {
                        db.put(key(k), value(k, n)).unwrap();
                    }
                    versions.acked[k as usize].store(n, Ordering::Release);
                }
            });
        }
        for r in 0..2u64 {
            let (db, versions, stop, reads) = (&db, &versions, &stop, &reads);
            s.spawn(move || {
                let mut x = r + 100;
                while !stop.load(Ordering::Relaxed) {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let k = (x >> 33) % KEYS;
                    let low = versions.acked[k as usize].load(Ordering::Acquire);
                    let got = db.get(key(k)).unwrap();
                    let high = versions.started[k as usize].load(Ordering::Relaxed);
                    versions.check(k, got.as_deref(), low, high);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        {
            // Snapshot scans: ordered, and the same twice under one snapshot.
            let (db, stop, scans) = (&db, &stop, &scans);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    scans.fetch_add(1, Ordering::Relaxed);
                    let snap = db.snapshot();
                    let opts = ReadOptions {
                        snapshot: Some(&snap),
                        ..ReadOptions::default()
                    };
                    let scan = || -> Vec<(Vec<u8>, Vec<u8>)> {
                        db.raw_iter(&opts)
                            .unwrap()
                            .entries()
                            .collect::<Result<_, _>>()
                            .unwrap()
                    };
                    let first = scan();
                    assert!(
                        first.windows(2).all(|w| w[0].0 < w[1].0),
                        "scan out of order"
                    );
                    assert!(first == scan(), "a snapshot changed under a scan");
                    for (k, v) in first.iter().step_by(97) {
                        assert_eq!(db.get_opt(&opts, k).unwrap().as_ref(), Some(v));
                    }
                }
            });
        }
        {
            // Flushes and manual compactions: serial, parallel, and cancelled ones.
            let (db, stop, manual) = (&db, &stop, &manual);
            s.spawn(move || {
                let mut round = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    round += 1;
                    db.flush().unwrap();
                    let lo = key(round * 137 % KEYS);
                    let hi = key((round * 137 + 400) % KEYS);
                    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                    let opts = CompactOptions {
                        parallel: round.is_multiple_of(2),
                        cancel: round
                            .is_multiple_of(3)
                            .then(|| Arc::new(AtomicBool::new(true))),
                        ..CompactOptions::default()
                    };
                    match db.compact_range_with(Some(&lo), Some(&hi), &opts) {
                        Ok(()) => {
                            manual.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Cancelled) => {}
                        Err(e) => panic!("manual compaction failed: {e}"),
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });

    let check_final = |db: &Db| {
        for k in 0..KEYS {
            let n = versions.acked[k as usize].load(Ordering::Acquire);
            versions.check(k, db.get(key(k)).unwrap().as_deref(), n, n);
        }
        db.check().unwrap();
    };
    check_final(&db);
    let m = db.metrics();
    assert!(m.compaction.count > 0, "{mode}: no compaction ran");
    assert!(m.compactions_running_peak >= 1 && m.compactions_running_peak <= 3);
    eprintln!(
        "{mode}: {} compactions, at most {} at once",
        m.compaction.count, m.compactions_running_peak
    );
    for (what, n) in [
        ("reads", &reads),
        ("scans", &scans),
        ("manual compactions", &manual),
    ] {
        assert!(n.load(Ordering::Relaxed) > 0, "{mode}: no {what} ran");
    }
    assert_eq!(m.compaction.failed, 0);
    let db = Arc::into_inner(db).unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options(mode)).unwrap();
    check_final(&db);
}

#[test]
fn everything_at_once_sequential() {
    run(CompactionMode::Sequential);
}

#[test]
fn everything_at_once_parallel() {
    run(CompactionMode::Parallel);
}

#[test]
fn everything_at_once_streaming() {
    run(CompactionMode::Streaming);
}
