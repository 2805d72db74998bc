//! A skiplist of internal keys whose nodes live in an [`Arena`], with the key inline: one
//! writer at a time, any number of lock-free readers. The models are LevelDB's
//! `db/skiplist.h`, RocksDB's `InlineSkipList` and Pebble's `arenaskl`.
//!
//! # Node layout
//!
//! A node is one allocation in the node arena. Its address (a [`Node`]) is that of its level-0
//! link; the links of higher levels sit *below* it, so the key is at a fixed offset whatever
//! the height and a search reads a node's level-0 link, lengths and a short key from one or two
//! cache lines:
//!
//! ```text
//!   -8*(h-1) .. -8   next[h-1] .. next[1]   AtomicPtr, one per level above 0
//!    0               next[0]                AtomicPtr
//!    8               key_len                u32 (user key + 8-byte trailer)
//!   12               value_len              u32
//!   16               value                  *const u8 into the value arena (dangling if empty)
//!   24               key                    key_len bytes: user_key || trailer (LE u64)
//! ```
//!
//! Values live in a second arena, packed without padding. A search touches only nodes, so
//! keeping values out of them keeps its working set small: with db_bench's 16-byte keys and
//! 100-byte values a full 64 MiB memtable's nodes take about 22 MB, inside a 32 MB L3 cache,
//! where values inline spread them over all 64 MiB. Measured on a 450k-entry memtable, inserts
//! took about 15% less CPU and lookups 10% less than with values inline, for 4 more bytes an
//! entry (the value pointer, 151 bytes where inline took 147).
//!
//! The head is a node of height [`MAX_HEIGHT`] with an empty key that no search compares.
//!
//! # Concurrency
//!
//! Invariants that make the readers' unsynchronised access sound:
//! - **One writer.** Inserts go through [`ListWriter`], which holds the list's writer mutex, so
//!   no two inserts ever interleave. (The memtable's writer is the group-commit leader, of which
//!   there is one at a time; the mutex makes that a checked fact rather than a promise, and is
//!   uncontended on the write path.) With one writer, a link needs a plain store, not a CAS.
//! - **Publish after build.** A node's lengths, key, value and every link are written before
//!   the node is linked anywhere; it is linked level 0 first with `Release` stores and readers
//!   load links with `Acquire`, so a reader that reaches a node sees it complete.
//! - **Immutable once published.** After linking, only a node's links change (by atomic
//!   stores); its key and value bytes are never written again, and no node is ever unlinked.
//! - **Never freed early.** Nodes are freed only when the list (and its arena) drops; readers
//!   borrow the list, so they cannot outlive it.
//!
//! A reader that races an insert sees the list either with or without the new node, at each
//! level independently: it may miss a node linked at level 0 but not yet above, which only
//! makes its search take a slower path, never a wrong one.

#![expect(
    unsafe_code,
    reason = "nodes laid out by hand in arena memory, linked with atomics for lock-free readers"
)]

use std::cmp::Ordering;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize};

use parking_lot::{Mutex, MutexGuard};
use sluice_sst::key::{TRAILER_LEN, compare_internal};

use super::arena::Arena;

/// Most levels a node can have. With a branching factor of 4, twelve levels keep searches
/// logarithmic up to 4^12 (16 million) entries, far more than a memtable holds.
pub(super) const MAX_HEIGHT: usize = 12;

/// Bytes of one link.
const LINK_BYTES: usize = size_of::<AtomicPtr<u8>>();

/// Offset of `key_len` from a node's address; `value_len` follows it.
const LENS_OFFSET: usize = LINK_BYTES;

/// Offset of the value pointer from a node's address.
const VALUE_OFFSET: usize = LENS_OFFSET + 2 * size_of::<u32>();

/// Offset of the key from a node's address.
const KEY_OFFSET: usize = VALUE_OFFSET + size_of::<*const u8>();

/// Source of [`SkipList::id`]s: unique for the life of the process.
static NEXT_LIST_ID: AtomicU64 = AtomicU64::new(0);

/// A node, by the address of its level-0 link (see the module docs for the layout).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Node(NonNull<u8>);

