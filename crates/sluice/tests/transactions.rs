//! Transactions: reads see the transaction's own writes, commits are atomic, conflicts fail
//! with `Busy` and write nothing, locks wait, time out and detect deadlocks, and a bank never
//! loses or creates money under contention.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sluice::merge_operator::U64Add;
use sluice::{Db, Error, KeyspaceOptions, MemtableOptions, Options, TransactionOptions};

fn options() -> Options {
    Options {
        merge_operator: Some(Arc::new(U64Add)),
        ..Options::default()
    }
}

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path(), options()).unwrap()
}

fn busy<T: std::fmt::Debug>(result: sluice::Result<T>) -> String {
    match result {
        Err(Error::Busy(m)) => m,
        other => panic!("expected Busy, got {other:?}"),
    }
}

fn entries(
    it: impl Iterator<Item = sluice::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(Result::unwrap).collect()
}

fn kv(k: &str, v: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (k.as_bytes().to_vec(), v.to_vec())
}

fn n(x: u64) -> [u8; 8] {
    x.to_le_bytes()
}

#[test]
fn reads_see_the_transactions_own_writes_and_others_see_them_at_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put("a", "1").unwrap();
    db.put("b", "2").unwrap();
    db.put("c", n(5)).unwrap();
    db.put("d", "4").unwrap();
    let mut txn = db.transaction();
    txn.put("a", "one").unwrap();
    txn.delete("b").unwrap();
    txn.merge("c", n(10)).unwrap();
    txn.put("bb", "new").unwrap();
    txn.merge("m", n(7)).unwrap();
    assert_eq!(txn.get("a").unwrap(), Some(b"one".to_vec()));
    assert_eq!(txn.get("b").unwrap(), None);
    assert_eq!(txn.get("c").unwrap(), Some(n(15).to_vec()));
    assert_eq!(txn.get("m").unwrap(), Some(n(7).to_vec()));
    assert_eq!(txn.get("d").unwrap(), Some(b"4".to_vec()));
    let expected = vec![
        kv("a", b"one"),
        kv("bb", b"new"),
        kv("c", &n(15)),
        kv("d", b"4"),
        kv("m", &n(7)),
    ];
    assert_eq!(entries(txn.iter()), expected);
    let mut backwards = expected.clone();
    backwards.reverse();
    assert_eq!(entries(txn.iter().rev()), backwards);
    assert_eq!(entries(txn.range("b".."d")), expected[1..3].to_vec());
    assert_eq!(entries(txn.prefix("b")), vec![kv("bb", b"new")]);
    // Both ends at once meet in the middle, each pair once.
    let mut both = txn.iter();
    let (first, last) = (
        both.next().unwrap().unwrap(),
        both.next_back().unwrap().unwrap(),
    );
    assert_eq!((first, last), (expected[0].clone(), expected[4].clone()));
    assert_eq!(entries(both), expected[1..4].to_vec());

    assert_eq!(
        db.get("a").unwrap(),
        Some(b"1".to_vec()),
        "nothing is visible before commit"
    );
    let seq = txn.commit().unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"one".to_vec()));
    assert_eq!(db.get("b").unwrap(), None);
    assert_eq!(db.get("c").unwrap(), Some(n(15).to_vec()));
    assert_eq!(db.get("m").unwrap(), Some(n(7).to_vec()));
    assert_eq!(
        db.snapshot().sequence(),
        seq,
        "the commit's last write is the last one"
    );
}

#[test]
fn a_rolled_back_or_dropped_transaction_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let mut txn = db.transaction();
    txn.put("a", "1").unwrap();
    txn.rollback();
    {
        let mut txn = db.transaction_with(TransactionOptions::pessimistic());
        txn.put("b", "2").unwrap();
    }
    assert_eq!(entries(db.iter()), vec![]);
    // The dropped pessimistic transaction released its lock.
    let mut again = db.transaction_with(TransactionOptions {
        lock_timeout: Duration::ZERO,
        ..TransactionOptions::pessimistic()
    });
    again.put("b", "3").unwrap();
    again.commit().unwrap();
    assert_eq!(db.get("b").unwrap(), Some(b"3".to_vec()));
}

