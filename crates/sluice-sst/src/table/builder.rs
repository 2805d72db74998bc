//! A table from entries in key order, on the caller's thread: RocksDB's `SstFileWriter`, for
//! tools and tests that need a table without a database (the worker's lie tests, fixtures).
//!
//! Not a write path of its own: it composes the same pieces flushes and compactions use
//! ([`TableContentBuilder`] for S4, [`encode_block`] for S5 and S6, [`TableFileWriter`] for
//! S7), so its files are byte-for-byte what they would write for the same entries. The
//! engine itself writes through `compact::OutputWriter`.

use std::path::Path;

use super::{TableContentBuilder, TableFileWriter, TableOptions, TableSummary, encode_block};
use crate::format::MAX_ENTRY_BYTES;
use crate::fs::Storage;
use crate::key::TRAILER_LEN;
use crate::{Error, Result};

/// Writes a table from entries in key order, on one thread.
///
/// After an error from [`TableBuilder::add`] the builder must not be used further except for
/// [`TableBuilder::abandon`].
#[derive(Debug)]
pub struct TableBuilder {
    opts: TableOptions,
    content: TableContentBuilder,
    writer: TableFileWriter,
}

impl TableBuilder {
    /// Validates `opts` and creates the file at `path` on the local file system.
    pub fn create(path: &Path, opts: &TableOptions) -> Result<Self> {
        Self::create_in(&Storage::default(), path, opts)
    }

    /// Validates `opts` and creates the file at `path` in `storage`.
    pub fn create_in(storage: &Storage, path: &Path, opts: &TableOptions) -> Result<Self> {
        opts.validate()?;
        Ok(TableBuilder {
            opts: opts.clone(),
            content: TableContentBuilder::new(opts),
            writer: TableFileWriter::create(storage, path, opts)?,
        })
    }

    /// Adds an entry and writes any block it completes.
    ///
    /// REQUIRES: `ikey` sorts strictly after the previous key (checked in debug builds).
    /// Entries larger than [`MAX_ENTRY_BYTES`] and keys without a trailer are rejected.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        if ikey.len() < TRAILER_LEN {
            return Err(Error::InvalidArgument(format!(
                "internal key of {} bytes has no trailer",
                ikey.len()
            )));
        }
        if ikey.len() + value.len() > MAX_ENTRY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "entry of {} bytes exceeds the {MAX_ENTRY_BYTES}-byte limit",
                ikey.len() + value.len()
            )));
        }
        self.content.add(ikey, value);
        while let Some(sealed) = self.content.take_sealed() {
            self.writer
                .append_data_block(&encode_block(sealed, &self.opts))?;
        }
        Ok(())
    }

    /// Records `nonce` as the offloaded task the table answers
    /// ([`TableFileWriter::set_task_nonce`]).
    pub fn set_task_nonce(&mut self, nonce: u64) {
        self.writer.set_task_nonce(nonce);
    }

    /// Bytes written so far plus the uncompressed size of the block being built.
    pub fn estimated_file_size(&self) -> u64 {
        self.writer.file_size() + self.content.current_block_size() as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.content.num_entries()
    }

    /// Writes the last block, the meta blocks and the footer, and fsyncs.
    pub fn finish(mut self) -> Result<TableSummary> {
        self.content.seal_current();
        while let Some(sealed) = self.content.take_sealed() {
            self.writer
                .append_data_block(&encode_block(sealed, &self.opts))?;
        }
        self.writer.finish()
    }

    /// Deletes the partial file.
    pub fn abandon(self) {
        self.writer.abandon();
    }
}