impl Node {
    /// The node whose level-0 link is at `ptr`; `None` for null (the end of a level).
    fn from_link(ptr: *mut u8) -> Option<Node> {
        NonNull::new(ptr).map(Node)
    }

    /// Asks the CPU to start loading the node's lengths and key: a search's time is almost
    /// all cache misses on nodes, and this lets two of them overlap.
    #[inline(always)]
    fn prefetch(self) {
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        // SAFETY: a prefetch is only a hint: it never faults and changes no memory.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(self.0.as_ptr().wrapping_add(LENS_OFFSET).cast());
        }
    }

    /// The link of `level`.
    ///
    /// # Safety
    /// `self` is the head or a node built by [`ListWriter::insert`] of a list that is alive
    /// for `'a`, and `level` is below its height.
    unsafe fn link<'a>(self, level: usize) -> &'a AtomicPtr<u8> {
        // SAFETY: per the contract, the node's allocation holds `height` links below and at
        // its address, each initialised before the node was published, LINK_BYTES-aligned
        // (arena allocations are 8-aligned and the layout keeps links at multiples of 8), and
        // alive for 'a. Links are only ever accessed atomically, so a shared reference is fine.
        unsafe {
            &*self
                .0
                .as_ptr()
                .sub(level * LINK_BYTES)
                .cast::<AtomicPtr<u8>>()
        }
    }

    /// The next node at `level`, as readers see it.
    ///
    /// # Safety
    /// As [`Node::link`].
    unsafe fn next(self, level: usize) -> Option<Node> {
        // SAFETY: forwarded contract. `Acquire` pairs with the `Release` store that published
        // the node it returns, so that node's bytes are visible to this thread.
        Node::from_link(unsafe { self.link(level) }.load(Acquire))
    }

    /// The internal key.
    ///
    /// # Safety
    /// `self` is a published (complete) node of a list alive for `'a`; not the head.
    unsafe fn key<'a>(self) -> &'a [u8] {
        // SAFETY: lengths and key were written before publication and never change; the key
        // lies inside the node's allocation (see `ListWriter::insert`).
        unsafe {
            let p = self.0.as_ptr();
            let key_len = p.add(LENS_OFFSET).cast::<u32>().read() as usize;
            std::slice::from_raw_parts(p.add(KEY_OFFSET), key_len)
        }
    }

    /// The value.
    ///
    /// # Safety
    /// As [`Node::key`].
    unsafe fn value<'a>(self) -> &'a [u8] {
        // SAFETY: as in `key`: the length and pointer were written before publication and
        // never change; the pointer is to `value_len` bytes of the value arena, which lives as
        // long as the list, or dangling (well aligned for bytes) when the length is zero.
        unsafe {
            let p = self.0.as_ptr();
            let value_len = p.add(LENS_OFFSET + 4).cast::<u32>().read() as usize;
            let value = p.add(VALUE_OFFSET).cast::<*const u8>().read();
            std::slice::from_raw_parts(value, value_len)
        }
    }
}

/// Where a cursor stands: a node of one particular list. Plain data; it is resolved only by
/// [`SkipList::entry`] and [`SkipList::next`], which check that the position is theirs.
#[derive(Clone, Copy)]
pub(super) struct Position {
    list: u64,
    node: Node,
}

// SAFETY: a `Position` is an address and a list id; it is dereferenced only through a borrow
// of the list with the same id (which keeps the node alive), never on its own.
unsafe impl Send for Position {}
// SAFETY: as for `Send`: sharing the address shares nothing it could be used to reach.
unsafe impl Sync for Position {}

/// What only the writer touches.
struct WriterState {
    /// Nodes: links, lengths, value pointer and key.
    nodes: Arena,
    /// Values, packed.
    values: Arena,
    /// xorshift64 state for node heights; never zero.
    rng: u64,
}

