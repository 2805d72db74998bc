//! Reads logical records back from a log file, telling a torn tail from lost data.
//!
//! A crash while appending leaves a *torn tail*: the last write reached the disk partly, or not
//! at all, or as zeros (the file size was extended but the data pages were not written). Such a
//! tail was never acknowledged as durable, so recovery may discard it. Damage *followed by*
//! valid records is different: acknowledged writes after the damage exist, and silently
//! skipping the damaged ones would lose data, so it is always reported as corruption.
//!
//! The reader tells the two apart by scanning forward from the first bad byte for any valid
//! fragment (a header of a known type whose CRC32C matches, inside one block). Fragments are
//! searched at every byte offset because a damaged length field hides where the next record
//! starts. The scan only runs after damage is found, so clean logs pay nothing, and it stops at
//! the first valid fragment. A payload that itself contains a well-formed log record (e.g. a
//! user value holding a copy of a log) can make a torn tail look like mid-log damage: that
//! errs on the safe side, refusing to open rather than dropping data.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use sluice_sst::{Error, IoContext, Result};

use super::format::{
    BLOCK_SIZE, BadFragment, HEADER_SIZE, RecordType, check_fragment, valid_fragment_at,
};

/// How recovery treats damage at the end of a log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WalRecoveryMode {
    /// A damaged region after which the file holds no valid record is a torn write from a
    /// crash: it is treated as the end of the log, counted in [`LogReader::dropped_bytes`] and
    /// logged. Damage followed by valid records is [`Error::Corruption`].
    #[default]
    TolerateCorruptedTail,
    /// Every damaged byte is [`Error::Corruption`], including a torn tail. Only an all-zero
    /// tail (preallocated space) after a complete record ends the log cleanly.
    AbsoluteConsistency,
}

/// Reads the logical records of one log file in order.
///
/// Not thread-safe (`&mut self`); recovery reads each log on one thread.
pub struct LogReader {
    file: File,
    path: PathBuf,
    mode: WalRecoveryMode,
    /// The block being parsed: `BLOCK_SIZE` bytes, or fewer only if it is the file's last.
    block: Vec<u8>,
    /// File offset of `block[0]`; always a multiple of `BLOCK_SIZE`.
    block_start: u64,
    /// Next unparsed byte in `block`.
    pos: usize,
    /// True once `block` is known to be the file's last block.
    at_eof: bool,
    last_record_offset: u64,
    valid_len: u64,
    dropped_bytes: u64,
    state: State,
    /// See [`LogReader::stop_at_unwritten_gap`].
    stop_at_unwritten_gap: bool,
}

/// Whether the reader can continue. After the end or an error, `read_record` keeps returning
/// the same outcome rather than resuming mid-damage.
enum State {
    Reading,
    Finished,
    Failed {
        corrupt_at: Option<u64>,
        message: String,
    },
}

/// A fragment found by [`LogReader::next_fragment`]; its payload has been appended to the
/// caller's buffer.
enum Physical {
    Fragment { kind: RecordType, offset: u64 },
    Bad { offset: u64, reason: BadFragment },
    Eof,
}

/// What follows a damaged offset, up to the end of the file.
enum Tail {
    /// Only zero bytes (or nothing).
    Zeros,
    /// Non-zero bytes but no valid fragment.
    Garbage,
    /// A valid fragment starts at this file offset.
    ValidFragmentAt(u64),
}

impl LogReader {
    /// Reads `file` from its current position, which must be offset 0 (a freshly opened file).
    pub fn new(file: File, path: PathBuf, mode: WalRecoveryMode) -> Self {
        LogReader {
            file,
            path,
            mode,
            block: Vec::with_capacity(BLOCK_SIZE),
            block_start: 0,
            pos: 0,
            at_eof: false,
            last_record_offset: 0,
            valid_len: 0,
            dropped_bytes: 0,
            state: State::Reading,
            stop_at_unwritten_gap: false,
        }
    }

