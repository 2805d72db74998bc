//! The drop log: every entry a compaction dropped, with the reason the compaction iterator
//! dropped it. A worker sends it with its outputs, and the host checks each decision against
//! what it knows ([`crate::compact::drop_audit`]): a drop-decision bug then fails the share
//! instead of balancing the digest equation with an honestly reported loss.
//!
//! A record is placed by position, not by key: it says how many written entries sort before
//! it, and names its user key only when the entry before it in the merged order (written or
//! dropped) has another one. Most drops are older versions of a key just written, so most
//! records are a few bytes with no key at all, and the host audits them without comparing a
//! key: it counts the entries it reads. The byte format is in `docs/format/drop-log.md`.
//!
//! [`DropLogWriter`] encodes, [`DropLogReader`] decodes record by record, and
//! [`decode_with_written`] resolves a whole log against the written keys (for tools and tests;
//! the audit resolves as it reads).

mod read;
#[cfg(test)]
mod tests;
mod write;

pub use read::DropLogReader;
pub use write::DropLogWriter;

use crate::coding::put_varint32;
use crate::key::{SeqNo, ValueKind, make_internal_key, parse_internal_key};
use crate::{Error, Result};

/// The file name used in errors about a drop log, which is a message, not a file.
pub const DROP_LOG: &str = "<drop log>";

/// Why the compaction iterator dropped an entry (see the parent module's rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// A newer version of the same key in the same snapshot stripe, the one at sequence number
    /// `by` (the version examined just before), hides it from every reader.
    Shadowed {
        /// The newer version's sequence number; as decoded, 0 when it is the key's value
        /// written zeroed at the bottom, whose own number the log cannot give.
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
        /// The written entry's sequence number as read; as decoded, 0 when that entry was
        /// written zeroed at the bottom.
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

/// The head byte of a record: the reason in bits 0-2, the kind in bits 3-4, and three flags.
mod head {
    /// The record carries its own user key (else: the previous entry's in the merged order).
    pub const OWN_KEY: u8 = 1 << 5;
    /// The sequence number is given below the previous entry's (else: as it is).
    pub const SEQ_BELOW_PREVIOUS: u8 = 1 << 6;
    /// The reason cites the previous entry's sequence number (else: a delta above the entry's).
    pub const CITES_PREVIOUS: u8 = 1 << 7;
}

/// The two bits a record spends on its entry's kind (a range tombstone is never dropped here).
fn kind_code(kind: ValueKind) -> u8 {
    match kind {
        ValueKind::Deletion | ValueKind::RangeDeletion => 0,
        ValueKind::Value => 1,
        ValueKind::Merge => 2,
        ValueKind::BlobIndex => 3,
    }
}

fn kind_of_code(code: u8) -> ValueKind {
    match code & 3 {
        0 => ValueKind::Deletion,
        1 => ValueKind::Value,
        2 => ValueKind::Merge,
        _ => ValueKind::BlobIndex,
    }
}

/// An encoded drop log and what appending another needs to know of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DropLog {
    bytes: Vec<u8>,
    records: u64,
    /// Written entries in the log's key range: where an appended log's positions start.
    written: u64,
    /// The last record's position (0 without records).
    last_position: u64,
    /// The last user key a record carried, which the next own key shares a prefix with.
    last_own_key: Vec<u8>,
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

    /// Appends `next`, the log of the next key range, written by another [`DropLogWriter`]
    /// (an executor's next sub-task). Its first record's position is moved past this log's
    /// written entries and its first own key re-encoded to share with this log's last, so the
    /// result is byte for byte what one writer makes of both ranges: every executor sends the
    /// same log for a compaction, however it split the work. A user key never spans two
    /// sub-tasks, so no record of `next` names a key of this log.
    pub fn append(&mut self, next: DropLog) {
        let rebase = self.written - self.last_position;
        let mut reader = DropLogReader::new(&next.bytes);
        let mut copied_to = 0;
        let mut first = true;
        let mut own_seen = false;
        // Re-encodes the records up to the first with an own key; the rest are copied.
        while !own_seen {
            let start = reader.byte_offset();
            match reader.advance() {
                Ok(true) => {}
                // A writer's log always decodes; nothing of it is lost if it did not.
                Ok(false) | Err(_) => break,
            }
            own_seen = reader.own_key().is_some();
            if !first && !own_seen {
                continue;
            }
            let gap = reader.gap() + if first { rebase } else { 0 };
            self.bytes.extend_from_slice(&next.bytes[copied_to..start]);
            crate::coding::put_varint64(&mut self.bytes, gap);
            self.bytes.push(reader.head_byte());
            if let Some(key) = reader.own_key() {
                let shared = common_prefix(key, &self.last_own_key);
                put_varint32(&mut self.bytes, shared as u32);
                put_varint32(&mut self.bytes, (key.len() - shared) as u32);
                self.bytes.extend_from_slice(&key[shared..]);
            }
            self.bytes
                .extend_from_slice(&next.bytes[reader.tail_offset()..reader.byte_offset()]);
            copied_to = reader.byte_offset();
            first = false;
        }
        self.bytes.extend_from_slice(&next.bytes[copied_to..]);
        if next.records > 0 {
            self.last_position = self.written + next.last_position;
        }
        if own_seen {
            self.last_own_key = next.last_own_key;
        }
        self.records += next.records;
        self.written += next.written;
    }
}

