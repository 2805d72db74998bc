//! Builds one block: prefix-compressed entries followed by the restart array.
//!
//! ```text
//! block   = entry* || restart[0..n] (fixed32 LE each) || n (fixed32 LE)
//! entry   = varint32 shared || varint32 non_shared || varint32 value_len
//!           || key[shared..] (non_shared bytes) || value (value_len bytes)
//! ```
//!
//! `shared` is the length of the prefix this key has in common with the previous key. Every
//! `restart_interval` entries the prefix compression restarts (`shared = 0`) and the entry's
//! offset is appended to the restart array, so a reader can binary-search restart points, whose
//! keys are stored whole. The first entry is always a restart point (`restart[0] = 0`); an empty
//! block is just `restart[0] = 0, n = 1`.

use crate::coding::{put_fixed32, put_varint32};

/// Accumulates sorted entries into one block. Not thread-safe; one builder per output block
/// stream.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    /// Entries added since the last restart point.
    counter: usize,
    num_entries: u64,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder that restarts prefix compression every `restart_interval` entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            counter: 0,
            num_entries: 0,
            last_key: Vec::new(),
        }
    }

    /// Appends an entry.
    ///
    /// REQUIRES: `key` sorts after every key added since the last [`BlockBuilder::finish`]
    /// (the caller orders keys; blocks do not compare), and the block stays under 4 GiB.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.counter < self.restart_interval {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        } else {
            debug_assert!(self.buf.len() <= u32::MAX as usize, "block exceeds 4 GiB");
            self.restarts.push(self.buf.len() as u32);
            self.counter = 0;
            0
        };
        let non_shared = &key[shared..];
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared.len() as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        self.counter += 1;
        self.num_entries += 1;
    }

    /// Bytes the block would take if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True when no entry has been added since the last finish.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Entries added since the last finish.
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the finished block bytes, leaving the builder empty
    /// and ready for the next block. The returned buffer is freshly owned so it can be handed to
    /// another thread; `capacity_hint` sizes the builder's next buffer.
    pub fn finish(&mut self, capacity_hint: usize) -> Vec<u8> {
        let mut out = std::mem::replace(&mut self.buf, Vec::with_capacity(capacity_hint));
        out.reserve(4 * self.restarts.len() + 4);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.num_entries = 0;
        self.last_key.clear();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_spec() {
        let mut b = BlockBuilder::new(2);
        b.add(b"apple", b"1");
        b.add(b"apricot", b"22");
        b.add(b"banana", b"");
        assert_eq!(b.num_entries(), 3);
        assert_eq!(b.last_key(), b"banana");
        let est = b.estimated_size();
        let bytes = b.finish(0);
        assert_eq!(bytes.len(), est);
        let mut expect = Vec::new();
        expect.extend_from_slice(&[0, 5, 1]);
        expect.extend_from_slice(b"apple1");
        expect.extend_from_slice(&[2, 5, 2]);
        expect.extend_from_slice(b"ricot22");
        let second_restart = expect.len() as u32;
        expect.extend_from_slice(&[0, 6, 0]);
        expect.extend_from_slice(b"banana");
        expect.extend_from_slice(&0u32.to_le_bytes());
        expect.extend_from_slice(&second_restart.to_le_bytes());
        expect.extend_from_slice(&2u32.to_le_bytes());
        assert_eq!(bytes, expect);
        assert!(b.is_empty());
        assert_eq!(
            b.finish(0),
            [0, 0, 0, 0, 1, 0, 0, 0],
            "empty block: one restart at 0"
        );
    }
}