    /// Returns the next logical record, or `None` at the end of the log (a clean end, an
    /// all-zero tail, or, in [`WalRecoveryMode::TolerateCorruptedTail`], a torn tail).
    ///
    /// Errors: [`Error::Corruption`] naming this file and the offset of the damaged fragment;
    /// [`Error::Io`] if reading fails. After `None` or an error, every later call returns the
    /// same outcome.
    pub fn read_record(&mut self) -> Result<Option<Vec<u8>>> {
        match &self.state {
            State::Reading => {}
            State::Finished => return Ok(None),
            State::Failed {
                corrupt_at: Some(offset),
                message,
            } => {
                return Err(Error::corruption(&self.path, *offset, message.clone()));
            }
            State::Failed {
                corrupt_at: None,
                message,
            } => {
                return Err(Error::io(
                    &self.path,
                    std::io::Error::other(message.clone()),
                ));
            }
        }
        let result = self.read_logical();
        match &result {
            Ok(Some(_)) => {}
            Ok(None) => self.state = State::Finished,
            Err(Error::Corruption { offset, reason, .. }) => {
                self.state = State::Failed {
                    corrupt_at: Some(*offset),
                    message: reason.clone(),
                };
            }
            Err(e) => {
                self.state = State::Failed {
                    corrupt_at: None,
                    message: e.to_string(),
                }
            }
        }
        result
    }

    /// File offset of the first fragment of the record last returned by `read_record`.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// File offset just past the last record returned. Truncating the file to this length
    /// removes a torn tail, after which appending to the log is safe.
    pub fn valid_len(&self) -> u64 {
        self.valid_len
    }

    /// Bytes discarded as a torn tail: from the start of the incomplete record to the end of
    /// the file. Zero unless the mode is `TolerateCorruptedTail` and the tail was torn.
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped_bytes
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_logical(&mut self) -> Result<Option<Vec<u8>>> {
        let mut record = Vec::new();
        // File offset of the first fragment of a record split across blocks, while reading it.
        let mut pending: Option<u64> = None;
        loop {
            match self.next_fragment(&mut record)? {
                Physical::Fragment { kind, offset } => match (kind, pending) {
                    (RecordType::Full, None) => return Ok(Some(self.finish(record, offset))),
                    (RecordType::First, None) => pending = Some(offset),
                    (RecordType::Middle, Some(_)) => {}
                    (RecordType::Last, Some(start)) => return Ok(Some(self.finish(record, start))),
                    (RecordType::Full | RecordType::First, Some(start)) => {
                        // A valid fragment follows, so this cannot be a torn tail.
                        return Err(Error::corruption(
                            &self.path,
                            start,
                            format!(
                                "record split across blocks has no last fragment; a new record \
                                 starts at offset {offset}"
                            ),
                        ));
                    }
                    (RecordType::Middle | RecordType::Last | RecordType::Zero, _) => {
                        return Err(Error::corruption(
                            &self.path,
                            offset,
                            format!("{kind:?} fragment without a preceding first fragment"),
                        ));
                    }
                },
                Physical::Bad { offset, reason } => {
                    return self.bad_region(pending, offset, &reason.to_string());
                }
                Physical::Eof => {
                    return match pending {
                        None => Ok(None),
                        Some(_) => {
                            let end = self.file_offset();
                            self.bad_region(
                                pending,
                                end,
                                "log ends inside a record split across blocks",
                            )
                        }
                    };
                }
            }
        }
    }

    fn finish(&mut self, record: Vec<u8>, start: u64) -> Vec<u8> {
        self.last_record_offset = start;
        self.valid_len = self.file_offset();
        record
    }

    /// File offset of `block[pos]`.
    fn file_offset(&self) -> u64 {
        self.block_start + self.pos as u64
    }

    /// Parses the next physical record, loading blocks as needed. On success the payload is
    /// appended to `out`.
    fn next_fragment(&mut self, out: &mut Vec<u8>) -> Result<Physical> {
        loop {
            let rest = self.block.get(self.pos..).unwrap_or_default();
            if rest.len() < HEADER_SIZE {
                if self.at_eof {
                    return Ok(if rest.is_empty() {
                        Physical::Eof
                    } else {
                        Physical::Bad {
                            offset: self.file_offset(),
                            reason: BadFragment::TooShort,
                        }
                    });
                }
                // A full block's trailer: the writer zero-fills it.
                if rest.iter().any(|&b| b != 0) {
                    return Ok(Physical::Bad {
                        offset: self.file_offset(),
                        reason: BadFragment::NonZeroTrailer,
                    });
                }
                self.load_next_block()?;
                continue;
            }
            let offset = self.file_offset();
            return Ok(match check_fragment(&self.block, self.pos) {
                Ok((kind, payload)) => {
                    out.extend_from_slice(payload);
                    self.pos += HEADER_SIZE + payload.len();
                    Physical::Fragment { kind, offset }
                }
                Err(reason) => Physical::Bad { offset, reason },
            });
        }
    }

    /// Replaces `block` with the file's next block.
    fn load_next_block(&mut self) -> Result<()> {
        self.block_start += self.block.len() as u64;
        self.block.clear();
        self.pos = 0;
        let n = (&mut self.file)
            .take(BLOCK_SIZE as u64)
            .read_to_end(&mut self.block)
            .with_path(&self.path)?;
        self.at_eof = n < BLOCK_SIZE;
        Ok(())
    }