#[test]
fn savepoints_undo_the_writes_made_since() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let mut txn = db.transaction();
    txn.put("a", "1").unwrap();
    txn.set_savepoint();
    txn.put("a", "2").unwrap();
    txn.put("b", "2").unwrap();
    txn.set_savepoint();
    txn.delete("a").unwrap();
    txn.rollback_to_savepoint().unwrap();
    assert_eq!(txn.get("a").unwrap(), Some(b"2".to_vec()));
    txn.rollback_to_savepoint().unwrap();
    assert_eq!(entries(txn.iter()), vec![kv("a", b"1")]);
    assert!(matches!(
        txn.rollback_to_savepoint(),
        Err(Error::InvalidArgument(_))
    ));
    txn.set_savepoint();
    txn.put("c", "3").unwrap();
    txn.pop_savepoint().unwrap();
    assert!(matches!(
        txn.pop_savepoint(),
        Err(Error::InvalidArgument(_))
    ));
    txn.commit().unwrap();
    assert_eq!(entries(db.iter()), vec![kv("a", b"1"), kv("c", b"3")]);
}

#[test]
fn a_key_written_by_another_since_it_was_tracked_fails_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put("k", "0").unwrap();

    // Read for update, then another write: Busy, and nothing of the transaction lands.
    let mut txn = db.transaction();
    assert_eq!(txn.get_for_update("k").unwrap(), Some(b"0".to_vec()));
    txn.put("other", "x").unwrap();
    db.put("k", "outside").unwrap();
    let message = busy(txn.commit());
    assert!(
        message.contains("key k ") && message.contains("run the transaction again"),
        "{message}"
    );
    assert_eq!(db.get("other").unwrap(), None);

    // Two transactions write one key: the first to commit wins.
    let (mut first, mut second) = (db.transaction(), db.transaction());
    first.put("k", "first").unwrap();
    second.put("k", "second").unwrap();
    first.commit().unwrap();
    busy(second.commit());
    assert_eq!(db.get("k").unwrap(), Some(b"first".to_vec()));

    // A plain `get` protects nothing, as in RocksDB.
    let mut txn = db.transaction();
    txn.get("k").unwrap();
    txn.put("elsewhere", "y").unwrap();
    db.put("k", "changed").unwrap();
    txn.commit().unwrap();

    // A delete or a range delete over a tracked key is a write too.
    for outside in [
        |db: &Db| db.delete("k"),
        |db: &Db| db.delete_range("j", "l"),
    ] {
        let mut txn = db.transaction();
        txn.get_for_update("k").unwrap();
        txn.put("k", "mine").unwrap();
        outside(&db).unwrap();
        busy(txn.commit());
    }
}

#[test]
fn a_snapshot_transaction_reads_its_start_and_conflicts_with_any_later_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put("k", "old").unwrap();
    let options = TransactionOptions {
        snapshot: true,
        ..Default::default()
    };
    let mut txn = db.transaction_with(options.clone());
    db.put("k", "new").unwrap();
    db.put("j", "later").unwrap();
    assert_eq!(txn.get("k").unwrap(), Some(b"old".to_vec()));
    assert_eq!(entries(txn.iter()), vec![kv("k", b"old")]);
    // Tracked after the other write, but the write came after the start: a conflict.
    assert_eq!(txn.get_for_update("k").unwrap(), Some(b"old".to_vec()));
    txn.put("k", "mine").unwrap();
    busy(txn.commit());

    // Without a snapshot, reading for update after the write protects from then on.
    let mut txn = db.transaction();
    db.put("k", "newer").unwrap();
    assert_eq!(txn.get_for_update("k").unwrap(), Some(b"newer".to_vec()));
    txn.put("k", "mine").unwrap();
    txn.commit().unwrap();
}

#[test]
fn conflicts_are_found_in_flushed_and_compacted_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    for i in 0..100u32 {
        db.put(format!("k{i:03}"), "v").unwrap();
    }
    db.flush().unwrap();
    let mut txn = db.transaction();
    txn.get_for_update("k050").unwrap();
    txn.put("k050", "mine").unwrap();
    db.put("k050", "outside").unwrap();
    // The outside write leaves the memtable and reaches the bottom level, where a compaction
    // would zero its sequence number if the transaction's start were not pinned.
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    busy(txn.commit());
    assert_eq!(db.get("k050").unwrap(), Some(b"outside".to_vec()));

    let mut txn = db.transaction();
    txn.get_for_update("k060").unwrap();
    txn.put("k060", "mine").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("k060").unwrap(), Some(b"mine".to_vec()));
}

#[test]
fn a_delete_after_the_read_is_a_conflict_even_once_compacted_away() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    for pessimistic in [false, true] {
        let mut txn = db.transaction_with(match pessimistic {
            true => TransactionOptions::pessimistic(),
            false => TransactionOptions::default(),
        });
        // Tracked above the transaction's start: the value and the delete after it fall in
        // one stripe unless the tracked number is pinned too.
        db.put("k", n(10)).unwrap();
        assert_eq!(txn.get_for_update("k").unwrap(), Some(n(10).to_vec()));
        txn.put("k", n(11)).unwrap();
        db.delete("k").unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        busy(txn.commit());
        assert_eq!(db.get("k").unwrap(), None, "the delete stands");
    }
}

