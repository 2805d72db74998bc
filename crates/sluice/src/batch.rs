//! `WriteBatch`: a group of puts, deletes and merges applied atomically, and the payload of one WAL
//! record.
//!
//! The encoding is LevelDB's `WriteBatch` representation, kept in one buffer so that logging a
//! batch is a single `add_record(batch.data())`:
//!
//! ```text
//! rep      = sequence: fixed64 LE   -- sequence number of the first entry
//!            count:    fixed32 LE   -- number of entries
//!            entry * count
//! entry    = 0x01 (Value)    key: varint32-length-prefixed   value: varint32-length-prefixed
//!          | 0x00 (Deletion) key: varint32-length-prefixed
//!          | 0x02 (Merge)    key: varint32-length-prefixed   operand: varint32-length-prefixed
//!          | 0x0F (RangeDeletion) start: varint32-length-prefixed   end: varint32-length-prefixed
//!          | 0x10 (in keyspace)   keyspace id: varint32   entry  -- any of the above, nested once
//! ```
//!
//! Entry `i` (0-based) gets sequence number `sequence + i`. The kind bytes are
//! [`ValueKind`]'s frozen on-disk values. An entry without the `0x10` prefix belongs to the
//! default keyspace (id 0), so a batch that touches only it is encoded as LevelDB's.
//! `docs/format/wal.md` is the full specification.

use std::path::Path;
use std::sync::Arc;

use sluice_sst::coding::{
    get_fixed32, get_fixed64, get_length_prefixed, get_varint32, put_length_prefixed, put_varint32,
};
use sluice_sst::key::{MAX_SEQ, SeqNo, ValueKind};
use sluice_sst::{Error, Result};

use crate::db::open_id::OpenId;

/// Bytes before the first entry: sequence (8) + count (4).
pub const BATCH_HEADER_LEN: usize = 12;

/// The byte before an entry of a keyspace other than the default one, followed by the
/// keyspace's id. Frozen; not a [`ValueKind`] value.
const IN_KEYSPACE: u8 = 0x10;

/// The id of the default keyspace: its entries carry no keyspace prefix.
pub const DEFAULT_KEYSPACE_ID: u32 = 0;

/// Puts and deletes applied atomically, in order.
///
/// Invariant: `rep` always holds a well-formed batch (at least the header, then exactly
/// `count` entries), because it is built only by the methods below or validated by
/// [`WriteBatch::from_wal_record`].
#[derive(Clone)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// The database opens whose keyspace handles added entries (mostly none or one), each
    /// with the name of the first such keyspace: a database refuses the batch unless they are
    /// all its own (`db::open_id`), since an entry records only its keyspace's id. Not part
    /// of the encoding.
    handles_of: Vec<(OpenId, Arc<str>)>,
}

/// Batches are equal when they encode the same entries, whatever handles added them.
impl PartialEq for WriteBatch {
    fn eq(&self, other: &Self) -> bool {
        self.rep == other.rep
    }
}

impl Eq for WriteBatch {}

/// One entry of a batch, borrowed from it. `value` is empty for deletions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// The keyspace the entry belongs to ([`DEFAULT_KEYSPACE_ID`] unless written with one of
    /// the `_in` methods).
    pub keyspace: u32,
    /// Put or delete.
    pub kind: ValueKind,
    /// The user key.
    pub key: &'a [u8],
    /// The value, or the merge operand (empty for [`ValueKind::Deletion`]).
    pub value: &'a [u8],
}

