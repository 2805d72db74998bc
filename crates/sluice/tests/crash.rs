//! Crash test with real processes: a child process writes with `sync`, flushing and compacting
//! small memtables all the while, and is killed with SIGKILL at a random moment. After each
//! kill the database is reopened: every acknowledged write must be there, nothing else may
//! have changed (the one write in flight may or may not have landed), and every checksum of
//! every live file must verify.
//!
//! The child is this same test binary, re-run with `SLUICE_CRASH_CHILD` set. Rounds rotate
//! through the compaction executors, so each is killed mid-compaction. A second run does the
//! same in partitioned mode, with ranges moving between owners and splitting all the while, so
//! kills land in the middle of moves, splits and relocations.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use sluice::compaction::executor::CompactionMode;
use sluice::{CompactionOptions, Db, MemtableOptions, Options, TableOptions, WriteOptions};

const ROUNDS: u64 = 24;
const KEYS: u64 = 3000;

/// Partitioned runs: three owners under the database directory, eight ranges.
fn partitions(dir: &Path) -> sluice::options::PartitionOptions {
    sluice::options::PartitionOptions {
        owners: (0..3)
            .map(|i| sluice::options::PartitionOwner {
                dir: dir.join(format!("owner{i}")),
                worker: None,
            })
            .collect(),
        boundaries: (1..8).map(|r| key(r * KEYS / 8)).collect(),
        initial_owners: Vec::new(),
        balance: Some(sluice::partition::balance::BalanceOptions {
            max_skew: 0.25,
            min_bytes: 0,
        }),
        load_balance: None,
    }
}

fn options(dir: &Path, partitioned: bool) -> Options {
    Options {
        partitions: partitioned.then(|| partitions(dir)),
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
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            max_concurrent_compactions: 3,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i % KEYS).into_bytes()
}

fn value(round: u64, i: u64) -> Vec<u8> {
    let mut v = format!("round{round}-write{i}-").into_bytes();
    v.resize(v.len() + (i % 200) as usize, b'a' + (i % 26) as u8);
    v
}

/// Write `i` of a round: deletes every 11th, else a put.
fn is_delete(i: u64) -> bool {
    i % 11 == 5
}

/// The child: writes forever (until killed), acknowledging each synced write on stdout.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SLUICE_CRASH_CHILD") else {
        return;
    };
    let round: u64 = std::env::var("SLUICE_CRASH_ROUND")
        .unwrap()
        .parse()
        .unwrap();
    let partitioned = std::env::var("SLUICE_CRASH_PARTITIONED").is_ok();
    // Each round kills a different executor mid-compaction.
    let modes = CompactionMode::ALL;
    let mode = modes[round as usize % modes.len()];
    let mut opts = options(Path::new(&dir), partitioned);
    opts.compaction.mode = mode;
    opts.compaction.sub_task_bytes = 16 << 10;
    let db = Db::open(&dir, opts).unwrap();
    let sync = WriteOptions { sync: true };
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        if is_delete(i) {
            db.delete_opt(&sync, key(i)).unwrap();
        } else {
            db.put_opt(&sync, key(i), value(round, i)).unwrap();
        }
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
        if i % 997 == 996 {
            db.compact_range(None, None).unwrap();
        }
        if partitioned && i % 301 == 300 {
            db.move_range((i / 301 % 8) as usize, (i / 301 % 3) as u32)
                .unwrap();
        }
        if partitioned && i % 97 == 96 {
            // Split whichever range holds some key; a key that starts its range is refused.
            let at = key(i * 7919 % KEYS);
            let range = db.range_map().unwrap().index_of(&at);
            match db.split_range(range, &at) {
                Ok(()) | Err(sluice::Error::InvalidArgument(_)) => {}
                Err(e) => panic!("split at {at:?}: {e}"),
            }
        }
    }
}

fn apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, round: u64, i: u64) {
    if is_delete(i) {
        model.remove(&key(i));
    } else {
        model.insert(key(i), value(round, i));
    }
}

fn verify(
    dir: &Path,
    partitioned: bool,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    maybe: Option<(u64, u64)>,
) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, options(dir, partitioned)).expect("reopen after crash");
    db.check().expect("every checksum verifies after a crash");
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().collect::<Result<_, _>>().unwrap();
    if &got == model {
        return got;
    }
    // Only the write in flight when the child died may differ.
    let (round, i) = maybe.expect("database differs from acknowledged writes");
    let mut with_inflight = model.clone();
    apply(&mut with_inflight, round, i);
    assert_eq!(got, with_inflight, "database holds something never written");
    got
}

#[test]
fn killed_writers_lose_no_acknowledged_write() {
    kill_and_verify(false);
}

#[test]
fn killed_partitioned_writers_lose_no_acknowledged_write() {
    kill_and_verify(true);
}

fn kill_and_verify(partitioned: bool) {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut model = BTreeMap::new();
    for round in 0..ROUNDS {
        let mut child = Command::new(&exe)
            .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
            .env("SLUICE_CRASH_CHILD", dir.path())
            .env("SLUICE_CRASH_ROUND", round.to_string())
            .envs(partitioned.then_some(("SLUICE_CRASH_PARTITIONED", "1")))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(rng.gen_range(50..600));
        // Read acknowledgements on a thread so the kill happens at a wall-clock moment,
        // not at a line boundary.
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // The first ack shares its line with libtest's `test crash_child ... `.
                if let Some((_, n)) = line.rsplit_once("ack ") {
                    last = n.trim().parse::<u64>().ok();
                }
            }
            last
        });
        let start = Instant::now();
        while start.elapsed() < kill_after {
            if child.try_wait().unwrap().is_some() {
                panic!("child exited early; run it alone to see why");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let last_ack = reader.join().unwrap();
        let acked = last_ack.map_or(0, |n| n + 1);
        for i in 0..acked {
            apply(&mut model, round, i);
        }
        model = verify(dir.path(), partitioned, &model, Some((round, acked)));
    }
    if partitioned {
        let db = Db::open(dir.path(), options(dir.path(), true)).unwrap();
        let ranges = db.range_map().unwrap().len();
        assert!(
            ranges > 8,
            "some rounds got as far as splitting a range: {ranges}"
        );
    }
}