#[test]
fn a_pessimistic_snapshot_transaction_fails_at_the_lock_not_at_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put("k", n(0)).unwrap();
    let options = TransactionOptions {
        snapshot: true,
        ..TransactionOptions::pessimistic()
    };
    let mut late = db.transaction_with(options.clone());
    let mut first = db.transaction_with(options);
    first.put("k", n(1)).unwrap();
    first.commit().unwrap();
    // `late` started before `first` committed: the key changed after its snapshot.
    let message = busy(late.get_for_update("k"));
    assert!(message.contains("key k "), "{message}");
    // The refused transaction still holds the lock until it ends, and then releases it.
    drop(late);
    let mut next = db.transaction_with(TransactionOptions {
        lock_timeout: Duration::ZERO,
        ..TransactionOptions::pessimistic()
    });
    next.put("k", n(2)).unwrap();
    next.commit().unwrap();
}

#[test]
fn a_transaction_spans_keyspaces_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let users = db
        .create_keyspace("users", &KeyspaceOptions::default())
        .unwrap();
    let emails = db
        .create_keyspace("emails", &KeyspaceOptions::default())
        .unwrap();
    let mut txn = db.transaction();
    assert_eq!(
        txn.get_for_update_in(&emails, "ada@example.com").unwrap(),
        None
    );
    txn.put_in(&users, "42", "Ada").unwrap();
    txn.put_in(&emails, "ada@example.com", "42").unwrap();
    assert_eq!(txn.get_in(&users, "42").unwrap(), Some(b"Ada".to_vec()));
    assert_eq!(
        txn.get("42").unwrap(),
        None,
        "the default keyspace is another"
    );
    assert_eq!(
        entries(txn.range_in(&emails, ..)),
        vec![kv("ada@example.com", b"42")]
    );
    txn.commit().unwrap();
    assert_eq!(users.get("42").unwrap(), Some(b"Ada".to_vec()));

    // A unique index: the second claim of the address conflicts.
    let (mut one, mut two) = (db.transaction(), db.transaction());
    for (txn, id) in [(&mut one, "7"), (&mut two, "8")] {
        assert_eq!(
            txn.get_for_update_in(&emails, "bob@example.com").unwrap(),
            None
        );
        txn.put_in(&emails, "bob@example.com", id).unwrap();
        txn.put_in(&users, id, "Bob").unwrap();
    }
    one.commit().unwrap();
    busy(two.commit());
    assert_eq!(users.get("8").unwrap(), None, "the loser wrote nothing");

    // A handle of another database is refused.
    let other_dir = tempfile::tempdir().unwrap();
    let other = open(&other_dir);
    let foreign = other
        .create_keyspace("users", &KeyspaceOptions::default())
        .unwrap();
    let mut txn = db.transaction();
    assert!(matches!(
        txn.put_in(&foreign, "k", "v"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_pessimistic_transaction_waits_for_a_lock_and_never_conflicts_with_another() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(&dir));
    db.put("k", n(0)).unwrap();
    let mut holder = db.transaction_with(TransactionOptions::pessimistic());
    holder.get_for_update("k").unwrap();
    let waiting = AtomicBool::new(true);
    std::thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut txn = db.transaction_with(TransactionOptions {
                lock_timeout: Duration::from_secs(30),
                ..TransactionOptions::pessimistic()
            });
            let seen = txn.get_for_update("k").unwrap();
            waiting.store(false, Ordering::Release);
            txn.put("k", n(2)).unwrap();
            txn.commit().unwrap();
            seen
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            waiting.load(Ordering::Acquire),
            "the second waits for the lock"
        );
        holder.put("k", n(1)).unwrap();
        holder.commit().unwrap();
        assert_eq!(
            waiter.join().unwrap(),
            Some(n(1).to_vec()),
            "it read the first's write"
        );
    });
    assert_eq!(db.get("k").unwrap(), Some(n(2).to_vec()));

    // A lock held past the timeout fails the waiter with Busy.
    let mut holder = db.transaction_with(TransactionOptions::pessimistic());
    holder.put("k", n(3)).unwrap();
    let mut impatient = db.transaction_with(TransactionOptions {
        lock_timeout: Duration::from_millis(20),
        ..TransactionOptions::pessimistic()
    });
    assert!(busy(impatient.put("k", n(4))).contains("timed out"));
    drop(impatient);
    // A plain write skips the locks, and then the holder's commit fails rather than lose it.
    db.put("k", n(9)).unwrap();
    busy(holder.commit());
    assert_eq!(db.get("k").unwrap(), Some(n(9).to_vec()));
}