/// Every record of `log` as an internal key and a reason, resolved against `written`, the
/// internal keys of the written entries in order; refused unless the records and the written
/// entries make one merged order. For tools and tests: the host's audit resolves and checks
/// records as it reads instead ([`crate::compact::drop_audit`]).
pub fn decode_with_written(log: &[u8], written: &[Vec<u8>]) -> Result<Vec<(Vec<u8>, DropReason)>> {
    Ok(merged_with_written(log, written)?
        .into_iter()
        .filter_map(|(key, reason)| reason.map(|r| (key, r)))
        .collect())
}

/// The merged order of `log`'s records (with their reasons) and `written` (with none), as
/// [`decode_with_written`] checks it. A [`DropLogWriter::in_order`] given these entries
/// writes the log again, canonically.
pub fn merged_with_written(
    log: &[u8],
    written: &[Vec<u8>],
) -> Result<Vec<(Vec<u8>, Option<DropReason>)>> {
    let mut reader = DropLogReader::new(log);
    let mut merged: Vec<(Vec<u8>, Option<DropReason>)> = Vec::new();
    let mut placed = 0;
    while reader.advance()? {
        let position = reader.position();
        if position > written.len() as u64 {
            return Err(reader.corrupt("a position past the last written entry"));
        }
        for w in &written[placed..position as usize] {
            place(&mut merged, (w.clone(), None)).map_err(|why| reader.corrupt(why))?;
        }
        placed = position as usize;
        let (user_key, previous_seq) = match (reader.own_key(), merged.last()) {
            (Some(key), _) => (key.to_vec(), None),
            (None, Some((prev, _))) => {
                let p = parse_internal_key(prev).ok_or_else(|| {
                    Error::corruption(DROP_LOG, 0, "a written key does not parse")
                })?;
                (p.user_key.to_vec(), Some(p.seq))
            }
            (None, None) => return Err(reader.corrupt("names the key of no previous entry")),
        };
        let (seq, reason) = reader.resolve(previous_seq)?;
        let key = make_internal_key(&user_key, seq, reader.kind());
        place(&mut merged, (key, Some(reason))).map_err(|why| reader.corrupt(why))?;
    }
    for w in &written[placed..] {
        place(&mut merged, (w.clone(), None)).map_err(|why| reader.corrupt(why))?;
    }
    Ok(merged)
}

/// Appends `entry` to `merged` if it may follow the last entry.
fn place(
    merged: &mut Vec<(Vec<u8>, Option<DropReason>)>,
    entry: (Vec<u8>, Option<DropReason>),
) -> std::result::Result<(), &'static str> {
    if let Some(last) = merged.last()
        && !follows((&last.0, last.1), (&entry.0, entry.1))
    {
        return Err("entries out of the merged order");
    }
    merged.push(entry);
    Ok(())
}

/// Whether entry `b` may follow entry `a` in the merged order (each an internal key and, for
/// a drop, its reason): internal-key order, a written entry before a drop of the same internal
/// key, and after a value written at sequence number 0 (zeroed at the bottom) the versions
/// that cite it, which sorted below the number it had.
fn follows(a: (&[u8], Option<DropReason>), b: (&[u8], Option<DropReason>)) -> bool {
    let (ua, ub) = (crate::key::user_key(a.0), crate::key::user_key(b.0));
    if ua != ub {
        return ua < ub;
    }
    let (ta, tb) = (crate::key::trailer(a.0), crate::key::trailer(b.0));
    let cites_zeroed = b.1.and_then(DropReason::cites) == Some(0);
    let zeroed = ta >> 8 == 0
        && matches!(
            ValueKind::from_u8(ta as u8),
            Some(ValueKind::Value | ValueKind::BlobIndex)
        );
    match (a.1, b.1) {
        (None, Some(_)) if zeroed && cites_zeroed => true,
        (None, Some(_)) => tb <= ta,
        _ => tb < ta,
    }
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
