//! The fixed parts of the table file: block handles, block trailers, the footer, and the limits
//! every reader enforces. `docs/format/sst.md` is the full byte-level specification.
//!
//! ```text
//! block handle  = varint64 offset || varint64 size          (size excludes the trailer)
//! block trailer = u8 compression type || fixed32 LE masked crc32c(contents || type byte)
//!
//! footer (FOOTER_LEN = 64 bytes, at the very end of the file; all integers little-endian):
//!   0  fixed64 index offset        8  fixed64 index size
//!  16  fixed64 filter offset      24  fixed64 filter size      (size 0: the table has no filter)
//!  32  fixed64 properties offset  40  fixed64 properties size
//!  48  fixed32 format version     52  fixed32 masked crc32c of footer bytes 0..52
//!  56  8-byte magic "SLUICEST"
//! ```

use std::path::Path;

use crate::checksum::{block_checksum, crc32c, mask};
use crate::coding::{
    get_fixed32, get_fixed64, get_varint64, put_fixed32, put_fixed64, put_varint64,
};
use crate::compression::CompressionType;
use crate::{Error, Result};

/// Bytes after every block: 1 compression-type byte and a 4-byte masked CRC32C.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Size of the footer at the end of every table file.
pub const FOOTER_LEN: usize = 64;

/// The last 8 bytes of every table file. Frozen.
pub const MAGIC: [u8; 8] = *b"SLUICEST";

/// Format version this build writes. Versions only move forward: a reader accepts every version
/// from 1 up to this one and rejects newer files rather than misreading them.
///
/// History: 1 = initial format.
pub const FORMAT_VERSION: u32 = 1;

/// Largest uncompressed block a reader accepts. Decompression refuses to allocate more, so a
/// corrupt length prefix cannot exhaust memory; writers never produce bigger blocks because a
/// block holds at most `MAX_TABLE_BLOCK_SIZE_BYTES` plus one entry of at most `MAX_ENTRY_BYTES`.
pub const MAX_BLOCK_BYTES: usize = 128 << 20;

/// Largest entry (internal key plus value) a table can hold.
pub const MAX_ENTRY_BYTES: usize = 64 << 20;

/// Largest `block_size` option accepted.
pub const MAX_TABLE_BLOCK_SIZE_BYTES: usize = 32 << 20;

/// The position of a block in a table file. `size` counts the stored block contents, without
/// the [`BLOCK_TRAILER_LEN`] trailer that follows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BlockHandle {
    /// Byte offset of the block's first byte in the file.
    pub offset: u64,
    /// Length of the stored contents (compressed, if compressed), excluding the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Longest varint encoding of a handle.
    pub const MAX_ENCODED_LEN: usize = 20;

    /// Builds a handle.
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends the varint encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes a handle from the start of `src`; returns it and the bytes consumed.
    pub fn decode(src: &[u8]) -> Option<(BlockHandle, usize)> {
        let (offset, n1) = get_varint64(src)?;
        let (size, n2) = get_varint64(src.get(n1..)?)?;
        Some((BlockHandle { offset, size }, n1 + n2))
    }

    /// Offset just past the block's trailer; `None` on overflow (only corrupt handles overflow).
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// The 5-byte trailer stored after `contents` compressed with `ctype`.
pub fn block_trailer(contents: &[u8], ctype: CompressionType) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = block_checksum(contents, ctype as u8).to_le_bytes();
    [ctype as u8, crc[0], crc[1], crc[2], crc[3]]
}

/// The checksum stored in an encoded footer (the masked CRC32C at byte 52): part of the
/// table's identity ([`crate::table::TableIdentity`]).
pub fn footer_checksum(footer: &[u8; FOOTER_LEN]) -> u32 {
    get_fixed32(footer.get(52..).unwrap_or_default()).unwrap_or(0)
}

/// The footer: where the meta blocks are, and which format wrote the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footer {
    /// The index block: one entry per data block.
    pub index: BlockHandle,
    /// The bloom filter block, or `None` when the table was written without a filter.
    pub filter: Option<BlockHandle>,
    /// The properties block.
    pub properties: BlockHandle,
    /// The format version that wrote the file.
    pub format_version: u32,
}

