//! The memtable: a skiplist of internal keys, the first home of every write.
//!
//! Entries live in an arena-backed skiplist (`skiplist.rs`, `arena.rs`): the key inline in the
//! node, the value packed in a second arena, no allocator call per entry, and the memtable's
//! size is the arenas' bytes used (nodes, links, values, padding), not an estimate.
//!
//! A memtable made for a write buffer also keeps a Bloom filter of its user keys (`filter.rs`),
//! so that a lookup of a key it does not hold, the common case, skips the search.
//!
//! One writer at a time inserts (the group-commit leader, which holds a [`MemTableWriter`] for
//! its whole group), while readers and iterators run concurrently without a lock. A memtable
//! is append-only: deletes are tombstone entries, so an entry once visible never changes.

mod arena;
mod filter;
mod skiplist;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use sluice_sst::iter::InternalIterator;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use sluice_sst::key::{self, SeqNo, ValueKind};
use sluice_sst::range_del::{RangeTombstone, Tombstones};
use smallvec::SmallVec;

use sluice_sst::Result;

use filter::{Filter, key_hash};
use skiplist::{ListWriter, Position, SkipList};

/// A memtable's filter takes this fraction of its write buffer: 512 KiB of a 64 MiB buffer,
/// about 10 bits per entry of db_bench's size (16-byte keys, 100-byte values), which keeps
/// false positives near 1%.
pub const WRITE_BUFFER_BYTES_PER_FILTER_BYTE: usize = 128;

/// A seek key built on the stack for user keys up to this many bytes (with the trailer).
const INLINE_SEEK_KEY_BYTES: usize = 64;

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
    list: SkipList,
    /// The user keys inserted, for [`MemTable::for_write_buffer`]'s memtables.
    filter: Option<Filter>,
    /// Number of the WAL file whose records this memtable holds.
    log_number: u64,
    /// Range tombstones written here; kept apart from the entries, as the version keeps
    /// them apart from the tables.
    range_dels: Mutex<RangeDels>,
    /// Set once a range tombstone is written: reads skip the lock until then.
    has_range_dels: AtomicBool,
}

/// A memtable's range tombstones, and their fragments while no new one has come.
#[derive(Debug, Default)]
struct RangeDels {
    list: Vec<RangeTombstone>,
    fragmented: Option<Arc<Tombstones>>,
}

impl RangeDels {
    /// Adds `tombstone` unless its range is empty; true when it was added.
    fn add(&mut self, tombstone: RangeTombstone) -> bool {
        let covers = tombstone.start < tombstone.end;
        if covers {
            self.list.push(tombstone);
            self.fragmented = None;
        }
        covers
    }
}

impl std::fmt::Debug for MemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemTable")
            .field("entries", &self.len())
            .field("approximate_bytes", &self.approximate_bytes())
            .field("allocated_bytes", &self.allocated_bytes())
            .field("log_number", &self.log_number)
            .finish()
    }
}

/// The internal key `user_key || pack(seq, kind)`, on the stack when short.
fn internal_key(
    user_key: &[u8],
    seq: SeqNo,
    kind: ValueKind,
) -> SmallVec<[u8; INLINE_SEEK_KEY_BYTES]> {
    let mut ikey = SmallVec::with_capacity(user_key.len() + key::TRAILER_LEN);
    ikey.extend_from_slice(user_key);
    ikey.extend_from_slice(&key::pack_trailer(seq, kind).to_le_bytes());
    ikey
}

impl MemTable {
    /// An empty memtable whose writes are logged in WAL `log_number`, without a filter (for
    /// memtables that are only written out, as repair's are).
    pub fn new(log_number: u64) -> Self {
        MemTable {
            list: SkipList::new(),
            filter: None,
            log_number,
            range_dels: Mutex::default(),
            has_range_dels: AtomicBool::new(false),
        }
    }

