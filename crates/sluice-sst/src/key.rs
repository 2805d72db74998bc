//! Internal keys: a user key followed by an 8-byte trailer.
//!
//! ```text
//! internal key = user_key bytes || trailer (fixed64, little-endian)
//! trailer      = (sequence_number << 8) | kind
//! ```
//!
//! Internal keys sort by user key ascending (bytewise), then by trailer *descending*, so the
//! newest version of a user key comes first. A lookup for `(user_key, snapshot)` seeks to
//! `user_key || pack(snapshot, KIND_FOR_SEEK)` and lands on the newest version visible to the
//! snapshot.

use std::cmp::Ordering;

use crate::coding::{get_fixed64, put_fixed64};

/// A sequence number: every write gets the next one. Only the low 56 bits are usable.
pub type SeqNo = u64;

/// Largest sequence number that fits in a trailer.
pub const MAX_SEQ: SeqNo = (1 << 56) - 1;

/// Length of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What an entry means.
///
/// These values are written to disk (SSTables, WAL batches): they are frozen and must never be
/// renumbered. New kinds may only take new numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Deletion = 0,
    /// A value.
    Value = 1,
    /// A merge operand: combined with the older versions of the key by the database's
    /// merge operator (see [`crate::merge_operator`]) when read or compacted.
    Merge = 2,
    /// A range tombstone, `[key, value)`, in a write batch (RocksDB's number). It never
    /// appears among point entries: memtables and the version keep range tombstones apart
    /// ([`crate::range_del`]), so a point entry of this kind is corruption.
    RangeDeletion = 15,
    /// A value kept in a blob file (value separation, [`crate::blob`]): the entry's value is
    /// an encoded [`crate::blob::BlobRef`] (RocksDB's `kTypeBlobIndex`). Only flushes and
    /// compactions write it, into tables; a write batch holding it is corruption.
    BlobIndex = 17,
}

/// The kind used when building seek keys: the largest, so a seek key sorts before every entry
/// of the same user key and sequence number. Seek keys are never written to disk, so this
/// moves up whenever a larger kind is added.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::BlobIndex;

impl ValueKind {
    /// Decodes a kind byte; `None` for an unknown value (corrupt data).
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            2 => Some(ValueKind::Merge),
            15 => Some(ValueKind::RangeDeletion),
            17 => Some(ValueKind::BlobIndex),
            _ => None,
        }
    }

    /// The lower-case name dumps and logs print.
    pub fn name(self) -> &'static str {
        match self {
            ValueKind::Value => "value",
            ValueKind::Merge => "merge",
            ValueKind::RangeDeletion => "range-delete",
            ValueKind::Deletion => "delete",
            ValueKind::BlobIndex => "blob-ref",
        }
    }
}

/// `bytes` with every byte outside `' '..='~'`, and `\` itself, written as `\xNN`: the
/// form every dump shows keys in, unambiguous and reversible (the CLI takes keys back in it),
/// and a tab or newline in a key can never pass for a separator.
pub fn escape_bytes(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len());
    for &b in bytes {
        if (b' '..=b'~').contains(&b) && b != b'\\' {
            out.push(char::from(b));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// An internal key as `'user key' @ seq kind`, the user key's bytes written by `encode`
/// (usually [`escape_bytes`]); a key that does not parse is shown raw.
pub fn describe_internal_key(ikey: &[u8], encode: impl Fn(&[u8]) -> String) -> String {
    match parse_internal_key(ikey) {
        Some(k) => format!("'{}' @ {} {}", encode(k.user_key), k.seq, k.kind.name()),
        None => format!("<invalid internal key '{}'>", encode(ikey)),
    }
}

/// Packs a sequence number and kind into a trailer.
#[inline]
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQ, "sequence number {seq} overflows 56 bits");
    (seq << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `dst`.
#[inline]
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.reserve(user_key.len() + TRAILER_LEN);
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_trailer(seq, kind));
}

