//! Reading a separated value back: the reference a table holds, resolved through the
//! version's blob files, the block cache (which holds blob values too) and the table cache.

use std::path::Path;

use sluice_sst::blob::BlobRef;

use crate::table_cache::TableCache;
use crate::version::Version;
use crate::{Error, Result};

/// The value the reference `encoded`, stored for user key `key` in `table` (a path for
/// errors), points at, in a blob file of `version`. Corruption naming `table` if the
/// reference does not decode or names a file the version does not hold; naming the blob
/// file and offset if the record is damaged or belongs to another key.
pub(crate) fn resolve(
    tables: &TableCache,
    version: &Version,
    key: &[u8],
    encoded: &[u8],
    table: &Path,
) -> Result<Vec<u8>> {
    let blob = BlobRef::decode(encoded).ok_or_else(|| {
        Error::corruption(
            table,
            0,
            format!(
                "a blob reference of {} bytes that does not decode",
                encoded.len()
            ),
        )
    })?;
    let state = version.blob_file(blob.file_number).ok_or_else(|| {
        Error::corruption(
            table,
            0,
            format!(
                "a reference to blob file {}, which the version does not hold",
                blob.file_number
            ),
        )
    })?;
    Ok(tables.blob_value(&state.meta, &blob, key)?)
}
