//! The memtable's arenas: skiplist nodes and values are carved out of large chunks, so a
//! memtable costs a few dozen allocations instead of two per entry, and its size is the bytes
//! handed out, not an estimate.
//!
//! Chunks start at [`FIRST_CHUNK_BYTES`] and double up to [`MAX_CHUNK_BYTES`], so a small
//! memtable (tests, recovery of a short WAL) does not pay for a megabyte it never uses. A
//! request larger than a quarter of the maximum chunk gets a chunk of its own, exactly its size,
//! so a big value never abandons most of a chunk (RocksDB's arena does the same).
//!
//! Invariants:
//! - Every pointer [`Arena::alloc`] returns is aligned as the arena was created with (at most
//!   [`ALIGN`]), points to `size` bytes no other
//!   call ever returns, and stays valid (never moved, never freed) until the arena is dropped.
//! - `used_bytes <= reserved_bytes`, and `reserved_bytes - used_bytes` is the unused rest of the
//!   current chunk: memory the arena holds but has not handed out.
//!
//! The arena does not synchronise: its owner (the skiplist) calls `alloc` from one writer at a
//! time, and readers reach the bytes only through pointers the writer published.

#![expect(
    unsafe_code,
    reason = "raw chunk allocation: nodes are laid out by hand and outlive any borrow of the arena"
)]

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::NonNull;

/// The largest alignment an arena hands out (the skiplist's nodes start with `AtomicPtr`s);
/// chunks are aligned to it.
pub(super) const ALIGN: usize = 8;

/// Size of the first chunk.
pub(super) const FIRST_CHUNK_BYTES: usize = 16 << 10;

/// Chunks stop doubling at this size: one transparent huge page (see [`HUGE_PAGE_BYTES`]).
pub(super) const MAX_CHUNK_BYTES: usize = HUGE_PAGE_BYTES;

/// Chunks of this size are aligned to it and, on Linux, advised to be backed by a transparent
/// huge page. A full memtable is tens of megabytes of nodes that a search visits in random
/// order; with 4 KiB pages nearly every node visit also missed the TLB.
const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Requests above this get a dedicated chunk.
const DEDICATED_ABOVE_BYTES: usize = MAX_CHUNK_BYTES / 4;

/// One block of memory from the global allocator, freed when the arena drops.
struct Chunk {
    ptr: NonNull<u8>,
    layout: Layout,
}

/// A bump allocator over [`Chunk`]s. See the module docs for its invariants.
pub(super) struct Arena {
    /// Every allocation's size is rounded up to a multiple of this, a power of two `<= ALIGN`,
    /// so that every allocation starts aligned to it.
    align: usize,
    chunks: Vec<Chunk>,
    /// Start of the free part of the current chunk (dangling while there is no chunk).
    cursor: NonNull<u8>,
    /// Bytes left in the current chunk after `cursor`.
    remaining: usize,
    /// Size of the next shared chunk.
    next_chunk_bytes: usize,
    /// Bytes handed out, plus the abandoned tails of earlier chunks.
    used_bytes: usize,
    /// Bytes of every chunk.
    reserved_bytes: usize,
}

// SAFETY: the arena owns its chunks exclusively (they are allocated here and freed only in
// `Drop`); the raw pointers carry no thread affinity. Moving it to another thread moves that
// ownership; the bytes it handed out are the skiplist's concern.
unsafe impl Send for Arena {}

impl Arena {
    /// An arena that has allocated nothing yet, whose allocations are `align`-aligned.
    ///
    /// # Panics
    /// If `align` is not a power of two no larger than [`ALIGN`].
    pub(super) fn new(align: usize) -> Self {
        assert!(
            align.is_power_of_two() && align <= ALIGN,
            "arena alignment {align}"
        );
        Arena {
            align,
            chunks: Vec::new(),
            cursor: NonNull::dangling(),
            remaining: 0,
            next_chunk_bytes: FIRST_CHUNK_BYTES,
            used_bytes: 0,
            reserved_bytes: 0,
        }
    }

    /// Bytes handed out, counting the abandoned tails of full chunks: what the entries cost.
    pub(super) fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// Bytes taken from the global allocator: `used_bytes` plus the rest of the current chunk.
    pub(super) fn reserved_bytes(&self) -> usize {
        self.reserved_bytes
    }