    /// An empty memtable for a write buffer of `write_buffer_size` bytes, whose writes are
    /// logged in WAL `log_number`: with a filter of
    /// `write_buffer_size / WRITE_BUFFER_BYTES_PER_FILTER_BYTE` bytes, counted in its size.
    pub fn for_write_buffer(log_number: u64, write_buffer_size: usize) -> Self {
        MemTable {
            list: SkipList::new(),
            filter: Filter::with_bytes(write_buffer_size / WRITE_BUFFER_BYTES_PER_FILTER_BYTE),
            log_number,
            range_dels: Mutex::default(),
            has_range_dels: AtomicBool::new(false),
        }
    }

    /// The WAL file holding this memtable's writes.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The right to insert, for a run of [`MemTableWriter::add`]s. One writer at a time: this
    /// blocks while another holds one. The write path has a single writer anyway (the
    /// group-commit leader), so there it never waits.
    pub fn writer(&self) -> MemTableWriter<'_> {
        MemTableWriter {
            list: self.list.writer(),
            filter: self.filter.as_ref(),
            range_dels: &self.range_dels,
            has_range_dels: &self.has_range_dels,
        }
    }

    /// Inserts one entry (a [`MemTable::writer`] for one call).
    /// REQUIRES: `(user_key, seq)` was not inserted before; a repeat is ignored.
    ///
    /// # Panics
    /// If `user_key` or `value` is 4 GiB or longer.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.writer().add(seq, kind, user_key, value);
    }

    /// Finds the newest version of `user_key` with sequence `<= snapshot`. Merge operands
    /// found on the way are appended to `operands`, newest first, and the search goes on to
    /// older versions: the answer is then what the operands apply to, and `None` means this
    /// memtable holds nothing more of the key. A version below `floor` (a range tombstone's
    /// sequence number; 0 for none) reads as deleted.
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        floor: SeqNo,
        operands: &mut Vec<Vec<u8>>,
    ) -> Option<Lookup> {
        if let Some(filter) = &self.filter
            && !filter.may_contain(key_hash(user_key))
        {
            return None;
        }
        let seek = internal_key(user_key, snapshot, key::KIND_FOR_SEEK);
        let mut at = self.list.seek_ge(&seek);
        while let Some(pos) = at {
            let (ikey, value) = self.list.entry(pos);
            let parsed = key::parse_internal_key(ikey)?;
            if parsed.user_key != user_key {
                return None;
            }
            if parsed.seq < floor {
                return Some(Lookup::Deleted);
            }
            match parsed.kind {
                ValueKind::Value => return Some(Lookup::Value(value.to_vec())),
                // Range tombstones are not entries, and batches refuse blob references; one
                // here would be a bug, read as a tombstone.
                ValueKind::Deletion | ValueKind::RangeDeletion | ValueKind::BlobIndex => {
                    return Some(Lookup::Deleted);
                }
                ValueKind::Merge => operands.push(value.to_vec()),
            }
            at = self.list.next(pos);
        }
        None
    }

    /// The sequence number of the newest entry of `user_key` (of any kind), or `None` when
    /// this memtable holds none.
    pub fn newest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        if let Some(filter) = &self.filter
            && !filter.may_contain(key_hash(user_key))
        {
            return None;
        }
        let seek = internal_key(user_key, key::MAX_SEQ, key::KIND_FOR_SEEK);
        let (ikey, _) = self.list.entry(self.list.seek_ge(&seek)?);
        let parsed = key::parse_internal_key(ikey)?;
        (parsed.user_key == user_key).then_some(parsed.seq)
    }

    /// Bytes the entries use: the arenas' bytes handed out, counting each node's links,
    /// lengths, value pointer, key and padding, the values, and the unused tails of full arena
    /// chunks.
    /// The memory held is this plus at most two partly used chunks (see
    /// [`MemTable::allocated_bytes`]), so a write buffer limit on it bounds memory.
    pub fn approximate_bytes(&self) -> usize {
        self.list.used_bytes() + self.filter_bytes()
    }

    /// Bytes the memtable took from the allocator for its entries (whole arena chunks): at most
    /// two partly used chunks (one per arena) more than [`MemTable::approximate_bytes`].
    pub fn allocated_bytes(&self) -> usize {
        self.list.reserved_bytes() + self.filter_bytes()
    }

    fn filter_bytes(&self) -> usize {
        self.filter.as_ref().map_or(0, Filter::bytes)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when it holds entries (range tombstones aside).
    pub fn has_entries(&self) -> bool {
        self.list.len() != 0
    }

    /// True when nothing was written: no entry and no range tombstone.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && !self.has_range_dels.load(Ordering::Acquire)
    }

    /// The range tombstones written here, in the order they were written.
    pub fn range_tombstones(&self) -> Vec<RangeTombstone> {
        self.range_dels.lock().list.clone()
    }

    /// The range tombstones written here, fragmented; `None` when there are none. Built once
    /// per change and shared by the reads until the next.
    pub fn tombstones(&self) -> Option<Arc<Tombstones>> {
        if !self.has_range_dels.load(Ordering::Acquire) {
            return None;
        }
        let mut dels = self.range_dels.lock();
        let RangeDels { list, fragmented } = &mut *dels;
        Some(Arc::clone(fragmented.get_or_insert_with(|| {
            Arc::new(Tombstones::new(list.iter()))
        })))
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
        let mut pos = match lower {
            // The newest possible version sorts first among `lower`'s entries.
            Some(lower) => {
                self.list
                    .seek_ge(&internal_key(lower, key::MAX_SEQ, key::KIND_FOR_SEEK))
            }
            None => self.list.first(),
        };
        while let Some(at) = pos {
            let (ikey, value) = self.list.entry(at);
            if upper.is_some_and(|upper| key::user_key(ikey) >= upper) {
                break;
            }
            f(ikey, value)?;
            pos = self.list.next(at);
        }
        Ok(())
    }

    /// An iterator that keeps this memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(self),
            pos: None,
        }
    }
}

