//! Tables for unit tests: one place that builds a [`FileMetaData`] from a key range, so tests
//! of the picker, the version, partitioning and the rest describe a table the same way.

use sluice_sst::key::{ValueKind, make_internal_key};

use super::edit::FileMetaData;

/// Table `number` holding keys `lo..=hi`, every entry a value at sequence number `seq`, of
/// `size` bytes, in the database directory. Other fields take their defaults; set them with
/// struct update syntax (`FileMetaData { dir_index: 1, ..table(..) }`).
pub(crate) fn table(number: u64, lo: &str, hi: &str, size: u64, seq: u64) -> FileMetaData {
    FileMetaData {
        number,
        file_size: size,
        smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
        largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
        smallest_seq: seq,
        largest_seq: seq,
        ..FileMetaData::default()
    }
}
