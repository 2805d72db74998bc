//! The workload: threads doing random puts, deletes (a third of them as range deletes of the
//! one key, so range tombstones go through every crash and recovery too), batches, gets,
//! iterators, snapshot reads, flushes, manual compactions (plain, parallel, cancelled) and,
//! partitioned, range moves and splits, each read checked against the expected state. Each
//! operation goes to a random keyspace; a batch draws one for each of its keys, so batches
//! span keyspaces; a snapshot is read back in a random keyspace after writes to any.
//!
//! Key `k` belongs to thread `k % threads`, in every keyspace: only its owner writes it, so
//! the owner knows exactly what the database must return for it (or, while a write of it is
//! in flight or its outcome unknown, the two things it may return). Every write follows the
//! expected-state protocol of [`super::expected`]: pending before, committed after the
//! acknowledgement. A write that fails (only allowed while a fault is armed) leaves its keys
//! pending, and the thread leaves them alone until a reopen resolves them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sluice::{CompactOptions, Db, Error, Keyspace, ReadOptions, WriteBatch, WriteOptions};

use super::check::{check_range, check_read, found};
use super::engine::KEYSPACES;
use super::expected::{ExpectedFile, Slot};
use super::tally::Tally;
use super::value::{encode, key};

/// Most keys one iterator or snapshot check covers.
const MAX_RANGE_KEYS: u32 = 400;
/// Most keys one batch writes.
const MAX_BATCH_KEYS: usize = 8;

/// What the workload threads share.
pub struct Workload<'a> {
    pub db: &'a Db,
    /// The handle of each of [`KEYSPACES`], by index (the default one's first).
    pub keyspaces: &'a [Keyspace],
    pub expected: &'a ExpectedFile,
    pub tally: &'a Tally,
    pub threads: u32,
    /// Percent of writes that sync the WAL.
    pub sync_percent: u32,
    /// Partition owners (0: not partitioned): ranges are moved and split among them.
    pub owners: u32,
    /// A fault is or may be armed: errors are counted, not failures.
    pub faults: bool,
    /// Set to stop every thread; also set by a thread that found a failure, so the database
    /// is left as close as possible to where it went wrong.
    pub stop: &'a AtomicBool,
}

impl Workload<'_> {
    /// Runs the threads until `stop` is set or `deadline` passes. `slots` is the expected
    /// state when they start (no key may be pending).
    pub fn run(&self, slots: &[Slot], seed: u64, deadline: Instant) {
        debug_assert_eq!(self.keyspaces.len(), KEYSPACES.len());
        let keys = self.expected.keys() as usize;
        std::thread::scope(|s| {
            for thread in 0..self.threads {
                let own = slots
                    .chunks_exact(keys)
                    .map(|keyspace| {
                        keyspace
                            .iter()
                            .skip(thread as usize)
                            .step_by(self.threads as usize)
                            .copied()
                            .collect()
                    })
                    .collect();
                let rng = SmallRng::seed_from_u64(seed ^ u64::from(thread).wrapping_mul(0x9e37));
                s.spawn(move || {
                    let mut t = Thread {
                        w: self,
                        thread,
                        rng,
                        own,
                    };
                    while !self.stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                        t.step();
                        self.tally.ops(1);
                    }
                });
            }
        });
    }

    /// An error from the database: counted while faults are armed, else a failure.
    fn error(&self, what: String, e: &Error) {
        if self.faults {
            self.tally.fault_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.failure(format!("{what}: unexpected error: {e}"));
        }
    }

    fn failure(&self, message: String) {
        self.tally.fail(message);
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One workload thread; index `i` of `own[ks]` is key `i * threads + thread` of keyspace
/// `ks`.
struct Thread<'a> {
    w: &'a Workload<'a>,
    thread: u32,
    rng: SmallRng,
    own: Vec<Vec<Slot>>,
}

