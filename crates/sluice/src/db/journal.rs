//! The journal: what one database has once, whatever its keyspaces. The WAL and its group
//! commit, the sequence numbers readers see, the snapshots, the registry of keyspace trees and
//! the directory lock. Each keyspace is a [`Tree`]; the journal owns them all and no tree
//! points back at it, so whatever needs both (a write, a memtable switch, a flush that moves
//! the WAL floor) is handed both.
//!
//! The default keyspace's tree is also the journal's record: its MANIFEST (the database's)
//! lists the WALs, the floor, the keyspaces and each keyspace's WAL boundary besides its own
//! tables, and its file numbers number the WALs. That is the on-disk format of a database
//! without keyspaces, kept as it was.
//!
//! Which WALs are still needed, with `C` the WAL being written:
//! - A keyspace switches memtables only together with a new WAL (the commit leader does both),
//!   so a memtable's writes are in WALs from its `log_number` on, and the WALs before the
//!   oldest unflushed memtable's hold nothing of that keyspace that is not in a table.
//! - Each tree records that boundary in its MANIFEST (`log_number`; for the default keyspace
//!   `default_log_number`), and replay skips the keyspace's entries in older WALs.
//! - The database's `log_number` (the *floor*) is the oldest WAL any keyspace needs: the
//!   smallest boundary of a keyspace with unflushed writes, and at most `C`. WALs below it are
//!   deleted and replay starts there. It only grows, so a keyspace that later gets writes
//!   finds them in WALs at or above `C` as it was then, which the floor never passed.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use sluice_sst::fs::FileLock;

use super::background::WorkSignal;
use super::commit::CommitQueue;
use super::open_id::OpenId;
use super::{Tree, TreeState};
use crate::keyspace::KeyspaceTree;
use crate::snapshot::SnapshotList;
use crate::version::edit::VersionEdit;
use crate::wal::LogWriter;
use crate::{Error, Result};

/// The database-wide half of an open database (see the module docs).
pub(crate) struct Journal {
    /// The default keyspace's tree, whose MANIFEST is the database's.
    pub default: Arc<Tree>,
    /// The other keyspaces' trees, by id.
    pub keyspaces: RwLock<BTreeMap<u32, Arc<KeyspaceTree>>>,
    /// Serializes creating and dropping keyspaces, and the changes made to every keyspace in
    /// turn (range moves and splits), so that each sees one set of keyspaces.
    pub keyspace_admin: Mutex<()>,
    pub commit: CommitQueue,
    /// The active WAL. Only the group-commit leader appends to it (and `Db::flush_wal` syncs
    /// it, under this lock). `None` when open read-only.
    pub wal: Mutex<Option<LogWriter>>,
    /// The number of the WAL being written. Set only by the commit leader; read without locks
    /// to bound which WALs may still be needed.
    pub current_wal: AtomicU64,
    /// A WAL write or switch failed: the WAL may end in a partial record, so nothing more may
    /// be appended, whichever keyspace writes. The cause is the default tree's background
    /// error.
    pub wal_failed: AtomicBool,
    /// Highest sequence number visible to readers, published after the memtable inserts.
    /// Every tree holds it too: reads and compactions of any keyspace see one sequence.
    pub visible_seq: Arc<AtomicU64>,
    /// The live snapshots, shared likewise: one point in time across keyspaces.
    pub snapshots: Arc<SnapshotList>,
    /// This open of the database: handles it made carry it, and it refuses those of another.
    pub open_id: OpenId,
    /// Wakes the background threads, which serve every tree.
    pub bg_work: Arc<WorkSignal>,
    /// Held for the lifetime of the database so two processes cannot open it at once (shared
    /// when open read-only; `None` for a read-only open of a directory without a LOCK file).
    /// Released at close, even while a [`crate::Keyspace`] handle still holds the journal.
    pub lock_file: Mutex<Option<Box<dyn FileLock>>>,
    /// The key locks of pessimistic transactions, across keyspaces.
    pub txn_locks: crate::txn::locks::LockTable,
    /// A secondary instance's follower of its primary ([`super::secondary`]); `None` for
    /// every other open.
    pub follower: Option<super::secondary::Follower>,
}

