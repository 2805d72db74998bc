//! `VersionEdit`: one atomic change to the set of live files, and its MANIFEST encoding.
//!
//! An edit is a sequence of tagged fields; the MANIFEST is a log of edits, and replaying them
//! in order rebuilds the tree. Every tag value below is written to disk and frozen.
//!
//! ```text
//! edit   = field*
//! field  = tag: varint32, then by tag:
//!   1  comparator        length-prefixed UTF-8 name
//!   2  log_number        varint64
//!   3  next_file_number  varint64
//!   4  last_sequence     varint64
//!   5  compact_pointer   level: varint32, internal key: length-prefixed
//!   6  deleted_file      level: varint32, file number: varint64
//!   20 new_file          level: varint32, body: length-prefixed (file fields, below)
//!   21 range_map         body: length-prefixed (partitioned mode's whole range map, encoded
//!                        as `version::range_map` documents); replaces the previous map
//!   22 wal               log number: varint64, synced bytes: varint64 -- the WAL exists
//!                        and was synced through that many bytes (0 when just created)
//!   23 value_format      length-prefixed UTF-8 name: how values are stored ("ttl": each
//!                        followed by its write time); absent means as the user gave them
//!   24 range_tombstone   seq: varint64, start: length-prefixed, end: length-prefixed --
//!                        every version older than seq of the keys in [start, end) is deleted
//!   25 drop_tombstone    seq: varint64 -- the range tombstone of that sequence number is no
//!                        longer needed (nothing it covers is left)
//!   26 default_log_number varint64 -- the default keyspace's entries in WALs numbered below
//!                        this are in tables (absent: log_number). log_number itself is then
//!                        the oldest WAL any keyspace still needs
//!   27 keyspace          id: varint32, name: length-prefixed UTF-8 -- a keyspace was created;
//!                        its tree lives in `keyspaces/<id>/`
//!   28 drop_keyspace     id: varint32 -- the keyspace was dropped
//!   29 next_keyspace_id  varint32 -- the id the next keyspace gets (ids are never reused)
//!   30 new_blob_file     body: length-prefixed (`version::blob_files` documents it) -- a
//!                        blob file the edit's tables reference
//!   31 keyspace_log_number id: varint32, log number: varint64 -- keyspace id's own MANIFEST
//!                        recorded that its entries in WALs below this are in its tables,
//!                        durably, before the database gave up older WALs
//!   32 merge_operator    length-prefixed UTF-8 name of the merge operator the tree's merge
//!                        operands are written for; an open with another operator (or none)
//!                        is refused
//!
//! file fields = (field_tag: varint32, value: length-prefixed bytes)*
//!   1 number (varint64)          2 file_size (varint64)
//!   3 smallest (internal key)    4 largest (internal key)
//!   5 smallest_seq (varint64)    6 largest_seq (varint64)
//!   7 num_entries (varint64)     8 num_deletions (varint64)
//!   9 raw_value_bytes (varint64) 10 dir_index (varint32)
//!   11 range_clean_seq (varint64)
//!   13 file_checksum (varint32: CRC32C of every byte of the file)
//!   14 identity (varint64: `sluice_sst::table::TableIdentity`, checked at every open)
//!   76 blob_refs (12 | mandatory: the table's references per blob file, a
//!      `sluice_sst::blob::BlobRefCounts` encoding; absent when it has none)
//! ```
//!
//! File fields 1-6 are required; 7-11 default to 0 when absent; 13 and 14 are absent in
//! MANIFESTs of older builds. A reader skips file fields it
//! does not know, unless bit 6 of the field tag (`MANDATORY_FIELD_BIT`) is set, which marks a
//! field an older reader must not ignore. Levels are below [`NUM_LEVELS`]. Scalar fields appear
//! at most once per edit. `docs/format/manifest.md` is the full specification.

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use sluice_sst::blob::BlobRefCounts;
use sluice_sst::coding::{
    get_length_prefixed, get_varint32, get_varint64, put_length_prefixed, put_varint32,
    put_varint64,
};
use sluice_sst::key::{SeqNo, describe_internal_key, escape_bytes, parse_internal_key};
use sluice_sst::range_del::RangeTombstone;
use sluice_sst::table::TableIdentity;
use sluice_sst::{Error, Result};

