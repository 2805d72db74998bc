//! A cursor over one block.
//!
//! Seeks binary-search the restart points (whose keys are stored whole, so the search compares
//! slices of the block without copying) and then scan forward. Moving backwards re-scans from the
//! restart point before the current entry, as LevelDB does, since entries only encode their
//! successor. The current key is rebuilt in one reusable buffer: after the first few entries an
//! iterator allocates nothing.

use std::cmp::Ordering;
use std::sync::Arc;

use super::Block;
use crate::coding::get_varint32;
use crate::key::{TRAILER_LEN, compare_internal};
use crate::{InternalIterator, Result};

/// Iterates the entries of a [`Block`] in key order; keeps the block alive through an `Arc`.
///
/// After a movement method returns an error the iterator is invalid; it can be re-positioned.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `block.restarts_offset` when invalid.
    current: usize,
    /// Offset of the entry after the current one.
    next_offset: usize,
    /// Index of the restart point at or before `current`.
    restart_index: usize,
    /// The current key, rebuilt from the shared prefix and the entry's delta.
    key: Vec<u8>,
    value_start: usize,
    value_end: usize,
}

/// The three varints at the start of an entry: (shared, non_shared, value_len, header_len).
#[inline]
fn decode_entry_header(entries: &[u8]) -> Option<(usize, usize, usize, usize)> {
    // Fast path: every length below 128 fits in one byte each.
    if let [a, b, c, ..] = *entries
        && (a | b | c) < 0x80
    {
        return Some((a as usize, b as usize, c as usize, 3));
    }
    let (shared, n1) = get_varint32(entries)?;
    let (non_shared, n2) = get_varint32(entries.get(n1..)?)?;
    let (value_len, n3) = get_varint32(entries.get(n1 + n2..)?)?;
    Some((
        shared as usize,
        non_shared as usize,
        value_len as usize,
        n1 + n2 + n3,
    ))
}

impl BlockIter {
    /// An unpositioned iterator over `block`.
    pub fn new(block: Arc<Block>) -> Self {
        Self::with_key_capacity(block, 0)
    }

    /// [`BlockIter::new`] with room for keys of `capacity` bytes, so a point lookup that knows
    /// its key length does not grow the key buffer while scanning.
    pub fn with_key_capacity(block: Arc<Block>, capacity: usize) -> Self {
        let end = block.restarts_offset;
        let restart_index = block.num_restarts;
        BlockIter {
            block,
            current: end,
            next_offset: end,
            restart_index,
            key: Vec::with_capacity(capacity),
            value_start: 0,
            value_end: 0,
        }
    }

    /// Re-targets the iterator at another block, keeping its key buffer; leaves it unpositioned.
    pub fn reset(&mut self, block: Arc<Block>) {
        self.block = block;
        self.invalidate();
    }

    /// The block being iterated.
    pub fn block(&self) -> &Arc<Block> {
        &self.block
    }

    /// Moves the current entry out (key buffer and a copy of the value) and leaves the iterator
    /// unpositioned. REQUIRES: `valid()`.
    pub(crate) fn take_entry(&mut self) -> (Vec<u8>, Vec<u8>) {
        let value = self.value().to_vec();
        let key = std::mem::take(&mut self.key);
        self.invalidate();
        (key, value)
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_offset;
        self.next_offset = self.current;
        self.restart_index = self.block.num_restarts;
        self.key.clear();
    }

    fn corrupt<T>(&mut self, at: usize, what: &str) -> Result<T> {
        self.invalidate();
        Err(self.block.corruption(format!(
            "bad entry at offset {at} of the uncompressed block: {what}"
        )))
    }

    fn seek_to_restart_point(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.current = self.block.restarts_offset;
        self.next_offset = self.block.restart_point(index);
    }

