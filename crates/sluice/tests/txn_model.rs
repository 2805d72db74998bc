//! The transaction model test: threads run random transactions (optimistic and pessimistic,
//! with and without a snapshot, over two keyspaces, with merges, scans and savepoints) while
//! another flushes and compacts; then the committed ones are replayed serially, in commit
//! order, against a `BTreeMap`, and every read each of them made must match the reference:
//!
//! - with a snapshot, every read is the state at the transaction's start with its own writes
//!   over it, and no key it tracked changed between its start and its commit;
//! - without one, a `get_for_update` read the state just before its commit (with its own
//!   writes over it): nothing wrote the key in between.
//!
//! Transactions that failed with `Busy` must have written nothing: the database's final state
//! is the replay's. `SLUICE_TXN_MODEL_SEEDS` sets how many seeds run (8 by default).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice::merge_operator::U64Add;
use sluice::{
    Concurrency, Db, Error, Keyspace, KeyspaceOptions, MemtableOptions, Options, Transaction,
    TransactionOptions,
};

const THREADS: u64 = 4;
const TRANSACTIONS: usize = 400;
/// Keys per keyspace, and keyspaces (the default one and "other").
const KEYS: u64 = 6;
const KEYSPACES: usize = 2;

/// A key: its keyspace's index and its own.
type Key = (usize, u64);
/// The reference: every key's value.
type Model = BTreeMap<Key, u64>;

#[derive(Clone, Copy, Debug)]
enum Step {
    Get(Key),
    GetForUpdate(Key),
    Put(Key, u64),
    Delete(Key),
    Merge(Key, u64),
    Scan(usize),
    SetSavepoint,
    RollbackToSavepoint,
}

/// What a step read.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Nothing,
    Value(Option<u64>),
    Scan(Vec<(u64, u64)>),
}

/// A committed transaction.
#[derive(Debug)]
struct Committed {
    snapshot: bool,
    start: u64,
    commit: u64,
    steps: Vec<(Step, Seen)>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn key(&mut self) -> Key {
        (self.below(KEYSPACES as u64) as usize, self.below(KEYS))
    }

    fn step(&mut self) -> Step {
        match self.below(16) {
            0..=2 => Step::Get(self.key()),
            3..=5 => Step::GetForUpdate(self.key()),
            6..=9 => Step::Put(self.key(), self.below(1000)),
            10 => Step::Delete(self.key()),
            11 | 12 => Step::Merge(self.key(), 1 + self.below(9)),
            13 => Step::Scan(self.below(KEYSPACES as u64) as usize),
            14 => Step::SetSavepoint,
            _ => Step::RollbackToSavepoint,
        }
    }
}

fn key_bytes(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

fn number(v: Option<Vec<u8>>) -> Option<u64> {
    v.map(|v| u64::from_le_bytes(v.try_into().unwrap()))
}

/// Runs `steps` in `txn`, recording what each read.
fn run(
    txn: &mut Transaction<'_>,
    keyspaces: &[Keyspace],
    steps: &[Step],
) -> sluice::Result<Vec<(Step, Seen)>> {
    let mut seen = Vec::new();
    for &step in steps {
        let ks = |k: Key| &keyspaces[k.0];
        let what = match step {
            Step::Get((s, k)) => Seen::Value(number(txn.get_in(ks((s, k)), key_bytes(k))?)),
            Step::GetForUpdate((s, k)) => {
                Seen::Value(number(txn.get_for_update_in(ks((s, k)), key_bytes(k))?))
            }
            Step::Put((s, k), v) => {
                txn.put_in(ks((s, k)), key_bytes(k), v.to_le_bytes())?;
                Seen::Nothing
            }
            Step::Delete((s, k)) => {
                txn.delete_in(ks((s, k)), key_bytes(k))?;
                Seen::Nothing
            }
            Step::Merge((s, k), v) => {
                txn.merge_in(ks((s, k)), key_bytes(k), v.to_le_bytes())?;
                Seen::Nothing
            }
            Step::Scan(s) => {
                let mut pairs = Vec::new();
                for entry in txn.range_in(&keyspaces[s], ..) {
                    let (k, v) = entry?;
                    let k = u64::from_be_bytes(k.try_into().unwrap());
                    pairs.push((k, number(Some(v)).unwrap()));
                }
                Seen::Scan(pairs)
            }
            Step::SetSavepoint => {
                txn.set_savepoint();
                Seen::Nothing
            }
            Step::RollbackToSavepoint => {
                // Without a savepoint this is refused, and the transaction goes on.
                let _ = txn.rollback_to_savepoint();
                Seen::Nothing
            }
        };
        seen.push((step, what));
    }
    Ok(seen)
}

/// A transaction's own writes over `base`, with its savepoints.
struct Overlay<'a> {
    base: &'a Model,
    own: BTreeMap<Key, Option<u64>>,
    savepoints: Vec<BTreeMap<Key, Option<u64>>>,
}

