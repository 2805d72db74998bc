//! [`LockTable`]: the per-key locks of pessimistic transactions, with a timeout and deadlock
//! detection (RocksDB's `PointLockManager` with `deadlock_detect`).
//!
//! Locks are exclusive and held until the transaction commits or rolls back. A transaction
//! that finds a key locked waits for its holder, recording the edge "waits for" in a graph of
//! one out-edge per waiter (a key has one holder, a waiter waits for one key). Before it waits
//! it follows the edges from the holder: if they lead back to itself, waiting would never end,
//! and it fails with [`Error::Busy`] instead of the holder. Each wait is bounded by the
//! transaction's lock timeout, after which it fails with [`Error::Busy`] too: a holder that is
//! merely slow costs the waiter a retry, never a hang.
//!
//! One mutex guards the table, and a release wakes every waiter (each rechecks its key). That
//! keeps the graph and the holders consistent with no ordering between stripes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::{Error, Result};

/// A transaction as the lock table knows it: a number unique within the database.
pub(crate) type TxnId = u64;

/// A locked key: its keyspace id and the key.
type LockKey = (u32, Vec<u8>);

#[derive(Default)]
struct Table {
    holders: HashMap<LockKey, TxnId>,
    /// Waiter -> the transaction it waits for.
    waits_for: HashMap<TxnId, TxnId>,
}

/// The locks of one database's pessimistic transactions.
#[derive(Default)]
pub(crate) struct LockTable {
    table: Mutex<Table>,
    released: Condvar,
    next_txn: AtomicU64,
}

impl LockTable {
    /// A number for a new transaction.
    pub fn new_txn(&self) -> TxnId {
        self.next_txn.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Locks `key` of `keyspace` for `txn`, waiting up to `timeout` for its holder (zero: fail
    /// at once if it is held). Locking a key `txn` holds already succeeds.
    ///
    /// # Errors
    /// [`Error::Busy`] on a timeout, or when waiting would close a cycle of waiters (a
    /// deadlock) and `detect_deadlocks` is set.
    pub fn lock(
        &self,
        txn: TxnId,
        keyspace: u32,
        key: &[u8],
        timeout: Duration,
        detect_deadlocks: bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let wanted = (keyspace, key.to_vec());
        let mut table = self.table.lock();
        loop {
            let holder = match table.holders.get(&wanted) {
                None => {
                    table.holders.insert(wanted, txn);
                    table.waits_for.remove(&txn);
                    return Ok(());
                }
                Some(&holder) if holder == txn => return Ok(()),
                Some(&holder) => holder,
            };
            if detect_deadlocks && leads_to(&table.waits_for, holder, txn) {
                table.waits_for.remove(&txn);
                return Err(Error::Busy(format!(
                    "deadlock: the transaction holding key {} of keyspace {keyspace} waits, \
                     through others, for this one; roll back and retry",
                    sluice_sst::key::escape_bytes(key)
                )));
            }
            table.waits_for.insert(txn, holder);
            let timed_out =
                timeout.is_zero() || self.released.wait_until(&mut table, deadline).timed_out();
            if timed_out && table.holders.get(&wanted).is_some_and(|&h| h != txn) {
                table.waits_for.remove(&txn);
                return Err(Error::Busy(format!(
                    "timed out after {:?} waiting for the lock on key {} of keyspace \
                     {keyspace}",
                    timeout,
                    sluice_sst::key::escape_bytes(key)
                )));
            }
        }
    }

    /// Releases `txn`'s locks on `keys` and wakes the waiters.
    pub fn unlock<'k>(&self, txn: TxnId, keys: impl IntoIterator<Item = (u32, &'k [u8])>) {
        let mut table = self.table.lock();
        let mut any = false;
        for (keyspace, key) in keys {
            let lookup = (keyspace, key.to_vec());
            if table.holders.get(&lookup) == Some(&txn) {
                table.holders.remove(&lookup);
                any = true;
            }
        }
        table.waits_for.remove(&txn);
        drop(table);
        if any {
            self.released.notify_all();
        }
    }

    /// The number of keys locked.
    #[cfg(test)]
    pub fn locked(&self) -> usize {
        self.table.lock().holders.len()
    }
}