/// The skiplist. See the module docs for its layout and concurrency invariants.
pub(super) struct SkipList {
    /// Identifies this list to [`Position`]s.
    id: u64,
    /// Height `MAX_HEIGHT`, empty key; in the arena like every node.
    head: Node,
    /// Tallest node's height (at least 1). Readers start their searches there; a stale value
    /// only makes a search start lower (slower) or at an empty level (skipped).
    height: AtomicUsize,
    /// Entries inserted.
    len: AtomicUsize,
    /// The arenas' used and reserved bytes, mirrored after each insert for readers.
    used_bytes: AtomicUsize,
    reserved_bytes: AtomicUsize,
    writer: Mutex<WriterState>,
}

// SAFETY: `head`, every node and every value point into the arenas inside `writer`, which the
// list owns and frees only when dropped. Readers share nodes under the invariants of the
// module docs (only atomic links change after publication); all mutation is serialised by the
// `writer` mutex.
unsafe impl Send for SkipList {}
// SAFETY: as for `Send`.
unsafe impl Sync for SkipList {}

impl SkipList {
    /// An empty list.
    pub(super) fn new() -> Self {
        let id = NEXT_LIST_ID.fetch_add(1, Relaxed);
        let mut nodes = Arena::new(LINK_BYTES);
        let values = Arena::new(1);
        let head_bytes = (MAX_HEIGHT - 1) * LINK_BYTES + KEY_OFFSET;
        let base = nodes.alloc(head_bytes);
        // SAFETY: `base` holds `head_bytes` fresh bytes: MAX_HEIGHT links then the lengths and
        // value pointer, the node's address being the last link. All of it is initialised here.
        let head = unsafe {
            let node = base.add((MAX_HEIGHT - 1) * LINK_BYTES);
            for level in 0..MAX_HEIGHT {
                let link = node
                    .as_ptr()
                    .sub(level * LINK_BYTES)
                    .cast::<AtomicPtr<u8>>();
                link.write(AtomicPtr::new(ptr::null_mut()));
            }
            node.add(LENS_OFFSET).cast::<u32>().write(0);
            node.add(LENS_OFFSET + 4).cast::<u32>().write(0);
            let no_value = NonNull::<u8>::dangling().as_ptr().cast_const();
            node.add(VALUE_OFFSET).cast::<*const u8>().write(no_value);
            Node(node)
        };
        SkipList {
            id,
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
            used_bytes: AtomicUsize::new(nodes.used_bytes() + values.used_bytes()),
            reserved_bytes: AtomicUsize::new(nodes.reserved_bytes() + values.reserved_bytes()),
            writer: Mutex::new(WriterState {
                nodes,
                values,
                rng: (id + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            }),
        }
    }

    /// The right to insert, held until the returned writer drops. Blocks while another writer
    /// holds it.
    pub(super) fn writer(&self) -> ListWriter<'_> {
        ListWriter {
            list: self,
            state: self.writer.lock(),
        }
    }