use super::blob_files::BlobFileMetaData;
use super::range_map::RangeMap;

/// Number of levels in the tree.
pub const NUM_LEVELS: usize = 7;

// Edit tags. Frozen: never renumber. Tag 7 (LevelDB's NewFile, a different layout) is
// deliberately unused so that a LevelDB MANIFEST is rejected rather than misread.
const TAG_COMPARATOR: u32 = 1;
const TAG_LOG_NUMBER: u32 = 2;
const TAG_NEXT_FILE_NUMBER: u32 = 3;
const TAG_LAST_SEQUENCE: u32 = 4;
const TAG_COMPACT_POINTER: u32 = 5;
const TAG_DELETED_FILE: u32 = 6;
const TAG_NEW_FILE: u32 = 20;
const TAG_RANGE_MAP: u32 = 21;
const TAG_WAL: u32 = 22;
const TAG_VALUE_FORMAT: u32 = 23;
const TAG_RANGE_TOMBSTONE: u32 = 24;
const TAG_DROP_TOMBSTONE: u32 = 25;
const TAG_DEFAULT_LOG_NUMBER: u32 = 26;
const TAG_KEYSPACE: u32 = 27;
const TAG_DROP_KEYSPACE: u32 = 28;
const TAG_NEXT_KEYSPACE_ID: u32 = 29;
const TAG_NEW_BLOB_FILE: u32 = 30;
const TAG_KEYSPACE_LOG_NUMBER: u32 = 31;
const TAG_MERGE_OPERATOR: u32 = 32;

// New-file field tags. Frozen: never renumber.
const FIELD_NUMBER: u32 = 1;
const FIELD_FILE_SIZE: u32 = 2;
const FIELD_SMALLEST: u32 = 3;
const FIELD_LARGEST: u32 = 4;
const FIELD_SMALLEST_SEQ: u32 = 5;
const FIELD_LARGEST_SEQ: u32 = 6;
const FIELD_NUM_ENTRIES: u32 = 7;
const FIELD_NUM_DELETIONS: u32 = 8;
const FIELD_RAW_VALUE_BYTES: u32 = 9;
const FIELD_DIR_INDEX: u32 = 10;
const FIELD_RANGE_CLEAN_SEQ: u32 = 11;
/// Mandatory: a reader that ignored it would think the blob files it names unreferenced, and
/// delete them.
const FIELD_BLOB_REFS: u32 = 12 | MANDATORY_FIELD_BIT;
const FIELD_FILE_CHECKSUM: u32 = 13;
const FIELD_IDENTITY: u32 = 14;

/// A new-file field tag with this bit set must be understood by the reader; without it, an
/// unknown field is skipped. Frozen.
pub const MANDATORY_FIELD_BIT: u32 = 1 << 6;

/// What the MANIFEST records about one table file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct FileMetaData {
    /// File number (names `NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry.
    pub largest_seq: SeqNo,
    /// Entries (puts and deletions).
    pub num_entries: u64,
    /// Deletion entries.
    pub num_deletions: u64,
    /// Sum of value lengths before compression.
    pub raw_value_bytes: u64,
    /// Which of `Options::data_dirs` holds the file; 0 = the main directory.
    pub dir_index: u32,
    /// Every range tombstone with a sequence number up to this one has had what it covers
    /// in this file dropped: the compaction that wrote the file applied them all, with no
    /// snapshot below this number. 0 for flushed and ingested files. Once every file under a
    /// tombstone has it at or above the tombstone, the tombstone can go.
    pub range_clean_seq: SeqNo,
    /// The table's references into blob files: while any live table has some, the blob
    /// file stays ([`super::blob_files`]).
    pub blob_refs: BlobRefCounts,
    /// CRC32C of every byte of the file (RocksDB's `file_checksum`), computed from bytes the
    /// host wrote or read itself, never from a worker's word. Compared by full reads:
    /// [`crate::Db::verify_file_checksums`], `check`, backups. `None` for tables recorded
    /// by older builds.
    pub file_checksum: Option<u32>,
    /// What every open of the table compares with the file (with its size), so a file put in
    /// its place is `Corruption` instead of read as valid. `None` for older builds' tables.
    pub identity: Option<TableIdentity>,
}