/// Builds the internal key for `(user_key, seq, kind)`.
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// The key to seek to in order to find the newest version of `user_key` visible at `snapshot`.
pub fn seek_key(user_key: &[u8], snapshot: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, snapshot, KIND_FOR_SEEK)
}

/// An internal key split into its parts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedInternalKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The sequence number of the write.
    pub seq: SeqNo,
    /// Value, tombstone or merge operand.
    pub kind: ValueKind,
}

/// Splits an internal key; `None` if it is shorter than the trailer or has an unknown kind.
#[inline]
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedInternalKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let (user_key, trailer) = ikey.split_at(split);
    let trailer = get_fixed64(trailer)?;
    Some(ParsedInternalKey {
        user_key,
        seq: trailer >> 8,
        kind: ValueKind::from_u8(trailer as u8)?,
    })
}

/// The user-key part of an internal key. Keys shorter than a trailer (which only corrupt data
/// produces, and decoders reject first) yield an empty user key rather than panicking.
#[inline]
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

/// The trailer of an internal key (0 if it is too short).
#[inline]
pub fn trailer(ikey: &[u8]) -> u64 {
    ikey.len()
        .checked_sub(TRAILER_LEN)
        .and_then(|s| get_fixed64(&ikey[s..]))
        .unwrap_or(0)
}

/// The first 8 bytes of an internal key's user key as a big-endian integer, zero-padded when
/// the user key is shorter. Two keys whose prefixes differ compare as their prefixes do
/// ([`compare_internal`] of the keys agrees with `<` of the prefixes), so a merge that keeps
/// each input's prefix compares two integers for most keys instead of two slices. Equal
/// prefixes say nothing ("ab" and "ab\0" both give `0x6162_0000_0000_0000`).
#[inline]
pub fn user_key_prefix(ikey: &[u8]) -> u64 {
    be_word(user_key(ikey))
}

/// Orders internal keys: user key ascending, then trailer (sequence, kind) descending.
#[inline]
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    compare_bytes(user_key(a), user_key(b)).then_with(|| trailer(b).cmp(&trailer(a)))
}

/// Strings whose common length (the shorter one's) is at most this are compared in
/// registers, 8 bytes at a time; longer ones by `memcmp`, whose vector loops win there.
const INLINE_COMPARE_BYTES: usize = 32;

/// Orders byte strings as `a.cmp(b)` does. For the short keys an LSM mostly holds, comparing
/// 8-byte big-endian words inline is cheaper than the call into `memcmp` that the slice order
/// makes: the merge, the compaction iterator and the host's check of an output compare keys
/// for every entry.
#[inline]
pub fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    if common > INLINE_COMPARE_BYTES {
        return a.cmp(b);
    }
    let (words_a, words_b) = (a[..common].chunks_exact(8), b[..common].chunks_exact(8));
    let (rest_a, rest_b) = (words_a.remainder(), words_b.remainder());
    for (wa, wb) in words_a.zip(words_b) {
        let (wa, wb) = (be_word(wa), be_word(wb));
        if wa != wb {
            return wa.cmp(&wb);
        }
    }
    // The remainders have the same length, so zero padding keeps their order.
    be_word(rest_a)
        .cmp(&be_word(rest_b))
        .then(a.len().cmp(&b.len()))
}

/// Up to 8 bytes as a big-endian integer, zero-padded on the right.
#[inline(always)]
fn be_word(bytes: &[u8]) -> u64 {
    match bytes.first_chunk::<8>() {
        Some(word) => u64::from_be_bytes(*word),
        None => {
            let mut padded = [0u8; 8];
            padded[..bytes.len()].copy_from_slice(bytes);
            u64::from_be_bytes(padded)
        }
    }
}

/// An owned internal key that sorts in internal-key order (for `BTreeMap`s, heaps, skiplists).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct InternalKey(pub Vec<u8>);

