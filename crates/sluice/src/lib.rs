//! Sluice: an embeddable LSM-tree key-value store whose compaction runs as fast as the
//! hardware allows.
//!
//! The data path, one module per step:
//!
//! ```text
//! put/delete/write ─▶ db::write (the journal's group commit) ─▶ wal ─▶ each tree's memtable
//!        flush ─▶ L0 table ─▶ version (edit, MANIFEST, set)
//!        compaction::picker ─▶ compaction::choose (executor) ─▶ compaction::job (edit)
//!        ingest (external tables: edit)
//!                           ─▶ db::install (log_and_apply: MANIFEST, new version)
//! get/iter ◀─ memtables + L0 (newest first) + L1..L6 (table cache, block cache, bloom)
//!
//! One `db::journal::Journal` per open database (WAL, sequence numbers, snapshots, keyspaces)
//! and one `db::Tree` per keyspace (memtables, versions, MANIFEST); only `db/` changes either.
//! ```
//!
//! ```no_run
//! use sluice::{Db, Options};
//! let db = Db::open("/tmp/sluice-example", Options::default())?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?.as_deref(), Some(&b"world"[..]));
//! # Ok::<(), sluice::Error>(())
//! ```

pub mod backup;
pub mod batch;
pub mod blob;
pub mod compaction;
mod db;
pub mod error;
pub mod events;
mod flush;
pub mod info_log;
pub mod ingest;
pub mod internals;
pub mod iter;
pub mod keyspace;
pub mod metrics;
pub mod options;
pub mod partition;
pub mod prometheus;
pub mod rate_limiter;
pub mod repair;
pub mod snapshot;
mod table_cache;
pub mod txn;

// The insides keep their short paths within the crate.
pub(crate) use internals::{filename, memtable, version, wal};

pub use batch::WriteBatch;
pub use blob::BlobOptions;
pub use compaction::manual::{CompactOptions, CompactProgress};
pub use db::records::{OPTIONS_FILE, STATS_FILE};
pub use db::{CheckReport, CheckpointReport, Db, DbIterator, FileChecksumReport, RecoveryReport};
pub use error::{Error, ErrorKind, IoContext, Result};
pub use events::EventListener;
pub use ingest::{IngestOptions, SstFileWriter};
pub use iter::{KeyBounds, Range};
pub use keyspace::{Keyspace, KeyspaceOptions};
pub use metrics::Metrics;
pub use options::{
    CompactionFilter, CompactionMode, CompactionOptions, CompressionType, FilterDecision,
    MemtableOptions, MergeOperator, Options, PrefixExtractor, ReadOptions, TableOptions,
    WriteOptions,
};
pub use rate_limiter::RateLimiter;
pub use repair::{LostRange, RepairOptions, RepairReport, repair, repair_with};
pub use sluice_sst::cache::BlockCache;
/// The storage layer tables are read and written through ([`Options::fs`]).
pub use sluice_sst::fs;
/// Merge operators: the trait, the built-in `u64_add` and `append`, and lookup by name.
pub use sluice_sst::merge_operator;
pub use snapshot::Snapshot;
pub use txn::{Concurrency, Transaction, TransactionOptions, TxnRange};

/// The examples of `docs/getting-started.md`, compiled as doctests so that the guide stays true.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/getting-started.md")]
pub struct GettingStartedGuide;
