//! The background threads, one set per database whatever its keyspaces: one flushes frozen
//! memtables, `max_concurrent_compactions` (the database's option) run automatic compactions,
//! and with a `LOG` one writes its periodic `stats:` line.
//!
//! Every tree (the database's own and each keyspace's) is served by the same threads, as
//! RocksDB's and fjall's shared pools do, so a database's thread count does not grow with its
//! keyspaces. The flush thread takes the tree with the most frozen memtables (a stalled flush
//! stalls every writer of that tree); each compaction thread takes the tree with the highest
//! level score that may start one (at most its own `max_concurrent_compactions` at once),
//! rotating among equals so that no keyspace starves.
//!
//! Flushes get their own thread so they never wait behind a long compaction: a stalled flush
//! stalls writers, a stalled compaction only lets L0 grow. Each compaction thread picks, under
//! the tree's state lock, a compaction that does not conflict with the running ones
//! ([`crate::compaction::in_progress`]) and registers it before letting go of the lock, so two
//! threads never pick the same files.
//!
//! Wake-ups go through one [`WorkSignal`] per database: whatever may give any tree work
//! notifies it. A thread reads its generation before looking at the trees and sleeps only if
//! it did not move, so no notification between the look and the sleep is missed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};

use super::journal::Journal;
use super::{Tree, TreeState};
use crate::compaction::picker;
use crate::options::Options;
use crate::{Error, Result};

/// "There may be background work": shared by every tree of a database.
#[derive(Debug, Default)]
pub(crate) struct WorkSignal {
    generation: Mutex<u64>,
    changed: Condvar,
}

impl WorkSignal {
    /// Wakes every background thread. May be called with a tree's state lock held.
    pub(crate) fn notify_all(&self) {
        *self.generation.lock() += 1;
        self.changed.notify_all();
    }

    /// The current generation: read before looking for work.
    pub(crate) fn generation(&self) -> u64 {
        *self.generation.lock()
    }

    /// Sleeps until the generation moves past `seen` (or `deadline` passes). Call without
    /// any tree's state lock.
    pub(crate) fn wait_past(&self, seen: u64, deadline: Option<Instant>) {
        let mut generation = self.generation.lock();
        while *generation == seen {
            match deadline {
                Some(at) => {
                    if self.changed.wait_until(&mut generation, at).timed_out() {
                        return;
                    }
                }
                None => self.changed.wait(&mut generation),
            }
        }
    }
}

/// Starts the database's flush and compaction threads, serving every tree of `journal`. They
/// exit once the default keyspace's tree is stopped.
pub(crate) fn start(journal: &Arc<Journal>) -> Result<Vec<JoinHandle<()>>> {
    let db = &journal.default;
    let spawn = |name: &str, body: fn(&Journal)| {
        let shared = Arc::clone(journal);
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || body(&shared))
            .map_err(|e| Error::io(&db.dir, e))
    };
    let mut threads = vec![spawn("sluice-flush", flush_loop)?];
    for _ in 0..db.options.compaction.max_concurrent_compactions {
        threads.push(spawn("sluice-compact", compaction_loop)?);
    }
    if db.events.log().is_some() && !db.options.info_log.stats_dump_period.is_zero() {
        threads.push(spawn("sluice-stats", super::stats_dump::stats_dump_loop)?);
    }
    Ok(threads)
}

/// Every tree of the database, starting at the `turn`th: rotating the start breaks ties
/// fairly.
fn trees(journal: &Journal, turn: &AtomicUsize) -> Vec<Arc<Tree>> {
    let mut all = journal.all_trees();
    let start = turn.fetch_add(1, Ordering::Relaxed) % all.len();
    all.rotate_left(start);
    all
}

fn flush_loop(journal: &Journal) {
    let turn = AtomicUsize::new(0);
    loop {
        let seen = journal.bg_work.generation();
        if journal.default.state.lock().closing {
            return;
        }
        // Trees with frozen memtables, most first: their writers are nearest a stall.
        let mut ready: Vec<(usize, Weak<Tree>)> = trees(journal, &turn)
            .iter()
            .filter_map(|tree| {
                let st = tree.state.lock();
                let ready = !st.closing && st.bg_error.is_none() && !st.flush_running;
                let frozen = st.imm.len();
                drop(st);
                (ready && frozen > 0).then(|| (frozen, Arc::downgrade(tree)))
            })
            .collect();
        // Stable: equals keep the rotated order.
        ready.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        let flushed = ready
            .iter()
            .any(|(_, tree)| tree.upgrade().is_some_and(|tree| flush_one(journal, &tree)));
        if !flushed {
            journal.bg_work.wait_past(seen, None);
        }
    }
}

