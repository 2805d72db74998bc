//! The database handle and the state shared by foreground and background threads.
//!
//! Locks, in the order they may be taken (never the reverse):
//! 0. the journal's `keyspace_admin`: creating and dropping keyspaces, and range moves and
//!    splits made in every keyspace;
//! 0. `range_map_lock`: changes of the range map, and flushes (partitioned mode);
//! 1. `commit.queue`: the group-commit queue (held only briefly, never across I/O);
//! 2. `wal`: the active WAL writer, touched only by the group-commit leader;
//! 3. `manifest`: the MANIFEST writer; held across the MANIFEST fsync so that installs are
//!    serialized, while `state` is released;
//! 4. `state`: memtables, version set, background flags and counters;
//! 5. `bg_work`'s generation: held only to bump or read it, under any of the above;
//! 5. `live`: the current options, held only to copy out or replace the `Arc`, under any of
//!    the above, never while another lock is taken.
//!
//! Background failures are sticky: once a flush or compaction fails, `state.bg_error` is set and
//! every later write fails with `Error::Background` until the database is reopened.
//!
//! **Journal and trees.** An open database is one [`journal::Journal`] (the WAL, group commit,
//! visible sequence, snapshots, keyspace registry, lock) and one [`Tree`] per keyspace, the
//! default one included (memtables, version set, MANIFEST, table cache, placement, options;
//! a keyspace's in `keyspaces/<id>/`), all flushed and compacted by the database's background
//! threads (`background.rs`). Every write goes through the journal's commit queue and WAL, so
//! a batch spanning keyspaces is one WAL record; every tree shares the sequence numbers, the
//! visible sequence number and the snapshot list, so a snapshot is one point in time across
//! them. The journal owns the trees and no tree points back at it: a handle ([`Db`],
//! [`crate::Keyspace`]) holds both. The order above holds across them: a tree's
//! `range_map_lock`, then the journal's commit queue and WAL, then a tree's MANIFEST (the
//! default tree's for the journal's own records) and state; no thread holds two trees' state
//! locks at once.

mod admin;
pub(crate) mod background;
pub(crate) mod checkpoint;
mod commit;
mod conflict;
mod destroy;
mod ingest;
mod install;
mod jobs;
pub(crate) mod journal;
pub(crate) mod open;
pub(crate) mod open_id;
pub(crate) mod open_tree;
mod partition;
mod read;
pub mod records;
pub(crate) mod recover;
mod registry;
mod secondary;
pub(crate) mod set_options;
mod stats_dump;
mod write;

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;

use parking_lot::{Condvar, Mutex};

use crate::Result;
use crate::memtable::MemTable;
use crate::metrics::{JobMetrics, LevelCounters};
use crate::options::Options;
use crate::snapshot::{Snapshot, SnapshotList};
use crate::table_cache::TableCache;
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;

pub use admin::{CheckReport, FileChecksumReport};
pub use checkpoint::CheckpointReport;
pub(crate) use open::{Access, lock_directory};
pub use read::DbIterator;
pub use recover::RecoveryReport;

/// An open database. Cheap to share across threads (`&Db` is enough; wrap it in an `Arc` to
/// move it into threads).
pub struct Db {
    /// The database-wide half: WAL, group commit, snapshots, keyspaces, lock.
    pub(crate) journal: Arc<journal::Journal>,
    /// The tree this handle reads and writes: the default keyspace's (`journal.default`), or in
    /// a keyspace's view that keyspace's.
    pub(crate) tree: Arc<Tree>,
    background: Mutex<Vec<JoinHandle<()>>>,
    /// A keyspace's view of its tree ([`crate::Keyspace`]): dropping it stops nothing, as the
    /// database owns the threads.
    view: bool,
    /// The default keyspace's handle, made once: snapshots and transactions each hold one.
    default_keyspace: std::sync::OnceLock<crate::Keyspace>,
}

