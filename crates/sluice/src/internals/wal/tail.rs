//! What follows damage in a log: the next valid fragment, whether only zeros follow, and the
//! sync marks after it. Only damaged logs are scanned, so clean ones pay nothing.

use std::path::Path;

use sluice_sst::fs::ReadFile;
use sluice_sst::{IoContext, Result};

use super::format::{
    BLOCK_SIZE, HEADER_SIZE, RecordType, SYNC_MARK_FRAGMENT_LEN, SYNC_MARK_LEN, decode_sync_mark,
    valid_fragment_at,
};

/// What follows a damaged offset, up to the end of the file.
pub(super) struct Tail {
    /// The first valid fragment after the damage, if any.
    pub next_valid: Option<u64>,
    /// Every byte from the damage on is zero (or there are none).
    pub zeros_only: bool,
    /// The largest synced length a sync mark of this log after the damage states.
    pub max_mark: u64,
    /// The file's length.
    pub file_len: u64,
}

/// Scans `file` from `from` to its end for the first valid fragment and, with `log_number`,
/// for every sync mark of that log. Fragments never cross block boundaries, so each block is
/// searched on its own.
pub(super) fn scan_tail(
    file: &dyn ReadFile,
    path: &Path,
    from: u64,
    log_number: Option<u64>,
) -> Result<Tail> {
    let block_len = BLOCK_SIZE as u64;
    let mut tail = Tail {
        next_valid: None,
        zeros_only: true,
        max_mark: 0,
        file_len: from,
    };
    let mut buf = Vec::with_capacity(BLOCK_SIZE);
    let mut block_start = from - from % block_len;
    let mut at = (from % block_len) as usize;
    loop {
        buf.clear();
        let n = read_block(file, block_start, &mut buf).with_path(path)?;
        tail.file_len = block_start + n as u64;
        tail.zeros_only &= buf.get(at..).unwrap_or_default().iter().all(|&b| b == 0);
        if tail.next_valid.is_none() {
            tail.next_valid = (at..buf.len())
                .find(|&i| valid_fragment_at(&buf, i).is_some())
                .map(|i| block_start + i as u64);
        }
        if let Some(number) = log_number {
            for i in at..buf.len() {
                // A mark can only state bytes before itself.
                if let Some(synced) = sync_mark_at(&buf, i, number)
                    && synced <= block_start + i as u64
                {
                    tail.max_mark = tail.max_mark.max(synced);
                }
            }
        } else if tail.next_valid.is_some() {
            // A valid fragment means the tail is not all zeros; the length is the file's.
            tail.file_len = file.size().with_path(path)?;
            return Ok(tail);
        }
        if n < BLOCK_SIZE {
            return Ok(tail);
        }
        block_start += block_len;
        at = 0;
    }
}

/// Reads up to one block at `start` into `buf` (appended to it); returns the bytes read, fewer
/// than a block only at the end of the file.
///
/// A file may shrink between taking its size and reading: the WAL a follower reads is cut to
/// its length when its writer moves to the next one (its space was reserved ahead). The read
/// then takes the size again, a few times.
pub(super) fn read_block(
    file: &dyn ReadFile,
    start: u64,
    buf: &mut Vec<u8>,
) -> std::io::Result<usize> {
    let old_len = buf.len();
    let mut attempts = 0;
    loop {
        let available = file.size()?.saturating_sub(start);
        // At most a block, so the conversion cannot fail.
        let n = usize::try_from(available.min(BLOCK_SIZE as u64)).unwrap_or(BLOCK_SIZE);
        buf.resize(old_len + n, 0);
        match file.read_exact_at(&mut buf[old_len..], start) {
            Ok(()) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && attempts < 3 => {
                attempts += 1;
            }
            Err(e) => {
                buf.truncate(old_len);
                return Err(e);
            }
        }
    }
}

/// The synced length of a valid sync mark of log `log_number` at `block[at..]`. Checks the
/// length and type bytes before the checksum, so scanning every offset of a tail is cheap.
fn sync_mark_at(block: &[u8], at: usize, log_number: u64) -> Option<u64> {
    let fragment = block.get(at..at + SYNC_MARK_FRAGMENT_LEN)?;
    let header_tail = [SYNC_MARK_LEN as u8, 0, RecordType::SyncMark as u8];
    if fragment[4..HEADER_SIZE] != header_tail {
        return None;
    }
    let (RecordType::SyncMark, payload) = valid_fragment_at(block, at)? else {
        return None;
    };
    let (number, synced) = decode_sync_mark(payload)?;
    (number == log_number).then_some(synced)
}