/// The memtable's writer: inserts a run of entries under one acquisition of the skiplist's
/// writer lock. See [`MemTable::writer`].
pub struct MemTableWriter<'a> {
    list: ListWriter<'a>,
    filter: Option<&'a Filter>,
    range_dels: &'a Mutex<RangeDels>,
    has_range_dels: &'a AtomicBool,
}

impl MemTableWriter<'_> {
    /// Inserts one entry. REQUIRES: `(user_key, seq)` was not inserted before; a repeat is
    /// ignored (the first insert stays).
    ///
    /// # Panics
    /// If `user_key` or `value` is 4 GiB or longer.
    pub fn add(&mut self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::RangeDeletion {
            let added = self.range_dels.lock().add(RangeTombstone {
                start: user_key.to_vec(),
                end: value.to_vec(),
                seq,
            });
            if added {
                self.has_range_dels.store(true, Ordering::Release);
            }
            return;
        }
        // Before the node is linked: see the filter's module docs.
        if let Some(filter) = self.filter {
            filter.insert(key_hash(user_key));
        }
        let inserted = self
            .list
            .insert(user_key, key::pack_trailer(seq, kind), value);
        debug_assert!(inserted, "internal key inserted into a memtable twice");
    }
}

/// A cursor over a memtable. It keeps the memtable alive, and with it the arena its key and
/// value borrow from, so stepping is one link load: no copy, no re-seek forward.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    pos: Option<Position>,
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.pos.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = self.mem.list.first();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.mem.list.last();
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self.mem.list.seek_ge(target);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        self.pos = self.pos.and_then(|at| self.mem.list.next(at));
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        // No back links: find the last entry before this one (O(log n), as LevelDB does).
        let list = &self.mem.list;
        self.pos = self.pos.and_then(|at| list.seek_lt(list.entry(at).0));
        Ok(())
    }

    fn key(&self) -> &[u8] {
        self.pos.map_or(&[], |at| self.mem.list.entry(at).0)
    }

    fn value(&self) -> &[u8] {
        self.pos.map_or(&[], |at| self.mem.list.entry(at).1)
    }
}