/// Everything guarded by the state mutex.
pub(crate) struct TreeState {
    /// The memtable receiving writes.
    pub mem: Arc<MemTable>,
    /// Frozen memtables waiting for flush, oldest first.
    pub imm: VecDeque<Arc<MemTable>>,
    /// The tree of files and the persistent counters.
    pub versions: VersionSet,
    /// The first background failure; sticky. Later calls fail with
    /// [`Error::Background`] around a copy of it, of the same kind.
    pub bg_error: Option<crate::Error>,
    /// Set by `close`: background threads exit.
    pub closing: bool,
    /// A flush is being written.
    pub flush_running: bool,
    /// Automatic compactions running, with the files and ranges they hold.
    pub compactions: crate::compaction::in_progress::InProgress,
    /// A manual compaction is running; it runs alone.
    pub manual_running: bool,
    /// Manual compactions waiting to run; automatic compactions yield to them.
    pub manual_waiting: usize,
    /// Table numbers being written: not yet in a version, but not garbage either.
    pub pending_outputs: BTreeSet<u64>,
    /// Checkpoints and backups copying files: while non-zero, nothing is deleted.
    pub file_deletions_held: usize,
    /// Per-level traffic counters.
    pub level_counters: LevelCounters,
    /// Flush totals.
    pub flush_metrics: JobMetrics,
    /// Compaction totals.
    pub compaction_metrics: JobMetrics,
    /// Trivial moves performed.
    pub trivial_moves: u64,
    /// Intra-L0 compactions performed.
    pub intra_l0_compactions: u64,
    /// Partitioned mode: tables rewritten into their range's new owner.
    pub relocations: u64,
    /// Partitioned mode: ranges moved to another owner.
    pub range_moves: u64,
    /// Partitioned mode: ranges cut in two.
    pub range_splits: u64,
}

/// Foreground counters updated without the state lock.
#[derive(Default)]
pub(crate) struct WriteCounters {
    pub user_bytes: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_syncs: AtomicU64,
    /// Stalls and their microseconds by [`StallCause`].
    pub stalls: [(AtomicU64, AtomicU64); 3],
    /// Tables prefix scans skipped because their filter lacked the prefix.
    pub prefix_skips: AtomicU64,
}

/// Why a writer waited: the index of its counters in [`WriteCounters::stalls`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum StallCause {
    L0Slowdown = 0,
    L0Stop = 1,
    MemtableLimit = 2,
}

impl WriteCounters {
    /// The stall counters as [`crate::metrics::StallMetrics`].
    pub fn stall_metrics(&self) -> crate::metrics::StallMetrics {
        let of = |cause: StallCause| {
            let (count, micros) = &self.stalls[cause as usize];
            crate::metrics::StallCounts {
                count: count.load(Ordering::Relaxed),
                micros: micros.load(Ordering::Relaxed),
            }
        };
        crate::metrics::StallMetrics {
            l0_slowdown: of(StallCause::L0Slowdown),
            l0_stop: of(StallCause::L0Stop),
            memtable_limit: of(StallCause::MemtableLimit),
        }
    }
}

