//! [`BlobFile`]: reads values back by reference, and walks every record (for checks, dumps
//! and garbage collection). Every failure is [`Error::Corruption`] naming the file and the
//! offset of what failed: a reference out of bounds, a record whose checksum, lengths,
//! compression or key do not hold.

use std::path::{Path, PathBuf};

use super::{
    BlobRef, FOOTER_LEN, FOOTER_MAGIC, FORMAT_VERSION, HEADER_LEN, HEADER_MAGIC, RECORD_HEADER_LEN,
};
use crate::checksum::{crc32c, unmask};
use crate::coding::{get_fixed32, get_fixed64};
use crate::compression::{CompressionType, decompress};
use crate::format::MAX_ENTRY_BYTES;
use crate::fs::{ReadFile, Storage};
use crate::{Error, IoContext, Result};

/// An open blob file whose header and footer were checked.
#[derive(Debug)]
pub struct BlobFile {
    file: Box<dyn ReadFile>,
    path: PathBuf,
    file_number: u64,
    size: u64,
    records: u64,
    value_bytes: u64,
}

/// One record of a blob file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobRecord {
    /// Where it is: its reference.
    pub blob: BlobRef,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl BlobFile {
    /// Opens blob file `file_number` at `path` and checks its header and footer.
    pub fn open(storage: &Storage, path: &Path, file_number: u64) -> Result<BlobFile> {
        let file = storage.open_read(path).with_path(path)?;
        let size = file.size().with_path(path)?;
        let corrupt = |offset: u64, reason: String| Error::corruption(path, offset, reason);
        if size < HEADER_LEN + FOOTER_LEN {
            return Err(corrupt(
                0,
                format!("blob file of {size} bytes is shorter than its header and footer"),
            ));
        }
        let mut header = [0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut header, 0).with_path(path)?;
        if &header[..8] != HEADER_MAGIC {
            return Err(corrupt(0, "not a blob file (bad magic)".into()));
        }
        let stored_crc = get_fixed32(&header[12..]).unwrap_or_default();
        if unmask(stored_crc) != crc32c(&header[..12]) {
            return Err(corrupt(0, "blob file header checksum mismatch".into()));
        }
        let version = get_fixed32(&header[8..]).unwrap_or_default();
        if version != FORMAT_VERSION {
            return Err(corrupt(8, format!("unknown blob format version {version}")));
        }
        let footer_at = size - FOOTER_LEN;
        let mut footer = [0u8; FOOTER_LEN as usize];
        file.read_exact_at(&mut footer, footer_at).with_path(path)?;
        if &footer[20..] != FOOTER_MAGIC {
            return Err(corrupt(
                footer_at,
                "blob file footer missing (the file was not finished, or is truncated)".into(),
            ));
        }
        let stored_crc = get_fixed32(&footer[16..]).unwrap_or_default();
        if unmask(stored_crc) != crc32c(&footer[..16]) {
            return Err(corrupt(
                footer_at,
                "blob file footer checksum mismatch".into(),
            ));
        }
        Ok(BlobFile {
            file,
            path: path.to_path_buf(),
            file_number,
            size,
            records: get_fixed64(&footer).unwrap_or_default(),
            value_bytes: get_fixed64(&footer[8..]).unwrap_or_default(),
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The records its footer counts.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The values' bytes before compression, as its footer counts them.
    pub fn value_bytes(&self) -> u64 {
        self.value_bytes
    }

    /// The value `blob` points at, which must have been written under `key`.
    pub fn get(&self, blob: &BlobRef, key: &[u8]) -> Result<Vec<u8>> {
        let end = blob.offset.checked_add(blob.size);
        let in_bounds = blob.file_number == self.file_number
            && blob.offset >= HEADER_LEN
            && blob.size >= RECORD_HEADER_LEN as u64
            && end.is_some_and(|end| end <= self.size - FOOTER_LEN);
        if !in_bounds {
            return Err(Error::corruption(
                &self.path,
                blob.offset,
                format!(
                    "blob reference {blob:?} points outside blob file {} ({} bytes)",
                    self.file_number, self.size
                ),
            ));
        }
        let mut record = vec![0u8; blob.size as usize];
        self.file
            .read_exact_at(&mut record, blob.offset)
            .with_path(&self.path)?;
        let (found_key, value) = self.decode(&record, blob.offset)?;
        if found_key != key {
            return Err(Error::corruption(
                &self.path,
                blob.offset,
                "the blob record belongs to another key than the reference's",
            ));
        }
        Ok(value)
    }

    /// Every record, in file order; the last item is an error if the records do not add up
    /// to what the footer counts.
    pub fn records_iter(&self) -> BlobRecords<'_> {
        BlobRecords {
            file: self,
            offset: HEADER_LEN,
            seen: 0,
            value_bytes: 0,
            done: false,
        }
    }

    /// Checks `record` (read at `offset`) and returns its key and value.
    fn decode<'r>(&self, record: &'r [u8], offset: u64) -> Result<(&'r [u8], Vec<u8>)> {
        let corrupt = |reason: String| Error::corruption(&self.path, offset, reason);
        let field = |at: usize| get_fixed32(&record[at..]).unwrap_or_default();
        if record.len() < RECORD_HEADER_LEN {
            return Err(corrupt(format!("blob record of {} bytes", record.len())));
        }
        let (key_len, stored_len, value_len) = (field(4), field(8), field(12));
        let expected = RECORD_HEADER_LEN as u64 + u64::from(key_len) + u64::from(stored_len);
        if expected != record.len() as u64 {
            return Err(corrupt(format!(
                "blob record lengths say {expected} bytes, the reference {}",
                record.len()
            )));
        }
        if unmask(field(0)) != crc32c(&record[4..]) {
            return Err(corrupt("blob record checksum mismatch".into()));
        }
        // Bounds what decompressing may allocate, whatever the record claims.
        if value_len as usize > MAX_ENTRY_BYTES {
            return Err(corrupt(format!(
                "blob value of {value_len} bytes is over the {MAX_ENTRY_BYTES}-byte limit"
            )));
        }
        let compression = CompressionType::from_u8(record[16])
            .ok_or_else(|| corrupt(format!("unknown compression type {}", record[16])))?;
        let key_end = RECORD_HEADER_LEN + key_len as usize;
        let mut value = Vec::new();
        decompress(
            compression,
            &record[key_end..],
            value_len as usize,
            &mut value,
        )
        .map_err(|why| corrupt(format!("blob value: {why}")))?;
        if value.len() != value_len as usize {
            return Err(corrupt(format!(
                "blob value of {} bytes, its record says {value_len}",
                value.len()
            )));
        }
        Ok((&record[RECORD_HEADER_LEN..key_end], value))
    }
}

/// The records of a [`BlobFile`], in file order ([`BlobFile::records_iter`]).
pub struct BlobRecords<'a> {
    file: &'a BlobFile,
    offset: u64,
    seen: u64,
    value_bytes: u64,
    done: bool,
}

