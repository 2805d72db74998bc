//! Starting the loads of a block the merge is about to read. S4 walks each input's decoded
//! blocks in order, and the first touch of every block (its first entries, its restart count at
//! the end) waits for memory: blocks are separate allocations, and a hardware prefetcher does
//! not follow a stream from one into the next. Asking for the next block's first lines and its
//! last one when a block is opened lets those loads overlap the current block's entries.

#![cfg_attr(
    all(target_arch = "x86_64", not(miri)),
    expect(unsafe_code, reason = "the prefetch intrinsic, which is only a hint")
)]

/// Cache lines asked for at the start of a block: the hardware prefetcher takes over once the
/// entries are read in order.
const LEADING_LINES: usize = 2;

const LINE: usize = 64;

/// Asks the CPU to start loading the first lines and the last line of `data`. Changes nothing
/// and cannot fail: a hint the CPU may drop.
#[inline]
pub(crate) fn block(data: &[u8]) {
    for line in 0..LEADING_LINES.min(data.len().div_ceil(LINE)) {
        hint(data, line * LINE);
    }
    if let Some(last) = data.len().checked_sub(1) {
        hint(data, last);
    }
}

/// A prefetch of the line holding `data[at]` (`at < data.len()`).
#[inline(always)]
fn hint(data: &[u8], at: usize) {
    debug_assert!(at < data.len());
    let _ = (data, at);
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: `at` is inside `data`, and a prefetch is only a hint: it never faults, reads
    // nothing into the program and changes no memory.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(data.as_ptr().wrapping_add(at).cast());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Any slice may be hinted, empty or not, of any length and alignment.
    #[test]
    fn any_block_may_be_prefetched() {
        let bytes = vec![7u8; 4096 + 3];
        for len in [0, 1, 63, 64, 65, 128, 4096, 4099] {
            block(&bytes[..len]);
            block(&bytes[3..len.max(3)]);
        }
        assert!(bytes.iter().all(|&b| b == 7));
    }
}