impl Thread<'_> {
    fn step(&mut self) {
        let ks = self.keyspace();
        match self.rng.gen_range(0..1000) {
            0..350 => self.write_one(ks, false, None),
            350..430 => self.write_one(ks, true, None),
            430..520 => self.batch(None),
            520..800 => self.get(ks),
            800..900 => self.iterate(ks),
            900..940 => self.snapshot(),
            940..942 => self.flush(ks),
            942..944 => self.compact(ks),
            944..946 => self.reshape_ranges(),
            _ => self.write_one(ks, false, None),
        }
    }

    /// A random keyspace.
    fn keyspace(&mut self) -> usize {
        self.rng.gen_range(0..KEYSPACES.len())
    }

    fn key_of(&self, i: usize) -> u32 {
        i as u32 * self.w.threads + self.thread
    }

    /// An own key of keyspace `ks` without a pending write, in key range `within` if given.
    fn pick(&mut self, ks: usize, within: Option<(u32, u32)>) -> Option<usize> {
        let (lo, hi) = match within {
            Some((lo, hi)) => (
                self.own_index_at_or_after(lo),
                self.own_index_at_or_after(hi),
            ),
            None => (0, self.own[ks].len()),
        };
        if lo >= hi {
            return None;
        }
        (0..8)
            .map(|_| self.rng.gen_range(lo..hi))
            .find(|&i| self.own[ks][i].pending.is_none())
    }

    /// Index in `own[ks]` (any `ks`) of the first own key at or above key `k`.
    fn own_index_at_or_after(&self, k: u32) -> usize {
        let i = k.saturating_sub(self.thread).div_ceil(self.w.threads) as usize;
        i.min(self.own[0].len())
    }

    fn write_options(&mut self) -> WriteOptions {
        WriteOptions {
            sync: self.rng.gen_range(0..100) < self.w.sync_percent,
        }
    }

    /// Stores own slot `i` of keyspace `ks` in memory and in the expected-state file.
    fn store(&mut self, ks: usize, i: usize, slot: Slot) -> bool {
        self.own[ks][i] = slot;
        match self.w.expected.store(ks, self.key_of(i), &slot) {
            Ok(()) => true,
            Err(e) => {
                self.w.failure(e);
                false
            }
        }
    }

    fn write_one(&mut self, ks: usize, delete: bool, within: Option<(u32, u32)>) {
        let Some(i) = self.pick(ks, within) else {
            return;
        };
        let k = self.key_of(i);
        let slot = self.own[ks][i];
        let version = slot.next_version();
        if !self.store(ks, i, slot.begin(version, delete, 0)) {
            return;
        }
        let opts = self.write_options();
        let keyspace = &self.w.keyspaces[ks];
        let result = if delete && self.rng.gen_ratio(1, 3) {
            let (start, end) = one_key_range(k);
            keyspace.delete_range_opt(&opts, &start, &end)
        } else if delete {
            keyspace.delete_opt(&opts, key(k))
        } else {
            keyspace.put_opt(&opts, key(k), encode(ks, k, version))
        };
        match result {
            Ok(()) => {
                let committed = self.own[ks][i].commit();
                self.store(ks, i, committed);
            }
            Err(e) => self.w.error(
                format!("write of key {k} version {version} in {}", KEYSPACES[ks]),
                &e,
            ),
        }
    }

    /// An atomic batch of puts and deletes of distinct own keys, each in a random keyspace.
    fn batch(&mut self, within: Option<(u32, u32)>) {
        let n = self.rng.gen_range(2..=MAX_BATCH_KEYS);
        let mut picked: Vec<(usize, usize)> = (0..n)
            .filter_map(|_| {
                let ks = self.keyspace();
                self.pick(ks, within).map(|i| (ks, i))
            })
            .collect();
        picked.sort_unstable();
        picked.dedup();
        let group = self.rng.r#gen::<u32>() | 1;
        let mut batch = WriteBatch::new();
        for &(ks, i) in &picked {
            let (k, slot) = (self.key_of(i), self.own[ks][i]);
            let (version, delete) = (slot.next_version(), self.rng.gen_ratio(1, 4));
            if !self.store(ks, i, slot.begin(version, delete, group)) {
                return;
            }
            let keyspace = &self.w.keyspaces[ks];
            if delete && self.rng.gen_ratio(1, 3) {
                let (start, end) = one_key_range(k);
                batch.delete_range_in(keyspace, &start, &end);
            } else if delete {
                batch.delete_in(keyspace, key(k));
            } else {
                batch.put_in(keyspace, key(k), encode(ks, k, version));
            }
        }
        let opts = self.write_options();
        match self.w.db.write(&opts, batch) {
            Ok(()) => {
                for (ks, i) in picked {
                    let committed = self.own[ks][i].commit();
                    self.store(ks, i, committed);
                }
            }
            Err(e) => self.w.error(format!("batch of {} keys", picked.len()), &e),
        }
    }

    fn get(&mut self, ks: usize) {
        let i = self.rng.gen_range(0..self.own[ks].len());
        let k = self.key_of(i);
        match self.w.keyspaces[ks].get(key(k)) {
            Ok(v) => self.checked(
                ks,
                found(ks, k, v.as_deref()).and_then(|got| {
                    check_read(k, &self.own[ks][i], got, "get")?;
                    Ok(1)
                }),
            ),
            Err(e) => self
                .w
                .error(format!("get of key {k} in {}", KEYSPACES[ks]), &e),
        }
    }

    /// Counts what a check in keyspace `ks` verified, or records its failure.
    fn checked(&self, ks: usize, result: Result<u64, String>) {
        match result {
            Ok(n) => self.w.tally.verified(n),
            Err(e) => self.w.failure(format!(
                "thread {}, keyspace {:?}: {e}",
                self.thread, KEYSPACES[ks]
            )),
        }
    }

    /// The slot of key `k` in `slots` (`own[ks]` or a copy of it) if this thread owns `k`.
    fn owned(&self, slots: &[Slot], k: u32) -> Option<Slot> {
        (k % self.w.threads == self.thread)
            .then(|| slots.get((k / self.w.threads) as usize).copied())
            .flatten()
    }

    /// A random key range `[lo, hi)`.
    fn range(&mut self) -> (u32, u32) {
        let keys = self.w.expected.keys();
        let lo = self.rng.gen_range(0..keys);
        let hi = (lo + self.rng.gen_range(1..=MAX_RANGE_KEYS)).min(keys);
        (lo, hi)
    }

    /// Reads `[lo, hi)` of keyspace `ks` forwards or backwards, returning the entries in
    /// ascending order.
    fn read_range(
        &mut self,
        ks: usize,
        lo: u32,
        hi: u32,
        snapshot: Option<&sluice::Snapshot>,
    ) -> sluice::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (lo_key, hi_key) = (key(lo), key(hi));
        let opts = ReadOptions {
            snapshot,
            lower_bound: Some(&lo_key),
            upper_bound: Some(&hi_key),
            ..ReadOptions::default()
        };
        let mut it = self.w.keyspaces[ks].raw_iter(&opts)?;
        let mut entries = Vec::new();
        if self.rng.r#gen() {
            it.seek_to_first()?;
            while it.valid() {
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.next()?;
            }
        } else {
            it.seek_to_last()?;
            while it.valid() {
                entries.push((it.key().to_vec(), it.value().to_vec()));
                it.prev()?;
            }
            entries.reverse();
        }
        Ok(entries)
    }

    fn iterate(&mut self, ks: usize) {
        let (lo, hi) = self.range();
        self.check_range_read(ks, (lo, hi), None, None, "iterator");
    }

    /// Reads `[lo, hi)` of keyspace `ks` (through `snapshot`, if any) and checks what came
    /// back against this thread's slots (`noted`, a copy taken earlier, or the current ones);
    /// `what` names the read in failures.
    fn check_range_read(
        &mut self,
        ks: usize,
        (lo, hi): (u32, u32),
        snapshot: Option<&sluice::Snapshot>,
        noted: Option<&[Vec<Slot>]>,
        what: &str,
    ) {
        match self.read_range(ks, lo, hi, snapshot) {
            Ok(entries) => {
                let slots = noted.unwrap_or(&self.own);
                let result = check_range(&entries, ks, lo, hi, |k| self.owned(&slots[ks], k), what);
                self.checked(ks, result);
            }
            Err(e) => self
                .w
                .error(format!("{what} over [{lo}, {hi}) of {}", KEYSPACES[ks]), &e),
        }
    }

    /// Pins a snapshot, notes the own keys of a range, writes some of them (in any
    /// keyspaces), and checks that reads through the snapshot, an iterator in one keyspace and
    /// a get in one, still see what was noted.
    fn snapshot(&mut self) {
        let (lo, hi) = self.range();
        let snap = self.w.db.snapshot();
        let noted = self.own.clone();
        for _ in 0..self.rng.gen_range(1..12) {
            let ks = self.keyspace();
            match self.rng.gen_range(0..4) {
                0 => self.write_one(ks, true, Some((lo, hi))),
                1 => self.batch(Some((lo, hi))),
                _ => self.write_one(ks, false, Some((lo, hi))),
            }
        }
        let ks = self.keyspace();
        self.check_range_read(ks, (lo, hi), Some(&snap), Some(&noted), "snapshot iterator");
        let (ks, k) = (self.keyspace(), self.rng.gen_range(lo..hi));
        if let Some(slot) = self.owned(&noted[ks], k) {
            let opts = ReadOptions {
                snapshot: Some(&snap),
                ..ReadOptions::default()
            };
            match self.w.keyspaces[ks].get_opt(&opts, key(k)) {
                Ok(v) => self.checked(
                    ks,
                    found(ks, k, v.as_deref()).and_then(|got| {
                        check_read(k, &slot, got, "snapshot get")?;
                        Ok(1)
                    }),
                ),
                Err(e) => self
                    .w
                    .error(format!("snapshot get of key {k} in {}", KEYSPACES[ks]), &e),
            }
        }
    }

    fn flush(&mut self, ks: usize) {
        if let Err(e) = self.w.keyspaces[ks].flush() {
            self.w.error(format!("flush of {}", KEYSPACES[ks]), &e);
        }
    }

    /// A manual compaction of a random range of keyspace `ks` (one time in eight everything):
    /// plain, with parallel pieces, cancelled before it starts, or cancelled while it runs.
    fn compact(&mut self, ks: usize) {
        let (lo, hi) = self.range();
        let (lo, hi) = (key(lo), key(hi));
        let everything = self.rng.gen_ratio(1, 8);
        let (start, end) = if everything {
            (None, None)
        } else {
            (Some(&lo[..]), Some(&hi[..]))
        };
        let how = self.rng.gen_range(0..4);
        let cancel = Arc::new(AtomicBool::new(how == 2));
        let opts = CompactOptions {
            parallel: how == 1,
            cancel: (how >= 2).then(|| Arc::clone(&cancel)),
            ..CompactOptions::default()
        };
        let delay = Duration::from_millis(self.rng.gen_range(0..30));
        let result = std::thread::scope(|s| {
            if how == 3 {
                let cancel = &cancel;
                s.spawn(move || {
                    std::thread::sleep(delay);
                    cancel.store(true, Ordering::Relaxed);
                });
            }
            self.w.keyspaces[ks].compact_range_with(start, end, &opts)
        });
        match result {
            Ok(()) | Err(Error::Cancelled) => {}
            Err(e) => self
                .w
                .error(format!("compact_range of {}", KEYSPACES[ks]), &e),
        }
    }

    /// Partitioned only: moves a range of the default keyspace's map to another owner, or
    /// splits one at a random key, in every keyspace.
    fn reshape_ranges(&mut self) {
        let Some(map) = self.w.db.range_map() else {
            return;
        };
        let at = key(self.rng.gen_range(0..self.w.expected.keys()));
        let result = if self.rng.r#gen() {
            let range = self.rng.gen_range(0..map.len());
            self.w
                .db
                .move_range(range, self.rng.gen_range(0..self.w.owners.max(1)))
        } else {
            self.w.db.split_range(map.index_of(&at), &at)
        };
        match result {
            // A range that starts at `at`, or is busy, is refused: that is an answer.
            Ok(()) | Err(Error::InvalidArgument(_)) => {}
            Err(e) => self.w.error("range move or split".into(), &e),
        }
    }
}

/// The range `[key(k), key(k) + 0x00)`: key `k` and nothing else, as keys are all one length.
fn one_key_range(k: u32) -> (Vec<u8>, Vec<u8>) {
    let start = key(k);
    let mut end = start.clone();
    end.push(0);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_key_range_holds_its_key_and_no_neighbour() {
        let (start, end) = one_key_range(41);
        for (k, inside) in [(40, false), (41, true), (42, false)] {
            let key = key(k);
            assert_eq!(start <= key && key < end, inside, "key {k}");
        }
    }
}