impl BlobRecords<'_> {
    fn next_record(&mut self) -> Result<Option<BlobRecord>> {
        let file = self.file;
        let end = file.size - FOOTER_LEN;
        if self.offset == end {
            if (self.seen, self.value_bytes) != (file.records, file.value_bytes) {
                return Err(Error::corruption(
                    &file.path,
                    end,
                    format!(
                        "blob file holds {} records of {} value bytes, its footer says {} of {}",
                        self.seen, self.value_bytes, file.records, file.value_bytes
                    ),
                ));
            }
            return Ok(None);
        }
        let corrupt = |reason: &str| Error::corruption(&file.path, self.offset, reason);
        if end - self.offset < RECORD_HEADER_LEN as u64 {
            return Err(corrupt("blob record header cut off by the footer"));
        }
        let mut header = [0u8; RECORD_HEADER_LEN];
        file.file
            .read_exact_at(&mut header, self.offset)
            .with_path(&file.path)?;
        let len = |at: usize| u64::from(get_fixed32(&header[at..]).unwrap_or_default());
        let size = RECORD_HEADER_LEN as u64 + len(4) + len(8);
        if size > end - self.offset {
            return Err(corrupt("blob record runs into the footer"));
        }
        let blob = BlobRef {
            file_number: file.file_number,
            offset: self.offset,
            size,
        };
        let mut record = vec![0u8; size as usize];
        file.file
            .read_exact_at(&mut record, self.offset)
            .with_path(&file.path)?;
        let (key, value) = file.decode(&record, self.offset)?;
        self.offset += size;
        self.seen += 1;
        self.value_bytes += value.len() as u64;
        Ok(Some(BlobRecord {
            blob,
            key: key.to_vec(),
            value,
        }))
    }
}

impl Iterator for BlobRecords<'_> {
    type Item = Result<BlobRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let item = self.next_record().transpose();
        self.done = !matches!(item, Some(Ok(_)));
        item
    }
}
