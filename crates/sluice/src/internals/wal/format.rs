//! The physical layout of a log file (write-ahead log and MANIFEST), shared by writer and reader.
//!
//! A log file is a sequence of 32 KiB blocks; the last block may be short. Each block holds
//! physical records; a physical record never crosses a block boundary:
//!
//! ```text
//! block           = physical_record* trailer?
//! physical_record = masked_crc: fixed32 LE   -- mask(crc32c(type byte || payload))
//!                   length:     fixed16 LE   -- payload bytes, <= BLOCK_SIZE - HEADER_SIZE
//!                   type:       u8           -- RecordType below
//!                   payload:    [u8; length]
//! trailer         = 0..=6 zero bytes         -- a block tail too short for a header
//! ```
//!
//! A logical record (one `add_record` call) is stored as a single `Full` fragment, or as
//! `First`, zero or more `Middle`, and `Last` when it does not fit in the rest of the block.
//! This is LevelDB's log format byte for byte (`doc/log_format.md` there), plus one record type
//! of Sluice's own, [`RecordType::SyncMark`], that a WAL writes to say how far it was synced;
//! `docs/format/wal.md` is the full specification.

/// Size of a log block. Frozen: changing it makes every existing log unreadable.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Size of a physical record header: checksum (4) + length (2) + type (1).
pub const HEADER_SIZE: usize = 4 + 2 + 1;

/// Largest payload one fragment can carry (a whole block minus its header).
pub const MAX_FRAGMENT_LEN: usize = BLOCK_SIZE - HEADER_SIZE;

/// The type byte of a physical record.
///
/// These values are written to disk and are frozen: never renumber them. New types may only
/// take new numbers, and an old reader treats an unknown type as corruption.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordType {
    /// Reserved for preallocated (zero-filled) space; never written by the writer.
    Zero = 0,
    /// A whole logical record.
    Full = 1,
    /// The first fragment of a logical record split across blocks.
    First = 2,
    /// An interior fragment.
    Middle = 3,
    /// The final fragment.
    Last = 4,
    /// Not part of any logical record: a WAL's statement that it was synced through an offset
    /// before this fragment was written ([`SYNC_MARK_LEN`] bytes: log number, synced length).
    /// Recovery uses it to tell lost synced data from an unsynced torn tail.
    SyncMark = 5,
}

impl RecordType {
    /// Decodes a type byte; `None` for values this version does not know.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(RecordType::Zero),
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            5 => Some(RecordType::SyncMark),
            _ => None,
        }
    }
}

/// Masks a CRC before storing it: the same masking SSTable blocks use (LevelDB's
/// `crc32c::Mask`), because a record may carry bytes that themselves contain checksums.
pub use sluice_sst::checksum::mask as mask_crc;
/// Inverse of [`mask_crc`].
pub use sluice_sst::checksum::unmask as unmask_crc;

/// The unmasked CRC32C of a physical record: over the type byte, then the payload.
#[inline]
pub fn record_crc(kind: u8, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&[kind]), payload)
}

/// Appends a physical record (header and payload) to `dst`.
///
/// Precondition: `payload.len() <= MAX_FRAGMENT_LEN` and the record fits in the current block;
/// the writer guarantees both.
pub(crate) fn encode_fragment(dst: &mut Vec<u8>, kind: RecordType, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_FRAGMENT_LEN);
    let crc = mask_crc(record_crc(kind as u8, payload));
    dst.extend_from_slice(&crc.to_le_bytes());
    dst.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    dst.push(kind as u8);
    dst.extend_from_slice(payload);
}

/// Payload bytes of a [`RecordType::SyncMark`] fragment: log number, then synced length, both
/// `u64` little-endian.
pub const SYNC_MARK_LEN: usize = 16;

/// Bytes a whole sync mark fragment takes in a block.
pub const SYNC_MARK_FRAGMENT_LEN: usize = HEADER_SIZE + SYNC_MARK_LEN;

/// The payload of a sync mark: log `log_number` was synced through `synced_len` bytes.
pub(crate) fn encode_sync_mark(log_number: u64, synced_len: u64) -> [u8; SYNC_MARK_LEN] {
    let mut payload = [0u8; SYNC_MARK_LEN];
    payload[..8].copy_from_slice(&log_number.to_le_bytes());
    payload[8..].copy_from_slice(&synced_len.to_le_bytes());
    payload
}

/// Decodes a sync mark payload into `(log_number, synced_len)`; `None` if it has the wrong size.
pub(crate) fn decode_sync_mark(payload: &[u8]) -> Option<(u64, u64)> {
    let bytes: &[u8; SYNC_MARK_LEN] = payload.try_into().ok()?;
    let (number, synced) = bytes.split_at(8);
    Some((
        u64::from_le_bytes(number.try_into().ok()?),
        u64::from_le_bytes(synced.try_into().ok()?),
    ))
}

/// A physical record header as found on disk, not yet validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawHeader {
    pub masked_crc: u32,
    pub length: usize,
    pub kind: u8,
}

/// Reads the header at the start of `src`; `None` if fewer than [`HEADER_SIZE`] bytes remain.
pub(crate) fn parse_header(src: &[u8]) -> Option<RawHeader> {
    let h: &[u8; HEADER_SIZE] = src.get(..HEADER_SIZE)?.try_into().ok()?;
    Some(RawHeader {
        masked_crc: u32::from_le_bytes([h[0], h[1], h[2], h[3]]),
        length: usize::from(u16::from_le_bytes([h[4], h[5]])),
        kind: h[6],
    })
}

