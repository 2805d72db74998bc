//! [`Transaction`]: buffered writes, reads that see them, tracked keys and the checked commit.

use std::collections::HashMap;

use sluice_sst::key::{SeqNo, ValueKind, escape_bytes};

use super::locks::TxnId;
use super::own_writes::{OwnWrite, TxnRange, resolve};
use super::write_set::{Base, WriteSet};
use super::{Concurrency, TransactionOptions};
use crate::iter::bounds::{KeyBounds, lower_bound, prefix_end, upper_bound};
use crate::options::ReadOptions;
use crate::{Db, Error, Keyspace, Result, Snapshot};

/// One transaction; see the [module docs](super). Made by [`Db::transaction`] or
/// [`Db::transaction_with`]; ended by [`commit`](Self::commit), [`rollback`](Self::rollback)
/// or dropping it (a rollback).
///
/// ```no_run
/// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
/// // Move 10 from a to b, or nothing if another writer touched either meanwhile.
/// let balance = |v: Option<Vec<u8>>| -> u64 {
///     v.map_or(0, |v| String::from_utf8_lossy(&v).parse().unwrap_or(0))
/// };
/// loop {
///     let mut txn = db.transaction();
///     let a = balance(txn.get_for_update("a")?);
///     let b = balance(txn.get_for_update("b")?);
///     if a < 10 {
///         break; // dropped: nothing written
///     }
///     txn.put("a", (a - 10).to_string())?;
///     txn.put("b", (b + 10).to_string())?;
///     match txn.commit() {
///         Err(sluice::Error::Busy(_)) => continue, // a conflict: run it again
///         done => {
///             done?;
///             break;
///         }
///     }
/// }
/// # Ok::<(), sluice::Error>(())
/// ```
pub struct Transaction<'db> {
    db: &'db Db,
    options: TransactionOptions,
    /// Pins the start, which keeps conflict checks exact (`db/conflict.rs`); with
    /// `options.snapshot`, reads see it.
    start: Snapshot,
    /// The default keyspace, for the calls that name none.
    default: Keyspace,
    writes: WriteSet,
    /// Each key written or read for update, with the sequence number after which another's
    /// write to it is a conflict. Pessimistic: the keys this transaction has locked.
    tracked: HashMap<(u32, Vec<u8>), SeqNo>,
    /// Without `options.snapshot`: a snapshot at each of those sequence numbers, ascending,
    /// and `get_for_update` reads at its key's. A compaction keeps a version newer than a
    /// pinned number unless a newer one, also above it, shadows it; so whatever another
    /// writes after the state the transaction read leaves a trace above the pin, where the
    /// conflict check finds it. (Reading later than the pin would let a put and a delete of
    /// the key, both after the pin, vanish together with what was read.)
    pins: Vec<Snapshot>,
    /// Pessimistic: this transaction in the database's lock table.
    lock_owner: Option<TxnId>,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("options", &self.options)
            .field("start", &self.start.sequence())
            .field("writes", &self.writes.len())
            .field("tracked", &self.tracked.len())
            .finish()
    }
}

impl Db {
    /// An optimistic transaction with default options; see [`crate::txn`].
    pub fn transaction(&self) -> Transaction<'_> {
        self.transaction_with(TransactionOptions::default())
    }

    /// A transaction with `options`: pessimistic, with a snapshot, synced at commit, ...
    pub fn transaction_with(&self, options: TransactionOptions) -> Transaction<'_> {
        let lock_owner = (options.concurrency == Concurrency::Pessimistic)
            .then(|| self.journal.txn_locks.new_txn());
        Transaction {
            db: self,
            start: self.snapshot(),
            default: self.default_keyspace().clone(),
            options,
            writes: WriteSet::default(),
            tracked: HashMap::new(),
            pins: Vec::new(),
            lock_owner,
        }
    }
}

