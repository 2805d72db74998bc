//! The memtable: a concurrent skiplist of internal keys, the first home of every write.
//!
//! Writers insert through the single group-commit leader, so inserts never race each other, but
//! readers and iterators run concurrently with inserts; the lock-free skiplist makes that safe
//! without a lock. A memtable is append-only: deletes are tombstone entries, so an entry once
//! visible never changes.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};

use crossbeam_skiplist::SkipMap;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{self, SeqNo, ValueKind, compare_internal};
use smallvec::SmallVec;

use sluice_sst::Result;

/// Bytes charged per entry for the skiplist node and allocations beyond the key and value.
const ENTRY_OVERHEAD_BYTES: usize = 64;

/// Keys up to this many bytes (user key + trailer) live inside the skiplist node itself.
const INLINE_KEY_BYTES: usize = 32;

/// An encoded internal key ordered by [`compare_internal`].
///
/// Short keys are stored inline so that comparing against a node during a skiplist search
/// touches one cache line instead of chasing a second pointer: insertion and lookup are
/// dominated by those comparisons.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MemKey(SmallVec<[u8; INLINE_KEY_BYTES]>);

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What a point lookup found in one memtable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible version is a value.
    Value(Vec<u8>),
    /// The newest visible version is a tombstone: stop looking in older sources.
    Deleted,
}

/// An in-memory sorted run of writes.
pub struct MemTable {
    map: SkipMap<MemKey, Box<[u8]>>,
    approximate_bytes: AtomicUsize,
    /// Sequence number of the first write that may live here (for WAL bookkeeping).
    first_seq: AtomicU64,
    /// Number of the WAL file whose records this memtable holds.
    log_number: u64,
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("entries", &self.map.len())
            .field("approximate_bytes", &self.approximate_bytes())
            .field("log_number", &self.log_number)
            .finish()
    }
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            approximate_bytes: AtomicUsize::new(0),
            first_seq: AtomicU64::new(SeqNo::MAX),
            log_number,
        }
    }

    /// The WAL file holding this memtable's writes.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Inserts one entry. REQUIRES: `(user_key, seq)` was not inserted before.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let mut ikey = SmallVec::with_capacity(user_key.len() + key::TRAILER_LEN);
        ikey.extend_from_slice(user_key);
        ikey.extend_from_slice(&key::pack_trailer(seq, kind).to_le_bytes());
        let charge = ikey.len() + value.len() + ENTRY_OVERHEAD_BYTES;
        self.map.insert(MemKey(ikey), value.into());
        self.approximate_bytes
            .fetch_add(charge, AtomicOrdering::Relaxed);
        self.first_seq.fetch_min(seq, AtomicOrdering::Relaxed);
    }

    /// Finds the newest version of `user_key` with sequence `<= snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<Lookup> {
        let mut seek = SmallVec::with_capacity(user_key.len() + key::TRAILER_LEN);
        seek.extend_from_slice(user_key);
        seek.extend_from_slice(&key::pack_trailer(snapshot, key::KIND_FOR_SEEK).to_le_bytes());
        let seek = MemKey(seek);
        let entry = self.map.lower_bound(Bound::Included(&seek))?;
        let parsed = key::parse_internal_key(&entry.key().0)?;
        if parsed.user_key != user_key {
            return None;
        }
        Some(match parsed.kind {
            ValueKind::Value => Lookup::Value(entry.value().to_vec()),
            ValueKind::Deletion => Lookup::Deleted,
        })
    }

    /// Bytes used, approximately (keys, values and per-entry overhead).
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when no entry was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Calls `f` on every entry in internal-key order (the fast path used by flush).
    pub fn for_each(&self, f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        self.for_each_in(None, None, f)
    }

    /// Calls `f` on every entry whose user key is in `[lower, upper)` (`None`: unbounded), in
    /// internal-key order. A partitioned flush writes one range at a time with it.
    pub fn for_each_in(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        let seek = lower.map(|lower| {
            let mut seek = SmallVec::with_capacity(lower.len() + key::TRAILER_LEN);
            seek.extend_from_slice(lower);
            // The newest possible version sorts first among `lower`'s entries.
            seek.extend_from_slice(
                &key::pack_trailer(key::MAX_SEQ, key::KIND_FOR_SEEK).to_le_bytes(),
            );
            MemKey(seek)
        });
        let start = seek.as_ref().map_or(Bound::Unbounded, Bound::Included);
        for entry in self.map.range((start, Bound::Unbounded)) {
            let ikey = &entry.key().0;
            if upper.is_some_and(|upper| key::user_key(ikey) >= upper) {
                break;
            }
            f(ikey, entry.value())?;
        }
        Ok(())
    }

    /// An iterator that keeps this memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(self),
            current: None,
        }
    }
}

