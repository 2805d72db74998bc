//! The WAL the keyspaces share, and which of its files are still needed.
//!
//! Rules, with `C` the WAL being written:
//! - A keyspace switches memtables only together with a new WAL (the commit leader does both),
//!   so a memtable's writes are in WALs from its `log_number` on, and the WALs before the
//!   oldest unflushed memtable's hold nothing of that keyspace that is not in a table.
//! - Each tree records that boundary in its MANIFEST (`log_number`; for the default keyspace
//!   `default_log_number`), and replay skips the keyspace's entries in older WALs.
//! - The database's `log_number` (the *floor*) is the oldest WAL any keyspace needs: the
//!   smallest boundary of a keyspace with unflushed writes, and at most `C`. WALs below it are
//!   deleted and replay starts there. It only grows, so a keyspace that later gets writes
//!   finds them in WALs at or above `C` as it was then, which the floor never passed.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::db::{DbInner, DbState};
use crate::version::edit::VersionEdit;
use crate::{Error, Result};

/// A tree reached from another: the same one, or one held by `Arc` (the journal owner of a
/// keyspace's tree, or a keyspace's tree from the database).
pub(crate) enum TreeRef<'a> {
    Same(&'a DbInner),
    Other(Arc<DbInner>),
}

impl Deref for TreeRef<'_> {
    type Target = DbInner;

    fn deref(&self) -> &DbInner {
        match self {
            TreeRef::Same(inner) => inner,
            TreeRef::Other(other) => other,
        }
    }
}

impl DbInner {
    /// The database whose commit queue and WAL this tree's writes go through.
    pub(crate) fn journal(&self) -> Result<TreeRef<'_>> {
        match &self.journal_owner {
            None => Ok(TreeRef::Same(self)),
            Some(owner) => owner.upgrade().map(TreeRef::Other).ok_or(Error::Closed),
        }
    }

    /// The tree of keyspace `id`, from the database (this one for the default keyspace), or
    /// `None` if the database has no such keyspace (any more).
    pub(crate) fn tree(&self, id: u32) -> Option<TreeRef<'_>> {
        if id == crate::batch::DEFAULT_KEYSPACE_ID {
            return Some(TreeRef::Same(self));
        }
        let tree = self.keyspaces.read().get(&id).map(|t| Arc::clone(&t.inner));
        tree.map(TreeRef::Other)
    }

    /// True for a keyspace's tree (not the database itself).
    pub(crate) fn is_keyspace_tree(&self) -> bool {
        self.journal_owner.is_some()
    }

    /// The oldest WAL holding writes of this tree that are not in a table, or `None` if it has
    /// none (its memtables are empty).
    pub(crate) fn unflushed_wal(st: &DbState) -> Option<u64> {
        st.imm
            .front()
            .map(|m| m.log_number())
            .or_else(|| (!st.mem.is_empty()).then(|| st.mem.log_number()))
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
            let st = tree.inner.state.lock();
            if let Some(needed) = Self::unflushed_wal(&st) {
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
        if self.read_only {
            return Ok(());
        }
        let own = Self::unflushed_wal(&self.state.lock());
        let edit = self.wal_floor_edit(own);
        if edit.log_number <= Some(self.state.lock().versions.log_number) {
            return Ok(());
        }
        self.log_and_apply(edit)?;
        self.delete_obsolete_files();
        Ok(())
    }

    /// Starts a new WAL for a tree switching memtables: numbers it from the database's file
    /// numbers and switches to it. Only the commit leader calls this. A failure is the
    /// database's background error: its WAL may be half switched.
    pub(crate) fn rotate_wal(&self) -> Result<u64> {
        let number = self.state.lock().versions.new_file_number();
        match self.switch_wal(number) {
            Ok(()) => Ok(number),
            Err(e) => {
                let mut st = self.state.lock();
                self.set_bg_error(&mut st, &e);
                Err(e)
            }
        }
    }
}
