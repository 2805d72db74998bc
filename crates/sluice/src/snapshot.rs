//! Snapshots: a pinned sequence number that reads can use and compaction must respect.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_sst::key::SeqNo;

#[cfg(doc)]
use crate::Db;
use crate::db::open_id::OpenId;
use crate::iter::{KeyBounds, Range};
use crate::options::ReadOptions;
use crate::{Keyspace, Result};

/// The set of live snapshots, shared between the database and its `Snapshot` handles.
///
/// Compaction asks for the list so it keeps every version some snapshot can still see.
#[derive(Debug, Default)]
pub(crate) struct SnapshotList {
    /// Sequence number -> number of live handles pinning it.
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Pins the sequence number `current` holds and returns the handle that unpins it on drop,
    /// a snapshot of the database open `of`.
    ///
    /// The number is read under the list's lock: a compaction that read the list before that
    /// only has inputs at or below it, so it cannot drop a version this snapshot needs.
    pub(crate) fn acquire_current(
        self: &Arc<Self>,
        current: &std::sync::atomic::AtomicU64,
        of: &OpenId,
    ) -> PinnedSeq {
        let mut live = self.live.lock();
        let (seq, generation) = of.read_at(current);
        *live.entry(seq).or_insert(0) += 1;
        drop(live);
        PinnedSeq {
            seq,
            generation,
            list: Arc::clone(self),
            of: of.clone(),
        }
    }

    /// All pinned sequence numbers, ascending.
    pub fn sequences(&self) -> Vec<SeqNo> {
        self.live.lock().keys().copied().collect()
    }

    /// The oldest pinned sequence number, if any.
    pub fn oldest(&self) -> Option<SeqNo> {
        self.live.lock().keys().next().copied()
    }

    fn release(&self, seq: SeqNo) {
        let mut live = self.live.lock();
        if let Some(count) = live.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                live.remove(&seq);
            }
        }
    }
}

/// A sequence number pinned in a [`SnapshotList`] until dropped: compaction keeps every
/// version it sees.
#[derive(Debug)]
pub(crate) struct PinnedSeq {
    seq: SeqNo,
    /// The secondary instance's generation it was taken in ([`OpenId::read_at`]).
    generation: u64,
    list: Arc<SnapshotList>,
    /// The database open it pins: another database may not have published `seq`, and does
    /// not keep what it sees.
    of: OpenId,
}

impl PinnedSeq {
    /// The pinned sequence number.
    pub(crate) fn sequence(&self) -> SeqNo {
        self.seq
    }

    /// The sequence number to read at in the database open `open`: this pin's, if it is of
    /// that open.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming both databases if it is another's, or if a
    /// secondary instance caught up past what it sees ([`OpenId::check_generation`]).
    pub(crate) fn sequence_in(&self, open: &OpenId) -> Result<SeqNo> {
        open.check(
            &self.of,
            format_args!("a snapshot (at sequence {})", self.seq),
        )?;
        open.check_generation(self.generation, self.seq)?;
        Ok(self.seq)
    }
}

impl Drop for PinnedSeq {
    fn drop(&mut self) {
        self.list.release(self.seq);
    }
}

/// A consistent, read-only view of the database as of one sequence number.
///
/// Reads through a snapshot see exactly the writes acknowledged before it was taken. Holding a
/// snapshot keeps compaction from discarding the versions it sees, so drop it when done.
///
/// Its own reads ([`get`](Self::get), [`iter`](Self::iter), [`range`](Self::range),
/// [`prefix`](Self::prefix)) go to the keyspace it was taken from ([`Db::snapshot`] for the
/// default one, [`Keyspace::snapshot`]). The sequence number is the whole database's, so
/// [`ReadOptions::snapshot`] reads any other keyspace at the same point in time.
///
/// ```no_run
/// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
/// db.put("k", "old")?;
/// let snapshot = db.snapshot();
/// db.put("k", "new")?;
/// assert_eq!(snapshot.get("k")?, Some(b"old".to_vec()));
/// for entry in snapshot.range("a".."z") {
///     let (key, value) = entry?;
/// }
/// # Ok::<(), sluice::Error>(())
/// ```
pub struct Snapshot {
    pin: PinnedSeq,
    /// The keyspace its own reads go to.
    keyspace: Keyspace,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.pin.seq)
            .field("keyspace", &self.keyspace.name())
            .finish()
    }
}

impl Snapshot {
    /// A snapshot pinned by `pin` whose own reads go to `keyspace`.
    pub(crate) fn new(pin: PinnedSeq, keyspace: Keyspace) -> Snapshot {
        Snapshot { pin, keyspace }
    }

    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.pin.seq
    }

    /// The sequence number to read at in the database open `open`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming both databases if it is another's.
    pub(crate) fn sequence_in(&self, open: &OpenId) -> Result<SeqNo> {
        self.pin.sequence_in(open)
    }

    /// Read options that read at this snapshot.
    pub fn read_options(&self) -> ReadOptions<'_> {
        ReadOptions {
            snapshot: Some(self),
            ..ReadOptions::default()
        }
    }

    /// The value `key` had when the snapshot was taken, as [`Db::get`].
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.keyspace.get_opt(&self.read_options(), key)
    }

    /// Every `(key, value)` as of the snapshot, as [`Db::iter`].
    pub fn iter(&self) -> Range {
        self.range(..)
    }

    /// The pairs in `range` as of the snapshot, as [`Db::range`].
    pub fn range(&self, range: impl KeyBounds) -> Range {
        self.keyspace.range_opt(&self.read_options(), range)
    }

    /// The pairs whose keys start with `prefix` as of the snapshot, as [`Db::prefix`].
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Range {
        self.keyspace.prefix_opt(&self.read_options(), prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_pin_and_release() {
        let list = Arc::new(SnapshotList::default());
        let seq = std::sync::atomic::AtomicU64::new(5);
        let open = OpenId::new(std::path::Path::new("/db"));
        let a = list.acquire_current(&seq, &open);
        let b = list.acquire_current(&seq, &open);
        seq.store(9, std::sync::atomic::Ordering::Release);
        let c = list.acquire_current(&seq, &open);
        assert_eq!(c.sequence_in(&open).unwrap(), 9);
        let other = OpenId::new(std::path::Path::new("/db"));
        assert!(c.sequence_in(&other).is_err(), "a snapshot of another open");
        assert_eq!(list.sequences(), vec![5, 9]);
        drop(a);
        assert_eq!(list.oldest(), Some(5));
        drop(b);
        assert_eq!(list.sequences(), vec![9]);
        assert_eq!(c.seq, 9);
        drop(c);
        assert_eq!(list.oldest(), None);
    }
}