impl InternalKey {
    /// Builds the key for `(user_key, seq, kind)`.
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }

    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }

    /// The user-key part.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_sorts_first() {
        let old = make_internal_key(b"k", 5, ValueKind::Value);
        let new = make_internal_key(b"k", 9, ValueKind::Deletion);
        assert_eq!(compare_internal(&new, &old), Ordering::Less);
        let other = make_internal_key(b"ka", 100, ValueKind::Value);
        assert_eq!(compare_internal(&old, &other), Ordering::Less);
        // A seek key at snapshot 7 lands between them.
        let seek = seek_key(b"k", 7);
        assert_eq!(compare_internal(&new, &seek), Ordering::Less);
        assert_eq!(compare_internal(&seek, &old), Ordering::Less);
    }

    proptest::proptest! {
        /// Different prefixes order two keys as `compare_internal` does; equal ones are only
        /// a hint to compare the keys.
        #[test]
        fn prefixes_that_differ_order_keys_as_the_keys_do(
            a in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
            b in proptest::collection::vec(0u8..3, 0..12),
            seq_a in 0u64..4,
            seq_b in 0u64..4,
        ) {
            let (ka, kb) = (
                make_internal_key(&a, seq_a, ValueKind::Value),
                make_internal_key(&b, seq_b, ValueKind::Value),
            );
            let (pa, pb) = (user_key_prefix(&ka), user_key_prefix(&kb));
            if pa != pb {
                proptest::prop_assert_eq!(pa.cmp(&pb), compare_internal(&ka, &kb));
            }
            if a == b {
                proptest::prop_assert_eq!(pa, pb);
            }
        }
    }

    proptest::proptest! {
        /// The inline comparison is the slice order, for keys of every length around the
        /// word size and the inline limit, and for keys that share long prefixes.
        #[test]
        fn byte_strings_compare_as_slices_do(
            shared in proptest::collection::vec(0u8..3, 0..40),
            a in proptest::collection::vec(0u8..3, 0..12),
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
        ) {
            let (a, b) = ([shared.as_slice(), &a].concat(), [shared.as_slice(), &b].concat());
            proptest::prop_assert_eq!(compare_bytes(&a, &b), a.cmp(&b));
            proptest::prop_assert_eq!(compare_bytes(&b, &a), b.cmp(&a));
            proptest::prop_assert_eq!(compare_bytes(&a, &a), std::cmp::Ordering::Equal);
        }
    }

    #[test]
    fn a_prefix_is_the_first_eight_bytes_padded() {
        let key = |uk: &[u8]| make_internal_key(uk, 1, ValueKind::Value);
        assert_eq!(user_key_prefix(&key(b"")), 0);
        assert_eq!(user_key_prefix(&key(b"ab")), 0x6162_0000_0000_0000);
        assert_eq!(user_key_prefix(&key(b"ab\0")), 0x6162_0000_0000_0000);
        assert_eq!(
            user_key_prefix(&key(b"0123456789")),
            u64::from_be_bytes(*b"01234567")
        );
        // Shorter than a trailer (corrupt): the user key is empty.
        assert_eq!(user_key_prefix(b"z"), 0);
    }

    #[test]
    fn parse_round_trips_and_rejects_bad_input() {
        let k = make_internal_key(b"hello", 42, ValueKind::Value);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"hello"[..], 42, ValueKind::Value)
        );
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 7; // unknown kind
        assert!(parse_internal_key(&bad).is_none());
    }

    #[test]
    fn a_seek_key_sorts_before_every_kind_at_its_sequence() {
        // Otherwise a lookup at snapshot 7 would skip an entry written at exactly 7.
        let seek = seek_key(b"k", 7);
        for b in 0..=u8::MAX {
            if let Some(kind) = ValueKind::from_u8(b) {
                assert_eq!(kind as u8, b, "kinds round-trip");
                let entry = make_internal_key(b"k", 7, kind);
                assert_ne!(compare_internal(&entry, &seek), Ordering::Less, "{kind:?}");
            }
        }
    }
}
