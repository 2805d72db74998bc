//! The write path allocates nothing per `put` or `delete` once warm: the batch buffer is
//! reused per thread, the group's bookkeeping per queue, and the memtable takes its memory in
//! arena chunks. A counting allocator checks it, counting only the writing thread's calls (the
//! background threads allocate for flushes and compactions as they like).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]
#![expect(unsafe_code, reason = "a global allocator is an unsafe trait")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use sluice::{Db, Options};

thread_local! {
    /// Allocator calls (alloc, alloc_zeroed, realloc) made by this thread.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the allocator may run while the thread-local is being torn down.
    let _ = CALLS.try_with(|c| c.set(c.get() + 1));
}

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so it
// upholds `GlobalAlloc`'s contract exactly as `System` does; counting touches only a
// const-initialised thread-local `Cell`, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// db_bench's shape: a 16-byte decimal key, written into `buf` without allocating.
fn key(i: u64, buf: &mut [u8; 16]) -> &[u8] {
    let mut n = i;
    for b in buf.iter_mut().rev() {
        *b = b'0' + (n % 10) as u8;
        n /= 10;
    }
    buf
}

#[test]
fn puts_and_deletes_allocate_only_arena_chunks() {
    let dir = tempfile::tempdir().unwrap();
    // The default 64 MiB memtable: 20,000 entries of 116 bytes never fill it.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let value = [b'v'; 100];
    let mut buf = [0u8; 16];
    for i in 0..1_000 {
        db.put(key(i * 7_919 % 20_000, &mut buf), value).unwrap();
        db.delete(key(i, &mut buf)).unwrap();
    }
    let writes = 20_000;
    let before = CALLS.with(Cell::get);
    for i in 0..writes / 2 {
        db.put(key(i * 7_919 % 20_000, &mut buf), value).unwrap();
        db.delete(key(i, &mut buf)).unwrap();
    }
    let calls = CALLS.with(Cell::get) - before;
    // About 1.8 MB of arena: a handful of chunks (16 KiB doubling to 2 MiB) and the growth of
    // the chunk list. A per-write allocation would show as 20,000.
    assert!(calls <= 32, "{calls} allocator calls for {writes} writes");
    // Deletes cover keys below 10,000; the puts' keys above it stay.
    assert_eq!(db.get(key(0, &mut buf)).unwrap(), None);
    assert_eq!(
        db.get(key(2 * 7_919, &mut buf)).unwrap().as_deref(),
        Some(&value[..])
    );
}
