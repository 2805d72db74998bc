//! Table properties: counts, sizes, key range and value-size histogram of one table, written
//! once in the properties block and read when the table opens.
//!
//! ```text
//! properties block = property*            (tags strictly increasing)
//! property         = varint32 tag || varint32 len || value (len bytes)
//! integer value    = one varint64 filling the whole value
//! bytes value      = the raw bytes (smallest_key, largest_key)
//! histogram value  = 24 varint64s, bucket 0 first
//! ```
//!
//! Tags (frozen: never renumber or reuse): 1 num_entries, 2 num_deletions, 3 num_data_blocks,
//! 4 raw_key_bytes, 5 raw_value_bytes, 6 data_bytes, 7 index_bytes, 8 filter_bytes,
//! 9 smallest_key, 10 largest_key, 11 smallest_seq, 12 largest_seq, 13 compression,
//! 14 value_size_histogram, 15 entry_digest (8 bytes, little-endian: the sum of the entries'
//! [`crate::digest::entry_hash`]es), 16 prefix_extractor (the [`crate::prefix`] extractor's
//! name, when the filter also holds key prefixes), 17 blob_refs (the table's references into
//! blob files, a [`BlobRefCounts`] encoding; absent when it has none), 18 task_nonce (8
//! bytes, little-endian: the nonce of the offloaded task whose output the table is; absent
//! in tables the host wrote for itself). Readers skip tags they do not know, so new properties may
//! be added under new tags without a format version change; a missing property reads as zero /
//! empty (the digest as absent: tables written before it existed).

use std::path::Path;

use crate::blob::BlobRefCounts;
use crate::coding::{get_varint32, get_varint64, put_varint32, put_varint64, varint_length};
use crate::compression::CompressionType;
use crate::digest::EntryDigest;
use crate::table::BlockMeta;
use crate::{Error, Result};

/// Buckets of the value-size histogram.
pub const VALUE_SIZE_BUCKETS: usize = 24;

mod tag {
    pub const NUM_ENTRIES: u32 = 1;
    pub const NUM_DELETIONS: u32 = 2;
    pub const NUM_DATA_BLOCKS: u32 = 3;
    pub const RAW_KEY_BYTES: u32 = 4;
    pub const RAW_VALUE_BYTES: u32 = 5;
    pub const DATA_BYTES: u32 = 6;
    pub const INDEX_BYTES: u32 = 7;
    pub const FILTER_BYTES: u32 = 8;
    pub const SMALLEST_KEY: u32 = 9;
    pub const LARGEST_KEY: u32 = 10;
    pub const SMALLEST_SEQ: u32 = 11;
    pub const LARGEST_SEQ: u32 = 12;
    pub const COMPRESSION: u32 = 13;
    pub const VALUE_SIZE_HISTOGRAM: u32 = 14;
    pub const ENTRY_DIGEST: u32 = 15;
    pub const PREFIX_EXTRACTOR: u32 = 16;
    pub const BLOB_REFS: u32 = 17;
    pub const TASK_NONCE: u32 = 18;
}

