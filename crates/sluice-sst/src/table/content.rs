//! S4: turns a sorted stream of entries into sealed data blocks plus the table-wide state (filter
//! keys, properties) that the meta blocks are written from.

use std::collections::VecDeque;

use super::TableOptions;
use crate::block::BlockBuilder;
use crate::filter::BloomFilterBuilder;
use crate::key::{TRAILER_LEN, compare_internal, user_key};
use crate::properties::TableProperties;

/// A finished data block, uncompressed, waiting for S5..S7.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedBlock {
    /// The block bytes (entries and restart array), uncompressed.
    pub contents: Vec<u8>,
    /// The block's last internal key; becomes its index entry.
    pub last_key: Vec<u8>,
    /// Entries in the block.
    pub num_entries: u64,
}

/// Builds the contents of one table. Not thread-safe; it is `Send`, so the S4 thread may own it
/// while other threads compress and write the blocks it seals.
#[derive(Debug)]
pub struct TableContentBuilder {
    block_size: usize,
    block: BlockBuilder,
    sealed: VecDeque<SealedBlock>,
    filter: Option<BloomFilterBuilder>,
    /// Entry-level properties; the writer fills in the block and byte counts.
    props: TableProperties,
}

impl TableContentBuilder {
    /// A builder for `opts` (the block size, restart interval and filter settings matter here).
    pub fn new(opts: &TableOptions) -> Self {
        let props = TableProperties {
            compression: opts.compression,
            ..TableProperties::default()
        };
        TableContentBuilder {
            block_size: opts.block_size.max(1),
            block: BlockBuilder::new(opts.restart_interval),
            sealed: VecDeque::new(),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key)),
            props,
        }
    }

    /// Adds an entry; seals the current block once it reaches `block_size`.
    ///
    /// REQUIRES: `ikey` is an internal key that sorts strictly after every key added before, and
    /// `ikey.len() + value.len() <= MAX_ENTRY_BYTES` (checked in debug builds; [`super::TableBuilder`]
    /// checks the size in every build).
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) {
        debug_assert!(ikey.len() >= TRAILER_LEN, "not an internal key");
        debug_assert!(
            ikey.len() + value.len() <= crate::format::MAX_ENTRY_BYTES,
            "entry of {} bytes exceeds MAX_ENTRY_BYTES",
            ikey.len() + value.len()
        );
        debug_assert!(
            self.props.num_entries == 0 || compare_internal(self.last_key(), ikey).is_lt(),
            "keys must be added in strictly increasing order"
        );
        if let Some(f) = self.filter.as_mut() {
            f.add_key(user_key(ikey));
        }
        self.props.add_entry(ikey, value);
        self.block.add(ikey, value);
        if self.block.estimated_size() >= self.block_size {
            self.seal_current();
        }
    }

    /// The last key added (the current block's, or the last sealed block's).
    fn last_key(&self) -> &[u8] {
        if self.block.is_empty() {
            &self.props.largest_key
        } else {
            self.block.last_key()
        }
    }

    /// Seals the block being built, even if it is smaller than `block_size` (an output file cut
    /// or a sub-task boundary). Does nothing when the block is empty.
    pub fn seal_current(&mut self) {
        if self.block.is_empty() {
            return;
        }
        let last_key = self.block.last_key().to_vec();
        self.props.set_largest_key(&last_key);
        let num_entries = self.block.num_entries();
        let contents = self.block.finish(self.block_size + self.block_size / 8);
        self.sealed.push_back(SealedBlock {
            contents,
            last_key,
            num_entries,
        });
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

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Seals the last block and hands over what the writer needs for the meta blocks.
    pub fn finish(mut self) -> TableTail {
        self.seal_current();
        TableTail {
            sealed: self.sealed,
            filter: self.filter,
            props: self.props,
        }
    }
}

/// The end of a table's content: sealed blocks not yet taken (in order), the filter keys and
/// the entry-level properties. [`super::TableFileWriter::finish`] encodes and writes any sealed
/// blocks still here, then the meta blocks.
#[derive(Debug)]
pub struct TableTail {
    sealed: VecDeque<SealedBlock>,
    pub(super) filter: Option<BloomFilterBuilder>,
    pub(super) props: TableProperties,
}

impl TableTail {
    /// The next sealed block still waiting for S5..S7, in key order.
    pub fn take_sealed(&mut self) -> Option<SealedBlock> {
        self.sealed.pop_front()
    }

    /// Entries in the whole table.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};

    #[test]
    fn seals_at_block_size_and_on_demand() {
        let opts = TableOptions {
            block_size: 200,
            ..TableOptions::default()
        };
        let mut b = TableContentBuilder::new(&opts);
        for i in 0..20u64 {
            b.add(
                &make_internal_key(format!("key{i:03}").as_bytes(), 100 - i, ValueKind::Value),
                &[1; 20],
            );
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
        let last = b.take_sealed().unwrap();
        assert!(!b.has_sealed());
        assert_eq!(
            last.last_key,
            make_internal_key(b"key019", 81, ValueKind::Value)
        );
        let total: u64 = blocks.iter().map(|s| s.num_entries).sum::<u64>() + last.num_entries;
        assert_eq!(total, 20);
        let tail = b.finish();
        assert_eq!(tail.num_entries(), 20);
        assert_eq!(tail.props.largest_key, last.last_key);
        assert_eq!(
            tail.props.smallest_key,
            make_internal_key(b"key000", 100, ValueKind::Value)
        );
        assert_eq!(tail.filter.as_ref().map(|f| f.num_keys()), Some(20));
    }

    #[test]
    fn finish_seals_the_last_block_and_no_filter_when_disabled() {
        let opts = TableOptions {
            bloom_bits_per_key: 0,
            ..TableOptions::default()
        };
        let mut b = TableContentBuilder::new(&opts);
        b.add(&make_internal_key(b"a", 1, ValueKind::Deletion), b"");
        let mut tail = b.finish();
        assert!(tail.filter.is_none());
        assert_eq!(tail.props.num_deletions, 1);
        assert_eq!(tail.take_sealed().map(|s| s.num_entries), Some(1));
        assert!(tail.take_sealed().is_none());
    }
}