impl WriteBatch {
    /// An empty batch with sequence number 0.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; BATCH_HEADER_LEN],
            handles_of: Vec::new(),
        }
    }

    /// Adds `key -> value`.
    ///
    /// # Panics
    /// If `key` or `value` is 4 GiB or longer (lengths are varint32 on disk), or the batch
    /// already holds `u32::MAX` entries. The database rejects such sizes before building a
    /// batch; this check only guarantees an oversized entry can never be encoded wrongly.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.add(
            DEFAULT_KEYSPACE_ID,
            ValueKind::Value,
            key.as_ref(),
            value.as_ref(),
        );
    }

    /// Adds `key -> value` in `keyspace` (a [`crate::Keyspace`] of the database the batch is
    /// written to). The batch stays atomic across keyspaces: they share one WAL.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn put_in(
        &mut self,
        keyspace: &crate::Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) {
        self.add_in(keyspace, ValueKind::Value, key.as_ref(), value.as_ref());
    }

    /// Adds a deletion of `key` in `keyspace`.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn delete_in(&mut self, keyspace: &crate::Keyspace, key: impl AsRef<[u8]>) {
        self.add_in(keyspace, ValueKind::Deletion, key.as_ref(), b"");
    }

    /// Adds merge operand `operand` for `key` in `keyspace`, combined by that keyspace's
    /// merge operator.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn merge_in(
        &mut self,
        keyspace: &crate::Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) {
        self.add_in(keyspace, ValueKind::Merge, key.as_ref(), operand.as_ref());
    }

    /// Adds a deletion of every key in `[start, end)` of `keyspace`.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn delete_range_in(
        &mut self,
        keyspace: &crate::Keyspace,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) {
        self.add_in(
            keyspace,
            ValueKind::RangeDeletion,
            start.as_ref(),
            end.as_ref(),
        );
    }

    /// Appends an entry of `kind` in `keyspace`, remembering which database the handle is of.
    fn add_in(&mut self, keyspace: &crate::Keyspace, kind: ValueKind, key: &[u8], value: &[u8]) {
        let open = keyspace.open_id();
        if !self.handles_of.iter().any(|(o, _)| o.is(open)) {
            self.handles_of
                .push((open.clone(), Arc::from(keyspace.name())));
        }
        self.add(keyspace.id(), kind, key, value);
    }

    /// Refuses the batch unless every keyspace handle that added entries is one of the
    /// database open `open`: another database's keyspace ids name other keyspaces here.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming the keyspace and both databases.
    pub(crate) fn check_handles(&self, open: &OpenId) -> crate::Result<()> {
        for (from, keyspace) in &self.handles_of {
            open.check(
                from,
                format_args!("the batch's entries in keyspace {keyspace:?}"),
            )?;
        }
        Ok(())
    }

    /// Appends an entry of `kind` in `keyspace` (see the module docs; a deletion's `value` is
    /// empty and not written).
    pub(crate) fn add(&mut self, keyspace: u32, kind: ValueKind, key: &[u8], value: &[u8]) {
        assert_u32_len(key);
        assert_u32_len(value);
        if keyspace != DEFAULT_KEYSPACE_ID {
            self.rep.push(IN_KEYSPACE);
            put_varint32(&mut self.rep, keyspace);
        }
        self.rep.push(kind as u8);
        put_length_prefixed(&mut self.rep, key);
        if kind != ValueKind::Deletion {
            put_length_prefixed(&mut self.rep, value);
        }
        self.set_count(
            self.count()
                .checked_add(1)
                .expect("write batch holds u32::MAX entries"),
        );
    }

    /// Adds merge operand `operand` for `key`: combined with the key's value by the
    /// database's merge operator ([`crate::Options::merge_operator`]) when it is read.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.add(
            DEFAULT_KEYSPACE_ID,
            ValueKind::Merge,
            key.as_ref(),
            operand.as_ref(),
        );
    }

    /// Adds a deletion of every key in `[start, end)` (a range tombstone): one entry, however
    /// many keys the range holds.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.add(
            DEFAULT_KEYSPACE_ID,
            ValueKind::RangeDeletion,
            start.as_ref(),
            end.as_ref(),
        );
    }

    /// Adds a deletion of `key`.
    ///
    /// # Panics
    /// As [`put`](Self::put).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.add(DEFAULT_KEYSPACE_ID, ValueKind::Deletion, key.as_ref(), b"");
    }

    /// Number of entries.
    pub fn count(&self) -> u32 {
        get_fixed32(self.rep.get(8..).unwrap_or_default()).unwrap_or(0)
    }

    /// True if the batch holds no entries.
    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Removes every entry and resets the sequence number to 0.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.handles_of.clear();
    }

    /// Encoded size in bytes: what the WAL record and the memtable insert will cost.
    pub fn approximate_size(&self) -> usize {
        self.rep.len()
    }

    /// Bytes allocated for the encoding (at least [`approximate_size`](Self::approximate_size)):
    /// what keeping this batch around for reuse costs.
    pub(crate) fn capacity(&self) -> usize {
        self.rep.capacity()
    }

    /// The encoded batch, ready to be written as one WAL record.
    pub fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Sequence number of the first entry.
    pub fn sequence(&self) -> SeqNo {
        get_fixed64(&self.rep).unwrap_or(0)
    }

    /// Sets the sequence number of the first entry; the commit pipeline calls this once the
    /// batch's place in the write order is known.
    pub fn set_sequence(&mut self, seq: SeqNo) {
        debug_assert!(seq <= MAX_SEQ, "sequence number {seq} overflows 56 bits");
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// Appends `other`'s entries after this batch's (group commit merges batches this way).
    /// This batch's sequence number is kept; `other`'s is ignored.
    ///
    /// # Panics
    /// If the combined count exceeds `u32::MAX`.
    pub fn append(&mut self, other: &WriteBatch) {
        let count = self
            .count()
            .checked_add(other.count())
            .expect("write batch holds u32::MAX entries");
        self.rep
            .extend_from_slice(other.rep.get(BATCH_HEADER_LEN..).unwrap_or_default());
        self.set_count(count);
        for (open, keyspace) in &other.handles_of {
            if !self.handles_of.iter().any(|(o, _)| o.is(open)) {
                self.handles_of.push((open.clone(), Arc::clone(keyspace)));
            }
        }
    }

    /// The entries in order. Each item is a `Result` so that a logic error surfaces as an error
    /// rather than a panic; a batch built by this module or accepted by
    /// [`from_wal_record`](Self::from_wal_record) never yields one.
    pub fn iter(&self) -> impl Iterator<Item = Result<BatchEntry<'_>>> {
        self.entries().map(|item| {
            item.map_err(|(pos, reason)| {
                Error::corruption("<in-memory write batch>", pos as u64, reason)
            })
        })
    }

    /// Takes ownership of a WAL record and validates it as a batch: header present, every
    /// entry well-formed, exactly `count` entries, no trailing bytes, sequence numbers within
    /// 56 bits. Errors are [`Error::Corruption`] naming the WAL file `path` and the record's
    /// `offset` in it (the reason gives the byte position inside the batch).
    ///
    /// The entries name their keyspaces by id only, and the batch no longer knows which
    /// database's handles added them: written to a database, each goes to that database's
    /// keyspace of its id. Write a decoded batch only to the database whose WAL it came from.
    pub fn from_wal_record(bytes: Vec<u8>, path: &Path, offset: u64) -> Result<WriteBatch> {
        let corrupt = |reason: String| Error::corruption(path, offset, reason);
        if bytes.len() < BATCH_HEADER_LEN {
            return Err(corrupt(format!(
                "write batch of {} bytes is shorter than its {BATCH_HEADER_LEN}-byte header",
                bytes.len()
            )));
        }
        let batch = WriteBatch {
            rep: bytes,
            handles_of: Vec::new(),
        };
        for entry in batch.entries() {
            entry.map_err(|(pos, reason)| corrupt(format!("write batch byte {pos}: {reason}")))?;
        }
        let last_seq = batch
            .sequence()
            .checked_add(u64::from(batch.count().saturating_sub(1)));
        if last_seq.is_none_or(|last| last > MAX_SEQ) {
            return Err(corrupt(format!(
                "write batch sequence {} with {} entries overflows 56 bits",
                batch.sequence(),
                batch.count()
            )));
        }
        Ok(batch)
    }

    fn set_count(&mut self, count: u32) {
        self.rep[8..BATCH_HEADER_LEN].copy_from_slice(&count.to_le_bytes());
    }

    fn entries(&self) -> Entries<'_> {
        Entries {
            rep: &self.rep,
            pos: BATCH_HEADER_LEN,
            remaining: self.count(),
            done: false,
        }
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence())
            .field("count", &self.count())
            .field("bytes", &self.rep.len())
            .finish()
    }
}