/// What a table holds, summarised when it was written.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TableProperties {
    /// Entries (values and tombstones).
    pub num_entries: u64,
    /// Tombstones among the entries.
    pub num_deletions: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// Sum of internal key lengths, uncompressed.
    pub raw_key_bytes: u64,
    /// Sum of value lengths, uncompressed.
    pub raw_value_bytes: u64,
    /// Stored bytes of the data blocks, trailers included.
    pub data_bytes: u64,
    /// Stored bytes of the index block, trailer included.
    pub index_bytes: u64,
    /// Stored bytes of the filter block, trailer included (0 without a filter).
    pub filter_bytes: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Largest internal key (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Smallest sequence number of any entry.
    pub smallest_seq: u64,
    /// Largest sequence number of any entry.
    pub largest_seq: u64,
    /// The compression the table was written with (single blocks may be stored uncompressed).
    pub compression: CompressionType,
    /// Bucket `i` counts values whose size is below `2^i` bytes and not counted by an earlier
    /// bucket (bucket 0: empty values); the last bucket counts every value of `2^22` bytes or
    /// more.
    pub value_size_histogram: [u64; VALUE_SIZE_BUCKETS],
    /// Sum of the entries' [`crate::digest::entry_hash`]es, modulo 2^64; `None` in a table
    /// written before the property existed.
    pub entry_digest: Option<u64>,
    /// The [`crate::prefix::PrefixExtractor::name`] whose prefixes the filter also holds;
    /// `None` when it holds whole keys only.
    pub prefix_extractor: Option<String>,
    /// The table's references into blob files ([`crate::key::ValueKind::BlobIndex`] entries).
    pub blob_refs: BlobRefCounts,
    /// The nonce of the offloaded task this table answers (a worker's output): the host
    /// refuses an output that carries another task's, such as one replayed from an earlier
    /// task. `None` in tables the host wrote for itself (its copy of a worker's part for `full`
    /// verification answers the part's task and carries its nonce).
    pub task_nonce: Option<u64>,
}

/// The histogram bucket of a value of `size` bytes.
#[inline]
pub fn value_size_bucket(size: u64) -> usize {
    ((u64::BITS - size.leading_zeros()) as usize).min(VALUE_SIZE_BUCKETS - 1)
}

impl TableProperties {
    /// Folds in the entries of one data block; the table writer calls this for each block it
    /// appends. Leaves the block, byte and compression fields to the writer.
    ///
    /// REQUIRES: blocks arrive in key order and each has at least one entry (checked in debug
    /// builds), so the first block sets `smallest_key` and every block moves `largest_key`.
    pub(crate) fn add_block(&mut self, meta: &BlockMeta) {
        debug_assert!(meta.num_entries > 0, "data blocks are never empty");
        if self.num_entries == 0 {
            self.smallest_key.clone_from(&meta.first_key);
            self.smallest_seq = meta.smallest_seq;
        } else {
            self.smallest_seq = self.smallest_seq.min(meta.smallest_seq);
        }
        self.largest_key.clone_from(&meta.last_key);
        self.largest_seq = self.largest_seq.max(meta.largest_seq);
        self.entry_digest = Some(
            self.entry_digest
                .unwrap_or_default()
                .wrapping_add(meta.digest_sum),
        );
        self.num_entries += meta.num_entries;
        self.num_deletions += meta.num_deletions;
        self.blob_refs.merge(&meta.blob_refs);
        self.raw_key_bytes += meta.raw_key_bytes;
        self.raw_value_bytes += meta.raw_value_bytes;
        for (sum, n) in self
            .value_size_histogram
            .iter_mut()
            .zip(meta.value_size_histogram)
        {
            *sum += n;
        }
    }

    /// The table's entry count and digest ([`crate::digest`]); `None` if the table was written
    /// before digests were recorded (an empty table's is known: zero).
    pub fn digest(&self) -> Option<EntryDigest> {
        match (self.entry_digest, self.num_entries) {
            (Some(sum), entries) => Some(EntryDigest { entries, sum }),
            (None, 0) => Some(EntryDigest::default()),
            (None, _) => None,
        }
    }

    /// Estimated share (0.0..=1.0) of values larger than `bytes`, from the histogram. Buckets
    /// that straddle `bytes` count in proportion to the part of their size range above it; the
    /// open last bucket counts whole, so thresholds of 4 MiB or more are overestimated.
    pub fn share_of_values_larger_than(&self, bytes: u64) -> f64 {
        // Sums in f64: counts decoded from disk may add up past u64::MAX.
        let (mut larger, mut total) = (0.0f64, 0.0f64);
        for (i, &count) in self.value_size_histogram.iter().enumerate() {
            // Bucket i covers sizes lo..=hi.
            let (lo, hi) = match i {
                0 => (0, 0),
                _ => (1u64 << (i - 1), (1u64 << i) - 1),
            };
            let share = if i == VALUE_SIZE_BUCKETS - 1 || lo > bytes {
                1.0
            } else if hi <= bytes {
                0.0
            } else {
                (hi - bytes) as f64 / (hi - lo + 1) as f64
            };
            larger += share * count as f64;
            total += count as f64;
        }
        if total == 0.0 {
            return 0.0;
        }
        (larger / total).min(1.0)
    }