impl Overlay<'_> {
    fn get(&self, key: Key) -> Option<u64> {
        match self.own.get(&key) {
            Some(v) => *v,
            None => self.base.get(&key).copied(),
        }
    }

    fn scan(&self, keyspace: usize) -> Vec<(u64, u64)> {
        (0..KEYS)
            .filter_map(|k| self.get((keyspace, k)).map(|v| (k, v)))
            .collect()
    }

    fn apply(&mut self, step: Step) {
        match step {
            Step::Put(k, v) => {
                self.own.insert(k, Some(v));
            }
            Step::Delete(k) => {
                self.own.insert(k, None);
            }
            Step::Merge(k, v) => {
                let sum = self.get(k).unwrap_or(0).wrapping_add(v);
                self.own.insert(k, Some(sum));
            }
            Step::SetSavepoint => self.savepoints.push(self.own.clone()),
            Step::RollbackToSavepoint => {
                if let Some(own) = self.savepoints.pop() {
                    self.own = own;
                }
            }
            Step::Get(_) | Step::GetForUpdate(_) | Step::Scan(_) => {}
        }
    }
}

/// The keys a transaction tracked: those it wrote or read for update (rolled back or not).
fn tracked(steps: &[(Step, Seen)]) -> Vec<Key> {
    steps
        .iter()
        .filter_map(|(step, _)| match *step {
            Step::GetForUpdate(k) | Step::Put(k, _) | Step::Delete(k) | Step::Merge(k, _) => {
                Some(k)
            }
            _ => None,
        })
        .collect()
}

/// Whether `txn` committed a write: one not rolled back to a savepoint.
fn wrote(txn: &Committed) -> bool {
    let empty = Model::new();
    let mut overlay = Overlay {
        base: &empty,
        own: BTreeMap::new(),
        savepoints: Vec::new(),
    };
    txn.steps.iter().for_each(|(step, _)| overlay.apply(*step));
    !overlay.own.is_empty()
}

/// Replays the committed transactions serially and checks each read; returns the final state.
fn replay(initial: (u64, Model), mut committed: Vec<Committed>) -> Model {
    // A read-only transaction's number is the last write its check saw: it goes after that
    // write's transaction.
    committed.sort_by_key(|c| (c.commit, !wrote(c)));
    // The state after each commit, by its sequence number.
    let mut history = vec![initial];
    let state_at = |history: &[(u64, Model)], seq: u64| -> Model {
        let at = history.partition_point(|(s, _)| *s <= seq);
        history[at - 1].1.clone()
    };
    for txn in &committed {
        let before = history.last().unwrap().1.clone();
        let start = state_at(&history, txn.start);
        let wrote = wrote(txn);
        if txn.snapshot {
            for key in tracked(&txn.steps) {
                assert_eq!(
                    start.get(&key),
                    before.get(&key),
                    "key {key:?} changed between the start and the commit of {txn:?}"
                );
            }
        }
        let base = if txn.snapshot { &start } else { &before };
        let mut overlay = Overlay {
            base,
            own: BTreeMap::new(),
            savepoints: Vec::new(),
        };
        for (step, seen) in &txn.steps {
            let expected = match *step {
                Step::Get(k) if txn.snapshot => Seen::Value(overlay.get(k)),
                Step::GetForUpdate(k) => Seen::Value(overlay.get(k)),
                Step::Scan(s) if txn.snapshot => Seen::Scan(overlay.scan(s)),
                // Without a snapshot, plain reads see whatever was latest: not checked.
                Step::Get(_) | Step::Scan(_) => seen.clone(),
                _ => Seen::Nothing,
            };
            assert_eq!(seen, &expected, "{step:?} in {txn:?}");
            overlay.apply(*step);
        }
        if wrote {
            let own = overlay.own;
            let mut after = before.clone();
            for (key, value) in own {
                match value {
                    Some(v) => after.insert(key, v),
                    None => after.remove(&key),
                };
            }
            history.push((txn.commit, after));
        }
    }
    history.pop().unwrap().1
}