/// Why the bytes at some offset are not a valid fragment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadFragment {
    /// Fewer than [`HEADER_SIZE`] bytes remain.
    TooShort,
    /// Non-zero bytes in the tail of a block too short for a header (written as zeros).
    NonZeroTrailer,
    /// An all-zero header: preallocated or never-written space.
    ZeroHeader,
    /// The length field points past the end of the block.
    CrossesBlock { length: usize },
    /// The length field points past the end of the file.
    PastEndOfFile { length: usize },
    /// A type byte this version does not know (or `Zero` with a payload).
    UnknownType(u8),
    /// The checksum does not match the type and payload.
    Checksum,
}

impl std::fmt::Display for BadFragment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadFragment::TooShort => write!(f, "too few bytes for a record header"),
            BadFragment::NonZeroTrailer => write!(f, "non-zero bytes in a block trailer"),
            BadFragment::ZeroHeader => write!(f, "zero-filled record header"),
            BadFragment::CrossesBlock { length } => {
                write!(f, "record length {length} crosses the block boundary")
            }
            BadFragment::PastEndOfFile { length } => {
                write!(f, "record length {length} runs past the end of the file")
            }
            BadFragment::UnknownType(t) => write!(f, "unknown record type {t}"),
            BadFragment::Checksum => write!(f, "record checksum mismatch"),
        }
    }
}

/// Validates the fragment starting at `block[at..]` and returns its type and payload.
///
/// `block` must start at a block boundary and hold at most [`BLOCK_SIZE`] bytes; it is shorter
/// only when it is the file's last block, so a fragment running past `block.len()` but not past
/// `BLOCK_SIZE` was cut off by the end of the file.
pub(crate) fn check_fragment(block: &[u8], at: usize) -> Result<(RecordType, &[u8]), BadFragment> {
    let header = block
        .get(at..)
        .and_then(parse_header)
        .ok_or(BadFragment::TooShort)?;
    if header.masked_crc == 0 && header.length == 0 && header.kind == 0 {
        return Err(BadFragment::ZeroHeader);
    }
    let start = at + HEADER_SIZE;
    let end = start + header.length;
    if end > BLOCK_SIZE {
        return Err(BadFragment::CrossesBlock {
            length: header.length,
        });
    }
    let payload = block.get(start..end).ok_or(BadFragment::PastEndOfFile {
        length: header.length,
    })?;
    let kind = match RecordType::from_u8(header.kind) {
        Some(RecordType::Zero) | None => return Err(BadFragment::UnknownType(header.kind)),
        Some(kind) => kind,
    };
    if unmask_crc(header.masked_crc) != record_crc(header.kind, payload) {
        return Err(BadFragment::Checksum);
    }
    Ok((kind, payload))
}

/// True if a complete, checksummed fragment of a known type starts at `block[at..]`.
pub(crate) fn valid_fragment_at(block: &[u8], at: usize) -> Option<(RecordType, &[u8])> {
    check_fragment(block, at).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The CRC-32C check value from RFC 3720 / the Castagnoli polynomial catalogue.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn mask_round_trips_and_changes_the_value() {
        for crc in [0u32, 1, 0xe306_9283, u32::MAX, 0x8000_0000] {
            assert_eq!(unmask_crc(mask_crc(crc)), crc);
            assert_ne!(mask_crc(crc), crc);
            assert_ne!(mask_crc(mask_crc(crc)), mask_crc(crc));
        }
        // LevelDB's mask of 0: rotate is a no-op, so the result is the delta itself.
        assert_eq!(mask_crc(0), 0xa282_ead8);
    }

    #[test]
    fn fragment_encoding_is_leveldb_layout() {
        let mut buf = Vec::new();
        encode_fragment(&mut buf, RecordType::Full, b"abc");
        assert_eq!(buf.len(), HEADER_SIZE + 3);
        assert_eq!(&buf[4..7], &[3, 0, 1]);
        let stored = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]);
        assert_eq!(unmask_crc(stored), crc32c::crc32c(&[1, b'a', b'b', b'c']));
        assert_eq!(
            valid_fragment_at(&buf, 0),
            Some((RecordType::Full, &b"abc"[..]))
        );
        // Truncated, or shifted by one byte: not a fragment.
        assert_eq!(valid_fragment_at(&buf[..buf.len() - 1], 0), None);
        assert_eq!(valid_fragment_at(&buf, 1), None);
        assert_eq!(valid_fragment_at(&[0u8; 16], 0), None);
    }

    #[test]
    fn record_type_values_are_frozen() {
        let all = [
            (RecordType::Zero, 0u8),
            (RecordType::Full, 1),
            (RecordType::First, 2),
            (RecordType::Middle, 3),
            (RecordType::Last, 4),
            (RecordType::SyncMark, 5),
        ];
        for (kind, value) in all {
            assert_eq!(kind as u8, value);
            assert_eq!(RecordType::from_u8(value), Some(kind));
        }
        assert_eq!(RecordType::from_u8(6), None);
    }

    #[test]
    fn sync_mark_round_trips() {
        let payload = encode_sync_mark(7, 0x0102_0304_0506);
        assert_eq!(&payload[..8], &7u64.to_le_bytes());
        assert_eq!(decode_sync_mark(&payload), Some((7, 0x0102_0304_0506)));
        assert_eq!(decode_sync_mark(&payload[..15]), None);
    }
}
