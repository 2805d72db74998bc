//! The table's bloom filter over user keys: one per table, pinned in memory while it is open.
//!
//! It is a cache-line-blocked bloom filter: a key's hash picks one 64-byte line and all of its
//! probes fall inside that line, so a negative lookup costs one cache miss instead of one per
//! probe. At 10 bits per key the false-positive rate is about 1% (a plain bloom filter gets
//! about 0.8%; the blocked one trades that for speed on large filters).
//!
//! ```text
//! filter block = bit lines (num_lines * 64 bytes) || num_probes (u8) || kind (u8 = 1)
//!
//! h        = hash64(user_key)                         (defined below; frozen)
//! line     = ((h & 0xffff_ffff) * num_lines) >> 32    (u64 arithmetic)
//! g        = (h >> 32) as u32
//! repeat num_probes times:
//!     bit  = g >> 23                                  (0..512, bit index within the line)
//!     test/set byte[line * 64 + bit / 8] bit (bit % 8)
//!     g    = g * 0x9e37_79b9                          (wrapping u32)
//! ```
//!
//! The hash, the probe sequence and the kind value are part of the on-disk format: frozen.
//! Another filter kind would take a new kind byte.

/// Bytes per line: one cache line.
const LINE_BYTES: usize = 64;
/// Bits per line.
const LINE_BITS: u32 = (LINE_BYTES * 8) as u32;
/// Kind byte of the cache-line-blocked bloom filter. Frozen.
const KIND_BLOCKED_BLOOM: u8 = 1;
/// Bytes after the bit lines: num_probes, kind.
const FILTER_TRAILER_LEN: usize = 2;
/// Most probes a filter may use (more only costs time).
const MAX_PROBES: u8 = 30;
/// Largest accepted `bits_per_key`; larger settings are clamped.
pub const MAX_BITS_PER_KEY: u32 = 100;

const P1: u64 = 0x9e37_79b9_7f4a_7c15;
const P2: u64 = 0xc2b2_ae3d_27d4_eb4f;
const P3: u64 = 0x1656_67b1_9e37_79f9;