    /// `size` bytes, aligned as the arena was created with and uninitialised, valid until the
    /// arena drops.
    ///
    /// # Panics
    /// If `size` is zero, or too big for a `Layout` (over `isize::MAX`).
    pub(super) fn alloc(&mut self, size: usize) -> NonNull<u8> {
        assert!(size > 0, "zero-byte arena allocation");
        let size = size
            .checked_next_multiple_of(self.align)
            .expect("arena allocation overflows usize");
        if size > DEDICATED_ABOVE_BYTES {
            self.used_bytes += size;
            return self.new_chunk(size);
        }
        if size > self.remaining {
            // Abandon the tail: it counts as used, so `used_bytes` never undercounts memory.
            self.used_bytes += self.remaining;
            // The chunk must hold the request: double past it if the next size is smaller.
            // `size <= DEDICATED_ABOVE_BYTES`, so this stops at `MAX_CHUNK_BYTES` at the latest.
            let mut bytes = self.next_chunk_bytes;
            while bytes < size {
                bytes *= 2;
            }
            self.next_chunk_bytes = (bytes * 2).min(MAX_CHUNK_BYTES);
            self.cursor = self.new_chunk(bytes);
            self.remaining = bytes;
        }
        // A hard check, not a debug one: everything after writes `size` bytes at the cursor.
        assert!(
            size <= self.remaining,
            "arena chunk too small for its request"
        );
        let out = self.cursor;
        // SAFETY: `size <= remaining`, so `cursor + size` is at most one past the end of the
        // current chunk, inside the same allocation.
        self.cursor = unsafe { self.cursor.add(size) };
        self.remaining -= size;
        self.used_bytes += size;
        debug_assert!(self.used_bytes <= self.reserved_bytes);
        out
    }

    /// A fresh chunk of `bytes` bytes, recorded for `Drop`.
    fn new_chunk(&mut self, bytes: usize) -> NonNull<u8> {
        let huge = bytes == HUGE_PAGE_BYTES;
        let align = if huge { HUGE_PAGE_BYTES } else { ALIGN };
        let layout = Layout::from_size_align(bytes, align).expect("arena chunk layout");
        // SAFETY: `layout` has a non-zero size (`alloc` rejects zero, chunk sizes are constants).
        let ptr = unsafe { alloc(layout) };
        let Some(ptr) = NonNull::new(ptr) else {
            handle_alloc_error(layout)
        };
        if huge {
            advise_huge_page(ptr, bytes);
        }
        self.chunks.push(Chunk { ptr, layout });
        self.reserved_bytes += bytes;
        ptr
    }
}

/// Asks the kernel to back `len` bytes at `ptr` (a huge-page-aligned chunk) with a transparent
/// huge page (`madvise(MADV_HUGEPAGE)`): needed where THP is in `madvise` mode, the usual
/// default. A hint: if it fails or THP is off, the chunk simply stays on small pages.
#[cfg(all(target_os = "linux", not(miri)))]
fn advise_huge_page(ptr: NonNull<u8>, len: usize) {
    // SAFETY: `ptr..ptr + len` is one live allocation of ours, page-aligned; MADV_HUGEPAGE
    // changes only how the kernel backs those pages, never their contents or validity.
    let _ = unsafe { libc::madvise(ptr.as_ptr().cast(), len, libc::MADV_HUGEPAGE) };
}

/// Elsewhere (and under Miri) there is no such hint.
#[cfg(not(all(target_os = "linux", not(miri))))]
fn advise_huge_page(_ptr: NonNull<u8>, _len: usize) {}

