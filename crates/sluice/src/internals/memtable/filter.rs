//! A memtable's Bloom filter of user keys, so that a lookup of a key the memtable does not hold
//! costs one cache line instead of a skiplist search (RocksDB's
//! `memtable_whole_key_filtering`). In readrandom over a 3M-key database most lookups miss the
//! memtable, and its search, a chain of cache misses, was about 45% of the reading thread.
//!
//! A *blocked* filter: every key's probes fall in one 64-byte line, so an insert or a lookup
//! touches one line. Bits are only ever set, with atomic `fetch_or`, so lookups need no lock.
//!
//! Visibility: the memtable's writer sets a key's bits before it links the key's node, and the
//! database publishes a write's sequence number (`Release`) only after both; a reader whose
//! snapshot includes the write acquired that number, so it sees the bits. A lookup racing an
//! insert it does not synchronise with may or may not see it, as with the skiplist itself.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use xxhash_rust::xxh3::xxh3_64;

/// Bits set per key. With about 10 bits per key (what
/// [`super::WRITE_BUFFER_BYTES_PER_FILTER_BYTE`] gives db_bench's entries) six probes in one
/// line keep false positives near 1%.
const PROBES: usize = 6;

/// Bits a probe index takes: 512 bits in a line.
const PROBE_BITS: u32 = 9;

/// One cache line of filter bits.
#[repr(align(64))]
struct Line([AtomicU64; 8]);

/// The filter. Its size is fixed when the memtable is made.
pub(super) struct Filter {
    lines: Box<[Line]>,
}

/// The hash a key is filtered by.
pub(super) fn key_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

impl Filter {
    /// A filter of `bytes` bytes (rounded down to whole lines); `None` if that is less than a
    /// line.
    pub(super) fn with_bytes(bytes: usize) -> Option<Filter> {
        let lines = bytes / size_of::<Line>();
        // Line indices are computed from 32 bits of the hash.
        let lines = lines.min(u32::MAX as usize);
        (lines > 0).then(|| Filter {
            lines: (0..lines)
                .map(|_| Line(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        })
    }

    /// Bytes the filter holds.
    pub(super) fn bytes(&self) -> usize {
        self.lines.len() * size_of::<Line>()
    }

    /// Records a key by its [`key_hash`].
    pub(super) fn insert(&self, hash: u64) {
        let (line, masks) = self.probe(hash);
        for (word, mask) in line.0.iter().zip(masks) {
            if mask != 0 {
                word.fetch_or(mask, Relaxed);
            }
        }
    }

    /// False if no key with this [`key_hash`] was inserted (before, in the sense of the module
    /// docs); true if one may have been.
    pub(super) fn may_contain(&self, hash: u64) -> bool {
        let (line, masks) = self.probe(hash);
        line.0
            .iter()
            .zip(masks)
            .all(|(word, mask)| word.load(Relaxed) & mask == mask)
    }

    /// The key's line, and the bits it sets there, per word.
    fn probe(&self, hash: u64) -> (&Line, [u64; 8]) {
        // Lemire's multiply-shift maps the high half of the hash onto the lines evenly.
        let index = ((hash >> 32) * self.lines.len() as u64) >> 32;
        let line = &self.lines[index as usize];
        // The probes come from a remix of the whole hash, so they are independent of the line.
        let mut bits = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut masks = [0u64; 8];
        for _ in 0..PROBES {
            let bit = (bits >> (64 - PROBE_BITS)) as usize;
            masks[bit / 64] |= 1 << (bit % 64);
            bits <<= PROBE_BITS;
        }
        (line, masks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn too_small_for_a_line_is_no_filter() {
        assert!(Filter::with_bytes(63).is_none());
        assert_eq!(Filter::with_bytes(130).map(|f| f.bytes()), Some(128));
    }

    #[test]
    fn false_positives_stay_near_one_percent_at_ten_bits_per_key() {
        // Smaller under Miri, which runs a few thousand times slower.
        let keys = if cfg!(miri) { 2_000 } else { 50_000 };
        let filter = Filter::with_bytes(keys * 10 / 8).expect("filter");
        for i in 0..keys {
            filter.insert(key_hash(format!("key{i:012}").as_bytes()));
        }
        let probes = 2 * keys;
        let positives = (0..probes)
            .filter(|i| filter.may_contain(key_hash(format!("absent{i:012}").as_bytes())))
            .count();
        let rate = positives as f64 / probes as f64;
        assert!(rate < 0.025, "false positive rate {rate}");
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: if cfg!(miri) { 4 } else { 256 },
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn never_a_false_negative(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..24), 1..300),
            bytes in 64usize..4096,
        ) {
            let filter = Filter::with_bytes(bytes).expect("at least a line");
            for k in &keys {
                filter.insert(key_hash(k));
            }
            for k in &keys {
                prop_assert!(filter.may_contain(key_hash(k)));
            }
        }
    }
}