    /// Entries inserted.
    pub(super) fn len(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// Arena bytes the entries use (nodes, values, padding, abandoned chunk tails).
    pub(super) fn used_bytes(&self) -> usize {
        self.used_bytes.load(Relaxed)
    }

    /// Arena bytes taken from the allocator: `used_bytes` plus the rest of the current chunk.
    pub(super) fn reserved_bytes(&self) -> usize {
        self.reserved_bytes.load(Relaxed)
    }

    /// The first entry.
    pub(super) fn first(&self) -> Option<Position> {
        // SAFETY: the head has every level.
        self.position(unsafe { self.head.next(0) })
    }

    /// The last entry.
    pub(super) fn last(&self) -> Option<Position> {
        let found = self.find_last_below(|_| true);
        self.position(found)
    }

    /// The first entry whose key is `>= key` in internal-key order.
    pub(super) fn seek_ge(&self, key: &[u8]) -> Option<Position> {
        self.position(self.find_ge(key, None))
    }

    /// The last entry whose key is `< key` in internal-key order.
    pub(super) fn seek_lt(&self, key: &[u8]) -> Option<Position> {
        // SAFETY: `find_last_below` hands only published nodes of this list to the closure.
        let found = self.find_last_below(|n| compare_internal(unsafe { n.key() }, key).is_lt());
        self.position(found)
    }

    /// The entry after `pos`.
    ///
    /// # Panics
    /// If `pos` came from another list.
    pub(super) fn next(&self, pos: Position) -> Option<Position> {
        self.check(pos);
        // SAFETY: `check` proved `pos.node` is a published node of this list, alive while
        // `self` is borrowed; level 0 exists in every node.
        self.position(unsafe { pos.node.next(0) })
    }

    /// The key and value at `pos`, borrowed from the list.
    ///
    /// # Panics
    /// If `pos` came from another list.
    pub(super) fn entry(&self, pos: Position) -> (&[u8], &[u8]) {
        self.check(pos);
        // SAFETY: as in `next`; positions never name the head.
        unsafe { (pos.node.key(), pos.node.value()) }
    }

    fn position(&self, node: Option<Node>) -> Option<Position> {
        node.map(|node| Position {
            list: self.id,
            node,
        })
    }

    /// Positions are only ever made by `position` from a node of the list with that id, and
    /// ids are never reused, so a matching id proves the node is one of ours.
    fn check(&self, pos: Position) {
        assert_eq!(pos.list, self.id, "a position used with another skiplist");
    }

    /// The first node `>= key`. If `splice` is given, fills `splice[level]` with the last node
    /// `< key` at every level below the current height (the head where there is none).
    fn find_ge(&self, key: &[u8], mut splice: Option<&mut [Node; MAX_HEIGHT]>) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height.load(Relaxed) - 1;
        // A node already known to be >= key: met again at a lower level, it needs no compare.
        let mut bigger = None;
        loop {
            // SAFETY: `x` is the head or was reached through a link of level >= `level`, so it
            // is a published node of this list with more than `level` levels.
            let next = unsafe { x.next(level) };
            if level > 0 {
                // Where the search goes if `next` is not smaller: fetch it while `next` loads.
                // SAFETY: as above, `x` has more than `level` levels.
                if let Some(down) = unsafe { x.next(level - 1) } {
                    down.prefetch();
                }
            }
            let right = next != bigger
                // SAFETY: `n` was loaded from a link, so it is published and not the head.
                && next.is_some_and(|n| compare_internal(unsafe { n.key() }, key).is_lt());
            if right {
                if let Some(n) = next {
                    x = n;
                }
                continue;
            }
            if let Some(splice) = splice.as_deref_mut() {
                splice[level] = x;
            }
            if level == 0 {
                return next;
            }
            bigger = next;
            level -= 1;
        }
    }

    /// The last node for which `below` holds, assuming it holds for a prefix of the list;
    /// `None` if it holds for none.
    fn find_last_below(&self, below: impl Fn(Node) -> bool) -> Option<Node> {
        let mut x = self.head;
        let mut level = self.height.load(Relaxed) - 1;
        loop {
            // SAFETY: as in `find_ge`.
            match unsafe { x.next(level) } {
                Some(n) if below(n) => x = n,
                _ if level == 0 => return (x != self.head).then_some(x),
                _ => level -= 1,
            }
        }
    }
}

/// The list's single writer: holds its writer mutex.
pub(super) struct ListWriter<'a> {
    list: &'a SkipList,
    state: MutexGuard<'a, WriterState>,
}

