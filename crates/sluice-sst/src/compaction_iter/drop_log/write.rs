//! Encoding a drop log as the compaction iterator writes and drops entries.

use super::{DropLog, DropReason, common_prefix, head, kind_code};
use crate::coding::{put_varint32, put_varint64};
use crate::key::{SeqNo, TRAILER_LEN, ValueKind, pack_trailer};

/// One version of the user key in progress, written or dropped.
#[derive(Clone, Copy, Debug)]
struct Version {
    /// Sequence number and kind as written (a zeroed one has sequence number 0).
    trailer: u64,
    /// Where it sorts in the merged order: `trailer`, or for a value zeroed at the bottom,
    /// the trailer it had.
    sorts_as: u64,
    /// `None` when written.
    dropped: Option<DropReason>,
}

/// Encodes drops as the compaction iterator decides them, told of every entry it writes too.
///
/// The versions of one user key are kept until the next key starts, then sorted into the
/// merged order and encoded: the iterator decides some drops after the versions that sort
/// below them (a tombstone awaiting its verdict, operands folded into a merge written before
/// them), and a record's position and form depend on its neighbours in that order. A writer
/// made [`DropLogWriter::in_order`] is given the merged order and keeps it.
#[derive(Debug, Default)]
pub struct DropLogWriter {
    log: DropLog,
    /// The user key in progress and its versions so far.
    key: Vec<u8>,
    versions: Vec<Version>,
    /// Whether a version in `versions` was dropped (else the key only adds to the count).
    has_drops: bool,
    /// The sequence number a value of this key zeroed at the bottom had: drops citing it
    /// cite the zeroed value.
    zeroed_from: Option<SeqNo>,
    /// Whether entries arrive in the merged order already.
    in_order: bool,
}

impl DropLogWriter {
    /// A writer given every entry in the merged order (tools re-encoding a decoded log):
    /// nothing is sorted, and a drop citing sequence number 0 cites the value zeroed at the
    /// bottom before it.
    pub fn in_order() -> Self {
        DropLogWriter {
            in_order: true,
            ..DropLogWriter::default()
        }
    }

    /// Records that the entry with internal key `ikey` was written.
    pub fn written(&mut self, ikey: &[u8]) {
        self.version(ikey, None, None);
    }

    /// Records that the value with internal key `ikey` was written with its sequence number
    /// zeroed at the bottom: it had `seq_before`. It sorts where it did, before the versions
    /// it shadows, which cite it as 0.
    pub fn written_zeroed(&mut self, ikey: &[u8], seq_before: SeqNo) {
        self.version(ikey, None, Some(seq_before));
    }

    /// Records that the entry with internal key `ikey` was dropped for `reason`.
    pub fn push(&mut self, ikey: &[u8], reason: DropReason) {
        self.version(ikey, Some(reason), None);
    }

    /// The log of everything recorded so far.
    pub fn take(&mut self) -> DropLog {
        self.end_key();
        self.key.clear();
        std::mem::take(&mut self.log)
    }

    fn version(&mut self, ikey: &[u8], dropped: Option<DropReason>, zeroed_from: Option<SeqNo>) {
        let split = ikey.len().saturating_sub(TRAILER_LEN);
        let (user_key, trailer) = ikey.split_at(split);
        if self.versions.is_empty() || user_key != self.key.as_slice() {
            self.end_key();
            self.key.clear();
            self.key.extend_from_slice(user_key);
        }
        self.has_drops |= dropped.is_some();
        let trailer = crate::coding::get_fixed64(trailer).unwrap_or(0);
        let sorts_as = match zeroed_from {
            Some(seq) => {
                self.zeroed_from = Some(seq);
                pack_trailer(
                    seq,
                    ValueKind::from_u8(trailer as u8).unwrap_or(ValueKind::Value),
                )
            }
            None => trailer,
        };
        self.versions.push(Version {
            trailer,
            sorts_as,
            dropped,
        });
    }

    /// Encodes the drops of the key in progress, in the merged order.
    fn end_key(&mut self) {
        let zeroed_from = self.zeroed_from.take();
        if !self.has_drops {
            self.log.written += self.versions.len() as u64;
            self.versions.clear();
            return;
        }
        if !self.in_order {
            // Newest first; a written version before a drop of the same trailer.
            self.versions
                .sort_by_key(|v| (std::cmp::Reverse(v.sorts_as), v.dropped.is_some()));
        }
        // The sequence number, as written, of the entry before in the merged order.
        let mut previous: Option<SeqNo> = None;
        for i in 0..self.versions.len() {
            let Version {
                trailer, dropped, ..
            } = self.versions[i];
            match dropped {
                None => self.log.written += 1,
                Some(reason) => self.encode(trailer, reason, previous, zeroed_from),
            }
            previous = Some(trailer >> 8);
        }
        self.versions.clear();
        self.has_drops = false;
    }

    /// Encodes one record; `previous` is the entry before it in the merged order when that
    /// entry has the same user key, and `zeroed_from` the number a value of the key zeroed at
    /// the bottom had.
    fn encode(
        &mut self,
        trailer: u64,
        reason: DropReason,
        previous: Option<SeqNo>,
        zeroed_from: Option<SeqNo>,
    ) {
        let seq = trailer >> 8;
        let kind = ValueKind::from_u8(trailer as u8).unwrap_or(ValueKind::Deletion);
        let mut head_byte = reason.code() | kind_code(kind) << 3;
        let below = previous.filter(|&p| p > seq);
        if below.is_some() {
            head_byte |= head::SEQ_BELOW_PREVIOUS;
        }
        // The zeroed value is cited as 0 (its own number is not in the outputs); any other
        // version as the previous entry, or by its distance above the entry's number.
        let cited = reason
            .cites()
            .map(|c| if zeroed_from == Some(c) { 0 } else { c });
        let cites_previous = match (cited, previous) {
            (Some(c), Some(p)) => c != 0 && c == p,
            _ => false,
        };
        if cites_previous {
            head_byte |= head::CITES_PREVIOUS;
        }
        if previous.is_none() {
            head_byte |= head::OWN_KEY;
        }
        let log = &mut self.log;
        let position = log.written;
        put_varint64(&mut log.bytes, position - log.last_position);
        log.bytes.push(head_byte);
        if previous.is_none() {
            let shared = common_prefix(&self.key, &log.last_own_key);
            put_varint32(&mut log.bytes, shared as u32);
            put_varint32(&mut log.bytes, (self.key.len() - shared) as u32);
            log.bytes.extend_from_slice(&self.key[shared..]);
            log.last_own_key.clone_from(&self.key);
        }
        match below {
            Some(p) => put_varint64(&mut log.bytes, p - seq),
            None => put_varint64(&mut log.bytes, seq),
        }
        match cited {
            // 0: the zeroed value.
            Some(0) => put_varint64(&mut log.bytes, 0),
            Some(c) if !cites_previous => put_varint64(&mut log.bytes, c.saturating_sub(seq)),
            _ => {}
        }
        log.last_position = position;
        log.records += 1;
    }
}
