//! The read-side steps: S1 read a block's stored bytes, S2 verify its checksum, S3 decompress
//! and parse it. Each is a plain function so executors can run them on different threads.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::block::Block;
use crate::checksum::block_checksum;
use crate::coding::get_fixed32;
use crate::compression::{CompressionType, decompress};
use crate::format::{BLOCK_TRAILER_LEN, BlockHandle, MAX_BLOCK_BYTES};
use crate::{Error, Result};

/// A block's bytes as stored on disk: contents (possibly compressed) followed by the trailer.
///
/// Invariant: `bytes.len() == handle.size + BLOCK_TRAILER_LEN`.
#[derive(Debug, Clone)]
pub struct RawBlock {
    bytes: Vec<u8>,
    handle: BlockHandle,
    path: Arc<Path>,
}

impl RawBlock {
    /// Stored contents and trailer.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Where the block was read from.
    pub fn handle(&self) -> BlockHandle {
        self.handle
    }

    /// The file the block was read from.
    pub fn path(&self) -> &Arc<Path> {
        &self.path
    }

    /// Bytes read from the file, trailer included.
    pub fn stored_len(&self) -> usize {
        self.bytes.len()
    }

    /// Splits into stored contents, compression type byte and stored (masked) checksum.
    fn parts(&self) -> (&[u8], u8, u32) {
        let split = self.bytes.len().saturating_sub(BLOCK_TRAILER_LEN);
        let (contents, trailer) = self.bytes.split_at(split);
        let ctype = trailer.first().copied().unwrap_or(u8::MAX);
        let crc = get_fixed32(trailer.get(1..).unwrap_or_default()).unwrap_or(0);
        (contents, ctype, crc)
    }

    fn corruption(&self, reason: impl Into<String>) -> Error {
        Error::corruption(&*self.path, self.handle.offset, reason)
    }
}

/// S1: reads the block at `handle` (contents and trailer) from `file` with one positioned read.
///
/// A handle larger than [`MAX_BLOCK_BYTES`] or reaching past the end of the file is corruption
/// (handles come from the index block), reported at the handle's offset.
pub fn read_raw_block(file: &File, path: &Path, handle: BlockHandle) -> Result<RawBlock> {
    read_raw_block_at(file, &Arc::from(path), handle)
}

/// [`read_raw_block`] for callers that already share the path.
pub(crate) fn read_raw_block_at(
    file: &File,
    path: &Arc<Path>,
    handle: BlockHandle,
) -> Result<RawBlock> {
    if handle.size > MAX_BLOCK_BYTES as u64 {
        return Err(Error::corruption(
            &**path,
            handle.offset,
            format!(
                "block handle size {} exceeds the {MAX_BLOCK_BYTES}-byte limit",
                handle.size
            ),
        ));
    }
    let mut bytes = vec![0u8; handle.size as usize + BLOCK_TRAILER_LEN];
    match file.read_exact_at(&mut bytes, handle.offset) {
        Ok(()) => Ok(RawBlock {
            bytes,
            handle,
            path: Arc::clone(path),
        }),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(Error::corruption(
            &**path,
            handle.offset,
            format!(
                "block of {} bytes runs past the end of the file",
                bytes.len()
            ),
        )),
        Err(e) => Err(Error::io(&**path, e)),
    }
}

/// S2: checks the trailer's CRC32C against the contents and type byte.
pub fn verify_raw_block(raw: &RawBlock) -> Result<()> {
    let (contents, ctype, stored) = raw.parts();
    let actual = block_checksum(contents, ctype);
    if actual != stored {
        return Err(raw.corruption(format!(
            "block checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    Ok(())
}

/// S3 without parsing: the uncompressed contents (for the filter and properties blocks, which
/// are not in block format). Never produces more than [`MAX_BLOCK_BYTES`].
pub(crate) fn decompress_raw_contents(raw: RawBlock) -> Result<Vec<u8>> {
    let (contents, ctype_byte, _) = raw.parts();
    let Some(ctype) = CompressionType::from_u8(ctype_byte) else {
        return Err(raw.corruption(format!("unknown compression type {ctype_byte}")));
    };
    if ctype == CompressionType::None {
        let len = contents.len();
        let mut bytes = raw.bytes;
        bytes.truncate(len);
        return Ok(bytes);
    }
    let mut out = Vec::new();
    decompress(ctype, contents, MAX_BLOCK_BYTES, &mut out)
        .map_err(|e| raw.corruption(format!("cannot decompress block: {e}")))?;
    Ok(out)
}

/// S3: decompresses the block and validates its restart array. Does not verify the checksum
/// (that is S2), so callers that skip S2 still never panic on bad bytes.
pub fn decompress_raw_block(raw: RawBlock) -> Result<Block> {
    let path = Arc::clone(&raw.path);
    let offset = raw.handle.offset;
    Block::new(decompress_raw_contents(raw)?, path, offset)
}