/// Every key and value in the database.
fn contents(db: &Db, keyspaces: &[Keyspace]) -> Model {
    let mut model = Model::new();
    for (s, ks) in keyspaces.iter().enumerate() {
        for entry in ks.iter() {
            let (k, v) = entry.unwrap();
            let k = u64::from_be_bytes(k.try_into().unwrap());
            model.insert((s, k), number(Some(v)).unwrap());
        }
    }
    let _ = db;
    model
}

fn one_seed(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            merge_operator: Some(Arc::new(U64Add)),
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    let other = db
        .create_keyspace(
            "other",
            &KeyspaceOptions {
                merge_operator: Some(Arc::new(U64Add)),
                ..KeyspaceOptions::of_default(db.options())
            },
        )
        .unwrap();
    let keyspaces = vec![db.keyspace("default").unwrap(), other];
    for (s, ks) in keyspaces.iter().enumerate() {
        for k in 0..KEYS {
            ks.put(key_bytes(k), (100 * s as u64 + k).to_le_bytes())
                .unwrap();
        }
    }
    let initial = (db.snapshot().sequence(), contents(&db, &keyspaces));
    let done = AtomicBool::new(false);
    let (committed, aborted) = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (db, keyspaces) = (&db, &keyspaces);
                s.spawn(move || {
                    let mut rng = Rng((seed << 8 | t).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                    let (mut committed, mut aborted) = (Vec::new(), 0);
                    for _ in 0..TRANSACTIONS {
                        let options = TransactionOptions {
                            concurrency: match rng.below(2) {
                                0 => Concurrency::Optimistic,
                                _ => Concurrency::Pessimistic,
                            },
                            snapshot: rng.below(3) != 0,
                            lock_timeout: Duration::from_millis(50),
                            ..TransactionOptions::default()
                        };
                        let steps: Vec<Step> = (0..1 + rng.below(6)).map(|_| rng.step()).collect();
                        let mut txn = db.transaction_with(options.clone());
                        let start = txn.start_sequence();
                        let outcome = run(&mut txn, keyspaces, &steps)
                            .and_then(|seen| Ok((seen, txn.commit()?)));
                        match outcome {
                            Ok((steps, commit)) => committed.push(Committed {
                                snapshot: options.snapshot,
                                start,
                                commit,
                                steps,
                            }),
                            Err(Error::Busy(_)) => aborted += 1,
                            Err(e) => panic!("transaction failed: {e}"),
                        }
                    }
                    (committed, aborted)
                })
            })
            .collect();
        let churn = s.spawn(|| {
            while !done.load(Ordering::Acquire) {
                db.flush().unwrap();
                for ks in &keyspaces {
                    ks.compact_range(None, None).unwrap();
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let mut all = (Vec::new(), 0);
        for t in threads {
            let (committed, aborted) = t.join().unwrap();
            all.0.extend(committed);
            all.1 += aborted;
        }
        done.store(true, Ordering::Release);
        churn.join().unwrap();
        all
    });
    let count = committed.len();
    let expected = replay(initial, committed);
    assert_eq!(
        contents(&db, &keyspaces),
        expected,
        "the database is not the replay"
    );
    eprintln!("seed {seed}: {count} committed, {aborted} failed with Busy");
}

#[test]
fn concurrent_transactions_are_a_serial_history() {
    let seeds = std::env::var("SLUICE_TXN_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    for seed in 0..seeds {
        one_seed(seed);
    }
}
