//! The entry digest: an order-independent checksum of a multiset of entries, so that what a
//! compaction wrote can be proven against what it read without reading any data.
//!
//! Each entry `(internal key, value)` hashes to 64 bits ([`entry_hash`]); a set of entries is
//! summarised by its count and the sum of its hashes modulo 2^64 ([`EntryDigest`]). Sums do
//! not depend on order or on how entries are grouped into blocks, files or sub-tasks, so for
//! every compaction, whoever ran it:
//!
//! ```text
//! sum(inputs) = sum(outputs) + sum(dropped)      for counts and digests alike
//! ```
//!
//! where the inputs' and outputs' digests are in their tables' properties and the dropped
//! entries' (shadowed versions, tombstones no one needs) are accumulated by the compaction
//! iterator. An entry lost, changed (key, sequence number, kind or value), invented or
//! duplicated breaks the equation unless the change happens to map to the same hash, which a
//! well-mixed 64-bit hash makes a 2^-64 event per fault. The internal key includes the
//! sequence number and kind, so a re-sequenced entry is a changed entry.
//!
//! What it does not catch: a writer that also forges the dropped sum (claims an entry it lost
//! as dropped), since the dropped entries are by definition not written anywhere. Catching
//! that takes reading the data (`--verify-outputs sample:K` or `full`); see
//! `docs/design/0005-compaction-offload.md` for the fault model.
//!
//! Frozen: the hash function, its seed and the way key and value are fed to it are part of the
//! table format (`docs/format/sst.md`, property `entry_digest`); changing them makes every
//! stored digest wrong.

use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::coding::get_fixed64;
use crate::filter::hash64;
use crate::key::TRAILER_LEN;

/// Mixed into the trailer's hash. Frozen.
pub const ENTRY_DIGEST_SEED: u64 = 0x5_1c1c_e0d1_9e57;

/// The 64-bit hash of one entry `(internal key, value)`: XXH3-64 of the value, seeded with the
/// user key's [`hash64`] (the bloom filter's hash, which the table writer computes for every
/// entry anyway) XOR the mixed trailer (sequence number and kind). Key, trailer and value are
/// hashed apart, so moving bytes across their boundaries changes the hash. See
/// [`entry_hash_parts`].
#[inline]
pub fn entry_hash(ikey: &[u8], value: &[u8]) -> u64 {
    EntryHash::of(ikey, value).entry
}

/// [`entry_hash`] from the user key's [`hash64`], the trailer (the internal key's last 8
/// bytes, little-endian) and the value: for callers that have the user key's hash already.
#[inline]
pub fn entry_hash_parts(user_key_hash: u64, trailer: u64, value: &[u8]) -> u64 {
    xxh3_64_with_seed(value, user_key_hash ^ fmix64(trailer ^ ENTRY_DIGEST_SEED))
}

/// An entry's [`entry_hash`] together with its user key's [`hash64`] (which the filter needs
/// as well), for a writer that has computed them to pass on: the table builder then does not
/// hash the entry a second time. Hashes handed on with an entry they do not belong to make
/// the table's digest wrong, which every check of the digest equation reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryHash {
    /// [`hash64`] of the user key.
    pub user_key: u64,
    /// [`entry_hash`] of the whole entry.
    pub entry: u64,
}

impl EntryHash {
    /// Both hashes of `(ikey, value)`.
    #[inline]
    pub fn of(ikey: &[u8], value: &[u8]) -> EntryHash {
        let split = ikey.len().saturating_sub(TRAILER_LEN);
        let (user_key, trailer) = ikey.split_at(split);
        EntryHash::parts(hash64(user_key), get_fixed64(trailer).unwrap_or(0), value)
    }

    /// Both hashes from the user key's [`hash64`], the trailer and the value.
    #[inline]
    pub fn parts(user_key_hash: u64, trailer: u64, value: &[u8]) -> EntryHash {
        EntryHash {
            user_key: user_key_hash,
            entry: entry_hash_parts(user_key_hash, trailer, value),
        }
    }
}

