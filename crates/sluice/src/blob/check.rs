//! What `Db::check` verifies of value separation: every record of every blob file (checksum,
//! lengths, decompression, the footer's counts), and every reference of every table: that it
//! decodes, lands exactly on a record of a blob file the version holds, written under the
//! same key, and that each table references what its MANIFEST record counts. A blob file the
//! version holds must be referenced: otherwise its count went wrong.

use std::collections::HashMap;
use std::path::Path;

use sluice_sst::blob::{BlobRef, BlobRefCounts};
use sluice_sst::filter::hash64;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{ValueKind, parse_internal_key};

use crate::table_cache::TableCache;
use crate::version::Version;
use crate::{Error, Result};

/// What [`check_tree`] read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct BlobCheck {
    pub files: usize,
    pub bytes: u64,
    pub references: u64,
}

/// Checks the blob files of `version` and the references its tables hold (module docs).
pub(crate) fn check_tree(tables: &TableCache, version: &Version) -> Result<BlobCheck> {
    let mut report = BlobCheck::default();
    // (file, offset) -> (size, hash of the key) of every record.
    let mut records: HashMap<(u64, u64), (u64, u64)> = HashMap::new();
    for state in version.blob_files().values() {
        let file = tables.blob_file(&state.meta)?;
        for record in file.records_iter() {
            let record = record?;
            records.insert(
                (record.blob.file_number, record.blob.offset),
                (record.blob.size, hash64(&record.key)),
            );
        }
        report.files += 1;
        report.bytes += file.size();
    }
    let mut referenced = BlobRefCounts::default();
    for f in version.live_files().filter(|f| !f.blob_refs.is_empty()) {
        let table = tables.get(f)?;
        let corrupt = |reason: String| Error::corruption(table.path(), 0, reason);
        let mut counted = BlobRefCounts::default();
        let mut it = table.iter();
        it.seek_to_first()?;
        while it.valid() {
            let parsed =
                parse_internal_key(it.key()).ok_or_else(|| corrupt("an unparseable key".into()))?;
            if parsed.kind == ValueKind::BlobIndex {
                let blob = BlobRef::decode(it.value())
                    .ok_or_else(|| corrupt("a blob reference that does not decode".into()))?;
                let lands = records.get(&(blob.file_number, blob.offset));
                if lands != Some(&(blob.size, hash64(parsed.user_key))) {
                    return Err(corrupt(format!(
                        "the reference of key {:?} to {blob:?} is not a record of that key",
                        parsed.user_key.escape_ascii().to_string()
                    )));
                }
                counted.add(&blob);
                report.references += 1;
            }
            it.next()?;
        }
        if counted != f.blob_refs {
            return Err(mismatch(table.path(), &counted, &f.blob_refs));
        }
        referenced.merge(&counted);
    }
    for (number, state) in version.blob_files() {
        if referenced.get(*number) != state.live {
            return Err(Error::corruption(
                tables.blob_path(state.meta.dir_index, *number),
                0,
                format!(
                    "the tables reference {:?} of the blob file, the version counts {:?}",
                    referenced.get(*number),
                    state.live
                ),
            ));
        }
    }
    Ok(report)
}

fn mismatch(table: &Path, counted: &BlobRefCounts, recorded: &BlobRefCounts) -> Error {
    Error::corruption(
        table,
        0,
        format!(
            "the table holds blob references {counted:?}, its MANIFEST record counts {recorded:?}"
        ),
    )
}
