//! What one data block contributes to its table's file-level state (key range, filter, properties).
//!
//! S4 fills a [`BlockMeta`] per block and it travels with the block through S5 and S6, so the
//! S7 writer can assemble the filter and the properties of whichever file the block lands in,
//! without the content builder knowing where files are cut. Nothing here is written to disk as
//! such: the writer folds it into the filter and properties blocks (see `filter.rs`,
//! `properties.rs` and `docs/format/sst.md`).

use crate::blob::{BlobRef, BlobRefCounts};
use crate::digest::EntryHash;
use crate::key::{ValueKind, parse_internal_key};
use crate::properties::{VALUE_SIZE_BUCKETS, value_size_bucket};

/// Per-block summary of the entries in one data block.
///
/// Invariants for a block built by [`super::TableContentBuilder`]: `num_entries > 0`,
/// `first_key <= last_key` in internal-key order, and `filter_hashes` holds
/// [`hash64`](crate::filter::hash64)`(user_key)` of the block's entries in order with consecutive equal hashes removed,
/// each preceded, when the table has a prefix extractor and the key's prefix differs from the
/// previous key's in the block (or starts it), by `hash64(prefix)`. A user key whose
/// versions span two blocks is hashed in both; the writer's filter builder drops the repeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockMeta {
    /// The block's first internal key.
    pub first_key: Vec<u8>,
    /// The block's last internal key; becomes its index entry.
    pub last_key: Vec<u8>,
    /// Filter hashes of the block's user keys, consecutive duplicates removed.
    pub filter_hashes: Vec<u64>,
    /// Entries (values and tombstones).
    pub num_entries: u64,
    /// Tombstones among the entries.
    pub num_deletions: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Value sizes, bucketed as [`crate::properties::TableProperties::value_size_histogram`].
    pub value_size_histogram: [u64; VALUE_SIZE_BUCKETS],
    /// Smallest sequence number of any entry (`u64::MAX` when no entry has a valid trailer).
    pub smallest_seq: u64,
    /// Largest sequence number of any entry (0 when no entry has a valid trailer).
    pub largest_seq: u64,
    /// Sum of the entries' [`entry_hash`](crate::digest::entry_hash)es, modulo 2^64 (see [`crate::digest`]).
    pub digest_sum: u64,
    /// The blob references among the entries ([`ValueKind::BlobIndex`]), per blob file.
    pub blob_refs: BlobRefCounts,
    /// Blob references that do not decode: never added by a writer (the compaction iterator
    /// fails on one), and refused by `Table::verify_all`.
    pub bad_blob_refs: u64,
}

impl Default for BlockMeta {
    /// The meta of a block with no entries: the sequence range is empty (`MAX..=0`), so merging
    /// the first entry's sequence number with `min`/`max` needs no special case.
    fn default() -> Self {
        BlockMeta {
            first_key: Vec::new(),
            last_key: Vec::new(),
            filter_hashes: Vec::new(),
            num_entries: 0,
            num_deletions: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            value_size_histogram: [0; VALUE_SIZE_BUCKETS],
            smallest_seq: u64::MAX,
            largest_seq: 0,
            digest_sum: 0,
            blob_refs: BlobRefCounts::default(),
            bad_blob_refs: 0,
        }
    }
}

impl BlockMeta {
    /// Accounts one entry, except `last_key`, which the content builder sets once at seal time
    /// (one copy per block instead of one per entry).
    ///
    /// REQUIRES: entries arrive in internal-key order, and `hash` is
    /// [`EntryHash::of`]`(ikey, value)` (checked in debug builds).
    pub(crate) fn add_entry(&mut self, ikey: &[u8], value: &[u8], hash: EntryHash) {
        debug_assert_eq!(hash, EntryHash::of(ikey, value), "a hash of another entry");
        if self.num_entries == 0 {
            self.first_key.clear();
            self.first_key.extend_from_slice(ikey);
        }
        if self.filter_hashes.last() != Some(&hash.user_key) {
            self.filter_hashes.push(hash.user_key);
        }
        self.num_entries += 1;
        self.digest_sum = self.digest_sum.wrapping_add(hash.entry);
        self.raw_key_bytes += ikey.len() as u64;
        self.raw_value_bytes += value.len() as u64;
        self.value_size_histogram[value_size_bucket(value.len() as u64)] += 1;
        if let Some(p) = parse_internal_key(ikey) {
            self.smallest_seq = self.smallest_seq.min(p.seq);
            self.largest_seq = self.largest_seq.max(p.seq);
            match p.kind {
                ValueKind::Deletion => self.num_deletions += 1,
                // Writers check references before they add them (the compaction iterator
                // fails on one that does not decode), so one that does not is not counted.
                ValueKind::BlobIndex => match BlobRef::decode(value) {
                    Some(blob) => self.blob_refs.add(&blob),
                    None => self.bad_blob_refs += 1,
                },
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::hash64;
    use crate::key::make_internal_key;

    #[test]
    fn accumulates_entries_and_dedups_consecutive_hashes() {
        let mut m = BlockMeta::default();
        let entries = [
            (make_internal_key(b"a", 9, ValueKind::Value), vec![0u8; 0]),
            (make_internal_key(b"a", 4, ValueKind::Deletion), vec![]),
            (make_internal_key(b"b", 7, ValueKind::Value), vec![1; 100]),
            (make_internal_key(b"c", 2, ValueKind::Value), vec![1; 5000]),
        ];
        for (k, v) in &entries {
            m.add_entry(k, v, EntryHash::of(k, v));
        }
        assert_eq!(m.first_key, entries[0].0);
        assert!(m.last_key.is_empty(), "set by the content builder");
        assert_eq!(m.filter_hashes, [hash64(b"a"), hash64(b"b"), hash64(b"c")]);
        assert_eq!((m.num_entries, m.num_deletions), (4, 1));
        assert_eq!(m.raw_key_bytes, 4 * 9);
        assert_eq!(m.raw_value_bytes, 5100);
        assert_eq!(m.value_size_histogram[0], 2);
        assert_eq!(m.value_size_histogram[7], 1);
        assert_eq!(m.value_size_histogram[13], 1);
        assert_eq!((m.smallest_seq, m.largest_seq), (2, 9));
    }

    #[test]
    fn unparseable_trailers_count_as_entries_without_seq_or_kind() {
        let mut m = BlockMeta::default();
        let mut k = make_internal_key(b"x", 5, ValueKind::Value);
        let kind_at = k.len() - 8;
        k[kind_at] = 0x7f; // not a ValueKind
        m.add_entry(&k, b"v", EntryHash::of(&k, b"v"));
        assert_eq!((m.num_entries, m.num_deletions), (1, 0));
        assert_eq!((m.smallest_seq, m.largest_seq), (u64::MAX, 0));
        assert_eq!(m.filter_hashes, [hash64(b"x")]);
    }
}
