//! [`BlobSeparator`]: what a flush writes to blob files. Each value at or above
//! `min_blob_size` is appended to the current blob file, and the table gets a
//! [`ValueKind::BlobIndex`] entry holding its reference instead.

use std::path::PathBuf;

use sluice_sst::blob::BlobFileWriter;
use sluice_sst::fs::Storage;
use sluice_sst::key::{TRAILER_LEN, ValueKind, pack_trailer, parse_internal_key};

use super::BlobOptions;
use crate::table_cache::TableCache;
use crate::version::blob_files::BlobFileMetaData;
use sluice_sst::Result;

/// Writes one flush piece's large values into blob files in one directory, numbered by the
/// flush's allocator. The files are synced as they are finished; nothing references them
/// until the flush's edit is installed, so after a failure they are garbage (deleted by
/// [`BlobSeparator::abandon`], or as obsolete files).
pub(crate) struct BlobSeparator<'a> {
    options: &'a BlobOptions,
    storage: Storage,
    tables: &'a TableCache,
    /// The table directory the files go to.
    dir_index: u32,
    current: Option<(BlobFileWriter, PathBuf)>,
    finished: Vec<BlobFileMetaData>,
    /// The entry written in a separated value's place.
    key: Vec<u8>,
    reference: Vec<u8>,
}

impl<'a> BlobSeparator<'a> {
    /// A separator writing into table directory `dir_index`, through `storage`.
    pub fn new(
        options: &'a BlobOptions,
        storage: Storage,
        tables: &'a TableCache,
        dir_index: u32,
    ) -> Self {
        BlobSeparator {
            options,
            storage,
            tables,
            dir_index,
            current: None,
            finished: Vec::new(),
            key: Vec::new(),
            reference: Vec::new(),
        }
    }

    /// The entry the table gets for `(ikey, value)`: itself, or, for a value of at least
    /// `min_blob_size` bytes, a reference to where it was just written. `new_number` names a
    /// new blob file when one is started.
    pub fn separate<'e>(
        &'e mut self,
        ikey: &'e [u8],
        value: &'e [u8],
        new_number: &mut dyn FnMut() -> u64,
    ) -> Result<(&'e [u8], &'e [u8])> {
        // Checked before the key is parsed: most flushes separate nothing.
        if !self.options.enabled() || value.len() < self.options.min_blob_size {
            return Ok((ikey, value));
        }
        let Some(parsed) = parse_internal_key(ikey).filter(|p| p.kind == ValueKind::Value) else {
            return Ok((ikey, value));
        };
        let current = match self.current.take() {
            Some(current) => current,
            None => {
                let number = new_number();
                let path = self.tables.blob_path(self.dir_index, number);
                let writer = BlobFileWriter::create(
                    &self.storage,
                    &path,
                    number,
                    self.options.blob_compression,
                    sluice_sst::compression::DEFAULT_ZSTD_LEVEL,
                )?;
                (writer, path)
            }
        };
        let (writer, _) = self.current.insert(current);
        let blob = writer.add(parsed.user_key, value)?;
        if writer.file_size() >= self.options.blob_file_size {
            self.finish_current()?;
        }
        self.key.clear();
        self.key
            .extend_from_slice(&ikey[..ikey.len() - TRAILER_LEN]);
        self.key
            .extend_from_slice(&pack_trailer(parsed.seq, ValueKind::BlobIndex).to_le_bytes());
        self.reference.clear();
        blob.encode_to(&mut self.reference);
        Ok((&self.key, &self.reference))
    }

    fn finish_current(&mut self) -> Result<()> {
        if let Some((writer, _)) = self.current.take() {
            let meta = writer.finish()?;
            self.finished.push(BlobFileMetaData {
                number: meta.file_number,
                dir_index: self.dir_index,
                file_size: meta.file_size,
                records: meta.records,
                value_bytes: meta.value_bytes,
            });
        }
        Ok(())
    }

    /// Finishes the current file and returns every file written, each synced.
    pub fn finish(mut self) -> Result<Vec<BlobFileMetaData>> {
        self.finish_current()?;
        Ok(std::mem::take(&mut self.finished))
    }

    /// Deletes every file written (best effort: a leftover is unreferenced, and deleted as
    /// obsolete later).
    pub fn abandon(mut self) {
        let current = self.current.take().map(|(_, path)| path);
        let finished = self
            .finished
            .iter()
            .map(|m| self.tables.blob_path(self.dir_index, m.number));
        for path in current.into_iter().chain(finished) {
            let _ = self.storage.fs.remove(&path);
        }
    }
}
