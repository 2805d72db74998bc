//! The read-side steps: S1 read a block's stored bytes, S2 verify its checksum, S3 decompress
//! and parse it. Each is a plain function so executors can run them on different threads.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use crate::block::Block;
use crate::checksum::block_checksum;
use crate::coding::get_fixed32;
use crate::compression::{CompressionType, decompress};
use crate::format::{BLOCK_TRAILER_LEN, BlockHandle, MAX_BLOCK_BYTES};
use crate::fs::ReadFile;
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

    /// How the contents are stored, from the trailer; `None` for a type byte this build
    /// does not know (the checksum, checked separately, says whether it is damage).
    pub fn compression(&self) -> Option<CompressionType> {
        CompressionType::from_u8(self.parts().1)
    }

    /// Splits into stored contents, compression type byte and stored (masked) checksum.
    /// The masked CRC32C stored in the block's trailer (verified by [`verify_raw_block`]).
    pub fn stored_checksum(&self) -> u32 {
        self.parts().2
    }

    fn parts(&self) -> (&[u8], u8, u32) {
        split_stored(&self.bytes)
    }

    fn corruption(&self, reason: impl Into<String>) -> Error {
        Error::corruption(&*self.path, self.handle.offset, reason)
    }
}

/// Splits a block's stored bytes into contents, compression type byte and stored (masked)
/// checksum.
fn split_stored(stored: &[u8]) -> (&[u8], u8, u32) {
    let split = stored.len().saturating_sub(BLOCK_TRAILER_LEN);
    let (contents, trailer) = stored.split_at(split);
    let ctype = trailer.first().copied().unwrap_or(u8::MAX);
    let crc = get_fixed32(trailer.get(1..).unwrap_or_default()).unwrap_or(0);
    (contents, ctype, crc)
}

/// How many handles at the front of `handles` one read can fetch: adjacent blocks (each
/// starting where the previous one's trailer ends, as a table's data blocks do) within
/// [`MAX_COALESCED_READ_BYTES`]; at least 1 when `handles` is not empty.
pub(crate) fn adjacent_run(handles: &[BlockHandle]) -> usize {
    let Some(first) = handles.first() else {
        return 0;
    };
    let mut end = first.end_with_trailer();
    let mut run = 1;
    while let (Some(next), Some(e)) = (handles.get(run), end) {
        let next_end = next.end_with_trailer();
        let adjacent = next.offset == e;
        let fits = next_end.is_some_and(|ne| ne - first.offset <= MAX_COALESCED_READ_BYTES);
        if !adjacent || !fits || next.size > MAX_BLOCK_BYTES as u64 {
            break;
        }
        end = next_end;
        run += 1;
    }
    run
}

/// S1: reads the block at `handle` (contents and trailer) from `file` with one positioned read.
///
/// A handle larger than [`MAX_BLOCK_BYTES`] or reaching past the end of the file is corruption
/// (handles come from the index block), reported at the handle's offset.
pub fn read_raw_block(file: &dyn ReadFile, path: &Path, handle: BlockHandle) -> Result<RawBlock> {
    read_raw_block_at(file, &Arc::from(path), handle)
}

/// [`read_raw_block`] for callers that already share the path.
pub(crate) fn read_raw_block_at(
    file: &dyn ReadFile,
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

/// Largest single read [`read_raw_blocks`] issues.
const MAX_COALESCED_READ_BYTES: u64 = 1 << 20;

/// S1 for several blocks of one file: adjacent blocks (each starting where the previous one's
/// trailer ends, as a table's data blocks do) are read with one positioned read of up to
/// 1 MiB, then split. A compaction reads a sub-task's blocks this way, so a 512 KiB sub-task
/// costs a few system calls instead of one per 4 KiB block.
pub fn read_raw_blocks(
    file: &dyn ReadFile,
    path: &Path,
    handles: &[BlockHandle],
) -> Result<Vec<RawBlock>> {
    let path: Arc<Path> = Arc::from(path);
    let mut out = Vec::with_capacity(handles.len());
    let mut rest = handles;
    while let Some(first) = rest.first() {
        let run = adjacent_run(rest);
        let end = rest.get(run - 1).and_then(|last| last.end_with_trailer());
        let (group, tail) = rest.split_at(run);
        rest = tail;
        if run == 1 {
            out.push(read_raw_block_at(file, &path, *first)?);
            continue;
        }
        // `adjacent_run` checked the sizes against the limits, so the range is at most 1 MiB.
        let len = end.unwrap_or(first.offset).saturating_sub(first.offset) as usize;
        let mut bytes = vec![0u8; len];
        match file.read_exact_at(&mut bytes, first.offset) {
            Ok(()) => {}
            // Some block runs past the end: read one by one to report exactly which.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                for h in group {
                    out.push(read_raw_block_at(file, &path, *h)?);
                }
                continue;
            }
            Err(e) => return Err(Error::io(&*path, e)),
        }
        for h in group {
            let start = (h.offset - first.offset) as usize;
            let stored = h.size as usize + BLOCK_TRAILER_LEN;
            let block = bytes
                .get(start..start + stored)
                .unwrap_or_default()
                .to_vec();
            out.push(RawBlock {
                bytes: block,
                handle: *h,
                path: Arc::clone(&path),
            });
        }
    }
    Ok(out)
}