#[test]
fn a_deadlock_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let long = TransactionOptions {
        lock_timeout: Duration::from_secs(30),
        ..TransactionOptions::pessimistic()
    };
    let mut a = db.transaction_with(long.clone());
    let mut b = db.transaction_with(long);
    a.put("1", "a").unwrap();
    b.put("2", "b").unwrap();
    std::thread::scope(|s| {
        let a_waits = s.spawn(move || {
            a.put("2", "a").unwrap();
            a.commit().unwrap();
        });
        std::thread::sleep(Duration::from_millis(50));
        let message = busy(b.put("1", "b"));
        assert!(message.contains("deadlock"), "{message}");
        drop(b);
        a_waits.join().unwrap();
    });
    assert_eq!(db.get("2").unwrap(), Some(b"a".to_vec()));
}

/// Accounts and the money in each at the start.
const ACCOUNTS: u64 = 12;
const START: u64 = 1_000;

fn account(i: u64) -> String {
    format!("account{i:02}")
}

fn balance(value: Option<Vec<u8>>) -> u64 {
    u64::from_le_bytes(value.unwrap().try_into().unwrap())
}

/// Threads move money between random accounts, retrying on `Busy`, while a reader checks the
/// total in snapshots and the memtable flushes and compacts underneath.
fn bank(txn_options: TransactionOptions) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..Default::default()
            },
            ..options()
        },
    )
    .unwrap();
    for i in 0..ACCOUNTS {
        db.put(account(i), n(START)).unwrap();
    }
    let (committed, conflicts) = (AtomicU64::new(0), AtomicU64::new(0));
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..4u64)
            .map(|t| {
                let (db, options) = (&db, txn_options.clone());
                let (committed, conflicts) = (&committed, &conflicts);
                s.spawn(move || {
                    let mut rng = t.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                    let mut next = move || {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        rng
                    };
                    for _ in 0..250 {
                        let (from, to) = (next() % ACCOUNTS, next() % ACCOUNTS);
                        let amount = next() % 50;
                        loop {
                            let mut txn = db.transaction_with(options.clone());
                            let step = (|| {
                                let a = balance(txn.get_for_update(account(from))?);
                                let b = balance(txn.get_for_update(account(to))?);
                                if from != to && a >= amount {
                                    txn.put(account(from), n(a - amount))?;
                                    txn.put(account(to), n(b + amount))?;
                                }
                                // Padding, so that the memtable fills and flushes.
                                txn.put(format!("log{t}"), [0u8; 512])?;
                                Ok(())
                            })();
                            match step.and_then(|()| txn.commit()) {
                                Ok(_) => {
                                    committed.fetch_add(1, Ordering::Relaxed);
                                    break;
                                }
                                Err(Error::Busy(_)) => {
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("transfer failed: {e}"),
                            }
                        }
                    }
                })
            })
            .collect();
        let auditor = s.spawn(|| {
            let mut audits = 0;
            while !done.load(Ordering::Acquire) {
                let snapshot = db.snapshot();
                let total: u64 = (0..ACCOUNTS)
                    .map(|i| balance(snapshot.get(account(i)).unwrap()))
                    .sum();
                assert_eq!(total, ACCOUNTS * START, "a snapshot saw money lost or made");
                audits += 1;
                if audits % 16 == 0 {
                    db.compact_range(None, None).unwrap();
                }
            }
            audits
        });
        for w in workers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
        assert!(auditor.join().unwrap() > 0);
    });
    assert_eq!(committed.load(Ordering::Relaxed), 4 * 250);
    let total: u64 = (0..ACCOUNTS)
        .map(|i| balance(db.get(account(i)).unwrap()))
        .sum();
    assert_eq!(total, ACCOUNTS * START);
    eprintln!(
        "{:?}: {} transfers, {} retried after Busy",
        txn_options.concurrency,
        committed.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed)
    );
}

#[test]
fn an_optimistic_bank_never_loses_or_makes_money() {
    bank(TransactionOptions::default());
}

#[test]
fn a_pessimistic_bank_never_loses_or_makes_money() {
    bank(TransactionOptions::pessimistic());
}

#[test]
fn a_snapshot_bank_never_loses_or_makes_money() {
    bank(TransactionOptions {
        snapshot: true,
        ..TransactionOptions::pessimistic()
    });
}