/// MurmurHash3's 64-bit finalizer: every input bit flips each output bit with probability
/// about 1/2, so neighbouring sequence numbers give unrelated seeds.
#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The count and hash sum of a multiset of entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EntryDigest {
    /// Entries.
    pub entries: u64,
    /// Sum of their [`entry_hash`]es, modulo 2^64.
    pub sum: u64,
}

impl EntryDigest {
    /// Adds one entry.
    #[inline]
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) {
        self.add_hash(entry_hash(ikey, value));
    }

    /// Adds one entry whose [`entry_hash`] is `hash`.
    #[inline]
    pub fn add_hash(&mut self, hash: u64) {
        self.entries += 1;
        self.sum = self.sum.wrapping_add(hash);
    }

    /// Adds every entry of `other`.
    pub fn merge(&mut self, other: EntryDigest) {
        self.entries += other.entries;
        self.sum = self.sum.wrapping_add(other.sum);
    }
}

impl std::ops::Add for EntryDigest {
    type Output = EntryDigest;

    fn add(mut self, other: EntryDigest) -> EntryDigest {
        self.merge(other);
        self
    }
}

impl std::iter::Sum for EntryDigest {
    fn sum<I: Iterator<Item = EntryDigest>>(iter: I) -> EntryDigest {
        iter.fold(EntryDigest::default(), |a, b| a + b)
    }
}

impl std::fmt::Display for EntryDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} entries, digest {:#018x}", self.entries, self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use proptest::prelude::*;

    #[test]
    fn the_hash_is_frozen() {
        // If this changes, every stored digest is wrong: see the module docs.
        let ikey = make_internal_key(b"key", 7, ValueKind::Value);
        assert_eq!(entry_hash(&ikey, b"value"), 0x1192_dda5_c4c8_4548);
        assert_eq!(entry_hash(b"", b""), 0x2728_d457_d5ec_8e0d);
        // The two ways of computing it agree.
        let trailer = u64::from_le_bytes(ikey[3..].try_into().unwrap());
        assert_eq!(
            entry_hash(&ikey, b"value"),
            entry_hash_parts(hash64(b"key"), trailer, b"value")
        );
        assert_eq!(
            EntryHash::of(&ikey, b"value"),
            EntryHash {
                user_key: hash64(b"key"),
                entry: entry_hash(&ikey, b"value")
            }
        );
    }

    #[test]
    fn every_part_of_an_entry_counts() {
        let base = entry_hash(&make_internal_key(b"key", 7, ValueKind::Value), b"value");
        for changed in [
            entry_hash(&make_internal_key(b"kez", 7, ValueKind::Value), b"value"),
            entry_hash(&make_internal_key(b"key", 8, ValueKind::Value), b"value"),
            entry_hash(&make_internal_key(b"key", 7, ValueKind::Deletion), b"value"),
            entry_hash(&make_internal_key(b"key", 7, ValueKind::Value), b"valuf"),
            // The same bytes, split differently between key and value.
            entry_hash(
                &make_internal_key(b"key", 7, ValueKind::Value)[..10],
                b"\x01value",
            ),
        ] {
            assert_ne!(changed, base);
        }
    }

    proptest! {
        #[test]
        fn the_sum_ignores_order_and_grouping(
            entries in proptest::collection::vec((any::<Vec<u8>>(), any::<Vec<u8>>()), 0..40),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut whole = EntryDigest::default();
            for (k, v) in &entries {
                whole.add(k, v);
            }
            let mut reversed = EntryDigest::default();
            for (k, v) in entries.iter().rev() {
                reversed.add(k, v);
            }
            let at = cut.index(entries.len() + 1);
            let (a, b) = entries.split_at(at);
            let part = |es: &[(Vec<u8>, Vec<u8>)]| {
                let mut d = EntryDigest::default();
                for (k, v) in es {
                    d.add(k, v);
                }
                d
            };
            prop_assert_eq!(whole, reversed);
            prop_assert_eq!(whole, part(a) + part(b));
            prop_assert_eq!(whole.entries, entries.len() as u64);
        }
    }
}