/// A cursor over a memtable.
///
/// The skiplist's entry handles borrow the map, so an owned iterator cannot hold one; instead it
/// copies the current entry and re-seeks from it on each step (O(log n) per step, fine for the
/// memtable, which holds a small fraction of the data).
pub struct MemTableIter {
    mem: Arc<MemTable>,
    current: Option<(MemKey, Box<[u8]>)>,
}

impl MemTableIter {
    fn set(&mut self, entry: Option<crossbeam_skiplist::map::Entry<'_, MemKey, Box<[u8]>>>) {
        self.current = entry.map(|e| (e.key().clone(), e.value().clone()));
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.map.front());
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let mem = Arc::clone(&self.mem);
        self.set(mem.map.back());
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let mem = Arc::clone(&self.mem);
        let target = MemKey(SmallVec::from_slice(target));
        self.set(mem.map.lower_bound(Bound::Included(&target)));
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        let mem = Arc::clone(&self.mem);
        let next = match &self.current {
            Some((k, _)) => mem.map.lower_bound(Bound::Excluded(k)),
            None => None,
        };
        self.set(next);
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        let mem = Arc::clone(&self.mem);
        let prev = match &self.current {
            Some((k, _)) => mem.map.upper_bound(Bound::Excluded(k)),
            None => None,
        };
        self.set(prev);
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(k, _)| &k.0[..])
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(|(_, v)| &v[..])
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_respects_snapshots_and_tombstones() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"a", b"v1");
        m.add(2, ValueKind::Value, b"a", b"v2");
        m.add(3, ValueKind::Deletion, b"a", b"");
        assert_eq!(m.get(b"a", 1), Some(Lookup::Value(b"v1".to_vec())));
        assert_eq!(m.get(b"a", 2), Some(Lookup::Value(b"v2".to_vec())));
        assert_eq!(m.get(b"a", 3), Some(Lookup::Deleted));
        assert_eq!(m.get(b"a", 0), None);
        assert_eq!(m.get(b"b", 10), None);
        assert_eq!(m.get(b"", 10), None);
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        for (i, k) in [b"c", b"a", b"b"].iter().enumerate() {
            m.add(i as u64 + 1, ValueKind::Value, *k, b"x");
        }
        m.add(9, ValueKind::Deletion, b"b", b"");
        let mut it = m.iter();
        it.seek_to_first().unwrap();
        let mut seen = Vec::new();
        while it.valid() {
            let p = key::parse_internal_key(it.key()).unwrap();
            seen.push((p.user_key.to_vec(), p.seq));
            it.next().unwrap();
        }
        let expect: Vec<(Vec<u8>, u64)> = vec![
            (b"a".to_vec(), 2),
            (b"b".to_vec(), 9),
            (b"b".to_vec(), 3),
            (b"c".to_vec(), 1),
        ];
        assert_eq!(seen, expect);
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push(key::parse_internal_key(it.key()).unwrap().seq);
            it.prev().unwrap();
        }
        assert_eq!(back, vec![1, 3, 9, 2]);
        it.seek(&key::seek_key(b"b", 5)).unwrap();
        assert_eq!(key::parse_internal_key(it.key()).unwrap().seq, 3);
    }

    #[test]
    fn size_grows_with_inserts() {
        let m = MemTable::new(1);
        assert!(m.is_empty());
        m.add(1, ValueKind::Value, b"key", &[0u8; 1000]);
        assert!(m.approximate_bytes() >= 1000);
        assert_eq!(m.len(), 1);
    }
}
