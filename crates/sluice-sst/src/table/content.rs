//! S4: turns a sorted stream of entries into sealed data blocks, each carrying the [`BlockMeta`]
//! the S7 writer assembles the file-level state (key range, filter, properties) from.
//!
//! The builder knows nothing about files: where one output file ends and the next begins is
//! decided by whoever appends the blocks, possibly on another thread.

use std::collections::VecDeque;

use super::{BlockMeta, TableOptions};
use crate::block::BlockBuilder;
use crate::digest::EntryHash;
use crate::filter::hash64;
use crate::key::{TRAILER_LEN, compare_internal, user_key};
use crate::prefix::PrefixExtractor;

/// A finished data block, uncompressed, waiting for S5..S7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedBlock {
    /// The block bytes (entries and restart array), uncompressed.
    pub contents: Vec<u8>,
    /// Key range, filter hashes and entry statistics of the block.
    pub meta: BlockMeta,
}

/// Builds data blocks from entries in key order. Not thread-safe; it is `Send`, so the S4
/// thread may own it while other threads compress and write the blocks it seals.
#[derive(Debug)]
pub struct TableContentBuilder {
    block_size: usize,
    block: BlockBuilder,
    /// Meta of the block being built.
    meta: BlockMeta,
    sealed: VecDeque<SealedBlock>,
    /// Entries added since creation.
    num_entries: u64,
    /// Last key of the last sealed block: the ordering check needs it once `block` is empty.
    prev_last_key: Vec<u8>,
    prefix_extractor: Option<PrefixExtractor>,
    /// The prefix last hashed into the current block's filter hashes (valid while the block
    /// is not empty): every block hashes each of its prefixes once, since blocks of one run
    /// may land in different files.
    last_prefix: Vec<u8>,
}

impl TableContentBuilder {
    /// A builder for `opts` (the block size, restart interval and prefix extractor matter
    /// here).
    pub fn new(opts: &TableOptions) -> Self {
        TableContentBuilder {
            block_size: opts.block_size.max(1),
            block: BlockBuilder::new(opts.restart_interval),
            meta: BlockMeta::default(),
            sealed: VecDeque::new(),
            num_entries: 0,
            prev_last_key: Vec::new(),
            prefix_extractor: opts.prefix_extractor,
            last_prefix: Vec::new(),
        }
    }