    /// The key stored whole at restart point `index`. REQUIRES: `index < num_restarts`.
    fn key_at_restart(&self, index: usize) -> std::result::Result<&[u8], (usize, &'static str)> {
        let at = self.block.restart_point(index);
        let entries = self
            .block
            .data
            .get(..self.block.restarts_offset)
            .unwrap_or_default();
        let rest = entries.get(at..).unwrap_or_default();
        match decode_entry_header(rest) {
            Some((0, non_shared, _, header)) => rest
                .get(header..header.saturating_add(non_shared))
                .ok_or((at, "key runs past the entries")),
            Some(_) => Err((at, "restart entry shares a prefix")),
            None => Err((at, "truncated entry header")),
        }
    }

    /// Decodes the entry at `next_offset`. Returns false (and invalidates) at the end.
    fn parse_next(&mut self) -> Result<bool> {
        self.current = self.next_offset;
        let at = self.current;
        let block = &*self.block;
        let limit = block.restarts_offset;
        if at >= limit {
            self.invalidate();
            return Ok(false);
        }
        let entries = block.data.get(at..limit).unwrap_or_default();
        let Some((shared, non_shared, value_len, header)) = decode_entry_header(entries) else {
            return self.corrupt(at, "truncated entry header");
        };
        if shared > self.key.len() {
            return self.corrupt(at, "shared prefix longer than the previous key");
        }
        let key_end = header.saturating_add(non_shared);
        let value_end = key_end.saturating_add(value_len);
        let Some(delta) = entries
            .get(header..key_end)
            .filter(|_| value_end <= entries.len())
        else {
            return self.corrupt(at, "entry runs past the end of the entries");
        };
        self.key.truncate(shared);
        self.key.extend_from_slice(delta);
        if self.key.len() < TRAILER_LEN {
            return self.corrupt(at, "key shorter than an internal-key trailer");
        }
        self.value_start = at + key_end;
        self.value_end = at + value_end;
        self.next_offset = self.value_end;
        while self.restart_index + 1 < block.num_restarts
            && block.restart_point(self.restart_index + 1) <= at
        {
            self.restart_index += 1;
        }
        Ok(true)
    }
}

impl InternalIterator for BlockIter {
    #[inline]
    fn valid(&self) -> bool {
        self.current < self.block.restarts_offset
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart_point(0);
        self.parse_next()?;
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_to_restart_point(self.block.num_restarts - 1);
        while self.parse_next()? && self.next_offset < self.block.restarts_offset {}
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // Find the last restart point whose key is < target, then scan forward from it.
        let mut left = 0;
        let mut right = self.block.num_restarts - 1;
        if self.valid() {
            // Reuse the current position to narrow the search (sequential seeks stay local).
            match compare_internal(&self.key, target) {
                Ordering::Less => left = self.restart_index,
                Ordering::Equal => return Ok(()),
                Ordering::Greater => right = self.restart_index,
            }
        }
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            match self.key_at_restart(mid) {
                Ok(k) if compare_internal(k, target).is_lt() => left = mid,
                Ok(_) => right = mid - 1,
                Err((at, what)) => return self.corrupt(at, what),
            }
        }
        self.seek_to_restart_point(left);
        while self.parse_next()? {
            if compare_internal(&self.key, target).is_ge() {
                break;
            }
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "next() on an invalid BlockIter");
        if self.valid() {
            self.parse_next()?;
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "prev() on an invalid BlockIter");
        if !self.valid() {
            return Ok(());
        }
        let original = self.current;
        // Back up to the restart point strictly before the current entry.
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.invalidate();
                return Ok(());
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart_point(self.restart_index);
        // Scan forward to the entry that ends where the original began.
        loop {
            if !self.parse_next()? || self.next_offset > original {
                return self.corrupt(original, "restart points disagree with entry boundaries");
            }
            if self.next_offset == original {
                return Ok(());
            }
        }
    }

    #[inline]
    fn key(&self) -> &[u8] {
        &self.key
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.block
            .data
            .get(self.value_start..self.value_end)
            .unwrap_or_default()
    }
}
