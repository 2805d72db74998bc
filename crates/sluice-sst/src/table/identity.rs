//! A table's identity: what the MANIFEST pins a table to, so that a file put in its place
//! after it was checked is refused when it is opened instead of read as valid.
//!
//! The identity is two checksums that every open reads and verifies anyway, so checking it
//! costs no extra read:
//!
//! ```text
//! identity = (footer checksum: fixed32 at footer byte 52) << 32 | properties block's trailer CRC
//! ```
//!
//! The footer's checksum covers where the index, filter and properties blocks lie and the
//! format version; the properties block's covers the table's key range, sequence numbers,
//! entry count, entry digest and sizes (and, for a worker's output, the nonce of the task it
//! answers). Another table with other entries has other properties; one of the same size and
//! layout has the same footer, so the properties' 32-bit CRC alone tells them apart: it passes
//! with probability about 2^-32 when nothing chose it to collide. The data blocks themselves
//! are covered by their own CRCs when read and by the whole-file checksum, not by the
//! identity. CRCs are not a cryptographic hash, so a party that crafts a file to collide can
//! pass it (the fault model of `docs/design/0005-compaction-offload.md` says where that
//! leaves a malicious worker).
//!
//! RocksDB pins tables the same way with `verify_sst_unique_id_in_manifest` (an id derived
//! from the properties), and records the whole-file checksum beside it (`file_checksum`),
//! which only a full read can compare: `Db::verify_file_checksums` and `sluice check` do.

use std::fmt;

/// A table's identity (see the module docs). Frozen: it is recorded in MANIFESTs.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TableIdentity(u64);

impl TableIdentity {
    /// The identity of a table whose footer checksum (the masked CRC at footer byte 52) is
    /// `footer_crc` and whose properties block's trailer CRC is `properties_crc`.
    pub fn new(footer_crc: u32, properties_crc: u32) -> TableIdentity {
        TableIdentity(u64::from(footer_crc) << 32 | u64::from(properties_crc))
    }

    /// The identity as recorded in a MANIFEST.
    pub fn from_u64(v: u64) -> TableIdentity {
        TableIdentity(v)
    }

    /// The value recorded in a MANIFEST.
    pub fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for TableIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for TableIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TableIdentity({self})")
    }
}

#[cfg(test)]
mod tests {
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::{Table, TableBuilder, TableOptions, TableReadOptions, TableSummary};

    fn write(path: &std::path::Path, keys: std::ops::Range<u32>, value: &[u8]) -> TableSummary {
        let mut b = TableBuilder::create(path, &TableOptions::default()).unwrap();
        for k in keys {
            let key = make_internal_key(format!("key{k:05}").as_bytes(), 7, ValueKind::Value);
            b.add(&key, value).unwrap();
        }
        b.finish().unwrap()
    }

    #[test]
    fn tables_with_other_entries_have_other_identities_and_equal_ones_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(&dir.path().join("a.sst"), 0..100, b"v");
        let same = write(&dir.path().join("same.sst"), 0..100, b"v");
        // Same size and layout, one value byte different: only the entry digest differs.
        let other = write(&dir.path().join("other.sst"), 0..100, b"w");
        assert_eq!(a.file_size, other.file_size);
        assert_eq!(a.identity, same.identity);
        assert_ne!(a.identity, other.identity);
        let opened = Table::open(
            &dir.path().join("other.sst"),
            1,
            TableReadOptions::default(),
        );
        assert_eq!(opened.unwrap().identity(), other.identity);
        assert_eq!(
            super::TableIdentity::from_u64(a.identity.as_u64()),
            a.identity
        );
    }
}
