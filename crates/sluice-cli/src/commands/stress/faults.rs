//! I/O faults under a running database: the workload runs on a [`FaultInjectingFs`], and a
//! fault is armed at a random moment (a failed WAL write or sync, a failed table write or
//! sync, corrupted table reads). Operations may then fail; none may return wrong data. The
//! database is then closed, reopened on the real file system, and every acknowledged write
//! must be there (writes that failed may or may not have landed).
//!
//! A fault counts as reported when it hit an operation and the engine said so: an error
//! returned to the workload, or a failed flush or compaction in the metrics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;
use sluice::fs::{Fault, FaultInjectingFs, FaultOp, os_fs};

use super::Run;
use super::rounds;
use super::tally::Answer;
use super::workload::Workload;

/// How long a fault round's workload runs.
const ROUND_LENGTH: Duration = Duration::from_millis(1500);
/// Writes sync at least this often in a fault round, so sync faults have syncs to hit.
const MIN_SYNC_PERCENT: u32 = 20;

/// The fault of class `class`, letting a few matching operations through first.
fn fault(class: &str, rng: &mut StdRng) -> Fault {
    let after = rng.gen_range(0..4);
    match class {
        "wal-write" => Fault::fail(FaultOp::Write).on_paths_containing(".log"),
        "wal-sync" => Fault::fail(FaultOp::Sync).on_paths_containing(".log"),
        "table-write" => Fault::fail(FaultOp::Write).on_paths_containing(".sst"),
        "table-sync" => Fault::fail(FaultOp::Sync).on_paths_containing(".sst"),
        _ => Fault::corrupt_reads().on_paths_containing(".sst"),
    }
    .after(after)
    .times(rng.gen_range(1..4))
}

const CLASSES: [&str; 5] = [
    "wal-write",
    "wal-sync",
    "table-write",
    "table-sync",
    "table-corrupt-read",
];

/// One fault round; see the module docs.
pub fn round(run: &Run<'_>, round: u64, rng: &mut StdRng) {
    let class = CLASSES[rng.gen_range(0..CLASSES.len())];
    let fs = FaultInjectingFs::new(os_fs());
    let options = sluice::Options {
        fs: fs.clone(),
        // Reads must reach the files for read faults to hit them.
        block_cache_bytes: 0,
        ..run.engine.workload_options(run.mode(round), rng)
    };
    let Some((db, keyspaces, slots)) =
        rounds::open_for_workload(run, round, options, "the fault round")
    else {
        return;
    };
    let errors_before = run.tally.fault_errors.load(Ordering::Relaxed);
    let stop = AtomicBool::new(false);
    let workload = Workload {
        db: &db,
        keyspaces: &keyspaces,
        expected: &run.expected,
        tally: &run.tally,
        threads: run.args.threads,
        sync_percent: run.args.sync_percent.max(MIN_SYNC_PERCENT),
        owners: run.args.partitions,
        faults: true,
        stop: &stop,
    };
    let arm_after = Duration::from_millis(rng.gen_range(100..600));
    let armed = fault(class, rng);
    let seed = rng.r#gen();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(arm_after);
            fs.inject(armed);
        });
        workload.run(&slots, seed, Instant::now() + ROUND_LENGTH);
    });
    let m = db.metrics();
    let failed_jobs = m.flush.failed + m.compaction.failed;
    fs.clear();
    // Closing may fail after a fault (the WAL cannot be synced): that is an answer too. A
    // keyspace handle keeps the database (and its lock) open until it is dropped.
    drop(keyspaces);
    let close_failed = db.close().is_err();
    let hit = fs.injected() > 0;
    let errors = run.tally.fault_errors.load(Ordering::Relaxed) - errors_before;
    if hit {
        let said = errors > 0 || failed_jobs > 0 || close_failed;
        run.tally.fault(
            class,
            if said {
                Answer::Reported
            } else {
                Answer::Hidden
            },
        );
    }
    rounds::verify(run, round, &format!("reopen after fault {class}"));
}
