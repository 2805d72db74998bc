//! [`SstFileWriter`]: a table built outside any database from sorted data, for
//! [`crate::Db::ingest`] (RocksDB's `SstFileWriter`).

use std::path::{Path, PathBuf};

use sluice_sst::fs::Storage;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::TableBuilder;

use crate::options::TableOptions;
use crate::{Error, Result};

/// What [`SstFileWriter::finish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalFile {
    /// The table file.
    pub path: PathBuf,
    /// Its first and last user keys.
    pub smallest_key: Vec<u8>,
    pub largest_key: Vec<u8>,
    /// Puts and deletes in it.
    pub entries: u64,
    /// Its size in bytes.
    pub file_size: u64,
}

/// Writes a table of puts and deletes given in strictly increasing key order, to be ingested
/// into a database with [`crate::Db::ingest`].
///
/// Entries carry sequence number 0; the ingest gives them their place in the database's
/// history. The file is in the database's own table format (checksummed blocks,
/// compression and Bloom filter from `options`), so an ingest that needs no new sequence
/// number moves it into the tree as it is.
///
/// ```no_run
/// # use sluice::{Db, Options, SstFileWriter};
/// let mut writer = SstFileWriter::create("/tmp/bulk.sst", &Default::default())?;
/// for i in 0..1000u32 {
///     writer.put(format!("key{i:06}").as_bytes(), b"value")?;
/// }
/// writer.finish()?;
/// let db = Db::open("/tmp/sluice-doc", Options::default())?;
/// db.ingest(&["/tmp/bulk.sst"], &Default::default())?;
/// # Ok::<(), sluice::Error>(())
/// ```
pub struct SstFileWriter {
    builder: Option<TableBuilder>,
    path: PathBuf,
    smallest_key: Vec<u8>,
    last_key: Vec<u8>,
    entries: u64,
}

impl SstFileWriter {
    /// Creates the table file at `path` (which must not exist) on the local file system.
    pub fn create(path: impl AsRef<Path>, options: &TableOptions) -> Result<SstFileWriter> {
        Self::create_in(&Storage::default(), path, options)
    }

    /// Creates the table file at `path` in `storage` (a database's [`crate::Options::fs`]).
    pub fn create_in(
        storage: &Storage,
        path: impl AsRef<Path>,
        options: &TableOptions,
    ) -> Result<SstFileWriter> {
        let path = path.as_ref().to_path_buf();
        Ok(SstFileWriter {
            builder: Some(TableBuilder::create_in(storage, &path, options)?),
            path,
            smallest_key: Vec::new(),
            last_key: Vec::new(),
            entries: 0,
        })
    }

    /// Adds `key` = `value`. `key` must sort after every key added before.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.add(key, value, ValueKind::Value)
    }

    /// Adds a deletion of `key`, which hides older versions of it in the database the file is
    /// ingested into. `key` must sort after every key added before.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.add(key, &[], ValueKind::Deletion)
    }

    /// Adds a merge operand for `key`, which the database's merge operator combines with the
    /// versions of `key` it already has when the file is ingested (RocksDB's
    /// `SstFileWriter::Merge`). `key` must sort after every key added before. The ingest
    /// refuses the file if the database has no operator or its operator refuses the operand.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.add(key, operand, ValueKind::Merge)
    }

    fn add(&mut self, key: &[u8], value: &[u8], kind: ValueKind) -> Result<()> {
        if self.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidArgument(format!(
                "{}: keys must be added in strictly increasing order ({:?} after {:?})",
                self.path.display(),
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&self.last_key)
            )));
        }
        let builder = self.builder.as_mut().ok_or(Error::Closed)?;
        if let Err(e) = builder.add(&make_internal_key(key, 0, kind), value) {
            // The builder is unusable after an error: delete the partial file.
            if let Some(b) = self.builder.take() {
                b.abandon();
            }
            return Err(e.into());
        }
        if self.entries == 0 {
            self.smallest_key = key.to_vec();
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
        Ok(())
    }

    /// Writes the rest of the table and syncs it. A table needs at least one entry.
    pub fn finish(mut self) -> Result<ExternalFile> {
        let builder = self.builder.take().ok_or(Error::Closed)?;
        if self.entries == 0 {
            builder.abandon();
            return Err(Error::InvalidArgument(format!(
                "{}: an external table needs at least one entry",
                self.path.display()
            )));
        }
        let summary = builder.finish()?;
        Ok(ExternalFile {
            path: std::mem::take(&mut self.path),
            smallest_key: std::mem::take(&mut self.smallest_key),
            largest_key: std::mem::take(&mut self.last_key),
            entries: self.entries,
            file_size: summary.file_size,
        })
    }
}

impl Drop for SstFileWriter {
    /// A writer dropped before `finish` leaves no partial file behind.
    fn drop(&mut self) {
        if let Some(b) = self.builder.take() {
            b.abandon();
        }
    }
}