/// Flushes `tree`'s oldest frozen memtable; false if another thread started first, or the
/// tree's range map is being changed (its flush would wait for that: the thread serves the
/// other trees meanwhile, and the change's end wakes it).
fn flush_one(journal: &Journal, tree: &Tree) -> bool {
    if tree.range_map_lock.try_lock().is_none() {
        return false;
    }
    let mut st = tree.state.lock();
    if st.closing || st.bg_error.is_some() || st.flush_running || st.imm.is_empty() {
        return false;
    }
    st.flush_running = true;
    drop(st);
    let result = unless_panicked("flush", || tree.flush_oldest_immutable(journal));
    match &result {
        Ok(()) => tree.maybe_balance(),
        Err(e) => tree.tell_background_error("flush", e),
    }
    let mut st = tree.state.lock();
    st.flush_running = false;
    if let Err(e) = result {
        st.flush_metrics.failed += 1;
        tree.set_bg_error(&mut st, &e);
    }
    // Wake stalled writers, `flush()` callers, and the compaction threads (L0 grew).
    tree.bg_done.notify_all();
    tree.bg_work.notify_all();
    true
}

/// Runs `job`; a panic in it (a bug, or an application callback's) becomes its tree's
/// background error, so that its flag or registration is cleared, the thread goes on serving
/// the other trees, and close does not wait for work that will never end.
fn unless_panicked(what: &str, job: impl FnOnce() -> Result<()>) -> Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(Error::Panicked(format!(
            "a background {what} panicked: {why}"
        )))
    })
}

fn compaction_loop(journal: &Journal) {
    let turn = AtomicUsize::new(0);
    loop {
        let seen = journal.bg_work.generation();
        if journal.default.state.lock().closing {
            return;
        }
        // Trees that may start a compaction, most urgent first: those whose writers L0 slows
        // or stops, then by level score. Held weakly: a keyspace dropped meanwhile goes.
        let mut ready: Vec<(Urgency, Weak<Tree>)> = trees(journal, &turn)
            .iter()
            .filter_map(|tree| Some((urgency(tree)?, Arc::downgrade(tree))))
            .collect();
        ready.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        let ran = ready
            .iter()
            .any(|(_, tree)| tree.upgrade().is_some_and(|tree| compact_one(&tree)));
        if !ran {
            journal.bg_work.wait_past(seen, None);
        }
    }
}

/// True if `tree` may start an automatic compaction now. REQUIRES: its state lock.
fn may_start(tree: &Tree, st: &TreeState, options: &Options) -> bool {
    !st.closing
        && st.bg_error.is_none()
        && st.manual_waiting == 0
        && !st.manual_running
        && st.compactions.len() < tree.options.compaction.max_concurrent_compactions
        && tree.needs_compaction(st, options)
}

/// How urgently a tree needs a compaction: whether L0 slows its writers, then its highest
/// level score.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Urgency {
    stalling: bool,
    score: f64,
}

impl Eq for Urgency {}

impl PartialOrd for Urgency {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Urgency {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.stalling.cmp(&other.stalling)).then(self.score.total_cmp(&other.score))
    }
}

/// `tree`'s [`Urgency`], if it may start an automatic compaction now.
fn urgency(tree: &Tree) -> Option<Urgency> {
    let st = tree.state.lock();
    // One reading of the options for the whole decision.
    let options = tree.live_options();
    may_start(tree, &st, &options).then(|| {
        let version = st.versions.current();
        let l0 = version.files(0).len();
        Urgency {
            stalling: l0 >= options.compaction.l0_slowdown_writes_trigger,
            score: {
                let (targets, scores) =
                    picker::targets_and_scores(version, &options, &st.compactions);
                let max = scores.into_iter().fold(0.0, f64::max);
                targets.comparable(max)
            },
        }
    })
}

/// Picks, registers and runs one automatic compaction of `tree`; false if it has none to run.
fn compact_one(tree: &Tree) -> bool {
    let options = tree.live_options();
    let mut st = tree.state.lock();
    if !may_start(tree, &st, &options) {
        return false;
    }
    let picked = picker::pick(
        st.versions.current(),
        &options,
        &st.versions.compact_pointers,
        &st.compactions,
    );
    let Some(c) = picked else {
        return false;
    };
    let job = st.compactions.register(&c);
    drop(st);
    let result = unless_panicked("compaction", || tree.run_automatic_compaction(c));
    if let Err(e) = &result {
        tree.tell_background_error("compaction", e);
    }
    let mut st = tree.state.lock();
    st.compactions.finish(job);
    if let Err(e) = result {
        tree.set_bg_error(&mut st, &e);
    }
    tree.bg_done.notify_all();
    tree.bg_work.notify_all();
    true
}