/// The 64-bit hash the filter uses. Frozen: changing it would make every existing filter answer
/// "absent" for keys it holds.
///
/// ```text
/// h = (len * P1) ^ P3 (wrapping)
/// for each 8-byte little-endian word w (the last one zero-padded):
///     h = rotl(h ^ rotl(w * P2, 31) * P1, 27) * P1 + P3
/// h ^= h >> 33; h *= 0xff51afd7ed558ccd; h ^= h >> 33; h *= 0xc4ceb9fe1a85ec53; h ^= h >> 33
/// P1 = 0x9e3779b97f4a7c15, P2 = 0xc2b2ae3d27d4eb4f, P3 = 0x165667b19e3779f9
/// ```
pub fn hash64(data: &[u8]) -> u64 {
    #[inline]
    fn round(h: u64, w: u64) -> u64 {
        let w = w.wrapping_mul(P2).rotate_left(31).wrapping_mul(P1);
        (h ^ w).rotate_left(27).wrapping_mul(P1).wrapping_add(P3)
    }
    let mut h = (data.len() as u64).wrapping_mul(P1) ^ P3;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = round(h, u64::from_le_bytes(w));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = round(h, u64::from_le_bytes(w));
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The probe positions of `h` in a filter of `num_lines` lines, as (byte index, bit mask).
#[inline]
fn probes(h: u64, num_lines: usize, num_probes: u8) -> impl Iterator<Item = (usize, u8)> {
    let line = (((h & 0xffff_ffff) * num_lines as u64) >> 32) as usize;
    let base = line * LINE_BYTES;
    let mut g = (h >> 32) as u32;
    (0..num_probes).map(move |_| {
        let bit = g >> (32 - LINE_BITS.trailing_zeros());
        g = g.wrapping_mul(0x9e37_79b9);
        (base + (bit / 8) as usize, 1u8 << (bit % 8))
    })
}

/// Collects the keys of one table and builds its filter. Keeps 8 bytes per distinct key.
#[derive(Debug, Clone)]
pub struct BloomFilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomFilterBuilder {
    /// A builder spending about `bits_per_key` bits per distinct key (clamped to
    /// 1..=[`MAX_BITS_PER_KEY`]).
    pub fn new(bits_per_key: u32) -> Self {
        BloomFilterBuilder {
            bits_per_key: bits_per_key.clamp(1, MAX_BITS_PER_KEY),
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. Consecutive duplicates (the versions of one user key, which tables store
    /// next to each other) are counted once.
    pub fn add_key(&mut self, user_key: &[u8]) {
        self.add_hash(hash64(user_key));
    }

    /// Adds a key by its precomputed [`hash64`]; sets exactly the bits `add_key` would. A hash
    /// equal to the previous one is skipped, so the repeated hash of a user key whose versions
    /// span two data blocks (each block lists it) counts once towards the filter's size.
    pub fn add_hash(&mut self, h: u64) {
        if self.hashes.last() != Some(&h) {
            self.hashes.push(h);
        }
    }

    /// Distinct keys added so far (consecutive duplicates counted once).
    pub fn num_keys(&self) -> usize {
        self.hashes.len()
    }

    /// Builds the filter block contents.
    pub fn finish(self) -> Vec<u8> {
        let num_probes = ((f64::from(self.bits_per_key) * std::f64::consts::LN_2).round() as u8)
            .clamp(1, MAX_PROBES);
        let total_bits = (self.hashes.len() as u64).saturating_mul(u64::from(self.bits_per_key));
        let num_lines = total_bits
            .div_ceil(u64::from(LINE_BITS))
            .clamp(1, u64::from(u32::MAX)) as usize;
        let mut out = vec![0u8; num_lines * LINE_BYTES + FILTER_TRAILER_LEN];
        for &h in &self.hashes {
            for (byte, mask) in probes(h, num_lines, num_probes) {
                if let Some(b) = out.get_mut(byte) {
                    *b |= mask;
                }
            }
        }
        let n = out.len();
        out[n - 2] = num_probes;
        out[n - 1] = KIND_BLOCKED_BLOOM;
        out
    }
}

/// A decoded filter; answers "may this table contain `user_key`?" with no false negatives.
#[derive(Clone)]
pub struct BloomFilter {
    data: Vec<u8>,
    num_lines: usize,
    num_probes: u8,
}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("num_lines", &self.num_lines)
            .field("num_probes", &self.num_probes)
            .finish()
    }
}

impl BloomFilter {
    /// Validates filter block contents. The error names what is wrong; the caller knows which
    /// file and offset the bytes came from and reports the corruption.
    pub fn new(data: Vec<u8>) -> Result<Self, String> {
        let &[.., num_probes, kind] = data.as_slice() else {
            return Err(format!("filter of {} bytes has no trailer", data.len()));
        };
        let bits_len = data.len() - FILTER_TRAILER_LEN;
        if kind != KIND_BLOCKED_BLOOM {
            return Err(format!("unknown filter kind {kind}"));
        }
        if !(1..=MAX_PROBES).contains(&num_probes) {
            return Err(format!(
                "filter uses {num_probes} probes (allowed 1..={MAX_PROBES})"
            ));
        }
        let num_lines = bits_len / LINE_BYTES;
        if !bits_len.is_multiple_of(LINE_BYTES) || num_lines == 0 || num_lines > u32::MAX as usize {
            return Err(format!(
                "filter bit array of {bits_len} bytes is not a whole number of lines"
            ));
        }
        Ok(BloomFilter {
            data,
            num_lines,
            num_probes,
        })
    }

    /// False only if `user_key` was certainly not added.
    #[inline]
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(hash64(user_key))
    }

    /// [`BloomFilter::may_contain`] for a precomputed [`hash64`] (lets a lookup that probes
    /// many tables hash the key once).
    #[inline]
    pub fn may_contain_hash(&self, h: u64) -> bool {
        probes(h, self.num_lines, self.num_probes)
            .all(|(byte, mask)| self.data.get(byte).is_none_or(|b| b & mask != 0))
    }

    /// Size of the filter in bytes.
    pub fn size_bytes(&self) -> usize {
        self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(i: u64) -> Vec<u8> {
        format!("user-key-{i:010}").into_bytes()
    }

    #[test]
    fn hash_is_frozen() {
        // Changing these values changes the on-disk format.
        assert_ne!(hash64(b""), 0);
        assert_eq!(hash64(b"a"), hash64(b"a"));
        assert_ne!(hash64(b"a"), hash64(b"a\0"), "length is hashed");
        let golden = [hash64(b"hello"), hash64(b"user-key-0000000001")];
        assert_eq!(golden, [0xc162_e50d_fe29_4498, 0x8005_1c7a_87cf_efe9]);
    }

    #[test]
    fn no_false_negatives_and_about_one_percent_false_positives() {
        let n = 50_000;
        let mut b = BloomFilterBuilder::new(10);
        for i in 0..n {
            b.add_key(&key(i));
        }
        let bytes = b.finish();
        assert_eq!(bytes.len(), (n as usize * 10).div_ceil(512) * 64 + 2);
        let f = BloomFilter::new(bytes).unwrap();
        assert!((0..n).all(|i| f.may_contain(&key(i))));
        let trials = 200_000;
        let fp = (n..n + trials).filter(|&i| f.may_contain(&key(i))).count();
        let rate = fp as f64 / trials as f64;
        assert!((0.004..0.015).contains(&rate), "false-positive rate {rate}");
    }

    #[test]
    fn duplicates_count_once_and_empty_filter_rejects_everything() {
        let mut b = BloomFilterBuilder::new(10);
        for _ in 0..5 {
            b.add_key(b"same");
        }
        assert_eq!(b.num_keys(), 1);
        let f = BloomFilter::new(BloomFilterBuilder::new(10).finish()).unwrap();
        assert!((0..1000).all(|i| !f.may_contain(&key(i))));
    }

    #[test]
    fn add_hash_builds_the_same_filter_as_add_key() {
        let (mut by_key, mut by_hash) = (BloomFilterBuilder::new(10), BloomFilterBuilder::new(10));
        // Two "blocks" sharing user key 5 at the boundary, as block metas list it.
        let blocks: [&[u64]; 2] = [&[1, 2, 3, 4, 5], &[5, 6, 7]];
        for block in blocks {
            for &i in block {
                by_key.add_key(&key(i));
                by_hash.add_hash(hash64(&key(i)));
            }
        }
        assert_eq!(by_hash.num_keys(), 7, "the boundary key counts once");
        assert_eq!(by_key.num_keys(), 7);
        assert_eq!(by_key.finish(), by_hash.finish());
    }

    /// The bits a filter sets are part of the format: a filter built today must answer as the
    /// ones already on disk do.
    #[test]
    fn the_filter_bits_are_frozen() {
        let mut b = BloomFilterBuilder::new(10);
        for i in 0..1000 {
            b.add_key(&key(i));
        }
        let bytes = b.finish();
        assert_eq!(bytes.len(), 20 * 64 + 2);
        assert_eq!(crc32c::crc32c(&bytes), 0xff87_e2da);
    }

    #[test]
    fn malformed_filters_are_rejected() {
        let good = {
            let mut b = BloomFilterBuilder::new(10);
            b.add_key(b"x");
            b.finish()
        };
        let n = good.len();
        let mut bad_kind = good.clone();
        bad_kind[n - 1] = 9;
        let mut zero_probes = good.clone();
        zero_probes[n - 2] = 0;
        let ragged = [&good[..n - 3], &good[n - 2..]].concat();
        for bad in [vec![], vec![1], bad_kind, zero_probes, ragged, vec![7, 1]] {
            assert!(BloomFilter::new(bad).is_err());
        }
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes: Vec<u8>, probe: Vec<u8>) {
            if let Ok(f) = BloomFilter::new(bytes) {
                let _ = f.may_contain(&probe);
            }
        }

        #[test]
        fn added_keys_are_always_found(keys: Vec<Vec<u8>>, bits in 1u32..30) {
            let mut b = BloomFilterBuilder::new(bits);
            for k in &keys {
                b.add_key(k);
            }
            let f = BloomFilter::new(b.finish()).unwrap();
            for k in &keys {
                prop_assert!(f.may_contain(k));
            }
        }
    }
}