/// One atomic change to the version: scalar updates, compaction pointers, files removed and
/// files added. Applied all-or-nothing (it is one MANIFEST record).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Name of the key comparator; checked against the database's on open.
    pub comparator: Option<String>,
    /// WAL files numbered below this are fully flushed and may be deleted.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The largest sequence number in any flushed file.
    pub last_sequence: Option<SeqNo>,
    /// Per level, the internal key where the next round-robin compaction starts.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// `(level, file number)` of files removed.
    pub deleted_files: BTreeSet<(usize, u64)>,
    /// `(level, file)` of files added.
    pub new_files: Vec<(usize, FileMetaData)>,
    /// Partitioned mode: the range map from this edit on (the whole map, not a change).
    pub range_map: Option<RangeMap>,
    /// `(log number, bytes synced)` of WALs that exist: recorded when a WAL is created (0
    /// bytes) and when it is closed. Recovery fails if a recorded WAL is missing, shorter than
    /// recorded, or damaged below that length. A WAL stops being tracked once `log_number`
    /// passes it.
    pub wals: Vec<(u64, u64)>,
    /// How values are stored, when not as the user gave them: [`VALUE_FORMAT_TTL`]. Set in
    /// the edit that creates a database and in every MANIFEST's first edit after it.
    pub value_format: Option<String>,
    /// The name of the merge operator ([`sluice_sst::merge_operator::MergeOperator::name`])
    /// the tree's merge operands are written for. Set by the first open with an operator and
    /// in every MANIFEST's first edit after it.
    pub merge_operator: Option<String>,
    /// Range tombstones added: by a flush (those of its memtable), or in a MANIFEST's first
    /// edit (all of them).
    pub range_tombstones: Vec<RangeTombstone>,
    /// Sequence numbers of range tombstones removed because nothing they cover is left.
    pub dropped_tombstones: Vec<SeqNo>,
    /// The default keyspace's entries in WALs below this are in tables. Set apart from
    /// `log_number` once other keyspaces share the WAL: `log_number` is then the oldest WAL
    /// any of them needs, and replay skips the default keyspace's entries below this one.
    pub default_log_number: Option<u64>,
    /// `(id, name)` of keyspaces created.
    pub keyspaces_created: Vec<(u32, String)>,
    /// Ids of keyspaces dropped.
    pub keyspaces_dropped: Vec<u32>,
    /// The id the next keyspace gets.
    pub next_keyspace_id: Option<u32>,
    /// `(id, log number)`: what keyspace `id`'s MANIFEST had made durable as its WAL boundary
    /// when the database advanced its floor. A recovered keyspace below it lost an
    /// acknowledged record (`db::open_tree`).
    pub keyspace_log_numbers: Vec<(u32, u64)>,
    /// Blob files the edit's new tables reference, written by the job that wrote them (or,
    /// in a MANIFEST's first edit, every blob file of the version).
    pub new_blob_files: Vec<BlobFileMetaData>,
}

/// The value format of a database opened with [`crate::Options::ttl`]: every value is
/// followed by its write time ([`sluice_sst::ttl`]).
pub const VALUE_FORMAT_TTL: &str = "ttl";

impl VersionEdit {
    /// Records that `meta` is added at `level` (< [`NUM_LEVELS`]).
    pub fn add_file(&mut self, level: usize, meta: FileMetaData) {
        debug_assert!(level < NUM_LEVELS, "level {level} out of range");
        self.new_files.push((level, meta));
    }

    /// Records that file `number` is removed from `level` (< [`NUM_LEVELS`]).
    pub fn delete_file(&mut self, level: usize, number: u64) {
        debug_assert!(level < NUM_LEVELS, "level {level} out of range");
        self.deleted_files.insert((level, number));
    }

