//! S5 (compress) and S6 (re-checksum): a sealed block becomes the exact bytes written to disk.
//!
//! ```text
//! encoded block = stored contents || u8 compression type || fixed32 LE masked crc32c
//! ```
//!
//! Both steps are pure functions of their inputs, so every executor, whatever thread runs them,
//! produces byte-identical blocks.

use super::{BlockMeta, SealedBlock, TableOptions};
use crate::compression::{self, CompressionType};
use crate::format::{BLOCK_TRAILER_LEN, block_trailer};

/// A block ready for S7: stored bytes with trailer, and the meta S4 recorded for it (which
/// the writer turns into the index entry, filter and properties of the file it lands in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedBlock {
    /// Stored contents followed by the 5-byte trailer.
    pub bytes: Vec<u8>,
    /// Size of the block before compression.
    pub uncompressed_len: usize,
    /// The sealed block's meta, unchanged.
    pub meta: BlockMeta,
}

impl EncodedBlock {
    /// Bytes the block takes in the file, trailer included.
    pub fn stored_len(&self) -> usize {
        self.bytes.len()
    }
}

/// S5: compresses `contents` with `ctype` into `out` (cleared first) and returns the type used:
/// [`CompressionType::None`], with a copy of `contents` in `out`, when compression saves less
/// than one eighth.
pub fn compress_block(
    contents: &[u8],
    ctype: CompressionType,
    zstd_level: i32,
    out: &mut Vec<u8>,
) -> CompressionType {
    compression::compress_with_level(ctype, zstd_level, contents, out)
}

/// S6: appends the trailer (type byte and masked CRC32C of `compressed || type`) to the stored
/// bytes S5 produced for `sealed`, whose meta goes with the result.
pub fn seal_block_trailer(
    sealed: SealedBlock,
    compressed: Vec<u8>,
    used: CompressionType,
) -> EncodedBlock {
    let uncompressed_len = sealed.contents.len();
    finish(compressed, used, uncompressed_len, sealed.meta)
}

/// S5 and S6 in one call; avoids copying the contents when they are stored uncompressed.
/// Produces the same bytes as [`compress_block`] followed by [`seal_block_trailer`].
pub fn encode_block(mut sealed: SealedBlock, opts: &TableOptions) -> EncodedBlock {
    let uncompressed_len = sealed.contents.len();
    let mut out = Vec::new();
    let (stored, used) = if compression::try_compress(
        opts.compression,
        opts.zstd_level,
        &sealed.contents,
        &mut out,
    ) {
        (out, opts.compression)
    } else {
        (std::mem::take(&mut sealed.contents), CompressionType::None)
    };
    finish(stored, used, uncompressed_len, sealed.meta)
}

fn finish(
    mut stored: Vec<u8>,
    used: CompressionType,
    uncompressed_len: usize,
    meta: BlockMeta,
) -> EncodedBlock {
    let trailer = block_trailer(&stored, used);
    stored.reserve_exact(BLOCK_TRAILER_LEN);
    stored.extend_from_slice(&trailer);
    EncodedBlock {
        bytes: stored,
        uncompressed_len,
        meta,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_steps_and_encode_block_agree_byte_for_byte() {
        let contents: Vec<u8> = (0..4000u32).map(|i| (i % 13) as u8).collect();
        for ctype in CompressionType::ALL {
            let opts = TableOptions {
                compression: ctype,
                ..TableOptions::default()
            };
            let sealed = SealedBlock {
                contents: contents.clone(),
                meta: BlockMeta {
                    last_key: b"last-key\0\0\0\0\0\0\0\0".to_vec(),
                    num_entries: 3,
                    filter_hashes: vec![1, 2, 3],
                    ..BlockMeta::default()
                },
            };
            let mut out = Vec::new();
            let used = compress_block(&sealed.contents, ctype, opts.zstd_level, &mut out);
            let split = seal_block_trailer(sealed.clone(), out, used);
            let sealed_meta = sealed.meta.clone();
            let joined = encode_block(sealed, &opts);
            assert_eq!(split, joined, "{ctype}");
            assert_eq!(joined.uncompressed_len, 4000);
            assert_eq!(joined.meta, sealed_meta, "the meta travels unchanged");
            assert_eq!(joined.bytes[joined.bytes.len() - 5], used as u8);
            if ctype != CompressionType::None {
                assert!(joined.stored_len() < 4000);
            }
        }
    }
}