fn assert_u32_len(bytes: &[u8]) {
    assert!(
        u32::try_from(bytes.len()).is_ok(),
        "write batch keys and values must be shorter than 4 GiB"
    );
}

/// Decodes entries, checking the count and that nothing trails the last entry. Errors carry
/// the byte position in the batch and a reason; the iterator stops after the first.
struct Entries<'a> {
    rep: &'a [u8],
    pos: usize,
    remaining: u32,
    done: bool,
}

type EntryResult<'a> = std::result::Result<BatchEntry<'a>, (usize, String)>;

impl<'a> Entries<'a> {
    fn decode_one(&mut self) -> EntryResult<'a> {
        let at = self.pos;
        let rest = self.rep.get(at..).unwrap_or_default();
        let Some((&first, mut rest)) = rest.split_first() else {
            return Err((
                at,
                format!("batch ends with {} entries missing", self.remaining),
            ));
        };
        let mut kind_byte = first;
        let mut keyspace = DEFAULT_KEYSPACE_ID;
        let mut used = 0;
        if first == IN_KEYSPACE {
            let (id, id_len) = get_varint32(rest)
                .ok_or_else(|| (at, "truncated or malformed keyspace id".to_string()))?;
            if id == DEFAULT_KEYSPACE_ID {
                return Err((at, "keyspace prefix names the default keyspace".into()));
            }
            keyspace = id;
            let Some((&kind, after)) = rest.get(id_len..).and_then(<[u8]>::split_first) else {
                return Err((at, "keyspace prefix without an entry".into()));
            };
            kind_byte = kind;
            rest = after;
            used = 1 + id_len;
        }
        // Blob references are written by flushes into tables, never into a batch.
        let kind = ValueKind::from_u8(kind_byte)
            .filter(|&k| k != ValueKind::BlobIndex)
            .ok_or_else(|| (at, format!("unknown entry kind {kind_byte}")))?;
        let (key, key_len) = get_length_prefixed(rest)
            .ok_or_else(|| (at, "truncated or malformed key".to_string()))?;
        used += 1 + key_len;
        let value = match kind {
            ValueKind::Deletion => &[][..],
            ValueKind::Value
            | ValueKind::Merge
            | ValueKind::RangeDeletion
            | ValueKind::BlobIndex => {
                let (value, value_len) = rest
                    .get(key_len..)
                    .and_then(get_length_prefixed)
                    .ok_or_else(|| (at, "truncated or malformed value".to_string()))?;
                used += value_len;
                value
            }
        };
        self.pos = at + used;
        Ok(BatchEntry {
            keyspace,
            kind,
            key,
            value,
        })
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = EntryResult<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if self.remaining == 0 {
            self.done = true;
            let trailing = self.rep.len().saturating_sub(self.pos);
            return (trailing > 0)
                .then(|| Err((self.pos, format!("{trailing} bytes follow the last entry"))));
        }
        self.remaining -= 1;
        let item = self.decode_one();
        self.done = item.is_err();
        Some(item)
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use proptest::prelude::*;