    /// Appends the encoding to `dst`. Levels must be below [`NUM_LEVELS`].
    pub fn encode(&self, dst: &mut Vec<u8>) {
        if let Some(name) = &self.comparator {
            put_varint32(dst, TAG_COMPARATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        let scalars = [
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE_NUMBER, self.next_file_number),
            (TAG_LAST_SEQUENCE, self.last_sequence),
        ];
        for (tag, value) in scalars {
            if let Some(v) = value {
                put_varint32(dst, tag);
                put_varint64(dst, v);
            }
        }
        for (level, key) in &self.compact_pointers {
            put_varint32(dst, TAG_COMPACT_POINTER);
            put_varint32(dst, *level as u32);
            put_length_prefixed(dst, key);
        }
        for &(level, number) in &self.deleted_files {
            put_varint32(dst, TAG_DELETED_FILE);
            put_varint32(dst, level as u32);
            put_varint64(dst, number);
        }
        let mut body = Vec::new();
        for (level, f) in &self.new_files {
            body.clear();
            put_varint_field(&mut body, FIELD_NUMBER, f.number);
            put_varint_field(&mut body, FIELD_FILE_SIZE, f.file_size);
            put_field(&mut body, FIELD_SMALLEST, &f.smallest);
            put_field(&mut body, FIELD_LARGEST, &f.largest);
            put_varint_field(&mut body, FIELD_SMALLEST_SEQ, f.smallest_seq);
            put_varint_field(&mut body, FIELD_LARGEST_SEQ, f.largest_seq);
            put_varint_field(&mut body, FIELD_NUM_ENTRIES, f.num_entries);
            put_varint_field(&mut body, FIELD_NUM_DELETIONS, f.num_deletions);
            put_varint_field(&mut body, FIELD_RAW_VALUE_BYTES, f.raw_value_bytes);
            put_varint_field(&mut body, FIELD_DIR_INDEX, u64::from(f.dir_index));
            if f.range_clean_seq != 0 {
                put_varint_field(&mut body, FIELD_RANGE_CLEAN_SEQ, f.range_clean_seq);
            }
            if let Some(crc) = f.file_checksum {
                put_varint_field(&mut body, FIELD_FILE_CHECKSUM, u64::from(crc));
            }
            if let Some(identity) = f.identity {
                put_varint_field(&mut body, FIELD_IDENTITY, identity.as_u64());
            }
            if !f.blob_refs.is_empty() {
                let mut refs = Vec::new();
                f.blob_refs.encode_to(&mut refs);
                put_field(&mut body, FIELD_BLOB_REFS, &refs);
            }
            put_varint32(dst, TAG_NEW_FILE);
            put_varint32(dst, *level as u32);
            put_length_prefixed(dst, &body);
        }
        if let Some(map) = &self.range_map {
            body.clear();
            map.encode(&mut body);
            put_varint32(dst, TAG_RANGE_MAP);
            put_length_prefixed(dst, &body);
        }
        for &(number, synced) in &self.wals {
            put_varint32(dst, TAG_WAL);
            put_varint64(dst, number);
            put_varint64(dst, synced);
        }
        if let Some(format) = &self.value_format {
            put_varint32(dst, TAG_VALUE_FORMAT);
            put_length_prefixed(dst, format.as_bytes());
        }
        if let Some(name) = &self.merge_operator {
            put_varint32(dst, TAG_MERGE_OPERATOR);
            put_length_prefixed(dst, name.as_bytes());
        }
        for t in &self.range_tombstones {
            put_varint32(dst, TAG_RANGE_TOMBSTONE);
            put_varint64(dst, t.seq);
            put_length_prefixed(dst, &t.start);
            put_length_prefixed(dst, &t.end);
        }
        for &seq in &self.dropped_tombstones {
            put_varint32(dst, TAG_DROP_TOMBSTONE);
            put_varint64(dst, seq);
        }
        if let Some(n) = self.default_log_number {
            put_varint32(dst, TAG_DEFAULT_LOG_NUMBER);
            put_varint64(dst, n);
        }
        for (id, name) in &self.keyspaces_created {
            put_varint32(dst, TAG_KEYSPACE);
            put_varint32(dst, *id);
            put_length_prefixed(dst, name.as_bytes());
        }
        for &id in &self.keyspaces_dropped {
            put_varint32(dst, TAG_DROP_KEYSPACE);
            put_varint32(dst, id);
        }
        if let Some(id) = self.next_keyspace_id {
            put_varint32(dst, TAG_NEXT_KEYSPACE_ID);
            put_varint32(dst, id);
        }
        for &(id, n) in &self.keyspace_log_numbers {
            put_varint32(dst, TAG_KEYSPACE_LOG_NUMBER);
            put_varint32(dst, id);
            put_varint64(dst, n);
        }
        for blob in &self.new_blob_files {
            body.clear();
            blob.encode_body(&mut body);
            put_varint32(dst, TAG_NEW_BLOB_FILE);
            put_length_prefixed(dst, &body);
        }
    }

    /// Decodes an edit. `path` and `offset` name the MANIFEST record it came from; every error
    /// is [`Error::Corruption`] naming them, with the byte position inside the edit.
    pub fn decode(src: &[u8], path: &Path, offset: u64) -> Result<VersionEdit> {
        let mut d = Decoder {
            src,
            pos: 0,
            path,
            offset,
        };
        let mut edit = VersionEdit::default();
        while d.pos < src.len() {
            let at = d.pos;
            let tag = d.varint32("tag")?;
            match tag {
                TAG_COMPARATOR => {
                    let name = String::from_utf8(d.bytes("comparator name")?.to_vec())
                        .map_err(|_| d.error_at(at, "comparator name is not UTF-8"))?;
                    if edit.comparator.replace(name).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_LOG_NUMBER | TAG_NEXT_FILE_NUMBER | TAG_LAST_SEQUENCE => {
                    let v = d.varint64("number")?;
                    let slot = match tag {
                        TAG_LOG_NUMBER => &mut edit.log_number,
                        TAG_NEXT_FILE_NUMBER => &mut edit.next_file_number,
                        _ => &mut edit.last_sequence,
                    };
                    if slot.replace(v).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_COMPACT_POINTER => {
                    let level = d.level()?;
                    let key = d.bytes("compact pointer")?.to_vec();
                    edit.compact_pointers.push((level, key));
                }
                TAG_DELETED_FILE => {
                    let level = d.level()?;
                    let number = d.varint64("deleted file number")?;
                    edit.deleted_files.insert((level, number));
                }
                TAG_NEW_FILE => {
                    let level = d.level()?;
                    let body_at = d.pos;
                    let body = d.bytes("new file record")?;
                    let meta = decode_file(body).map_err(|(pos, reason)| {
                        d.error_at(body_at + pos, format!("new file record: {reason}"))
                    })?;
                    edit.new_files.push((level, meta));
                }
                TAG_RANGE_MAP => {
                    let body_at = d.pos;
                    let body = d.bytes("range map")?;
                    let map = RangeMap::decode(body).map_err(|(pos, reason)| {
                        d.error_at(body_at + pos, format!("range map: {reason}"))
                    })?;
                    if edit.range_map.replace(map).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_WAL => {
                    let number = d.varint64("WAL number")?;
                    let synced = d.varint64("WAL synced bytes")?;
                    edit.wals.push((number, synced));
                }
                TAG_RANGE_TOMBSTONE => {
                    let seq = d.varint64("range tombstone sequence")?;
                    let start = d.bytes("range tombstone start")?.to_vec();
                    let end = d.bytes("range tombstone end")?.to_vec();
                    if start >= end {
                        return Err(d.error_at(at, "range tombstone ends before it starts"));
                    }
                    edit.range_tombstones
                        .push(RangeTombstone { start, end, seq });
                }
                TAG_DROP_TOMBSTONE => {
                    let seq = d.varint64("dropped tombstone sequence")?;
                    edit.dropped_tombstones.push(seq);
                }
                TAG_DEFAULT_LOG_NUMBER => {
                    let n = d.varint64("default keyspace log number")?;
                    if edit.default_log_number.replace(n).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_KEYSPACE => {
                    let id = d.varint32("keyspace id")?;
                    let name = String::from_utf8(d.bytes("keyspace name")?.to_vec())
                        .map_err(|_| d.error_at(at, "keyspace name is not UTF-8"))?;
                    if id == 0 {
                        return Err(d.error_at(at, "keyspace id 0 is the default keyspace's"));
                    }
                    edit.keyspaces_created.push((id, name));
                }
                TAG_DROP_KEYSPACE => {
                    let id = d.varint32("dropped keyspace id")?;
                    edit.keyspaces_dropped.push(id);
                }
                TAG_NEXT_KEYSPACE_ID => {
                    let id = d.varint32("next keyspace id")?;
                    if edit.next_keyspace_id.replace(id).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_KEYSPACE_LOG_NUMBER => {
                    let id = d.varint32("keyspace id")?;
                    let n = d.varint64("keyspace log number")?;
                    if id == 0 {
                        return Err(d.error_at(at, "keyspace id 0 is the default keyspace's"));
                    }
                    edit.keyspace_log_numbers.push((id, n));
                }
                TAG_NEW_BLOB_FILE => {
                    let body_at = d.pos;
                    let body = d.bytes("new blob file record")?;
                    let blob = BlobFileMetaData::decode_body(body).map_err(|reason| {
                        d.error_at(body_at, format!("new blob file record: {reason}"))
                    })?;
                    edit.new_blob_files.push(blob);
                }
                TAG_VALUE_FORMAT => {
                    let name = String::from_utf8(d.bytes("value format")?.to_vec())
                        .map_err(|_| d.error_at(at, "value format is not UTF-8"))?;
                    if edit.value_format.replace(name).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                TAG_MERGE_OPERATOR => {
                    let name = String::from_utf8(d.bytes("merge operator")?.to_vec())
                        .map_err(|_| d.error_at(at, "merge operator name is not UTF-8"))?;
                    if edit.merge_operator.replace(name).is_some() {
                        return Err(d.error_at(at, format!("tag {tag} appears twice")));
                    }
                }
                _ => {
                    return Err(d.error_at(
                        at,
                        format!("unknown tag {tag} (written by a newer version?)"),
                    ));
                }
            }
        }
        Ok(edit)
    }
}

/// Appends one new-file field: tag, then the length-prefixed value.
fn put_field(body: &mut Vec<u8>, tag: u32, value: &[u8]) {
    put_varint32(body, tag);
    put_length_prefixed(body, value);
}

/// Appends a new-file field whose value is one varint64.
fn put_varint_field(body: &mut Vec<u8>, tag: u32, v: u64) {
    let mut value = Vec::with_capacity(10);
    put_varint64(&mut value, v);
    put_field(body, tag, &value);
}

/// Reads fields from an edit, turning every failure into a `Corruption` naming the record.
struct Decoder<'a> {
    src: &'a [u8],
    pos: usize,
    path: &'a Path,
    offset: u64,
}

impl<'a> Decoder<'a> {
    fn error_at(&self, pos: usize, reason: impl fmt::Display) -> Error {
        Error::corruption(
            self.path,
            self.offset,
            format!("version edit byte {pos}: {reason}"),
        )
    }

    fn rest(&self) -> &'a [u8] {
        self.src.get(self.pos..).unwrap_or_default()
    }

    fn varint32(&mut self, what: &str) -> Result<u32> {
        let (v, n) = get_varint32(self.rest())
            .ok_or_else(|| self.error_at(self.pos, format!("bad {what}")))?;
        self.pos += n;
        Ok(v)
    }

    fn varint64(&mut self, what: &str) -> Result<u64> {
        let (v, n) = get_varint64(self.rest())
            .ok_or_else(|| self.error_at(self.pos, format!("bad {what}")))?;
        self.pos += n;
        Ok(v)
    }

    fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let (v, n) = get_length_prefixed(self.rest())
            .ok_or_else(|| self.error_at(self.pos, format!("truncated {what}")))?;
        self.pos += n;
        Ok(v)
    }

    fn level(&mut self) -> Result<usize> {
        let at = self.pos;
        let level = self.varint32("level")? as usize;
        if level >= NUM_LEVELS {
            return Err(self.error_at(at, format!("level {level} is not below {NUM_LEVELS}")));
        }
        Ok(level)
    }
}

/// Decodes a new-file body; errors carry the byte position inside `body`.
fn decode_file(body: &[u8]) -> std::result::Result<FileMetaData, (usize, String)> {
    let mut meta = FileMetaData::default();
    let mut seen = 0u64; // bit `tag` set once a known field was read
    let mut pos = 0;
    while pos < body.len() {
        let rest = body.get(pos..).unwrap_or_default();
        let (tag, n) = get_varint32(rest).ok_or((pos, "bad field tag".to_string()))?;
        let (value, m) = rest
            .get(n..)
            .and_then(get_length_prefixed)
            .ok_or((pos, format!("field {tag} is truncated")))?;
        let varint = || match get_varint64(value) {
            Some((v, used)) if used == value.len() => Ok(v),
            _ => Err((pos, format!("field {tag} is not a single varint"))),
        };
        if (1..=FIELD_RANGE_CLEAN_SEQ).contains(&tag)
            || tag == FIELD_FILE_CHECKSUM
            || tag == FIELD_IDENTITY
        {
            if seen & (1 << tag) != 0 {
                return Err((pos, format!("field {tag} appears twice")));
            }
            seen |= 1 << tag;
        }
        match tag {
            FIELD_NUMBER => meta.number = varint()?,
            FIELD_FILE_SIZE => meta.file_size = varint()?,
            FIELD_SMALLEST => meta.smallest = value.to_vec(),
            FIELD_LARGEST => meta.largest = value.to_vec(),
            FIELD_SMALLEST_SEQ => meta.smallest_seq = varint()?,
            FIELD_LARGEST_SEQ => meta.largest_seq = varint()?,
            FIELD_NUM_ENTRIES => meta.num_entries = varint()?,
            FIELD_NUM_DELETIONS => meta.num_deletions = varint()?,
            FIELD_RAW_VALUE_BYTES => meta.raw_value_bytes = varint()?,
            FIELD_DIR_INDEX => {
                meta.dir_index = u32::try_from(varint()?)
                    .map_err(|_| (pos, "dir_index exceeds u32".to_string()))?;
            }
            FIELD_RANGE_CLEAN_SEQ => meta.range_clean_seq = varint()?,
            FIELD_FILE_CHECKSUM => {
                let crc = u32::try_from(varint()?)
                    .map_err(|_| (pos, "file_checksum exceeds u32".to_string()))?;
                meta.file_checksum = Some(crc);
            }
            FIELD_IDENTITY => meta.identity = Some(TableIdentity::from_u64(varint()?)),
            FIELD_BLOB_REFS => {
                if !meta.blob_refs.is_empty() {
                    return Err((pos, format!("field {tag} appears twice")));
                }
                meta.blob_refs = BlobRefCounts::decode(value)
                    .ok_or((pos, "blob references do not decode".to_string()))?;
            }
            _ if tag & MANDATORY_FIELD_BIT != 0 => {
                return Err((
                    pos,
                    format!("unknown mandatory field {tag} (written by a newer version?)"),
                ));
            }
            _ => {} // unknown optional field: skip
        }
        pos += n + m;
    }
    let required = [
        FIELD_NUMBER,
        FIELD_FILE_SIZE,
        FIELD_SMALLEST,
        FIELD_LARGEST,
        FIELD_SMALLEST_SEQ,
        FIELD_LARGEST_SEQ,
    ];
    if let Some(missing) = required.iter().find(|&&t| seen & (1 << t) == 0) {
        return Err((body.len(), format!("required field {missing} is missing")));
    }
    for (name, key) in [("smallest", &meta.smallest), ("largest", &meta.largest)] {
        if parse_internal_key(key).is_none() {
            return Err((
                body.len(),
                format!("{name} key is not a valid internal key"),
            ));
        }
    }
    if meta.smallest_seq > meta.largest_seq {
        return Err((
            body.len(),
            format!(
                "smallest_seq {} > largest_seq {}",
                meta.smallest_seq, meta.largest_seq
            ),
        ));
    }
    Ok(meta)
}

/// Shows an internal key as `'user key' @ seq kind`, as every dump does
/// ([`describe_internal_key`]).
struct KeyDisplay<'a>(&'a [u8]);

impl fmt::Display for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&describe_internal_key(self.0, escape_bytes))
    }
}