impl Transaction<'_> {
    /// The sequence number the transaction started at.
    pub fn start_sequence(&self) -> SeqNo {
        self.start.sequence()
    }

    /// The number of writes buffered.
    pub fn write_count(&self) -> usize {
        self.writes.len()
    }

    /// `keyspace`'s tree, if it belongs to this database and is still there.
    fn tree_of<'k>(&self, keyspace: &'k Keyspace) -> Result<&'k Db> {
        self.db.tree.open_id.check(
            keyspace.open_id(),
            format_args!("keyspace {:?}", keyspace.name()),
        )?;
        keyspace.db()
    }

    fn read_options(&self) -> ReadOptions<'_> {
        match self.options.snapshot {
            true => self.start.read_options(),
            false => ReadOptions::default(),
        }
    }

    /// Starts protecting `key` of `keyspace`, if not yet: locks it (pessimistic) and notes
    /// from which sequence number another's write conflicts.
    fn track(&mut self, keyspace: u32, key: &[u8]) -> Result<()> {
        let wanted = (keyspace, key.to_vec());
        if self.tracked.contains_key(&wanted) {
            return Ok(());
        }
        if let Some(owner) = self.lock_owner {
            let timeout = self.options.lock_timeout;
            let detect = self.options.deadlock_detect;
            self.db
                .journal
                .txn_locks
                .lock(owner, keyspace, key, timeout, detect)?;
        }
        // Read before the value is: a write between the two is a conflict, never missed.
        let since = match self.options.snapshot {
            true => self.start.sequence(),
            false => self.pin_latest(),
        };
        // Tracked (so released at the end) before anything else can fail.
        self.tracked.insert(wanted, since);
        // Pessimistic with a snapshot: a write since the start fails the lock, not the commit.
        if self.lock_owner.is_some() && self.options.snapshot {
            self.check_key(keyspace, key, since)?;
        }
        Ok(())
    }

    /// Pins the latest sequence number (once per number) and returns it.
    fn pin_latest(&mut self) -> SeqNo {
        let tree = &self.db.tree;
        let pin = tree
            .snapshots
            .acquire_current(&tree.visible_seq, &tree.open_id);
        let seq = pin.sequence();
        if self.pins.last().is_none_or(|last| last.sequence() != seq) {
            self.pins.push(Snapshot::new(pin, self.default.clone()));
        }
        seq
    }

    /// The read options of a read at `since`, a tracked key's sequence number.
    fn read_options_at(&self, since: SeqNo) -> ReadOptions<'_> {
        match self.options.snapshot {
            true => self.start.read_options(),
            false => self
                .pins
                .iter()
                .rev()
                .find(|pin| pin.sequence() == since)
                .map_or_else(ReadOptions::default, Snapshot::read_options),
        }
    }

    /// The value of `key` as the transaction sees it: its own write, or the database's.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_in(&self.default, key)
    }

    /// [`Transaction::get`] in `keyspace`.
    pub fn get_in(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_with(&self.read_options(), keyspace, key.as_ref())
    }

    /// `key` as the transaction sees it, the database read with `opts`.
    fn get_with(
        &self,
        opts: &ReadOptions<'_>,
        keyspace: &Keyspace,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        let db = self.tree_of(keyspace)?;
        let pending = self.writes.pending(keyspace.id(), key);
        let database = match &pending {
            Some(p) if p.base != Base::Database => None,
            _ => db.get_opt(opts, key)?,
        };
        let Some(pending) = pending else {
            return Ok(database);
        };
        let operator = db.tree.options.merge_operator.as_deref();
        resolve(
            operator,
            key,
            pending.base,
            &pending.operands,
            database.as_deref(),
        )
    }

    /// Reads `key` and protects it: the commit fails if anyone else writes it after this read
    /// (optimistic), or nobody else's transaction can until this one ends (pessimistic). The
    /// read is at the sequence number the key is protected from: the first time the
    /// transaction read or wrote it, or its start with a snapshot.
    pub fn get_for_update(&mut self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let default = self.default.clone();
        self.get_for_update_in(&default, key)
    }

    /// [`Transaction::get_for_update`] in `keyspace`.
    pub fn get_for_update_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        self.tree_of(keyspace)?;
        self.track(keyspace.id(), key)?;
        let since = self.tracked.get(&(keyspace.id(), key.to_vec())).copied();
        let opts = since.map_or_else(ReadOptions::default, |s| self.read_options_at(s));
        self.get_with(&opts, keyspace, key)
    }

    /// Sets `key` to `value` at commit.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.put_in(&default, key, value)
    }

    /// [`Transaction::put`] in `keyspace`.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write(keyspace, ValueKind::Value, key.as_ref(), value.as_ref())
    }

    /// Deletes `key` at commit.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.delete_in(&default, key)
    }

    /// [`Transaction::delete`] in `keyspace`.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.write(keyspace, ValueKind::Deletion, key.as_ref(), b"")
    }

    /// Adds merge operand `operand` to `key` at commit; the transaction's reads apply it at
    /// once.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.merge_in(&default, key, operand)
    }

    /// [`Transaction::merge`] in `keyspace`.
    pub fn merge_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.write(keyspace, ValueKind::Merge, key.as_ref(), operand.as_ref())
    }

    /// Checks, tracks and buffers one write.
    fn write(
        &mut self,
        keyspace: &Keyspace,
        kind: ValueKind,
        key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        let db = self.tree_of(keyspace)?;
        db.tree.check_writable()?;
        db.tree.check_sizes(key, value)?;
        if kind == ValueKind::Merge {
            db.tree.check_merge(key, value)?;
        }
        self.track(keyspace.id(), key)?;
        self.writes.add(keyspace.id(), kind, key, value);
        Ok(())
    }

    /// Every `(key, value)` the transaction sees, in key order from either end.
    pub fn iter(&self) -> TxnRange {
        self.range(..)
    }

    /// The pairs the transaction sees in `range`, as [`Db::range`].
    pub fn range(&self, range: impl KeyBounds) -> TxnRange {
        self.range_in(&self.default, range)
    }

    /// [`Transaction::range`] in `keyspace`.
    pub fn range_in(&self, keyspace: &Keyspace, range: impl KeyBounds) -> TxnRange {
        let lower = lower_bound(range.start());
        let upper = upper_bound(range.end());
        self.within(keyspace, lower, upper)
    }

    /// The pairs the transaction sees whose keys start with `prefix`, as [`Db::prefix`].
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> TxnRange {
        self.prefix_in(&self.default, prefix)
    }

    /// [`Transaction::prefix`] in `keyspace`.
    pub fn prefix_in(&self, keyspace: &Keyspace, prefix: impl AsRef<[u8]>) -> TxnRange {
        let prefix = prefix.as_ref();
        self.within(keyspace, Some(prefix.to_vec()), prefix_end(prefix))
    }

    /// The database's pairs in `[lower, upper)` with the transaction's own writes over them.
    fn within(
        &self,
        keyspace: &Keyspace,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> TxnRange {
        let db = match self.tree_of(keyspace) {
            Ok(db) => db,
            // The failure is the range's only item.
            Err(e) => return TxnRange::new(crate::Range::new(Err(e)), Vec::new(), None),
        };
        let own = self
            .writes
            .in_range(keyspace.id(), lower.as_deref(), upper.as_deref())
            .into_iter()
            .map(|(key, pending)| (key, OwnWrite::of(&pending)))
            .collect();
        let bounds = (
            lower.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included),
            upper.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded),
        );
        let database = db.range_opt(&self.read_options(), bounds);
        TxnRange::new(database, own, db.tree.options.merge_operator.clone())
    }

    /// Marks the transaction's current writes; [`rollback_to_savepoint`] returns to them.
    /// Savepoints nest.
    ///
    /// [`rollback_to_savepoint`]: Self::rollback_to_savepoint
    pub fn set_savepoint(&mut self) {
        self.writes.set_savepoint();
    }

    /// Undoes every write since the last savepoint, and forgets it. Keys tracked since stay
    /// tracked (and locked), as in RocksDB.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no savepoint.
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        match self.writes.rollback_to_savepoint() {
            true => Ok(()),
            false => Err(no_savepoint()),
        }
    }

    /// Forgets the last savepoint and keeps the writes made since.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when there is no savepoint.
    pub fn pop_savepoint(&mut self) -> Result<()> {
        match self.writes.pop_savepoint() {
            true => Ok(()),
            false => Err(no_savepoint()),
        }
    }

    /// Writes the transaction's writes atomically, if no tracked key was written by another
    /// since it was tracked. Returns the sequence number of its last write: a snapshot at it
    /// or later sees all of them, one below it none. A transaction that wrote nothing but read
    /// for update is checked the same way, and returns the sequence number its reads still
    /// held at; one that tracked nothing returns its start.
    ///
    /// # Errors
    /// [`Error::Busy`] on a conflict, naming the key: nothing was written; run the
    /// transaction again. Any write error otherwise.
    pub fn commit(self) -> Result<SeqNo> {
        if self.tracked.is_empty() {
            return Ok(self.start.sequence());
        }
        if self.writes.is_empty() {
            return self.db.journal.check_alone(&|| self.check_conflicts());
        }
        let batch = self.writes.to_batch();
        let count = u64::from(batch.count());
        // The check runs as the commit leader of a group of one: the batch's numbers follow
        // the last visible one it sees.
        let before = std::cell::Cell::new(0);
        let check = || {
            self.check_conflicts()?;
            before.set(self.db.tree.latest_seq());
            Ok(())
        };
        let journal = &self.db.journal;
        journal.write_checked(&self.db.tree, &self.options.write, batch, Some(&check))?;
        Ok(before.get() + count)
    }

    /// Discards the transaction's writes and releases its locks (as dropping it does).
    pub fn rollback(self) {}

    /// Fails with [`Error::Busy`] if another wrote a tracked key since it was tracked. Runs
    /// as the commit leader, with every earlier write visible.
    fn check_conflicts(&self) -> Result<()> {
        for ((keyspace, key), &since) in &self.tracked {
            self.check_key(*keyspace, key, since)?;
        }
        Ok(())
    }

    /// Fails with [`Error::Busy`] if another wrote `key` of `keyspace` after `since`.
    fn check_key(&self, keyspace: u32, key: &[u8], since: SeqNo) -> Result<()> {
        let tree = self.db.journal.tree(keyspace).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "keyspace id {keyspace} was dropped during the transaction"
            ))
        })?;
        if tree.written_since(key, since)? {
            return Err(Error::Busy(format!(
                "transaction conflict: key {} of keyspace id {keyspace} was written by another \
                 after sequence {since}, when this transaction first read or wrote it; nothing \
                 was written, run the transaction again",
                escape_bytes(key)
            )));
        }
        Ok(())
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if let Some(owner) = self.lock_owner {
            let keys = self.tracked.keys().map(|(ks, key)| (*ks, key.as_slice()));
            self.db.journal.txn_locks.unlock(owner, keys);
        }
    }
}

fn no_savepoint() -> Error {
    Error::InvalidArgument("the transaction has no savepoint".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write between a key's pin and its read for update, then a delete, both compacted
    /// away at the bottom: the read saw the state at the pin, which is the state at commit.
    #[test]
    fn a_read_for_update_sees_the_state_its_key_is_protected_from() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), crate::Options::default()).unwrap();
        let mut txn = db.transaction();
        // What get_for_update does first; the put below lands before its read.
        txn.track(crate::batch::DEFAULT_KEYSPACE_ID, b"k").unwrap();
        db.put("k", "v").unwrap();
        assert_eq!(txn.get_for_update("k").unwrap(), None, "read at the pin");
        db.delete("k").unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        txn.put("k", "mine").unwrap();
        // Read absent, absent at commit: serializable, so it commits.
        txn.commit().unwrap();
        assert_eq!(db.get("k").unwrap(), Some(b"mine".to_vec()));
    }
}