/// S2: checks the trailer's CRC32C against the contents and type byte.
pub fn verify_raw_block(raw: &RawBlock) -> Result<()> {
    verify_stored(&raw.bytes).map_err(|reason| raw.corruption(reason))
}

/// S2 on a block's stored bytes: the reason it fails, if it does.
fn verify_stored(stored: &[u8]) -> std::result::Result<(), String> {
    let (contents, ctype, crc) = split_stored(stored);
    let actual = block_checksum(contents, ctype);
    if actual != crc {
        return Err(format!(
            "block checksum mismatch: stored {crc:#010x}, computed {actual:#010x}"
        ));
    }
    Ok(())
}

/// S3 without parsing on a block's stored bytes: appends the uncompressed contents to `out`,
/// never more than [`MAX_BLOCK_BYTES`]; the reason it fails, if it does.
fn decompress_stored(stored: &[u8], out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let (contents, ctype_byte, _) = split_stored(stored);
    match CompressionType::from_u8(ctype_byte) {
        None => Err(format!("unknown compression type {ctype_byte}")),
        Some(CompressionType::None) => {
            out.extend_from_slice(contents);
            Ok(())
        }
        Some(ctype) => decompress(ctype, contents, MAX_BLOCK_BYTES, out)
            .map_err(|e| format!("cannot decompress block: {e}")),
    }
}

/// S2 and S3 on the stored bytes of the block at `handle` of `path`, borrowed from a larger
/// read: checks the checksum, then leaves the uncompressed contents in `out` (cleared first,
/// so one buffer serves block after block without allocating).
pub(crate) fn verify_and_decompress_stored(
    stored: &[u8],
    path: &Path,
    handle: BlockHandle,
    out: &mut Vec<u8>,
) -> Result<()> {
    out.clear();
    verify_stored(stored)
        .and_then(|()| decompress_stored(stored, out))
        .map_err(|reason| Error::corruption(path, handle.offset, reason))
}

/// S3 without parsing: the uncompressed contents (for the filter and properties blocks, which
/// are not in block format). Never produces more than [`MAX_BLOCK_BYTES`].
pub(crate) fn decompress_raw_contents(raw: RawBlock) -> Result<Vec<u8>> {
    let (contents, ctype_byte, _) = raw.parts();
    if ctype_byte == CompressionType::None as u8 {
        let len = contents.len();
        let mut bytes = raw.bytes;
        bytes.truncate(len);
        return Ok(bytes);
    }
    let mut out = Vec::new();
    decompress_stored(&raw.bytes, &mut out).map_err(|reason| raw.corruption(reason))?;
    Ok(out)
}

/// S3: decompresses the block and validates its restart array. Does not verify the checksum
/// (that is S2), so callers that skip S2 still never panic on bad bytes.
pub fn decompress_raw_block(raw: RawBlock) -> Result<Block> {
    let path = Arc::clone(&raw.path);
    let offset = raw.handle.offset;
    Block::new(decompress_raw_contents(raw)?, path, offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{ValueKind, make_internal_key};
    use crate::table::{Table, TableBuilder, TableOptions, TableReadOptions};

    fn table(dir: &Path) -> Arc<Table> {
        let path = dir.join("1.sst");
        let opts = TableOptions {
            block_size: 512,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&path, &opts).unwrap();
        for i in 0..5000u32 {
            let k = make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Value);
            b.add(&k, format!("value {i}").as_bytes()).unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, 1, TableReadOptions::default()).unwrap()
    }

    #[test]
    fn coalesced_reads_return_the_same_blocks_as_single_reads() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path());
        let handles: Vec<BlockHandle> = t.index_entries().into_iter().map(|(_, h)| h).collect();
        assert!(handles.len() > 100);
        // All of them (several 1 MiB-bounded groups), and a gapped selection.
        let gapped: Vec<BlockHandle> = handles.iter().copied().step_by(3).collect();
        for set in [&handles, &gapped] {
            let together = read_raw_blocks(t.file(), t.path(), set).unwrap();
            assert_eq!(together.len(), set.len());
            for (raw, h) in together.iter().zip(set.iter()) {
                let single = read_raw_block(t.file(), t.path(), *h).unwrap();
                assert_eq!(raw.bytes(), single.bytes());
                assert_eq!(raw.handle(), *h);
                verify_raw_block(raw).unwrap();
            }
        }
    }

    #[test]
    fn a_coalesced_read_past_the_end_names_the_block() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path());
        let handles: Vec<BlockHandle> = t.index_entries().into_iter().map(|(_, h)| h).collect();
        let cut = handles[10].offset + 3;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(t.path())
            .unwrap();
        file.set_len(cut).unwrap();
        let err = read_raw_blocks(t.file(), t.path(), &handles).unwrap_err();
        match err {
            Error::Corruption { offset, .. } => assert_eq!(offset, handles[10].offset),
            other => panic!("expected corruption, got {other}"),
        }
    }
}
