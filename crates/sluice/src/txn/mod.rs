//! Transactions: read, decide and write as one atomic step that other writers cannot slip
//! into (RocksDB's `OptimisticTransactionDB` and `TransactionDB`, fjall's transactions).
//!
//! A [`Transaction`] buffers its writes (puts, deletes and merge operands, in any keyspace) and
//! reads them back: its `get`, `iter`, `range` and `prefix` see the database with its own
//! writes laid over it. [`Transaction::commit`] writes them as one batch, atomically; dropping
//! the transaction or [`Transaction::rollback`] discards them. Savepoints undo part of the work.
//!
//! **What is protected.** A transaction *tracks* every key it writes and every key it reads
//! with [`Transaction::get_for_update`] (not those read with `get`, as in RocksDB), with the
//! sequence number from which another's write counts as a conflict: the one it read at (the
//! transaction's start with [`TransactionOptions::snapshot`]), which it keeps pinned as a
//! snapshot so that compaction cannot make a later write vanish. The commit succeeds only if
//! no tracked key shows a write since by anyone else, transaction or not, and fails with
//! [`crate::Error::Busy`] otherwise, writing nothing: retry the whole transaction. (A key that
//! was absent, then put and deleted again by others, may show nothing once compaction has
//! dropped both: the transaction then read what is there now, which is serializable.) The check
//! and the write are one step of the group-commit queue (a checked write leads alone, see
//! `db/commit.rs`), so no write lands between them.
//!
//! **Optimistic or pessimistic** ([`Concurrency`]). An optimistic transaction locks nothing:
//! conflicts show at commit. A pessimistic one locks each tracked key when it first tracks it
//! and holds the lock until it ends, so two pessimistic transactions never conflict at commit:
//! the second waits at `put` or `get_for_update`, up to [`TransactionOptions::lock_timeout`],
//! and a wait that would close a cycle fails at once ([`TransactionOptions::deadlock_detect`]).
//! With a snapshot, a key another wrote after the start fails the lock that finds it, not the
//! commit (RocksDB's `ValidateSnapshot`).
//! Writes made outside transactions take no locks; a pessimistic commit still checks its keys,
//! so such a write makes it fail with `Busy` rather than be lost.
//!
//! **Isolation.** With `snapshot`, every read sees the database as the transaction began
//! (snapshot isolation, and with `get_for_update` on what a decision depends on,
//! serializable). Without it, `get` reads the latest committed state, and `get_for_update`
//! protects what it read from then on (RocksDB's default).
//!
//! **Left out.** Range deletes (RocksDB's transactions have none either); shared read locks;
//! range locks; two-phase commit. A transaction's conflict check reads tables flushed during
//! the transaction (see `db/conflict.rs`) instead of failing with "try again" as RocksDB's
//! memtable-only check can.

pub(crate) mod locks;
mod own_writes;
mod transaction;
mod write_set;

use std::time::Duration;

pub use own_writes::TxnRange;
pub use transaction::Transaction;

use crate::options::WriteOptions;

/// How a transaction keeps others from changing what it tracks; see the [module docs](self).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Concurrency {
    /// Nothing is locked; a conflict fails the commit with [`crate::Error::Busy`].
    #[default]
    Optimistic,
    /// Each tracked key is locked until the transaction ends.
    Pessimistic,
}

/// Options for one transaction ([`crate::Db::transaction_with`]).
#[derive(Clone, Debug)]
pub struct TransactionOptions {
    /// Optimistic (the default) or pessimistic.
    pub concurrency: Concurrency,
    /// Read everything as of the transaction's start, and count every write since then to a
    /// tracked key as a conflict (RocksDB's `set_snapshot`). Off: reads see the latest
    /// committed state.
    pub snapshot: bool,
    /// Pessimistic: how long to wait for a key another transaction holds before failing with
    /// [`crate::Error::Busy`] (RocksDB's `lock_timeout`, 1 s by default); zero fails at once.
    pub lock_timeout: Duration,
    /// Pessimistic: fail at once, with [`crate::Error::Busy`], a wait that would close a cycle
    /// of transactions each waiting for the next (RocksDB's `deadlock_detect`; on by default
    /// here, as it costs a walk of the waiters only when a key is held).
    pub deadlock_detect: bool,
    /// How the commit is written (`sync` for durability at commit).
    pub write: WriteOptions,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions {
            concurrency: Concurrency::Optimistic,
            snapshot: false,
            lock_timeout: Duration::from_secs(1),
            deadlock_detect: true,
            write: WriteOptions::default(),
        }
    }
}

impl TransactionOptions {
    /// Pessimistic, with the other options at their defaults.
    pub fn pessimistic() -> Self {
        TransactionOptions {
            concurrency: Concurrency::Pessimistic,
            ..Self::default()
        }
    }
}