impl fmt::Debug for KeyDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FileMetaData {
    /// The MANIFEST's description of a freshly written table, numbered `number`, in table
    /// directory `dir_index`.
    pub fn of_new_table(
        number: u64,
        dir_index: u32,
        summary: &sluice_sst::table::TableSummary,
    ) -> FileMetaData {
        let p = &summary.properties;
        FileMetaData {
            number,
            file_size: summary.file_size,
            smallest: summary.smallest_key.clone(),
            largest: summary.largest_key.clone(),
            smallest_seq: p.smallest_seq,
            largest_seq: p.largest_seq,
            num_entries: p.num_entries,
            num_deletions: p.num_deletions,
            raw_value_bytes: p.raw_value_bytes,
            dir_index,
            range_clean_seq: 0,
            blob_refs: p.blob_refs.clone(),
            file_checksum: Some(summary.file_checksum),
            identity: Some(summary.identity),
        }
    }
}

impl fmt::Display for FileMetaData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "#{:06} size={} [{} .. {}] seq={}..={} entries={} deletions={} raw_value_bytes={} dir={}",
            self.number,
            self.file_size,
            KeyDisplay(&self.smallest),
            KeyDisplay(&self.largest),
            self.smallest_seq,
            self.largest_seq,
            self.num_entries,
            self.num_deletions,
            self.raw_value_bytes,
            self.dir_index
        )?;
        if let Some(crc) = self.file_checksum {
            write!(f, " crc32c={crc:08x}")?;
        }
        if let Some(identity) = self.identity {
            write!(f, " identity={identity}")?;
        }
        for (blob, tally) in self.blob_refs.iter() {
            write!(f, " blob#{blob:06}={}/{}B", tally.refs, tally.bytes)?;
        }
        Ok(())
    }
}