/// A tree reached through the journal: the default one, borrowed, or a keyspace's, held. Batches
/// mostly write the default keyspace, whose tree is then reached without touching a reference
/// count.
pub(crate) enum TreeRef<'a> {
    Borrowed(&'a Tree),
    Held(Arc<Tree>),
}

impl Deref for TreeRef<'_> {
    type Target = Tree;

    fn deref(&self) -> &Tree {
        match self {
            TreeRef::Borrowed(tree) => tree,
            TreeRef::Held(tree) => tree,
        }
    }
}

impl Journal {
    /// Makes `err`, a failed WAL write or switch, the database's background error: no write
    /// goes to the WAL from now on (see [`Journal::check_wal`]).
    pub(crate) fn fail_wal(&self, err: &Error) {
        let mut st = self.default.state.lock();
        self.default.set_bg_error(&mut st, err);
        self.wal_failed.store(true, Ordering::Release);
    }

    /// Fails once a WAL write or switch has failed, with its error.
    pub(crate) fn check_wal(&self) -> Result<()> {
        if !self.wal_failed.load(Ordering::Acquire) {
            return Ok(());
        }
        // `fail_wal` set the error first, and background errors are never cleared.
        Tree::check_bg_error(&self.default.state.lock())?;
        Err(Error::Closed)
    }

    /// The open keyspaces other than the default one, by id.
    pub(crate) fn trees(&self) -> Vec<Arc<KeyspaceTree>> {
        self.keyspaces.read().values().cloned().collect()
    }

    /// Every open tree, the default keyspace's first.
    pub(crate) fn all_trees(&self) -> Vec<Arc<Tree>> {
        std::iter::once(Arc::clone(&self.default))
            .chain(self.trees().into_iter().map(|t| Arc::clone(&t.tree)))
            .collect()
    }