    fn collect(batch: &WriteBatch) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
        batch
            .iter()
            .map(|e| {
                let e = e.unwrap();
                (e.kind, e.key.to_vec(), e.value.to_vec())
            })
            .collect()
    }

    fn wal_path() -> PathBuf {
        PathBuf::from("/db/000042.log")
    }

    #[test]
    fn put_delete_iterate_in_order() {
        let mut b = WriteBatch::new();
        assert!(b.is_empty());
        b.put(b"k1", b"v1");
        b.delete(b"k2");
        b.put(b"", b"");
        b.merge(b"k3", b"+1");
        b.set_sequence(100);
        assert_eq!((b.count(), b.sequence()), (4, 100));
        assert_eq!(
            collect(&b),
            vec![
                (ValueKind::Value, b"k1".to_vec(), b"v1".to_vec()),
                (ValueKind::Deletion, b"k2".to_vec(), vec![]),
                (ValueKind::Value, vec![], vec![]),
                (ValueKind::Merge, b"k3".to_vec(), b"+1".to_vec()),
            ]
        );
        assert_eq!(b.approximate_size(), b.data().len());
    }

    #[test]
    fn encoding_is_leveldb_layout() {
        let mut b = WriteBatch::new();
        b.set_sequence(0x0102);
        b.put(b"ab", b"c");
        b.delete(b"d");
        let mut expected = vec![0x02, 0x01, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0];
        expected.extend_from_slice(&[1, 2, b'a', b'b', 1, b'c', 0, 1, b'd']);
        assert_eq!(b.data(), &expected[..]);
    }

    #[test]
    fn append_and_clear() {
        let mut a = WriteBatch::new();
        a.put(b"a", b"1");
        a.set_sequence(7);
        let mut b = WriteBatch::new();
        b.delete(b"b");
        b.put(b"c", b"3");
        b.set_sequence(99);
        a.append(&b);
        assert_eq!((a.count(), a.sequence()), (3, 7));
        assert_eq!(
            collect(&a).iter().map(|e| e.1.clone()).collect::<Vec<_>>(),
            [b"a", b"b", b"c"]
        );
        a.clear();
        assert_eq!(a, WriteBatch::new());
    }

    #[test]
    fn from_wal_record_round_trips() {
        let mut b = WriteBatch::new();
        b.put(b"key", [7; 300]);
        b.delete(b"gone");
        b.set_sequence(12345);
        let decoded = WriteBatch::from_wal_record(b.data().to_vec(), &wal_path(), 0).unwrap();
        assert_eq!(decoded, b);
        assert_eq!(collect(&decoded), collect(&b));
    }

    fn corruption_of(bytes: Vec<u8>) -> String {
        match WriteBatch::from_wal_record(bytes, &wal_path(), 4096) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!((file, offset), (wal_path(), 4096));
                reason
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn from_wal_record_rejects_malformed_batches() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        b.delete(b"d");
        let good = b.data().to_vec();

        assert!(corruption_of(good[..5].to_vec()).contains("header"));
        let mut more = good.clone();
        more[8] = 3; // count says 3, only 2 present
        assert!(corruption_of(more).contains("missing"));
        let mut fewer = good.clone();
        fewer[8] = 1; // count says 1: the deletion is trailing garbage
        assert!(corruption_of(fewer).contains("follow the last entry"));
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(corruption_of(trailing).contains("follow the last entry"));
        let mut bad_kind = good.clone();
        bad_kind[BATCH_HEADER_LEN] = 9;
        assert!(corruption_of(bad_kind).contains("unknown entry kind 9"));
        let mut overflow = good.clone();
        overflow[..8].copy_from_slice(&MAX_SEQ.to_le_bytes());
        assert!(corruption_of(overflow).contains("overflows"));
        // Every truncation of a valid batch is rejected.
        for cut in 0..good.len() {
            corruption_of(good[..cut].to_vec());
        }
        let mut in_default = good.clone();
        in_default.splice(BATCH_HEADER_LEN..BATCH_HEADER_LEN, [IN_KEYSPACE, 0]);
        assert!(corruption_of(in_default).contains("names the default keyspace"));
        let mut nested = good.clone();
        nested.splice(
            BATCH_HEADER_LEN..BATCH_HEADER_LEN,
            [IN_KEYSPACE, 3, IN_KEYSPACE],
        );
        assert!(corruption_of(nested).contains("unknown entry kind 16"));
        let mut b = WriteBatch::new();
        b.add(300, ValueKind::Value, b"k", b"v");
        let in_keyspace = b.data().to_vec();
        for cut in BATCH_HEADER_LEN..in_keyspace.len() {
            corruption_of(in_keyspace[..cut].to_vec());
        }
    }

    fn op() -> impl Strategy<Value = (u8, Vec<u8>, Vec<u8>)> {
        (
            0u8..4,
            proptest::collection::vec(any::<u8>(), 0..20),
            proptest::collection::vec(any::<u8>(), 0..200),
        )
    }

    proptest! {
        #[test]
        fn random_ops_round_trip(
            ops in proptest::collection::vec(op(), 0..30),
            keyspaces in proptest::collection::vec(prop_oneof![Just(0u32), 1..u32::MAX], 30),
            seq in 0..MAX_SEQ / 2,
        ) {
            let mut b = WriteBatch::new();
            b.set_sequence(seq);
            for (kind, k, v) in &ops {
                match kind {
                    0 => b.delete(k),
                    1 => b.put(k, v),
                    2 => b.merge(k, v),
                    _ => b.delete_range(k, v),
                }
            }
            // The same entries, each in a keyspace: ids survive, entries are unchanged.
            let mut in_keyspaces = WriteBatch::new();
            let kinds = [ValueKind::Deletion, ValueKind::Value, ValueKind::Merge, ValueKind::RangeDeletion];
            for ((kind, k, v), &id) in ops.iter().zip(&keyspaces) {
                in_keyspaces.add(id, kinds[usize::from(*kind).min(3)], k, v);
            }
            let decoded_in =
                WriteBatch::from_wal_record(in_keyspaces.data().to_vec(), &wal_path(), 0).unwrap();
            let ids: Vec<u32> = decoded_in.iter().map(|e| e.unwrap().keyspace).collect();
            prop_assert_eq!(&ids[..], &keyspaces[..ops.len()]);
            prop_assert_eq!(collect(&decoded_in), collect(&b));
            let decoded = WriteBatch::from_wal_record(b.data().to_vec(), &wal_path(), 0).unwrap();
            prop_assert_eq!(decoded.sequence(), seq);
            let expected: Vec<_> = ops
                .iter()
                .map(|(kind, k, v)| match kind {
                    0 => (ValueKind::Deletion, k.clone(), vec![]),
                    1 => (ValueKind::Value, k.clone(), v.clone()),
                    2 => (ValueKind::Merge, k.clone(), v.clone()),
                    _ => (ValueKind::RangeDeletion, k.clone(), v.clone()),
                })
                .collect();
            prop_assert_eq!(collect(&decoded), expected);
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(b) = WriteBatch::from_wal_record(bytes.clone(), &wal_path(), 0) {
                // Accepted batches iterate without error and re-encode identically.
                prop_assert_eq!(b.iter().filter(|e| e.is_ok()).count(), b.count() as usize);
                prop_assert_eq!(b.data(), &bytes[..]);
            }
        }
    }
}
