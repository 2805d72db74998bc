//! Blob files: large values kept out of the LSM tree (value separation, as RocksDB's
//! integrated BlobDB, Pebble's value separation, fjall's blob files and WiscKey). The tree
//! keeps a small [`BlobRef`] in the value's place, so compactions move references instead of
//! re-reading and re-writing the values at every level.
//!
//! A blob file is written once, front to back, and never changed:
//!
//! ```text
//! file    := header record* footer
//! header  := magic "SLUBLOB1" (8)   version: fixed32 = 1   crc: fixed32       -- 16 bytes
//! record  := crc: fixed32   key_len: fixed32   stored_len: fixed32   value_len: fixed32
//!            compression: u8   key   stored value                          -- 17 + key + stored
//! footer  := records: fixed64   value_bytes: fixed64   crc: fixed32   magic "SBF1" (4) -- 24
//! ```
//!
//! Every `crc` is a masked CRC32C: the header's of the 12 bytes before it, a record's of every
//! byte after it in the record, the footer's of the 16 bytes before it. `stored value` is the
//! value compressed with `compression` (the table format's byte: 0 none, 1 snappy, 2 lz4,
//! 3 zstd), or the value itself when compressing did not pay; `value_len` is the value's
//! length. The key is the user key the value was written under: a read checks it, so a
//! reference that points at another key's value is caught, not returned.
//! `docs/format/blob.md` is the full specification.
//!
//! A [`BlobRef`] names a record by file number, offset and size, so a read is one positioned
//! read of exactly the record.

mod blob_ref;
mod reader;
mod ref_counts;
mod writer;

pub use blob_ref::BlobRef;
pub use reader::{BlobFile, BlobRecord, BlobRecords};
pub use ref_counts::{BlobRefCounts, BlobRefTally};
pub use writer::{BlobFileMeta, BlobFileWriter};

/// The first 8 bytes of every blob file.
pub const HEADER_MAGIC: &[u8; 8] = b"SLUBLOB1";
/// The last 4 bytes of every blob file.
pub const FOOTER_MAGIC: &[u8; 4] = b"SBF1";
/// The only format version.
pub const FORMAT_VERSION: u32 = 1;
/// Header bytes.
pub const HEADER_LEN: u64 = 16;
/// Footer bytes.
pub const FOOTER_LEN: u64 = 24;
/// Bytes of a record before its key.
pub const RECORD_HEADER_LEN: usize = 17;

#[cfg(test)]
mod tests;
