//! [`BlobRef`]: what the LSM tree holds in place of a separated value.

use crate::coding::{get_varint64, put_varint64};

/// Where a separated value is: its record in blob file `file_number`.
///
/// Encoded as three varint64s (file number, offset, size) and nothing else, so a reference
/// costs a few bytes whatever the value's size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BlobRef {
    /// The blob file's number (it is named `NNNNNN.blob`).
    pub file_number: u64,
    /// The record's first byte in the file.
    pub offset: u64,
    /// The record's length in bytes, its header included.
    pub size: u64,
}

impl BlobRef {
    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file_number);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// The encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12);
        self.encode_to(&mut out);
        out
    }

    /// Decodes exactly one reference: `None` if `src` is anything else (a truncated varint,
    /// one longer than it needs to be, or bytes after the third). Only the canonical encoding
    /// is accepted, so a reference has one encoding and compares equal byte for byte.
    pub fn decode(src: &[u8]) -> Option<BlobRef> {
        let (file_number, a) = get_varint64(src)?;
        let (offset, b) = get_varint64(src.get(a..)?)?;
        let (size, c) = get_varint64(src.get(a + b..)?)?;
        let blob = BlobRef {
            file_number,
            offset,
            size,
        };
        (a + b + c == src.len() && blob.encode() == src).then_some(blob)
    }
}