impl Footer {
    /// Encodes the footer; the result is exactly [`FOOTER_LEN`] bytes.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut buf = Vec::with_capacity(FOOTER_LEN);
        let filter = self.filter.unwrap_or_default();
        for h in [self.index, filter, self.properties] {
            put_fixed64(&mut buf, h.offset);
            put_fixed64(&mut buf, h.size);
        }
        put_fixed32(&mut buf, self.format_version);
        let crc = mask(crc32c(&buf));
        put_fixed32(&mut buf, crc);
        buf.extend_from_slice(&MAGIC);
        let mut out = [0u8; FOOTER_LEN];
        out.copy_from_slice(&buf);
        out
    }

    /// Decodes a footer read from `file` at `footer_offset`. Checks, in order, the length, the
    /// magic (so a file that is not a table says so), the checksum and the version.
    pub fn decode(bytes: &[u8], file: &Path, footer_offset: u64) -> Result<Footer> {
        let corrupt = |at: u64, reason: String| {
            Error::corruption(file, footer_offset.saturating_add(at), reason)
        };
        if bytes.len() != FOOTER_LEN {
            return Err(corrupt(
                0,
                format!("footer is {} bytes, expected {FOOTER_LEN}", bytes.len()),
            ));
        }
        if bytes.get(56..) != Some(&MAGIC[..]) {
            return Err(corrupt(56, "bad magic number: not a Sluice table".into()));
        }
        let field64 = |at: usize| get_fixed64(bytes.get(at..).unwrap_or_default()).unwrap_or(0);
        let field32 = |at: usize| get_fixed32(bytes.get(at..).unwrap_or_default()).unwrap_or(0);
        let stored_crc = field32(52);
        let actual_crc = mask(crc32c(bytes.get(..52).unwrap_or_default()));
        if stored_crc != actual_crc {
            return Err(corrupt(
                52,
                format!(
                    "footer checksum mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}"
                ),
            ));
        }
        let format_version = field32(48);
        if !(1..=FORMAT_VERSION).contains(&format_version) {
            return Err(corrupt(
                48,
                format!(
                    "unsupported format version {format_version} (this build reads 1..={FORMAT_VERSION})"
                ),
            ));
        }
        let handle = |at: usize| BlockHandle::new(field64(at), field64(at + 8));
        let filter = handle(16);
        Ok(Footer {
            index: handle(0),
            filter: (filter.size != 0).then_some(filter),
            properties: handle(32),
            format_version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Footer {
        Footer {
            index: BlockHandle::new(1000, 200),
            filter: Some(BlockHandle::new(10, 300)),
            properties: BlockHandle::new(u64::MAX - 7, 1),
            format_version: FORMAT_VERSION,
        }
    }

    #[test]
    fn handle_round_trips() {
        for h in [
            BlockHandle::new(0, 0),
            BlockHandle::new(1 << 40, 4096),
            BlockHandle::new(u64::MAX, u64::MAX),
        ] {
            let mut buf = Vec::new();
            h.encode_to(&mut buf);
            assert!(buf.len() <= BlockHandle::MAX_ENCODED_LEN);
            assert_eq!(BlockHandle::decode(&buf), Some((h, buf.len())));
            assert_eq!(BlockHandle::decode(&buf[..buf.len() - 1]), None);
        }
        assert_eq!(BlockHandle::new(u64::MAX, 1).end_with_trailer(), None);
        assert_eq!(BlockHandle::new(10, 20).end_with_trailer(), Some(35));
    }

    #[test]
    fn footer_round_trips_with_and_without_filter() {
        let p = Path::new("t.sst");
        let f = sample();
        let bytes = f.encode();
        assert_eq!(&bytes[56..], b"SLUICEST");
        assert_eq!(Footer::decode(&bytes, p, 0).unwrap(), f);
        let nf = Footer { filter: None, ..f };
        assert_eq!(Footer::decode(&nf.encode(), p, 0).unwrap(), nf);
    }

    #[test]
    fn every_flipped_byte_is_caught_with_its_offset() {
        let p = Path::new("t.sst");
        let bytes = sample().encode();
        for i in 0..FOOTER_LEN {
            let mut bad = bytes;
            bad[i] ^= 0x01;
            match Footer::decode(&bad, p, 1000) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!(file, p);
                    assert!((1000..1000 + FOOTER_LEN as u64).contains(&offset));
                }
                other => panic!("byte {i}: expected corruption, got {other:?}"),
            }
        }
    }

    #[test]
    fn newer_version_and_short_input_are_rejected() {
        let p = Path::new("t.sst");
        let newer = Footer {
            format_version: FORMAT_VERSION + 1,
            ..sample()
        };
        let err = Footer::decode(&newer.encode(), p, 0).unwrap_err();
        assert!(
            err.to_string().contains("unsupported format version"),
            "{err}"
        );
        assert!(
            Footer::decode(&sample().encode()[1..], p, 0)
                .unwrap_err()
                .is_corruption()
        );
    }

    #[test]
    fn trailer_layout() {
        let t = block_trailer(b"abc", CompressionType::Zstd);
        assert_eq!(t[0], 3);
        assert_eq!(
            u32::from_le_bytes([t[1], t[2], t[3], t[4]]),
            block_checksum(b"abc", 3)
        );
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Footer::decode(&bytes, Path::new("x"), 0);
            let _ = BlockHandle::decode(&bytes);
        }

        #[test]
        fn random_footer_with_magic_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), FOOTER_LEN)) {
            bytes[56..].copy_from_slice(&MAGIC);
            let _ = Footer::decode(&bytes, Path::new("x"), 0);
        }
    }
}
