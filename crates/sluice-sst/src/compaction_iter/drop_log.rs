//! The drop log: every entry a compaction dropped, in internal-key order, with the reason the
//! compaction iterator dropped it. A worker sends it with its outputs, and the host checks each
//! decision against what it knows ([`crate::compact::drop_audit`]): a drop-decision bug then
//! fails the share instead of balancing the digest equation with an honestly reported loss.
//!
//! The byte format is specified in `docs/format/drop-log.md`. Each record shares a prefix of
//! its user key with the previous record's; the first record of every log shares nothing, and
//! [`DropLog::append`] re-encodes it when logs of consecutive key ranges (sub-tasks, in order)
//! are joined, so the result is what one writer would have made.

use crate::coding::{get_varint32, get_varint64, put_varint32, put_varint64};
use crate::key::{MAX_SEQ, SeqNo, TRAILER_LEN, ValueKind, compare_internal, pack_trailer};
use crate::{Error, Result};

/// The file name used in errors about a drop log, which is a message, not a file.
pub const DROP_LOG: &str = "<drop log>";

/// Why the compaction iterator dropped an entry (see the parent module's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A newer version of the same key in the same snapshot stripe, the one at sequence number
    /// `by` (the version examined just before), hides it from every reader.
    Shadowed {
        /// The newer version's sequence number.
        by: SeqNo,
    },
    /// A tombstone in a bottommost compaction with no kept version below it that it hides.
    /// A value a compaction filter removed is logged as the tombstone it became.
    BottomTombstone,
    /// A newer range tombstone in its stripe covers it.
    RangeCovered,
    /// Combined by the merge operator into the entry written at sequence number `into` (the
    /// stripe's newest operand's; the entry may be written with sequence number 0 instead,
    /// when it is zeroed at the bottom).
    MergeFolded {
        /// The written entry's sequence number as read.
        into: SeqNo,
    },
}

impl DropReason {
    fn code(self) -> u8 {
        match self {
            DropReason::Shadowed { .. } => 1,
            DropReason::BottomTombstone => 2,
            DropReason::RangeCovered => 3,
            DropReason::MergeFolded { .. } => 4,
        }
    }

    /// The newer sequence number the reason cites, if any.
    pub fn cites(self) -> Option<SeqNo> {
        match self {
            DropReason::Shadowed { by } => Some(by),
            DropReason::MergeFolded { into } => Some(into),
            DropReason::BottomTombstone | DropReason::RangeCovered => None,
        }
    }
}

/// An encoded drop log and its record count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropLog {
    bytes: Vec<u8>,
    records: u64,
    /// The last record's user key, which the next appended log's first record shares from.
    last_user_key: Vec<u8>,
}

impl DropLog {
    /// The encoded records.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The encoded records, owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Appends `next`, the log of a later key range written by another [`DropLogWriter`]:
    /// its first record is re-encoded to share a prefix with this log's last, so the result
    /// is byte for byte what one writer makes of both ranges (every executor's log of a
    /// compaction is the same bytes, however it split the work).
    pub fn append(&mut self, next: DropLog) {
        if self.bytes.is_empty() {
            *self = next;
            return;
        }
        // A writer's first record shares nothing: `0, len, key, ...`.
        let first = get_varint32(&next.bytes).and_then(|(shared, n)| {
            let (len, m) = get_varint32(&next.bytes[n..])?;
            let key = next.bytes.get(n + m..n + m + len as usize)?;
            (shared == 0).then_some((key, n + m + len as usize))
        });
        let Some((key, rest)) = first else {
            self.bytes.extend_from_slice(&next.bytes);
            self.records += next.records;
            return;
        };
        let shared = common_prefix(key, &self.last_user_key);
        put_varint32(&mut self.bytes, shared as u32);
        put_varint32(&mut self.bytes, (key.len() - shared) as u32);
        self.bytes.extend_from_slice(&key[shared..]);
        self.bytes.extend_from_slice(&next.bytes[rest..]);
        self.records += next.records;
        self.last_user_key = next.last_user_key;
    }
}