impl ListWriter<'_> {
    /// Inserts the internal key `user_key || trailer` (trailer little-endian) with `value`.
    /// Returns false, inserting nothing, if that key is already present.
    ///
    /// # Panics
    /// If the internal key or the value is 4 GiB or longer.
    pub(super) fn insert(&mut self, user_key: &[u8], trailer: u64, value: &[u8]) -> bool {
        let key_len = user_key.len() + TRAILER_LEN;
        let key_len32 = u32::try_from(key_len).expect("memtable key of 4 GiB or more");
        let value_len32 = u32::try_from(value.len()).expect("memtable value of 4 GiB or more");
        let height = self.random_height();
        let stored_value = if value.is_empty() {
            NonNull::dangling()
        } else {
            let stored = self.state.values.alloc(value.len());
            // SAFETY: `stored` holds `value.len()` fresh bytes that nothing else can reach,
            // and `value` is a different allocation.
            unsafe { ptr::copy_nonoverlapping(value.as_ptr(), stored.as_ptr(), value.len()) };
            stored
        };
        let size = (height - 1) * LINK_BYTES + KEY_OFFSET + key_len;
        let base = self.state.nodes.alloc(size);
        // SAFETY: `base` holds `size` fresh bytes nobody else can reach: `height` links, the
        // node's address being the last of them, then lengths, value pointer and key, which
        // fit exactly. All but the links are written here; links once the splice is known.
        let node = unsafe {
            let node = base.add((height - 1) * LINK_BYTES);
            let p = node.as_ptr();
            p.add(LENS_OFFSET).cast::<u32>().write(key_len32);
            p.add(LENS_OFFSET + 4).cast::<u32>().write(value_len32);
            let stored_value = stored_value.as_ptr().cast_const();
            p.add(VALUE_OFFSET).cast::<*const u8>().write(stored_value);
            let key = p.add(KEY_OFFSET);
            ptr::copy_nonoverlapping(user_key.as_ptr(), key, user_key.len());
            let trailer = trailer.to_le_bytes();
            ptr::copy_nonoverlapping(trailer.as_ptr(), key.add(user_key.len()), TRAILER_LEN);
            Node(node)
        };
        // SAFETY: lengths and key are initialised, and the node is not shared.
        let key = unsafe { node.key() };
        let list = self.list;
        let mut splice = [list.head; MAX_HEIGHT];
        let found = list.find_ge(key, Some(&mut splice));
        // SAFETY: `found` came from a link: a published node.
        if found.is_some_and(|n| compare_internal(unsafe { n.key() }, key) == Ordering::Equal) {
            // The node and value stay unreachable in the arenas (and counted in their bytes).
            self.publish_sizes();
            return false;
        }
        for (level, prev) in splice.iter().enumerate().take(height) {
            // SAFETY: `prev` is the head or a published node of this list; `find_ge` filled
            // `splice[level]` only with nodes having more than `level` levels (the head has
            // all of them). Only this writer stores links, so the relaxed load is current.
            let succ = unsafe { prev.link(level) }.load(Relaxed);
            // SAFETY: the link lies inside the node's allocation (see above); nobody else can
            // see it yet, so a plain write initialises it.
            unsafe {
                let link = node
                    .0
                    .as_ptr()
                    .sub(level * LINK_BYTES)
                    .cast::<AtomicPtr<u8>>();
                link.write(AtomicPtr::new(succ));
            }
        }
        if height > list.height.load(Relaxed) {
            // Before or after linking is equally fine: see `SkipList::height`.
            list.height.store(height, Relaxed);
        }
        // Publish, level 0 first: once a reader can reach the node it is complete.
        for (level, prev) in splice.iter().enumerate().take(height) {
            // SAFETY: as above; the `Release` store pairs with readers' `Acquire` loads.
            unsafe { prev.link(level) }.store(node.0.as_ptr(), Release);
        }
        list.len.store(list.len.load(Relaxed) + 1, Relaxed);
        self.publish_sizes();
        true
    }

    /// A height of 1 + k with probability (3/4)(1/4)^k, capped at [`MAX_HEIGHT`].
    fn random_height(&mut self) -> usize {
        let mut x = self.state.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state.rng = x;
        // xorshift64*: the multiply mixes the state's bits into the top ones, read here. Each
        // pair of leading zero bits (probability 1/4) adds a level.
        let zeros = x.wrapping_mul(0x2545_F491_4F6C_DD1D).leading_zeros() as usize;
        1 + (zeros / 2).min(MAX_HEIGHT - 1)
    }

    fn publish_sizes(&self) {
        let (nodes, values) = (&self.state.nodes, &self.state.values);
        let used = nodes.used_bytes() + values.used_bytes();
        let reserved = nodes.reserved_bytes() + values.reserved_bytes();
        self.list.used_bytes.store(used, Relaxed);
        self.list.reserved_bytes.store(reserved, Relaxed);
    }
}