    /// Adds an entry; seals the current block once it reaches `block_size`.
    ///
    /// REQUIRES: `ikey` is an internal key that sorts strictly after every key added before, and
    /// `ikey.len() + value.len() <= MAX_ENTRY_BYTES` (checked in debug builds; [`super::TableBuilder`]
    /// checks the size in every build).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) {
        self.add_hashed(ikey, value, EntryHash::of(ikey, value));
    }

    /// [`Self::add`] for a caller that knows the entry's hashes: a compaction that changed the
    /// entry (zeroed its sequence number, filtered its value, moved its blob reference)
    /// computed them to account the change, and hashing a value again was a tenth of S4
    /// (`benches/merge_floor.rs`).
    ///
    /// REQUIRES: as [`Self::add`], and `hash` is [`EntryHash::of`]`(ikey, value)`.
    pub fn add_hashed(&mut self, ikey: &[u8], value: &[u8], hash: EntryHash) {
        debug_assert!(ikey.len() >= TRAILER_LEN, "not an internal key");
        debug_assert!(
            ikey.len() + value.len() <= crate::format::MAX_ENTRY_BYTES,
            "entry of {} bytes exceeds MAX_ENTRY_BYTES",
            ikey.len() + value.len()
        );
        debug_assert!(
            self.num_entries == 0 || compare_internal(self.last_key(), ikey).is_lt(),
            "keys must be added in strictly increasing order"
        );
        self.num_entries += 1;
        // The prefix's hash goes before the key's, so that versions of one key still give
        // consecutive equal key hashes, which `add_entry` drops.
        let first_in_block = self.block.is_empty();
        if let Some(prefix) = self
            .prefix_extractor
            .as_ref()
            .and_then(|e| e.prefix(user_key(ikey)))
            && (first_in_block || prefix != self.last_prefix.as_slice())
        {
            self.meta.filter_hashes.push(hash64(prefix));
            self.last_prefix.clear();
            self.last_prefix.extend_from_slice(prefix);
        }
        self.meta.add_entry(ikey, value, hash);
        self.block.add(ikey, value);
        if self.block.estimated_size() >= self.block_size {
            self.seal_current();
        }
    }

    /// The last key added (the current block's, or the last sealed block's).
    fn last_key(&self) -> &[u8] {
        if self.block.is_empty() {
            &self.prev_last_key
        } else {
            self.block.last_key()
        }
    }

    /// Seals the block being built, even if it is smaller than `block_size` (an output file cut,
    /// a sub-task boundary, or the end of the input). Does nothing when the block is empty.
    pub fn seal_current(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let mut meta = std::mem::take(&mut self.meta);
        meta.last_key = self.block.last_key().to_vec();
        self.prev_last_key.clone_from(&meta.last_key);
        let contents = self.block.finish(self.block_size + self.block_size / 8);
        self.sealed.push_back(SealedBlock { contents, meta });
    }

    /// The oldest sealed block not yet taken, in key order.
    pub fn take_sealed(&mut self) -> Option<SealedBlock> {
        self.sealed.pop_front()
    }

    /// True when a sealed block waits to be taken.
    pub fn has_sealed(&self) -> bool {
        !self.sealed.is_empty()
    }

    /// Estimated bytes of the block being built (0 when it is empty); excludes sealed blocks.
    pub fn current_block_size(&self) -> usize {
        if self.block.is_empty() {
            0
        } else {
            self.block.estimated_size()
        }
    }

    /// Uncompressed bytes of the current block plus the sealed blocks not yet taken.
    pub fn pending_bytes(&self) -> usize {
        self.current_block_size() + self.sealed.iter().map(|s| s.contents.len()).sum::<usize>()
    }

    /// Entries added since the builder was created (sealed or not).
    pub fn num_entries(&self) -> u64 {
        self.num_entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash64;
    use crate::key::{ValueKind, make_internal_key, user_key};

    fn ikey(i: u64, seq: u64) -> Vec<u8> {
        make_internal_key(format!("key{i:03}").as_bytes(), seq, ValueKind::Value)
    }

    #[test]
    fn seals_at_block_size_and_on_demand() {
        let opts = TableOptions {
            block_size: 200,
            ..TableOptions::default()
        };
        let mut b = TableContentBuilder::new(&opts);
        for i in 0..20u64 {
            b.add(&ikey(i, 100 - i), &[1; 20]);
        }
        let mut blocks = Vec::new();
        while let Some(s) = b.take_sealed() {
            assert!(s.contents.len() >= 200);
            blocks.push(s);
        }
        assert!(blocks.len() >= 2);
        assert!(b.current_block_size() > 0);
        b.seal_current();
        assert!(b.has_sealed());
        assert_eq!(b.current_block_size(), 0);
        b.seal_current(); // empty: no-op
        blocks.push(b.take_sealed().unwrap());
        assert!(!b.has_sealed());
        assert_eq!(b.num_entries(), 20);
        // The metas tile the input: each block starts right after the previous one ends.
        let mut next = 0u64;
        for s in &blocks {
            let m = &s.meta;
            assert_eq!(m.first_key, ikey(next, 100 - next));
            next += m.num_entries;
            assert_eq!(m.last_key, ikey(next - 1, 101 - next));
            assert_eq!(m.filter_hashes.len() as u64, m.num_entries);
            assert_eq!(
                (m.smallest_seq, m.largest_seq),
                (101 - next, 100 - (next - m.num_entries))
            );
            assert_eq!(m.raw_value_bytes, 20 * m.num_entries);
        }
        assert_eq!(next, 20);
    }

    #[test]
    fn a_user_key_spanning_two_blocks_is_hashed_in_both() {
        let mut b = TableContentBuilder::new(&TableOptions::default());
        let versions = [
            make_internal_key(b"k", 9, ValueKind::Value),
            make_internal_key(b"k", 5, ValueKind::Deletion),
            make_internal_key(b"k", 1, ValueKind::Value),
        ];
        b.add(&versions[0], b"v");
        b.seal_current();
        b.add(&versions[1], b"");
        b.add(&versions[2], b"w");
        b.seal_current();
        let (first, second) = (b.take_sealed().unwrap(), b.take_sealed().unwrap());
        assert_eq!(first.meta.filter_hashes, [hash64(b"k")]);
        assert_eq!(second.meta.filter_hashes, [hash64(user_key(&versions[1]))]);
        assert_eq!((second.meta.num_entries, second.meta.num_deletions), (2, 1));
        assert_eq!(second.meta.first_key, versions[1]);
        assert_eq!(second.meta.last_key, versions[2]);
        assert_eq!(b.pending_bytes(), 0);
    }
}
