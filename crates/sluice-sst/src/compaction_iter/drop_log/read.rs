//! Decoding a drop log record by record.

use super::{DROP_LOG, DropReason, head, kind_of_code};
use crate::coding::{get_varint32, get_varint64};
use crate::key::{MAX_SEQ, SeqNo, ValueKind};
use crate::{Error, Result};

/// How a record gives its sequence number.
#[derive(Clone, Copy, Debug)]
enum RecordSeq {
    Absolute(SeqNo),
    /// This much below the previous entry's (at least 1).
    BelowPrevious(u64),
}

/// What a record's reason cites.
#[derive(Clone, Copy, Debug)]
enum RecordCite {
    Nothing,
    /// The previous entry's sequence number.
    Previous,
    /// This much above the entry's own (at least 1).
    Above(u64),
    /// The value of the key written with its sequence number zeroed at the bottom, before
    /// the entry in the merged order (a delta of 0): cited as 0.
    Zeroed,
}

/// Decodes a drop log record by record, checking what a record says on its own: lengths,
/// kinds, reasons, and deltas that cannot be zero. What needs the written entries (the key of
/// a record without one, a sequence number below the previous entry's, the order against the
/// written entries) is for the caller, which [`DropLogReader::resolve`] helps.
pub struct DropLogReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Offset of the current record, and of its sequence number field.
    offset: usize,
    tail: usize,
    gap: u64,
    position: u64,
    head: u8,
    /// The last user key a record carried (the current record's, when it carries one).
    own_key: Vec<u8>,
    seq: RecordSeq,
    cite: RecordCite,
}

