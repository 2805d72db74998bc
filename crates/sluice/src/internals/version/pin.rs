//! A table is pinned to what was checked when it was installed: the MANIFEST records its size,
//! its identity (the footer's and properties block's checksums, `sluice_sst::table::TableIdentity`)
//! and the CRC32C of all its bytes, and the file found under its name must match them.
//!
//! Why: a table is read by name long after the edit that installed it. Whatever renames
//! another valid table (or a link) over that name, a faulty worker racing the host, a copy
//! tool, an operator, would otherwise be read as valid from the next open on: the block
//! checksums hold, since they only say the bytes are a table, not which one.
//!
//! Where each check runs:
//!
//! | check | when | cost |
//! |---|---|---|
//! | not a symbolic link | every open of a table (`TableCache`) | one `lstat` |
//! | size and identity | every open of a table | none: the open reads both anyway |
//! | whole-file CRC32C | `Db::check`, `Db::verify_file_checksums`, backups | a read of the file |
//!
//! Hard links are not refused: checkpoints and ingestion with `move_files` make them by
//! design. A link shares the inode, so what it can change is caught like any other change by
//! the size, identity and checksum.

use sluice_sst::fs::{FileSystem, open_file_crc32c};
use sluice_sst::table::Table;
use sluice_sst::{Error, IoContext, Result};

use super::edit::FileMetaData;

/// Fails with `Corruption` unless the file at `path`, which a live table's name leads to, is
/// a file of the database's own: not a symbolic link (a database never makes one, so one
/// there leads to bytes that something outside the database controls).
pub fn refuse_symlink(fs: &dyn FileSystem, path: &std::path::Path) -> Result<()> {
    if fs.metadata(path).with_path(path)?.is_symlink {
        return Err(Error::corruption(
            path,
            0,
            "a live table is a symbolic link: a database never makes one, so another \
             process replaced the file",
        ));
    }
    Ok(())
}

/// Fails with `Corruption` naming the file unless the opened `table` has the size and the
/// identity the MANIFEST recorded for it in `file` (an identity is compared where one was
/// recorded: older builds recorded none).
pub fn check_opened(table: &Table, file: &FileMetaData) -> Result<()> {
    if table.file_size() != file.file_size {
        return Err(Error::corruption(
            table.path(),
            0,
            format!(
                "table is {} bytes, the MANIFEST recorded {}: the file was replaced or \
                 truncated after it was installed",
                table.file_size(),
                file.file_size
            ),
        ));
    }
    if let Some(recorded) = file.identity
        && table.identity() != recorded
    {
        return Err(Error::corruption(
            table.path(),
            table.footer().properties.offset,
            format!(
                "table's identity is {}, the MANIFEST recorded {recorded}: another table was \
                 put in its place after it was installed",
                table.identity()
            ),
        ));
    }
    Ok(())
}

/// Compares the CRC32C of every byte of the opened `table` with the checksum the MANIFEST
/// recorded in `file`: `known` when the caller computed it already (`Table::verify_all`
/// does, as it reads), otherwise from a read of the whole file. Returns the bytes this read,
/// or `None` when no checksum was recorded (a table of an older build): then nothing is
/// read.
pub fn check_file_checksum(
    table: &Table,
    file: &FileMetaData,
    known: Option<u32>,
) -> Result<Option<u64>> {
    let Some(recorded) = file.file_checksum else {
        return Ok(None);
    };
    let (crc, read) = match known {
        Some(crc) => (crc, 0),
        None => {
            let r = open_file_crc32c(table.file()).with_path(table.path())?;
            (r.crc32c, r.len)
        }
    };
    if crc != recorded {
        return Err(Error::corruption(
            table.path(),
            0,
            format!("file checksum is {crc:08x}, the MANIFEST recorded {recorded:08x}"),
        ));
    }
    Ok(Some(read))
}