/// One keyspace's tree: its memtables and version set, MANIFEST, table cache, placement and
/// options, shared by its handles and the background threads. What the keyspaces share lives
/// in the [`journal::Journal`]; the few pieces a tree's own work needs of it (the visible
/// sequence, snapshots, open and work signal) it holds as clones of the journal's.
pub(crate) struct Tree {
    pub dir: PathBuf,
    /// The options the tree was opened with.
    pub options: Options,
    /// The options now: `options` with what [`Db::set_options`] changed since
    /// ([`set_options`]). Read afresh by the write path, the picker and each compaction.
    pub live: parking_lot::RwLock<Arc<Options>>,
    pub state: Mutex<TreeState>,
    /// Signalled (with `state`) whenever background work finishes or fails.
    pub bg_done: Condvar,
    /// Notified when there may be background work to do, in this tree or another: the
    /// journal's, whose background threads serve every tree.
    pub bg_work: Arc<background::WorkSignal>,
    /// The MANIFEST writer; see the lock order above. `None` when open read-only.
    pub manifest: Mutex<Option<ManifestWriter>>,
    /// Highest sequence number visible to readers. Published after the memtable insert.
    /// Shared by every keyspace's tree.
    pub visible_seq: Arc<AtomicU64>,
    pub snapshots: Arc<SnapshotList>,
    /// This open of the database (shared by every keyspace's tree): handles it made carry it,
    /// and it refuses those of another ([`open_id`]).
    pub open_id: open_id::OpenId,
    pub table_cache: Arc<TableCache>,
    pub counters: WriteCounters,
    /// `Options::listeners`, and the stall condition last reported to them.
    pub events: crate::events::Listeners,
    /// Serializes obsolete-file collection (flush and compaction threads both run it).
    pub obsolete_files_lock: Mutex<()>,
    /// Partitioned mode: held by whatever changes the range map's boundaries or owners (moves
    /// and splits: read the map, edit it, apply) and by flushes, which cut their tables by
    /// the map and must install them into a map with the same boundaries.
    pub range_map_lock: Mutex<()>,
    /// Where compactions run and write: partitioned mode's owners, or anywhere.
    pub placement: Box<dyn crate::partition::placement::Placement>,
    /// The compaction workers, started from `Options::offload` (`None` when read-only).
    pub remote: Option<Arc<dyn crate::compaction::remote::RemoteExecutors>>,
    /// Their names, for partitioned mode's owners.
    pub remote_workers: Vec<String>,
    /// What the open read and dropped.
    pub recovery: Mutex<RecoveryReport>,
    /// Opened with [`Db::open_read_only`]: `manifest` is `None` (and the journal's WAL).
    pub read_only: bool,
    /// The keyspace this tree holds: [`crate::batch::DEFAULT_KEYSPACE_ID`] for the default one.
    pub keyspace_id: u32,
    /// The keyspace was dropped: its handles fail, its files are gone.
    pub dropped: AtomicBool,
    /// Stopped by close (or a drop): handles that outlive it fail.
    pub closed: AtomicBool,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database in `path`, recovering from
    /// the MANIFEST and replaying the WAL.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let journal = Arc::new(open::open_journal(
            path.as_ref(),
            options,
            open::Access::ReadWrite,
        )?);
        records::opened(&journal);
        let background = background::start(&journal)?;
        let db = Db {
            tree: Arc::clone(&journal.default),
            journal,
            background: Mutex::new(background),
            view: false,
            default_keyspace: Default::default(),
        };
        // Only with `create_missing_keyspaces`: the open refused unknown names otherwise.
        for (name, options) in &db.tree.options.keyspaces {
            if db.keyspace(name).is_none() {
                db.create_keyspace(name, options)?;
            }
        }
        Ok(db)
    }

    /// Opens the existing database in `path` without changing it: no file in it is created,
    /// written, renamed or deleted. The MANIFEST and every WAL are read and checked as by
    /// [`Db::open`], and the WALs' records are served from memory instead of being written to
    /// tables. Writes, flushes and compactions fail with [`crate::Error::InvalidArgument`].
    ///
    /// The LOCK file is taken shared: several read-only opens may run at once, but not beside
    /// a process that has the database open for writing (its files would change underneath).
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let journal = open::open_journal(path.as_ref(), options, open::Access::ReadOnly)?;
        Ok(Db::without_background(journal))
    }

    /// The handle of a database that runs no background work (read-only or secondary).
    fn without_background(journal: journal::Journal) -> Db {
        Db {
            tree: Arc::clone(&journal.default),
            journal: Arc::new(journal),
            background: Mutex::new(Vec::new()),
            view: false,
            default_keyspace: Default::default(),
        }
    }

    /// Opens a secondary instance of the database in `primary`: a read-only open that follows
    /// the process (or handle) writing it, as RocksDB's `OpenAsSecondary` does. It takes no
    /// lock and writes nothing in `primary`; its `LOG` goes to `scratch`, a directory of its
    /// own (created if missing). The open reads the primary's state once; each
    /// [`Db::try_catch_up`] reads what the primary wrote since. Reads see the primary's state
    /// as of one sequence number, every keyspace included.
    ///
    /// The secondary holds open every table and blob file its readers may still read, so the
    /// primary deleting one after a compaction costs it nothing: like RocksDB's, it needs file
    /// descriptors for every live file (`max_open_files` does not bound them), and a file
    /// system that keeps an open file readable after it is deleted (POSIX does; a read of an
    /// object store table the primary deleted fails with an I/O error naming it).
    ///
    /// Writes fail with [`crate::Error::ReadOnly`]. A snapshot stays readable until a
    /// catch-up installs a compaction, which may have dropped what it sees; then its reads
    /// fail with [`crate::Error::InvalidArgument`]. Iterators read the state they were made
    /// with to their end.
    ///
    /// ```no_run
    /// # use sluice::{Db, Options};
    /// let follower = Db::open_secondary("/var/lib/app/db", "/tmp/app-follower", Options::default())?;
    /// let seq = follower.try_catch_up()?;
    /// let value = follower.get("key")?;
    /// # Ok::<(), sluice::Error>(())
    /// ```
    pub fn open_secondary(
        primary: impl AsRef<Path>,
        scratch: impl AsRef<Path>,
        options: Options,
    ) -> Result<Db> {
        let journal = secondary::open_secondary(primary.as_ref(), scratch.as_ref(), options)?;
        Ok(Db::without_background(journal))
    }

    /// Catches a secondary instance ([`Db::open_secondary`]) up with its primary: reads what
    /// the primary appended to its MANIFESTs and WALs since the last catch-up, and makes it
    /// visible to reads at once. Returns the sequence number reads now see. Call it as often
    /// as fresh data is wanted; it is cheap when nothing changed.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] unless the database is open as a secondary;
    /// [`crate::Error::Busy`] when the primary changed its files under every one of many
    /// attempts (the state is then unchanged; try again); [`crate::Error::Corruption`] naming
    /// the file when one the primary's latest MANIFEST lists is missing or damaged.
    pub fn try_catch_up(&self) -> Result<sluice_sst::key::SeqNo> {
        self.journal.catch_up()
    }

    /// True if the database was opened with [`Db::open_secondary`].
    pub fn is_secondary(&self) -> bool {
        self.journal.follower.is_some()
    }

    /// A handle on one of the database's trees that stops nothing when dropped.
    pub(crate) fn view_of(journal: &Arc<journal::Journal>, tree: Arc<Tree>) -> Db {
        Db {
            journal: Arc::clone(journal),
            tree,
            background: Mutex::new(Vec::new()),
            view: true,
            default_keyspace: Default::default(),
        }
    }

    /// The default keyspace's handle (a cheap clone of one made at the first call).
    pub(crate) fn default_keyspace(&self) -> &crate::Keyspace {
        self.default_keyspace
            .get_or_init(|| crate::Keyspace::default_of(self))
    }

    /// What opening the database read from its MANIFEST and WALs, and what it dropped.
    pub fn recovery_report(&self) -> RecoveryReport {
        self.tree.recovery.lock().clone()
    }

    /// True if the database was opened with [`Db::open_read_only`] or
    /// [`Db::open_secondary`].
    pub fn is_read_only(&self) -> bool {
        self.tree.is_read_only()
    }

    /// The options the database was opened with ([`Db::current_options`]: with what
    /// [`Db::set_options`] changed since).
    pub fn options(&self) -> &Options {
        &self.tree.options
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.tree.dir
    }

    /// Pins the current state; reads through the snapshot see exactly it. Its own reads go
    /// to the default keyspace.
    ///
    /// On a secondary instance the snapshot can be read until a catch-up installs one of the
    /// primary's compactions ([`Db::open_secondary`]).
    pub fn snapshot(&self) -> Snapshot {
        let pin = self
            .tree
            .snapshots
            .acquire_current(&self.tree.visible_seq, &self.tree.open_id);
        Snapshot::new(pin, self.default_keyspace().clone())
    }

    /// Freezes the memtable (if it holds anything) and waits until every frozen memtable is
    /// written to L0.
    pub fn flush(&self) -> Result<()> {
        self.tree.flush_and_wait(&self.journal)
    }

    /// Waits until no flush or compaction is pending or running, in any keyspace (at once
    /// when read-only: nothing runs).
    pub fn wait_for_background_work(&self) -> Result<()> {
        if self.tree.is_read_only() {
            return Ok(());
        }
        for tree in self.journal.trees() {
            tree.tree.wait_for_quiet()?;
        }
        self.journal.default.wait_for_quiet()
    }

    /// Stops background work and closes the database. The WAL is synced and its length
    /// recorded in the MANIFEST, so every write acknowledged before `close` is durable and the
    /// next open fails, rather than drops it, if any of it is later damaged or lost.
    pub fn close(self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&self) -> Result<()> {
        if self.view {
            return Ok(());
        }
        let journal = &self.journal;
        // `close` and then the drop both get here; the session's record is written once.
        let first_close = !journal.default.closed.load(Ordering::Acquire);
        // The keyspaces' flushes advance the WAL floor through the default tree, which
        // `all_trees` lists first: it stops last. The threads exit once it is stopped.
        let trees = journal.all_trees();
        for tree in trees.iter().rev() {
            tree.stop_background_work();
        }
        for handle in self.background.lock().drain(..) {
            let _ = handle.join();
        }
        // Files that a reader's older version held at the last install are collected now,
        // not at the next open: disk use after close is the live version's.
        for tree in &trees {
            tree.delete_obsolete_files();
        }
        if first_close {
            records::closing(journal, &self.metrics());
        }
        let closed = journal.close_wal();
        // A keyspace handle may keep the journal alive: it keeps no open WAL.
        journal.wal.lock().take();
        // Another process may open the database now, whatever handles are still around.
        journal.lock_file.lock().take();
        closed
    }
}

impl Tree {
    /// Closes this tree to background work and waits until none of it runs: the database's
    /// threads take nothing more of it (a keyspace's tree, stopped before the database).
    pub(crate) fn stop_background_work(&self) {
        self.closed.store(true, Ordering::Release);
        let mut st = self.state.lock();
        st.closing = true;
        self.bg_work.notify_all();
        self.bg_done.notify_all();
        while st.flush_running || !st.compactions.is_empty() {
            self.bg_done.wait(&mut st);
        }
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!(error = %e, "error while closing database");
        }
    }
}