    /// The tree of keyspace `id`, or `None` if the database has no such keyspace (any more).
    pub(crate) fn tree(&self, id: u32) -> Option<TreeRef<'_>> {
        if id == crate::batch::DEFAULT_KEYSPACE_ID {
            return Some(TreeRef::Borrowed(&self.default));
        }
        let tree = self.keyspaces.read().get(&id).map(|t| Arc::clone(&t.tree));
        tree.map(TreeRef::Held)
    }

    /// The floor (see the module docs), with `own` the oldest WAL the default keyspace needs
    /// (`None`: none), as a database edit: `log_number` is the floor, and
    /// `keyspace_log_numbers` each keyspace's boundary (its MANIFEST's `log_number`), read
    /// under the same lock as its unflushed WAL. Every edit that moves the floor must carry
    /// both: WALs below the floor are deleted once it is installed, and recovery holds each
    /// keyspace to its recorded boundary so that a torn last record of its MANIFEST can be
    /// dropped (`docs/format/manifest.md`, tag 31). Read together, a keyspace whose flush
    /// released a WAL shows the boundary that flush made durable: its boundary is installed
    /// before its frozen memtable goes.
    ///
    /// Takes each tree's state lock in turn, never two at once.
    pub(crate) fn wal_floor_edit(&self, own: Option<u64>) -> VersionEdit {
        // Read first: writes that land after it go to this WAL or a newer one.
        let mut floor = self.current_wal.load(Ordering::Acquire);
        floor = own.map_or(floor, |own| floor.min(own));
        let mut boundaries = Vec::new();
        for tree in self.trees() {
            let st = tree.tree.state.lock();
            if let Some(needed) = Tree::unflushed_wal(&st) {
                floor = floor.min(needed);
            }
            boundaries.push((tree.id, st.versions.log_number));
        }
        VersionEdit {
            log_number: Some(floor),
            keyspace_log_numbers: boundaries,
            ..VersionEdit::default()
        }
    }

    /// Records a higher floor, once a keyspace's flush (or a drop) released old WALs, and
    /// deletes them. A no-op when the floor did not move.
    pub(crate) fn advance_wal_floor(&self) -> Result<()> {
        if self.default.is_read_only() {
            return Ok(());
        }
        let own = Tree::unflushed_wal(&self.default.state.lock());
        let edit = self.wal_floor_edit(own);
        if edit.log_number <= Some(self.default.state.lock().versions.log_number) {
            return Ok(());
        }
        self.default.log_and_apply(edit)?;
        self.default.delete_obsolete_files();
        Ok(())
    }

    /// Starts a new WAL for a tree switching memtables: numbers it from the database's file
    /// numbers and switches to it. Only the commit leader calls this. A failure is the
    /// database's background error: its WAL may be half switched.
    pub(crate) fn rotate_wal(&self) -> Result<u64> {
        let number = self.default.state.lock().versions.new_file_number();
        match self.switch_wal(number) {
            Ok(()) => Ok(number),
            Err(e) => {
                self.fail_wal(&e);
                Err(e)
            }
        }
    }

    /// Closes the active WAL and makes `log_number` the new one. In this order, each step
    /// durable before the next:
    /// 1. the old WAL is synced whole and cut to its length (its file was reserved ahead), so a
    ///    WAL with a newer non-empty one after it was synced entirely and ends at its last
    ///    record (recovery treats any damage in it, zeros included, as lost data);
    /// 2. the new WAL is created and its directory entry synced, so a synced write to it cannot
    ///    lose the whole file;
    /// 3. the MANIFEST records the old WAL's synced length and the new WAL's existence, so that
    ///    recovery fails if either later goes missing or shrinks, instead of quietly replaying
    ///    less;
    /// 4. only then do writes go to the new WAL.
    pub(crate) fn switch_wal(&self, log_number: u64) -> Result<()> {
        let (old_number, old_synced) = {
            let mut wal = self.wal.lock();
            let wal = wal.as_mut().ok_or(Error::Closed)?;
            wal.finish()?;
            (wal.log_number(), wal.synced_len())
        };
        let db = &*self.default;
        let path = crate::filename::log_file_name(&db.dir, log_number);
        let new_wal = LogWriter::create_wal(&*db.options.fs, path, log_number)?;
        crate::filename::sync_dir(&*db.options.fs, &db.dir)?;
        let mut edit = VersionEdit::default();
        edit.wals.extend(old_number.map(|n| (n, old_synced)));
        edit.wals.push((log_number, 0));
        db.log_and_apply(edit)?;
        *self.wal.lock() = Some(new_wal);
        self.current_wal.store(log_number, Ordering::Release);
        Ok(())
    }

    /// At close, after the background threads stopped: syncs the WAL and records its length
    /// in the MANIFEST, so the next open knows every byte of it was synced and fails, rather
    /// than drops them, if any of them are then damaged or missing. After a background error
    /// the WAL is only flushed: the MANIFEST takes no more edits.
    pub(crate) fn close_wal(&self) -> Result<()> {
        let (number, synced) = {
            let mut wal = self.wal.lock();
            let Some(wal) = wal.as_mut() else {
                return Ok(());
            };
            if self.default.state.lock().bg_error.is_some() {
                return Ok(wal.flush()?);
            }
            wal.finish()?;
            (wal.log_number(), wal.synced_len())
        };
        let Some(number) = number else {
            return Ok(());
        };
        let recorded = self
            .default
            .state
            .lock()
            .versions
            .wals
            .get(&number)
            .copied();
        if recorded == Some(synced) {
            return Ok(());
        }
        self.default
            .log_and_apply(VersionEdit {
                wals: vec![(number, synced)],
                ..Default::default()
            })
            .map(|_| ())
    }
}

impl Tree {
    /// The oldest WAL holding writes of this tree that are not in a table, or `None` if it has
    /// none (its memtables are empty).
    pub(crate) fn unflushed_wal(st: &TreeState) -> Option<u64> {
        st.imm
            .front()
            .map(|m| m.log_number())
            .or_else(|| (!st.mem.is_empty()).then(|| st.mem.log_number()))
    }
}
