//! The two halves of an in-process round: run the workload on an open database and close it
//! cleanly; reopen it and verify every key.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use rand::rngs::StdRng;
use sluice::{Db, Keyspace};

use super::Run;
use super::engine;
use super::expected::Slot;
use super::verify::verify_and_settle;
use super::workload::Workload;

/// Opens the database with `options` (creating the keyspaces it lacks) and loads the expected
/// state a workload starts from; a failure is the round's (`what` says which open it was),
/// and `None`.
pub fn open_for_workload(
    run: &Run<'_>,
    round: u64,
    options: sluice::Options,
    what: &str,
) -> Option<(Db, Vec<Keyspace>, Vec<Slot>)> {
    let (db, keyspaces) = match engine::open_for_workload(&run.paths.db, options) {
        Ok(opened) => opened,
        Err(e) => {
            run.fail(round, format!("open for {what}: {e}"));
            return None;
        }
    };
    match run.expected.load() {
        Ok(slots) => Some((db, keyspaces, slots)),
        Err(e) => {
            run.fail(round, e);
            None
        }
    }
}

/// Opens the database with round `round`'s executor and sizes, runs the workload for
/// `length`, and closes it (which syncs the WAL and records its length in the MANIFEST).
pub fn workload(run: &Run<'_>, round: u64, rng: &mut StdRng, length: Duration) {
    let options = run.engine.workload_options(run.mode(round), rng);
    let Some((db, keyspaces, slots)) = open_for_workload(run, round, options, "the workload")
    else {
        return;
    };
    let stop = AtomicBool::new(false);
    let workload = Workload {
        db: &db,
        keyspaces: &keyspaces,
        expected: &run.expected,
        tally: &run.tally,
        threads: run.args.threads,
        sync_percent: run.args.sync_percent,
        owners: run.args.partitions,
        faults: false,
        stop: &stop,
    };
    workload.run(&slots, rng.r#gen(), Instant::now() + length);
    let offloaded = db.offload_metrics().map_or(0, |m| m.jobs);
    run.tally.offloaded.fetch_add(offloaded, Ordering::Relaxed);
    // A keyspace handle keeps the database (and its lock) open until it is dropped.
    drop(keyspaces);
    if let Err(e) = db.close() {
        run.fail(round, format!("close after the workload: {e}"));
    }
}

/// Reopens the database read-write, verifies every key of every keyspace (settling writes
/// that were in flight at a kill), checks every table's checksums, and closes it.
pub fn verify(run: &Run<'_>, round: u64, what: &str) {
    let db = match Db::open(&run.paths.db, run.engine.check_options()) {
        Ok(db) => db,
        Err(e) => return run.fail(round, format!("{what}: open failed: {e}")),
    };
    match verify_and_settle(&db, &run.expected) {
        Ok(n) => run.tally.verified(n),
        Err(e) => run.fail(round, format!("{what}: {e}")),
    }
    if let Err(e) = db.check() {
        run.fail(round, format!("{what}: check: {e}"));
    }
    if let Err(e) = db.close() {
        run.fail(round, format!("{what}: close: {e}"));
    }
}