impl<'a> DropLogReader<'a> {
    /// A reader before the first record of `bytes`.
    pub fn new(bytes: &'a [u8]) -> DropLogReader<'a> {
        DropLogReader {
            bytes,
            pos: 0,
            offset: 0,
            tail: 0,
            gap: 0,
            position: 0,
            head: 0,
            own_key: Vec::new(),
            seq: RecordSeq::Absolute(0),
            cite: RecordCite::Nothing,
        }
    }

    /// Moves to the next record: `Ok(false)` at the end of the log.
    pub fn advance(&mut self) -> Result<bool> {
        if self.pos == self.bytes.len() {
            return Ok(false);
        }
        self.offset = self.pos;
        self.gap = self.varint64()?;
        self.position = self
            .position
            .checked_add(self.gap)
            .ok_or_else(|| self.corrupt("a position past 2^64"))?;
        let Some(&head) = self.bytes.get(self.pos) else {
            return Err(self.corrupt("a record ends before its head"));
        };
        self.pos += 1;
        self.head = head;
        if !(1..=4).contains(&(head & 7)) {
            return Err(self.corrupt(format!("unknown drop reason {}", head & 7)));
        }
        let own = head & head::OWN_KEY != 0;
        if own {
            let shared = self.varint32()? as usize;
            let unshared = self.varint32()? as usize;
            if shared > self.own_key.len() {
                return Err(self.corrupt("shares more bytes than the previous key has"));
            }
            let Some(suffix) = self
                .pos
                .checked_add(unshared)
                .and_then(|end| self.bytes.get(self.pos..end))
            else {
                return Err(self.corrupt("a key runs past the end of the log"));
            };
            self.own_key.truncate(shared);
            self.own_key.extend_from_slice(suffix);
            self.pos += unshared;
        }
        self.tail = self.pos;
        let seq = self.varint64()?;
        self.seq = match head & head::SEQ_BELOW_PREVIOUS != 0 {
            true if own => {
                return Err(self.corrupt("a sequence number below an entry of another key"));
            }
            true if seq == 0 => return Err(self.corrupt("a sequence number 0 below another")),
            true => RecordSeq::BelowPrevious(seq),
            false if seq > MAX_SEQ => {
                return Err(self.corrupt(format!("sequence number {seq} overflows 56 bits")));
            }
            false => RecordSeq::Absolute(seq),
        };
        let cites = matches!(head & 7, 1 | 4);
        self.cite = match (cites, head & head::CITES_PREVIOUS != 0) {
            (false, false) => RecordCite::Nothing,
            (false, true) => {
                return Err(self.corrupt("cites a version for a reason that cites none"));
            }
            (true, true) if own => return Err(self.corrupt("cites an entry of another key")),
            (true, true) => RecordCite::Previous,
            (true, false) => match self.varint64()? {
                0 => RecordCite::Zeroed,
                delta => RecordCite::Above(delta),
            },
        };
        Ok(true)
    }

    /// How many written entries sort before the current record's entry.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// The user key the current record carries: `None` when its key is the previous entry's
    /// in the merged order (written or dropped).
    pub fn own_key(&self) -> Option<&[u8]> {
        (self.head & head::OWN_KEY != 0).then_some(self.own_key.as_slice())
    }

    /// The current record's entry kind.
    pub fn kind(&self) -> ValueKind {
        kind_of_code(self.head >> 3)
    }

    /// The current record's sequence number and reason, given `previous`, the sequence number
    /// of the previous entry in the merged order when it has the record's user key. Fails when
    /// the record needs a previous entry there is not, or cites a version not newer than it.
    /// A record citing the value of its key zeroed at the bottom cites 0 (the audit finds
    /// that value among the written entries).
    pub fn resolve(&self, previous: Option<SeqNo>) -> Result<(SeqNo, DropReason)> {
        let seq = match self.seq {
            RecordSeq::Absolute(seq) => seq,
            RecordSeq::BelowPrevious(delta) => previous
                .and_then(|p| p.checked_sub(delta))
                .ok_or_else(|| self.corrupt("a sequence number below one no entry has"))?,
        };
        let cited =
            match self.cite {
                RecordCite::Nothing => None,
                RecordCite::Previous => Some(previous.filter(|&p| p > seq).ok_or_else(|| {
                    self.corrupt("cites a sequence number not newer than the entry")
                })?),
                RecordCite::Zeroed => Some(0),
                RecordCite::Above(delta) => Some(
                    seq.checked_add(delta)
                        .filter(|&s| s <= MAX_SEQ)
                        .ok_or_else(|| self.corrupt("cites a sequence number past 2^56 - 1"))?,
                ),
            };
        let reason = match (self.head & 7, cited) {
            (1, Some(by)) => DropReason::Shadowed { by },
            (2, _) => DropReason::BottomTombstone,
            (3, _) => DropReason::RangeCovered,
            (_, Some(into)) => DropReason::MergeFolded { into },
            (_, None) => return Err(self.corrupt("a reason without its cited version")),
        };
        Ok((seq, reason))
    }

    /// The current record's offset in the log, for errors.
    pub fn offset(&self) -> u64 {
        self.offset as u64
    }

    /// A corruption error at the current record.
    pub fn corrupt(&self, reason: impl Into<String>) -> Error {
        Error::corruption(DROP_LOG, self.offset as u64, reason)
    }

    /// The current record's position less the previous record's (for re-encoding).
    pub(super) fn gap(&self) -> u64 {
        self.gap
    }

    /// The current record's head byte (for re-encoding).
    pub(super) fn head_byte(&self) -> u8 {
        self.head
    }

    /// Where the current record's sequence number field starts (for re-encoding).
    pub(super) fn tail_offset(&self) -> usize {
        self.tail
    }

    /// Where the next record starts.
    pub(super) fn byte_offset(&self) -> usize {
        self.pos
    }

    fn varint32(&mut self) -> Result<u32> {
        let (v, n) = get_varint32(&self.bytes[self.pos..])
            .ok_or_else(|| self.corrupt("a truncated or overlong varint"))?;
        self.pos += n;
        Ok(v)
    }

    fn varint64(&mut self) -> Result<u64> {
        let (v, n) = get_varint64(&self.bytes[self.pos..])
            .ok_or_else(|| self.corrupt("a truncated or overlong varint"))?;
        self.pos += n;
        Ok(v)
    }
}