impl Drop for Arena {
    fn drop(&mut self) {
        for chunk in &self.chunks {
            // SAFETY: each chunk was allocated in `new_chunk` with exactly this layout and is
            // freed once, here. Nothing can read it afterwards: whoever holds pointers into the
            // arena (the skiplist) is being dropped with it.
            unsafe { dealloc(chunk.ptr.as_ptr(), chunk.layout) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_disjoint_and_counted() {
        let mut arena = Arena::new(ALIGN);
        let mut spans = Vec::new();
        for size in [1, 7, 8, 9, 100, 4096, 20_000, DEDICATED_ABOVE_BYTES + 1, 3] {
            let p = arena.alloc(size);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            // SAFETY: `p` points to `size` writable bytes that nothing else uses.
            unsafe { p.as_ptr().write_bytes(0xAB, size) };
            spans.push((p.as_ptr() as usize, size));
        }
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(
                pair[0].0 + pair[0].1 <= pair[1].0,
                "overlapping allocations"
            );
        }
        assert!(arena.used_bytes() <= arena.reserved_bytes());
        let requested: usize = spans.iter().map(|s| s.1.next_multiple_of(ALIGN)).sum();
        assert!(arena.used_bytes() >= requested);
    }

    /// Every allocation lies inside one chunk, whatever the sizes and their order (a request
    /// larger than the next chunk size once got a chunk too small for it).
    fn check_inside_chunks(align: usize, sizes: &[usize]) {
        let mut arena = Arena::new(align);
        let mut spans = Vec::new();
        for &size in sizes {
            let p = arena.alloc(size);
            // SAFETY: `p` points to `size` writable bytes that nothing else uses.
            unsafe { p.as_ptr().write_bytes(0x5A, size) };
            spans.push((p.as_ptr() as usize, size));
        }
        for &(start, size) in &spans {
            let inside = arena.chunks.iter().any(|c| {
                let base = c.ptr.as_ptr() as usize;
                base <= start && start + size <= base + c.layout.size()
            });
            assert!(inside, "allocation of {size} bytes outside every chunk");
        }
        assert!(arena.used_bytes() <= arena.reserved_bytes());
    }

    #[test]
    fn a_request_bigger_than_the_next_chunk_gets_a_chunk_that_holds_it() {
        check_inside_chunks(
            1,
            &[65_536, 65_536, 100, 200_000, 16_385, DEDICATED_ABOVE_BYTES],
        );
        check_inside_chunks(ALIGN, &[10, FIRST_CHUNK_BYTES + 1, 3 * FIRST_CHUNK_BYTES]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: if cfg!(miri) { 3 } else { 64 },
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        #[test]
        fn allocations_always_fit_their_chunk(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![1usize..200, 1usize..70_000, 1usize..(3 * MAX_CHUNK_BYTES / 8)],
                1..40,
            ),
            byte_aligned in proptest::prelude::any::<bool>(),
        ) {
            check_inside_chunks(if byte_aligned { 1 } else { ALIGN }, &sizes);
        }
    }

    #[test]
    fn a_byte_arena_packs_allocations_without_padding() {
        let mut arena = Arena::new(1);
        let a = arena.alloc(3);
        let b = arena.alloc(5);
        assert_eq!(b.as_ptr() as usize, a.as_ptr() as usize + 3);
        assert_eq!(arena.used_bytes(), 8);
    }

    #[test]
    fn chunks_double_up_to_the_maximum() {
        let mut arena = Arena::new(ALIGN);
        arena.alloc(8);
        assert_eq!(arena.reserved_bytes(), FIRST_CHUNK_BYTES);
        // Fill enough to need many chunks; the reserve never runs ahead of use by more than
        // one maximum chunk.
        for _ in 0..(4 * MAX_CHUNK_BYTES / 1024) {
            arena.alloc(1024);
            assert!(arena.reserved_bytes() - arena.used_bytes() <= MAX_CHUNK_BYTES);
        }
        assert!(
            arena
                .chunks
                .iter()
                .all(|c| c.layout.size() <= MAX_CHUNK_BYTES)
        );
        assert_eq!(
            arena.chunks.last().map(|c| c.layout.size()),
            Some(MAX_CHUNK_BYTES)
        );
    }

    #[test]
    fn a_big_request_gets_its_own_chunk_and_keeps_the_current_one() {
        let mut arena = Arena::new(ALIGN);
        let a = arena.alloc(16);
        let big = arena.alloc(MAX_CHUNK_BYTES * 3);
        let b = arena.alloc(16);
        // The small allocations are neighbours in the first chunk.
        assert_eq!(b.as_ptr() as usize, a.as_ptr() as usize + 16);
        assert_ne!(big, a);
        assert_eq!(
            arena.reserved_bytes(),
            FIRST_CHUNK_BYTES + MAX_CHUNK_BYTES * 3
        );
    }
}