impl fmt::Debug for FileMetaData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FileMetaData({self})")
    }
}

/// One line per field, as printed by `sluice manifest dump`.
impl fmt::Display for VersionEdit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(c) = &self.comparator {
            writeln!(f, "comparator: {c}")?;
        }
        if let Some(format) = &self.value_format {
            writeln!(f, "value_format: {format}")?;
        }
        if let Some(name) = &self.merge_operator {
            writeln!(f, "merge_operator: {}", name.escape_default())?;
        }
        let scalars = [
            ("log_number", self.log_number),
            ("default_log_number", self.default_log_number),
            ("next_file_number", self.next_file_number),
            ("last_sequence", self.last_sequence),
            ("next_keyspace_id", self.next_keyspace_id.map(u64::from)),
        ];
        for (name, value) in scalars {
            if let Some(v) = value {
                writeln!(f, "{name}: {v}")?;
            }
        }
        for (level, key) in &self.compact_pointers {
            writeln!(f, "compact_pointer L{level}: {}", KeyDisplay(key))?;
        }
        for (level, number) in &self.deleted_files {
            writeln!(f, "delete L{level} #{number:06}")?;
        }
        for blob in &self.new_blob_files {
            writeln!(f, "add {blob}")?;
        }
        for (level, file) in &self.new_files {
            writeln!(f, "add L{level} {file}")?;
        }
        for (number, synced) in &self.wals {
            writeln!(f, "wal #{number:06} synced={synced}")?;
        }
        for t in &self.range_tombstones {
            writeln!(
                f,
                "range tombstone @{}: [{}, {})",
                t.seq,
                escape_bytes(&t.start),
                escape_bytes(&t.end)
            )?;
        }
        for seq in &self.dropped_tombstones {
            writeln!(f, "drop range tombstone @{seq}")?;
        }
        for (id, name) in &self.keyspaces_created {
            writeln!(f, "keyspace {id}: {}", name.escape_default())?;
        }
        for id in &self.keyspaces_dropped {
            writeln!(f, "drop keyspace {id}")?;
        }
        for (id, n) in &self.keyspace_log_numbers {
            writeln!(f, "keyspace {id} log_number: {n}")?;
        }
        if let Some(map) = &self.range_map {
            write!(f, "range map:\n{map}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for VersionEdit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pointers: Vec<_> = self
            .compact_pointers
            .iter()
            .map(|(l, k)| (l, KeyDisplay(k)))
            .collect();
        f.debug_struct("VersionEdit")
            .field("comparator", &self.comparator)
            .field("log_number", &self.log_number)
            .field("next_file_number", &self.next_file_number)
            .field("last_sequence", &self.last_sequence)
            .field("compact_pointers", &pointers)
            .field("deleted_files", &self.deleted_files)
            .field("new_files", &self.new_files)
            .field("range_map", &self.range_map)
            .field("wals", &self.wals)
            .field("value_format", &self.value_format)
            .field("merge_operator", &self.merge_operator)
            .field("range_tombstones", &self.range_tombstones)
            .field("dropped_tombstones", &self.dropped_tombstones)
            .field("default_log_number", &self.default_log_number)
            .field("keyspaces_created", &self.keyspaces_created)
            .field("keyspaces_dropped", &self.keyspaces_dropped)
            .field("next_keyspace_id", &self.next_keyspace_id)
            .field("keyspace_log_numbers", &self.keyspace_log_numbers)
            .field("new_blob_files", &self.new_blob_files)
            .finish()
    }
}

#[cfg(test)]
mod tests;
