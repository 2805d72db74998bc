//! The iterator protocol every source of entries implements: blocks, tables, memtables, and the
//! merging and compaction iterators built on top of them.
//!
//! Keys are internal keys (see [`crate::key`]) in internal-key order. Movement methods return a
//! `Result` because moving may read and decode a block from disk; after an error the iterator is
//! invalid. `key()` and `value()` may only be called while `valid()` is true.

use crate::Result;

/// A positioned cursor over internal-key-ordered entries.
pub trait InternalIterator: Send {
    /// True when positioned on an entry.
    fn valid(&self) -> bool;
    /// Positions on the first entry (invalid if empty).
    fn seek_to_first(&mut self) -> Result<()>;
    /// Positions on the last entry (invalid if empty).
    fn seek_to_last(&mut self) -> Result<()>;
    /// Positions on the first entry whose internal key is `>= target`.
    fn seek(&mut self, target: &[u8]) -> Result<()>;
    /// Advances to the next entry. REQUIRES: `valid()`.
    fn next(&mut self) -> Result<()>;
    /// Moves to the previous entry. REQUIRES: `valid()`.
    fn prev(&mut self) -> Result<()>;
    /// The current internal key. REQUIRES: `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. REQUIRES: `valid()`.
    fn value(&self) -> &[u8];
}

impl<I: InternalIterator + ?Sized> InternalIterator for Box<I> {
    fn valid(&self) -> bool {
        (**self).valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        (**self).seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        (**self).seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        (**self).seek(target)
    }
    fn next(&mut self) -> Result<()> {
        (**self).next()
    }
    fn prev(&mut self) -> Result<()> {
        (**self).prev()
    }
    fn key(&self) -> &[u8] {
        (**self).key()
    }
    fn value(&self) -> &[u8] {
        (**self).value()
    }
}

/// An iterator over an in-memory sorted vector of `(internal key, value)` pairs. Used for tests
/// and for small sorted runs; the caller guarantees the entries are in internal-key order.
#[derive(Debug, Default, Clone)]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Current position; `entries.len()` means invalid.
    pos: usize,
}

impl VecIterator {
    /// Wraps `entries`, which must be sorted by [`crate::key::compare_internal`].
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        debug_assert!(
            entries
                .windows(2)
                .all(|w| crate::key::compare_internal(&w[0].0, &w[1].0).is_lt()),
            "VecIterator entries must be strictly sorted"
        );
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self
            .entries
            .len()
            .checked_sub(1)
            .unwrap_or(self.entries.len());
        Ok(())
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.pos = self
            .entries
            .partition_point(|(k, _)| crate::key::compare_internal(k, target).is_lt());
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.pos += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

/// Helpers for tests of every iterator in this crate.
#[cfg(test)]
pub(crate) mod test_util {
    use super::InternalIterator;

    /// Every `(key, value)` from the first entry forward.
    pub(crate) fn collect_forward<I: InternalIterator + ?Sized>(
        it: &mut I,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
        out
    }

    /// Every `(key, value)` from the last entry backward, in the order visited (descending).
    pub(crate) fn collect_backward<I: InternalIterator + ?Sized>(
        it: &mut I,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_last().unwrap();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        out
    }
}