    /// Treats a zero-filled record header followed by valid records as the end of the log
    /// (point-in-time recovery) instead of corruption.
    ///
    /// Use it only for the newest WAL, whose unsynced tail may reach the disk out of order after
    /// a power loss: a page that was never written reads as zeros while a later one survived.
    /// Older WALs are synced before the switch, so a gap in them is real damage.
    pub fn stop_at_unwritten_gap(&mut self, yes: bool) {
        self.stop_at_unwritten_gap = yes;
    }

    fn header_is_zero_at(&self, offset: u64) -> bool {
        let Some(start) = offset
            .checked_sub(self.block_start)
            .and_then(|o| usize::try_from(o).ok())
        else {
            return false;
        };
        self.block
            .get(start..)
            .is_some_and(|rest| !rest.is_empty() && rest.iter().take(HEADER_SIZE).all(|&b| b == 0))
    }

    /// Counts everything from `region_start` to the end of the file as dropped and returns it.
    /// REQUIRES: `scan_tail` ran, so `block` is the file's last block.
    fn drop_rest_from(&mut self, region_start: u64) -> u64 {
        let file_len = self.block_start + self.block.len() as u64;
        let dropped = file_len.saturating_sub(region_start);
        self.dropped_bytes += dropped;
        dropped
    }

    /// Decides what a damaged fragment at `bad_offset` means. `pending` is the start of the
    /// split record being assembled, if any: it is lost along with the damaged fragment.
    fn bad_region(
        &mut self,
        pending: Option<u64>,
        bad_offset: u64,
        reason: &str,
    ) -> Result<Option<Vec<u8>>> {
        let region_start = pending.unwrap_or(bad_offset);
        let unwritten_gap = self.stop_at_unwritten_gap
            && self.mode == WalRecoveryMode::TolerateCorruptedTail
            && self.header_is_zero_at(bad_offset);
        let tail = self.scan_tail(bad_offset)?;
        if let (Tail::ValidFragmentAt(next), true) = (&tail, unwritten_gap) {
            let dropped = self.drop_rest_from(region_start);
            tracing::warn!(
                file = %self.path.display(),
                offset = region_start,
                resumes_at = next,
                dropped_bytes = dropped,
                "newest WAL has a never-written gap; recovering to the point before it"
            );
            return Ok(None);
        }
        if let Tail::ValidFragmentAt(next) = tail {
            return Err(Error::corruption(
                &self.path,
                bad_offset,
                format!(
                    "{reason}; a valid record follows at offset {next}, so records were lost \
                     (this is not a torn write)"
                ),
            ));
        }
        if matches!(tail, Tail::Zeros) && pending.is_none() {
            // Preallocated or never-written space after the last complete record.
            return Ok(None);
        }
        match self.mode {
            WalRecoveryMode::AbsoluteConsistency => Err(Error::corruption(
                &self.path,
                bad_offset,
                format!("{reason} (torn tail; absolute consistency requested)"),
            )),
            WalRecoveryMode::TolerateCorruptedTail => {
                let dropped = self.drop_rest_from(region_start);
                tracing::warn!(
                    file = %self.path.display(),
                    offset = region_start,
                    dropped_bytes = dropped,
                    reason,
                    "dropping torn tail of log: the last write never completed"
                );
                Ok(None)
            }
        }
    }

    /// Scans from `from` (in the current block) to the end of the file for a valid fragment.
    /// Fragments never cross block boundaries, so each block is searched on its own.
    fn scan_tail(&mut self, from: u64) -> Result<Tail> {
        let mut at = usize::try_from(from.saturating_sub(self.block_start)).unwrap_or(usize::MAX);
        let mut all_zero = true;
        loop {
            let rest = self.block.get(at..).unwrap_or_default();
            if let Some(i) =
                (at..self.block.len()).find(|&i| valid_fragment_at(&self.block, i).is_some())
            {
                return Ok(Tail::ValidFragmentAt(self.block_start + i as u64));
            }
            all_zero &= rest.iter().all(|&b| b == 0);
            if self.at_eof {
                return Ok(if all_zero { Tail::Zeros } else { Tail::Garbage });
            }
            self.load_next_block()?;
            at = 0;
        }
    }
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("path", &self.path)
            .field("mode", &self.mode)
            .field("offset", &self.file_offset())
            .field("dropped_bytes", &self.dropped_bytes)
            .finish()
    }
}