    /// Encodes the properties block contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(160 + self.smallest_key.len() + self.largest_key.len());
        let int = |out: &mut Vec<u8>, t: u32, v: u64| {
            put_varint32(out, t);
            put_varint32(out, varint_length(v) as u32);
            put_varint64(out, v);
        };
        let bytes = |out: &mut Vec<u8>, t: u32, v: &[u8]| {
            put_varint32(out, t);
            put_varint32(out, v.len() as u32);
            out.extend_from_slice(v);
        };
        int(&mut out, tag::NUM_ENTRIES, self.num_entries);
        int(&mut out, tag::NUM_DELETIONS, self.num_deletions);
        int(&mut out, tag::NUM_DATA_BLOCKS, self.num_data_blocks);
        int(&mut out, tag::RAW_KEY_BYTES, self.raw_key_bytes);
        int(&mut out, tag::RAW_VALUE_BYTES, self.raw_value_bytes);
        int(&mut out, tag::DATA_BYTES, self.data_bytes);
        int(&mut out, tag::INDEX_BYTES, self.index_bytes);
        int(&mut out, tag::FILTER_BYTES, self.filter_bytes);
        bytes(&mut out, tag::SMALLEST_KEY, &self.smallest_key);
        bytes(&mut out, tag::LARGEST_KEY, &self.largest_key);
        int(&mut out, tag::SMALLEST_SEQ, self.smallest_seq);
        int(&mut out, tag::LARGEST_SEQ, self.largest_seq);
        int(&mut out, tag::COMPRESSION, self.compression as u64);
        let mut hist = Vec::with_capacity(VALUE_SIZE_BUCKETS * 2);
        for &c in &self.value_size_histogram {
            put_varint64(&mut hist, c);
        }
        bytes(&mut out, tag::VALUE_SIZE_HISTOGRAM, &hist);
        if let Some(digest) = self.entry_digest {
            bytes(&mut out, tag::ENTRY_DIGEST, &digest.to_le_bytes());
        }
        if let Some(name) = &self.prefix_extractor {
            bytes(&mut out, tag::PREFIX_EXTRACTOR, name.as_bytes());
        }
        if !self.blob_refs.is_empty() {
            let mut refs = Vec::new();
            self.blob_refs.encode_to(&mut refs);
            bytes(&mut out, tag::BLOB_REFS, &refs);
        }
        if let Some(nonce) = self.task_nonce {
            bytes(&mut out, tag::TASK_NONCE, &nonce.to_le_bytes());
        }
        out
    }

    /// Decodes a properties block read from `file` at `offset` (the block's offset).
    pub fn decode(data: &[u8], file: &Path, offset: u64) -> Result<TableProperties> {
        let mut p = TableProperties::default();
        let mut pos = 0usize;
        let mut last_tag = 0u32;
        while pos < data.len() {
            let corrupt = |what: &str| {
                Error::corruption(file, offset, format!("properties block byte {pos}: {what}"))
            };
            let rest = data.get(pos..).unwrap_or_default();
            let (t, n1) = get_varint32(rest).ok_or_else(|| corrupt("truncated tag"))?;
            let (len, n2) = get_varint32(rest.get(n1..).unwrap_or_default())
                .ok_or_else(|| corrupt("truncated length"))?;
            let start = n1 + n2;
            let value = rest
                .get(start..start.saturating_add(len as usize))
                .ok_or_else(|| corrupt("value runs past the block"))?;
            if t <= last_tag {
                return Err(corrupt(&format!(
                    "tag {t} after tag {last_tag}: tags must increase"
                )));
            }
            last_tag = t;
            let int = || match get_varint64(value) {
                Some((v, n)) if n == value.len() => Ok(v),
                _ => Err(corrupt(&format!("property {t} is not one varint"))),
            };
            match t {
                tag::NUM_ENTRIES => p.num_entries = int()?,
                tag::NUM_DELETIONS => p.num_deletions = int()?,
                tag::NUM_DATA_BLOCKS => p.num_data_blocks = int()?,
                tag::RAW_KEY_BYTES => p.raw_key_bytes = int()?,
                tag::RAW_VALUE_BYTES => p.raw_value_bytes = int()?,
                tag::DATA_BYTES => p.data_bytes = int()?,
                tag::INDEX_BYTES => p.index_bytes = int()?,
                tag::FILTER_BYTES => p.filter_bytes = int()?,
                tag::SMALLEST_KEY => p.smallest_key = value.to_vec(),
                tag::LARGEST_KEY => p.largest_key = value.to_vec(),
                tag::SMALLEST_SEQ => p.smallest_seq = int()?,
                tag::LARGEST_SEQ => p.largest_seq = int()?,
                tag::COMPRESSION => {
                    let v = int()?;
                    p.compression = u8::try_from(v)
                        .ok()
                        .and_then(CompressionType::from_u8)
                        .ok_or_else(|| corrupt(&format!("unknown compression type {v}")))?;
                }
                tag::VALUE_SIZE_HISTOGRAM => {
                    let mut at = 0;
                    for bucket in p.value_size_histogram.iter_mut() {
                        let (c, n) = get_varint64(value.get(at..).unwrap_or_default())
                            .ok_or_else(|| corrupt("histogram has fewer than 24 buckets"))?;
                        *bucket = c;
                        at += n;
                    }
                    if at != value.len() {
                        return Err(corrupt("histogram has more than 24 buckets"));
                    }
                }
                tag::ENTRY_DIGEST => {
                    let bytes: [u8; 8] = value
                        .try_into()
                        .map_err(|_| corrupt("entry digest is not 8 bytes"))?;
                    p.entry_digest = Some(u64::from_le_bytes(bytes));
                }
                tag::PREFIX_EXTRACTOR => {
                    let name = std::str::from_utf8(value)
                        .map_err(|_| corrupt("prefix extractor name is not UTF-8"))?;
                    p.prefix_extractor = Some(name.to_string());
                }
                tag::BLOB_REFS => {
                    p.blob_refs = BlobRefCounts::decode(value)
                        .ok_or_else(|| corrupt("blob references do not decode"))?;
                }
                tag::TASK_NONCE => {
                    let bytes: [u8; 8] = value
                        .try_into()
                        .map_err(|_| corrupt("task nonce is not 8 bytes"))?;
                    p.task_nonce = Some(u64::from_le_bytes(bytes));
                }
                _ => {} // A property from a newer writer: skipped.
            }
            pos += start + value.len();
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use proptest::prelude::*;

    fn sample() -> TableProperties {
        let mut p = TableProperties {
            compression: CompressionType::Zstd,
            ..Default::default()
        };
        // Two blocks of three entries, as the table writer folds them in.
        let mut block = BlockMeta::default();
        for (i, size) in [0usize, 1, 100, 5000, 40_000, 1 << 23]
            .into_iter()
            .enumerate()
        {
            let kind = if i == 2 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let k = make_internal_key(format!("k{i}").as_bytes(), 10 + i as u64, kind);
            let value = vec![0; size];
            block.add_entry(&k, &value, crate::digest::EntryHash::of(&k, &value));
            block.last_key = k;
            if i % 3 == 2 {
                p.add_block(&std::mem::take(&mut block));
            }
        }
        p.num_data_blocks = 3;
        p.data_bytes = 12345;
        p.index_bytes = 99;
        p.task_nonce = Some(0x0bad_cafe_f00d_1234);
        p.filter_bytes = 64;
        p
    }

    #[test]
    fn accumulates_and_round_trips() {
        let p = sample();
        assert_eq!(p.num_entries, 6);
        assert_eq!(p.num_deletions, 1);
        assert_eq!((p.smallest_seq, p.largest_seq), (10, 15));
        assert_eq!(
            p.smallest_key,
            make_internal_key(b"k0", 10, ValueKind::Value)
        );
        assert_eq!(
            p.largest_key,
            make_internal_key(b"k5", 15, ValueKind::Value)
        );
        assert_eq!(p.value_size_histogram[0], 1);
        assert_eq!(p.value_size_histogram[1], 1);
        assert_eq!(p.value_size_histogram[7], 1); // 100 < 128
        assert_eq!(p.value_size_histogram[13], 1); // 5000 < 8192
        assert_eq!(p.value_size_histogram[16], 1); // 40000 < 65536
        assert_eq!(p.value_size_histogram[23], 1); // 8 MiB: the open last bucket
        let bytes = p.encode();
        assert_eq!(
            TableProperties::decode(&bytes, Path::new("t"), 0).unwrap(),
            p
        );
    }

    #[test]
    fn blob_references_are_counted_per_file_and_round_trip() {
        use crate::blob::{BlobRef, BlobRefTally};
        let mut block = BlockMeta::default();
        let refs = [(7, 100), (3, 40), (7, 60)];
        for (i, (file_number, size)) in refs.into_iter().enumerate() {
            let k = make_internal_key(format!("b{i}").as_bytes(), 1, ValueKind::BlobIndex);
            let blob = BlobRef {
                file_number,
                offset: 16,
                size,
            };
            let value = blob.encode();
            block.add_entry(&k, &value, crate::digest::EntryHash::of(&k, &value));
            block.last_key = k;
        }
        let mut p = TableProperties::default();
        p.add_block(&block);
        assert_eq!(
            p.blob_refs.get(7),
            BlobRefTally {
                refs: 2,
                bytes: 160
            }
        );
        assert_eq!(p.blob_refs.get(3), BlobRefTally { refs: 1, bytes: 40 });
        let decoded = TableProperties::decode(&p.encode(), Path::new("t"), 0).unwrap();
        assert_eq!(decoded, p);
        assert!(
            sample().blob_refs.is_empty(),
            "a table without references has none"
        );
    }

    #[test]
    fn share_of_large_values() {
        let p = sample();
        // Larger than 32 KiB: the 40 000 byte value (almost all of its bucket) and the 8 MiB one.
        let s = p.share_of_values_larger_than(32 * 1024);
        assert!((s - 2.0 / 6.0).abs() < 0.001, "{s}");
        assert_eq!(p.share_of_values_larger_than(0), 5.0 / 6.0);
        assert_eq!(
            TableProperties::default().share_of_values_larger_than(10),
            0.0
        );
    }

    #[test]
    fn unknown_tags_are_skipped_and_order_is_enforced() {
        let p = sample();
        let mut bytes = p.encode();
        // A property from a future writer.
        put_varint32(&mut bytes, 99);
        put_varint32(&mut bytes, 3);
        bytes.extend_from_slice(b"new");
        assert_eq!(
            TableProperties::decode(&bytes, Path::new("t"), 0).unwrap(),
            p
        );
        // Repeating a tag is corruption, naming the file and offset.
        let mut dup = p.encode();
        dup.extend_from_slice(&[1, 1, 0]);
        match TableProperties::decode(&dup, Path::new("t"), 77) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!((file.as_path(), offset), (Path::new("t"), 77));
                assert!(reason.contains("tags must increase"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn truncation_is_corruption() {
        let bytes = sample().encode();
        for cut in 1..bytes.len() {
            // Every strict prefix either decodes (cut on a property boundary) or is corruption.
            if let Err(e) = TableProperties::decode(&bytes[..cut], Path::new("t"), 0) {
                assert!(e.is_corruption());
            }
        }
        assert!(TableProperties::decode(&bytes[..bytes.len() - 1], Path::new("t"), 0).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes: Vec<u8>) {
            let _ = TableProperties::decode(&bytes, Path::new("x"), 0);
        }
    }
}