/// Encodes drops as the compaction iterator decides them.
///
/// A tombstone whose fate waits for the next version ([`DropLogWriter::hold`]) sorts before the
/// shadowed versions dropped while it waits, so those are held back until the verdict.
#[derive(Debug, Default)]
pub struct DropLogWriter {
    log: DropLog,
    last_user_key: Vec<u8>,
    holding: bool,
    held: Vec<(Vec<u8>, DropReason)>,
}

impl DropLogWriter {
    /// Records that the entry with internal key `ikey` was dropped for `reason`.
    pub fn push(&mut self, ikey: &[u8], reason: DropReason) {
        if self.holding {
            self.held.push((ikey.to_vec(), reason));
            return;
        }
        self.encode(ikey, reason);
    }

    /// Holds back what is pushed from now on until [`DropLogWriter::release`].
    pub fn hold(&mut self) {
        self.holding = true;
    }

    /// Writes `first` (the awaited tombstone, when it was dropped), then what was held back.
    pub fn release(&mut self, first: Option<(&[u8], DropReason)>) {
        self.holding = false;
        if let Some((ikey, reason)) = first {
            self.encode(ikey, reason);
        }
        for (ikey, reason) in std::mem::take(&mut self.held) {
            self.encode(&ikey, reason);
        }
    }

    /// The log so far (what is held back is not in it).
    pub fn take(&mut self) -> DropLog {
        let mut log = std::mem::take(&mut self.log);
        log.last_user_key = std::mem::take(&mut self.last_user_key);
        log
    }

    fn encode(&mut self, ikey: &[u8], reason: DropReason) {
        let split = ikey.len().saturating_sub(TRAILER_LEN);
        let (user_key, trailer) = ikey.split_at(split);
        let trailer = crate::coding::get_fixed64(trailer).unwrap_or(0);
        let shared = common_prefix(user_key, &self.last_user_key);
        let out = &mut self.log.bytes;
        put_varint32(out, shared as u32);
        put_varint32(out, (user_key.len() - shared) as u32);
        out.extend_from_slice(&user_key[shared..]);
        // The sequence number alone (a 5-byte trailer varint is 4 bytes this way); the kind
        // rides in the tag byte with the reason.
        put_varint64(out, trailer >> 8);
        out.push(reason.code() | (trailer as u8) << 3);
        if let Some(newer) = reason.cites() {
            put_varint64(out, newer.saturating_sub(trailer >> 8));
        }
        self.last_user_key.truncate(shared);
        self.last_user_key.extend_from_slice(&user_key[shared..]);
        self.log.records += 1;
    }
}

/// The trailer of an internal key at least [`TRAILER_LEN`] bytes long.
fn trailer(ikey: &[u8]) -> u64 {
    crate::coding::get_fixed64(&ikey[ikey.len() - TRAILER_LEN..]).unwrap_or(0)
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Decodes a drop log record by record, checking everything a sender could get wrong: lengths,
/// kinds, reasons, cited sequence numbers newer than the entry, and strict internal-key order.
pub struct DropLogReader<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// The current record's internal key, and the previous record's.
    key: Vec<u8>,
    previous: Vec<u8>,
    seq: SeqNo,
    kind: ValueKind,
    reason: DropReason,
    /// Offset of the current record.
    offset: usize,
    /// Whether the current record's user key is the previous record's.
    same_user_key: bool,
}