/// Whether following "waits for" edges from `from` reaches `to`. The graph has one out-edge
/// per node, so the walk is a path; it stops at a node seen before (a cycle not through `to`,
/// which a detector elsewhere broke or will break).
fn leads_to(waits_for: &HashMap<TxnId, TxnId>, from: TxnId, to: TxnId) -> bool {
    let mut at = from;
    for _ in 0..=waits_for.len() {
        if at == to {
            return true;
        }
        match waits_for.get(&at) {
            Some(&next) => at = next,
            None => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    const LONG: Duration = Duration::from_secs(30);
    const NOW: Duration = Duration::ZERO;

    #[test]
    fn a_lock_is_exclusive_until_released() {
        let locks = LockTable::default();
        let (a, b) = (locks.new_txn(), locks.new_txn());
        locks.lock(a, 0, b"k", NOW, true).unwrap();
        locks.lock(a, 0, b"k", NOW, true).unwrap();
        locks.lock(b, 1, b"k", NOW, true).unwrap();
        let busy = locks.lock(b, 0, b"k", Duration::from_millis(20), true);
        assert!(matches!(busy, Err(Error::Busy(m)) if m.contains("timed out")));
        locks.unlock(a, [(0, &b"k"[..])]);
        locks.lock(b, 0, b"k", NOW, true).unwrap();
        assert_eq!(locks.locked(), 2);
    }

    #[test]
    fn a_waiter_gets_the_lock_when_it_is_released() {
        let locks = Arc::new(LockTable::default());
        let (a, b) = (locks.new_txn(), locks.new_txn());
        locks.lock(a, 0, b"k", NOW, true).unwrap();
        let waiter = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || locks.lock(b, 0, b"k", LONG, true))
        };
        while locks.table.lock().waits_for.get(&b) != Some(&a) {
            std::thread::yield_now();
        }
        locks.unlock(a, [(0, &b"k"[..])]);
        waiter.join().unwrap().unwrap();
    }

    #[test]
    fn the_transaction_that_would_close_a_cycle_is_refused() {
        let locks = Arc::new(LockTable::default());
        let (a, b, c) = (locks.new_txn(), locks.new_txn(), locks.new_txn());
        for (txn, key) in [(a, b"1"), (b, b"2"), (c, b"3")] {
            locks.lock(txn, 0, key, NOW, true).unwrap();
        }
        // a waits for b, b waits for c; c asking for a's key would close the cycle.
        let spawn = |txn, key: &'static [u8]| {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || locks.lock(txn, 0, key, LONG, true))
        };
        let a_waits = spawn(a, b"2");
        while !locks.table.lock().waits_for.contains_key(&a) {
            std::thread::yield_now();
        }
        let b_waits = spawn(b, b"3");
        while !locks.table.lock().waits_for.contains_key(&b) {
            std::thread::yield_now();
        }
        let refused = locks.lock(c, 0, b"1", LONG, true);
        assert!(matches!(refused, Err(Error::Busy(m)) if m.contains("deadlock")));
        // c gives up and releases: b, then a, get their keys.
        locks.unlock(c, [(0, &b"3"[..])]);
        b_waits.join().unwrap().unwrap();
        locks.unlock(b, [(0, &b"2"[..]), (0, &b"3"[..])]);
        a_waits.join().unwrap().unwrap();
    }

    #[test]
    fn without_detection_a_deadlock_ends_in_a_timeout() {
        let locks = Arc::new(LockTable::default());
        let (a, b) = (locks.new_txn(), locks.new_txn());
        locks.lock(a, 0, b"1", NOW, false).unwrap();
        locks.lock(b, 0, b"2", NOW, false).unwrap();
        let a_waits = {
            let locks = Arc::clone(&locks);
            std::thread::spawn(move || locks.lock(a, 0, b"2", LONG, false))
        };
        while !locks.table.lock().waits_for.contains_key(&a) {
            std::thread::yield_now();
        }
        let short = Duration::from_millis(30);
        let refused = locks.lock(b, 0, b"1", short, false);
        assert!(matches!(refused, Err(Error::Busy(m)) if m.contains("timed out")));
        locks.unlock(b, [(0, &b"2"[..])]);
        a_waits.join().unwrap().unwrap();
    }
}
