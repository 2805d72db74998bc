//! [`BlobFileWriter`]: writes one blob file front to back.

use std::path::{Path, PathBuf};

use super::{BlobRef, FOOTER_MAGIC, FORMAT_VERSION, HEADER_LEN, HEADER_MAGIC};
use crate::checksum::{crc32c, mask};
use crate::coding::{put_fixed32, put_fixed64};
use crate::compression::{CompressionType, compress_with_level};
use crate::format::MAX_ENTRY_BYTES;
use crate::fs::{Storage, WriteFile};
use crate::{Error, IoContext, Result};

/// What a finished blob file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobFileMeta {
    pub file_number: u64,
    /// Its size in bytes.
    pub file_size: u64,
    /// Records written.
    pub records: u64,
    /// The values' bytes before compression.
    pub value_bytes: u64,
}

/// Writes values into a new blob file and hands back where each went. The file is complete,
/// and durable, only once [`BlobFileWriter::finish`] returns; one dropped before is garbage
/// (nothing may reference it).
pub struct BlobFileWriter {
    file: Box<dyn WriteFile>,
    path: PathBuf,
    file_number: u64,
    compression: CompressionType,
    zstd_level: i32,
    /// Bytes written so far: the next record's offset.
    offset: u64,
    records: u64,
    value_bytes: u64,
    /// Reused for each record.
    record: Vec<u8>,
    compressed: Vec<u8>,
}

impl BlobFileWriter {
    /// Creates blob file `file_number` at `path` (which must not exist) and writes its header.
    pub fn create(
        storage: &Storage,
        path: &Path,
        file_number: u64,
        compression: CompressionType,
        zstd_level: i32,
    ) -> Result<Self> {
        let mut file = storage.create(path).with_path(path)?;
        let mut header = Vec::with_capacity(HEADER_LEN as usize);
        header.extend_from_slice(HEADER_MAGIC);
        put_fixed32(&mut header, FORMAT_VERSION);
        let crc = mask(crc32c(&header));
        put_fixed32(&mut header, crc);
        file.append(&header).with_path(path)?;
        Ok(BlobFileWriter {
            file,
            path: path.to_path_buf(),
            file_number,
            compression,
            zstd_level,
            offset: HEADER_LEN,
            records: 0,
            value_bytes: 0,
            record: Vec::new(),
            compressed: Vec::new(),
        })
    }

    /// Appends `value`, written under user key `key`, and returns its reference.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a key of 4 GiB or more (lengths are 32-bit) or a value
    /// over [`MAX_ENTRY_BYTES`] (what the reader will allocate for one);
    /// I/O errors name the file.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<BlobRef> {
        let too_long = |what: &str, len: usize| {
            Error::InvalidArgument(format!("blob {what} of {len} bytes is 4 GiB or more"))
        };
        let key_len = u32::try_from(key.len()).map_err(|_| too_long("key", key.len()))?;
        if value.len() > MAX_ENTRY_BYTES {
            return Err(Error::InvalidArgument(format!(
                "blob value of {} bytes is over the {MAX_ENTRY_BYTES}-byte limit",
                value.len()
            )));
        }
        let value_len = u32::try_from(value.len()).map_err(|_| too_long("value", value.len()))?;
        let used = compress_with_level(
            self.compression,
            self.zstd_level,
            value,
            &mut self.compressed,
        );
        let stored_len = u32::try_from(self.compressed.len())
            .map_err(|_| too_long("value", self.compressed.len()))?;
        let record = &mut self.record;
        record.clear();
        put_fixed32(record, 0); // the CRC, set below
        put_fixed32(record, key_len);
        put_fixed32(record, stored_len);
        put_fixed32(record, value_len);
        record.push(used as u8);
        record.extend_from_slice(key);
        record.extend_from_slice(&self.compressed);
        let crc = mask(crc32c(&record[4..]));
        record[..4].copy_from_slice(&crc.to_le_bytes());
        self.file.append(record).with_path(&self.path)?;
        let blob = BlobRef {
            file_number: self.file_number,
            offset: self.offset,
            size: record.len() as u64,
        };
        self.offset += blob.size;
        self.records += 1;
        self.value_bytes += u64::from(value_len);
        Ok(blob)
    }

    /// Bytes written so far.
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Writes the footer and syncs the file.
    pub fn finish(mut self) -> Result<BlobFileMeta> {
        let mut footer = Vec::with_capacity(super::FOOTER_LEN as usize);
        put_fixed64(&mut footer, self.records);
        put_fixed64(&mut footer, self.value_bytes);
        let crc = mask(crc32c(&footer));
        put_fixed32(&mut footer, crc);
        footer.extend_from_slice(FOOTER_MAGIC);
        self.file.append(&footer).with_path(&self.path)?;
        self.file.sync().with_path(&self.path)?;
        Ok(BlobFileMeta {
            file_number: self.file_number,
            file_size: self.offset + footer.len() as u64,
            records: self.records,
            value_bytes: self.value_bytes,
        })
    }
}