impl<'a> DropLogReader<'a> {
    /// A reader before the first record of `bytes`.
    pub fn new(bytes: &'a [u8]) -> DropLogReader<'a> {
        DropLogReader {
            bytes,
            pos: 0,
            key: Vec::new(),
            previous: Vec::new(),
            seq: 0,
            kind: ValueKind::Value,
            reason: DropReason::RangeCovered,
            offset: 0,
            same_user_key: false,
        }
    }

    /// Moves to the next record: `Ok(false)` at the end of the log.
    pub fn advance(&mut self) -> Result<bool> {
        if self.pos == self.bytes.len() {
            return Ok(false);
        }
        self.offset = self.pos;
        let bytes = self.bytes;
        std::mem::swap(&mut self.key, &mut self.previous);
        let shared = self.varint32()? as usize;
        let unshared = self.varint32()? as usize;
        let previous_user_key = &self.previous[..self.previous.len().saturating_sub(TRAILER_LEN)];
        let Some(prefix) = previous_user_key.get(..shared) else {
            return Err(self.corrupt("shares more bytes than the previous key has"));
        };
        let Some(suffix) = self
            .pos
            .checked_add(unshared)
            .and_then(|end| bytes.get(self.pos..end))
        else {
            return Err(self.corrupt("a key runs past the end of the log"));
        };
        self.key.clear();
        self.key.extend_from_slice(prefix);
        self.key.extend_from_slice(suffix);
        self.pos += unshared;
        let seq = self.varint64()?;
        if seq > MAX_SEQ {
            return Err(self.corrupt(format!("sequence number {seq} overflows 56 bits")));
        }
        let Some(&tag) = self.bytes.get(self.pos) else {
            return Err(self.corrupt("a record ends before its tag"));
        };
        self.pos += 1;
        let Some(kind) = ValueKind::from_u8(tag >> 3).filter(|&k| k != ValueKind::RangeDeletion)
        else {
            return Err(self.corrupt(format!("unknown entry kind {}", tag >> 3)));
        };
        self.key
            .extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
        let previous_len = self.previous.len().saturating_sub(TRAILER_LEN);
        self.same_user_key = !self.previous.is_empty() && shared == previous_len && unshared == 0;
        // The order from the shared prefix where it tells (no comparison of whole keys): the
        // same user key needs a smaller trailer; a longer key with the previous one as its
        // prefix sorts after it; otherwise the first differing byte decides.
        let in_order = match (self.previous.is_empty(), suffix.first()) {
            (true, _) => true,
            _ if self.same_user_key => trailer(&self.key) < trailer(&self.previous),
            (false, Some(_)) if shared == previous_len => true,
            (false, Some(&next)) if next != self.previous[shared] => next > self.previous[shared],
            _ => compare_internal(&self.previous, &self.key).is_lt(),
        };
        if !in_order {
            return Err(self.corrupt("records out of internal-key order"));
        }
        self.reason = match tag & 7 {
            1 => DropReason::Shadowed {
                by: self.cited(seq)?,
            },
            2 => DropReason::BottomTombstone,
            3 => DropReason::RangeCovered,
            4 => DropReason::MergeFolded {
                into: self.cited(seq)?,
            },
            other => return Err(self.corrupt(format!("unknown drop reason {other}"))),
        };
        (self.seq, self.kind) = (seq, kind);
        Ok(true)
    }

    /// True when the current record's user key is the previous record's.
    pub fn same_user_key(&self) -> bool {
        self.same_user_key
    }

    /// The current record's internal key. REQUIRES: the last `advance` returned `Ok(true)`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current record's sequence number.
    pub fn seq(&self) -> SeqNo {
        self.seq
    }

    /// The current record's entry kind.
    pub fn kind(&self) -> ValueKind {
        self.kind
    }

    /// Why the current record's entry was dropped.
    pub fn reason(&self) -> DropReason {
        self.reason
    }

    /// The current record's offset in the log, for errors.
    pub fn offset(&self) -> u64 {
        self.offset as u64
    }

    /// A corruption error at the current record.
    pub fn corrupt(&self, reason: impl Into<String>) -> Error {
        Error::corruption(DROP_LOG, self.offset as u64, reason)
    }

    /// Reads a cited sequence number: a delta above `seq`, which must be positive.
    fn cited(&mut self, seq: SeqNo) -> Result<SeqNo> {
        let delta = self.varint64()?;
        seq.checked_add(delta)
            .filter(|&s| delta > 0 && s <= MAX_SEQ)
            .ok_or_else(|| self.corrupt("cites a sequence number not newer than the entry"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::make_internal_key;

    fn ikey(k: &str, seq: SeqNo, kind: ValueKind) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, kind)
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<(Vec<u8>, DropReason)>> {
        let mut r = DropLogReader::new(bytes);
        let mut out = Vec::new();
        while r.advance()? {
            out.push((r.key().to_vec(), r.reason()));
        }
        Ok(out)
    }

    fn sample() -> Vec<(Vec<u8>, DropReason)> {
        vec![
            (
                ikey("apple", 9, ValueKind::Value),
                DropReason::Shadowed { by: 12 },
            ),
            (
                ikey("apple", 3, ValueKind::Deletion),
                DropReason::BottomTombstone,
            ),
            (
                ikey("apricot", 7, ValueKind::Merge),
                DropReason::MergeFolded { into: 8 },
            ),
            (ikey("b", 1, ValueKind::BlobIndex), DropReason::RangeCovered),
        ]
    }

    #[test]
    fn records_round_trip_and_logs_concatenate() {
        let mut w = DropLogWriter::default();
        for (k, r) in &sample()[..2] {
            w.push(k, *r);
        }
        let mut log = w.take();
        let mut w = DropLogWriter::default();
        for (k, r) in &sample()[2..] {
            w.push(k, *r);
        }
        log.append(w.take());
        assert_eq!(log.records(), 4);
        assert_eq!(read_all(log.as_bytes()).unwrap(), sample());
        // The same bytes as one writer's ("apricot" shares "ap" with "apple").
        let mut one = DropLogWriter::default();
        for (k, r) in &sample() {
            one.push(k, *r);
        }
        assert_eq!(log.as_bytes(), one.take().as_bytes());
        assert!(read_all(&[]).unwrap().is_empty());
    }

    #[test]
    fn held_drops_follow_the_awaited_tombstone() {
        let mut w = DropLogWriter::default();
        w.hold();
        w.push(
            &ikey("k", 4, ValueKind::Value),
            DropReason::Shadowed { by: 6 },
        );
        w.release(Some((
            &ikey("k", 6, ValueKind::Deletion),
            DropReason::BottomTombstone,
        )));
        let got = read_all(w.take().as_bytes()).unwrap();
        assert_eq!(got[0].1, DropReason::BottomTombstone);
        assert_eq!(got[1].1, DropReason::Shadowed { by: 6 });
    }

    #[test]
    fn every_malformed_log_is_corruption_at_its_record() {
        let mut w = DropLogWriter::default();
        for (k, r) in sample() {
            w.push(&k, r);
        }
        let good = w.take().into_bytes();
        // Every truncation fails cleanly (or, at a record boundary, reads fewer records).
        for cut in 0..good.len() {
            if let Ok(records) = read_all(&good[..cut]) {
                assert!(records.len() < 4);
            }
        }
        // Out of order: the same record twice.
        let mut w = DropLogWriter::default();
        let (k, r) = &sample()[0];
        w.push(k, *r);
        w.push(k, *r);
        let err = read_all(w.take().as_bytes()).unwrap_err().to_string();
        assert!(err.contains("out of internal-key order"), "{err}");
        // A cite not newer than the entry, an unknown reason, a range tombstone kind.
        let mut bytes = Vec::new();
        put_varint32(&mut bytes, 0);
        put_varint32(&mut bytes, 1);
        bytes.push(b'k');
        put_varint64(&mut bytes, 5);
        let value = (ValueKind::Value as u8) << 3;
        for (tail, expect) in [
            (vec![1 | value, 0], "not newer"),
            (vec![7 | value], "unknown drop reason"),
            (vec![1 | (9 << 3), 1], "unknown entry kind"),
        ] {
            let mut b = bytes.clone();
            b.extend_from_slice(&tail);
            let err = read_all(&b).unwrap_err().to_string();
            assert!(err.contains(expect), "{err}");
            assert!(err.contains(DROP_LOG), "{err}");
        }
        let mut b = Vec::new();
        put_varint32(&mut b, 0);
        put_varint32(&mut b, 1);
        b.push(b'k');
        put_varint64(&mut b, 5);
        b.push(3 | (ValueKind::RangeDeletion as u8) << 3);
        assert!(read_all(&b).is_err());
        // Sharing more than the previous key has.
        let mut b = Vec::new();
        put_varint32(&mut b, 3);
        put_varint32(&mut b, 0);
        assert!(
            read_all(&b)
                .unwrap_err()
                .to_string()
                .contains("shares more")
        );
    }
}
