//! The host's check of a worker's drop decisions: every entry its drop log says it dropped
//! must have been droppable by the rules of [`crate::compaction_iter`], judged from what the
//! host knows itself (the live snapshots, the bottommost flag and the range tombstones of the
//! spec) and from the outputs it reads.
//!
//! The outputs and the log together are what the compaction examined: every input entry is
//! either written (possibly rewritten) or dropped. The audit walks the two in the merged order
//! (`docs/format/drop-log.md`), one user key at a time. A record is placed by the count of
//! written entries before it, so the audit counts entries and looks at one only when a drop
//! is next to it: most written entries cost a counter and a flag the full read already has.
//! It holds each drop to its reason:
//!
//! - **shadowed by S**: `S` is newer and in the same snapshot stripe (no reader sees the
//!   dropped version without seeing `S`), and `S` is a written or dropped version of the key
//!   that hides what lies below it: not a merge operand, unless it was itself dropped as
//!   shadowed or covered. A value written zeroed at the bottom no longer carries `S`: a drop
//!   cites it as 0, only in a bottommost compaction and only a value or blob reference written
//!   at 0 before it (a log may also cite an `S` that is nowhere in stripe 0 at the bottom, as
//!   the writer did before zeroed values were cited as 0: then the key must have such a value);
//! - **a tombstone at the bottom**: the compaction is bottommost and the next *written* version
//!   of the key, if any, is a tombstone too, or a version a range tombstone deletes for every
//!   reader that saw the dropped one (what readers saw, "not found", is what they see);
//! - **covered by a range tombstone**: one of the spec's range tombstones covers the version
//!   in its stripe;
//! - **folded into S**: `S` is newer, in the same stripe, and written (or zeroed at the bottom,
//!   as above): a base (value or tombstone) only into a value; operands into an operand, or
//!   into a value only when nothing older lies below them (the key has no next version and
//!   the compaction is bottommost, or the next is covered by a range tombstone in the
//!   stripe), as a full merge reads the base or nothing.
//!
//! The audit also counts the drops by reason: those counts, not the worker's, are what the
//! digest equation is checked with. What it cannot judge is named in design note 0005: the
//! merge operator's and the filter's results (their values are not in the log), and the
//! sequence number a zeroed value had.

use crate::compaction_iter::CompactionIterStats;
use std::cmp::Ordering;

use crate::compaction_iter::drop_log::{DROP_LOG, DropLogReader, DropReason};
use crate::key::{MAX_SEQ, SeqNo, ValueKind, pack_trailer, parse_internal_key};
use crate::range_del::Tombstones;
use crate::{Error, Result};

use super::CompactionSpec;

/// The name in errors about an output entry that does not parse (which the full read of every
/// output rules out before the audit sees it).
const OUTPUTS: &str = "<outputs>";

/// Whether a value of this kind may be written with its sequence number zeroed at the bottom
/// (`CompactionIterator`: values and blob references; a full merge writes a value).
fn zeroable(kind: ValueKind) -> bool {
    matches!(kind, ValueKind::Value | ValueKind::BlobIndex)
}

/// Drops by reason, as the audit counted them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// Versions shadowed in their stripe.
    pub shadowed: u64,
    /// Tombstones dropped at the bottom.
    pub bottom_tombstones: u64,
    /// Versions a range tombstone covers.
    pub range_covered: u64,
    /// Operands and bases folded by the merge operator.
    pub merge_folded: u64,
}

impl DropCounts {
    /// Fails unless `stats` (a worker's report) counts the drops exactly as the log does.
    pub fn check_against(&self, stats: &CompactionIterStats) -> std::result::Result<(), String> {
        let reported = DropCounts {
            shadowed: stats.shadowed_dropped,
            bottom_tombstones: stats.tombstones_dropped,
            range_covered: stats.range_covered,
            merge_folded: stats.merge_absorbed,
        };
        match reported == *self {
            true => Ok(()),
            false => Err(format!(
                "its statistics count drops {reported:?}, its drop log {self:?}"
            )),
        }
    }
}

/// One version of the current user key, written or dropped.
#[derive(Clone, Copy, Debug)]
struct Version {
    seq: SeqNo,
    kind: ValueKind,
    /// `None` when written.
    dropped: Option<DropReason>,
}

/// Walks a share's outputs (fed entry by entry, in order) beside its drop log.
pub struct DropAudit<'a> {
    log: DropLogReader<'a>,
    /// Whether `log` is on a record not yet audited.
    log_ahead: bool,
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    tombstones: Option<&'a Tombstones>,
    lower: Option<&'a [u8]>,
    upper: Option<&'a [u8]>,
    /// The user key being audited and its versions so far, newest first. When versions are
    /// open, `key` is the user key of the previous entry in the merged order.
    key: Vec<u8>,
    versions: Vec<Version>,
    /// Written entries audited so far: the position of a record placed here.
    written: u64,
    /// Whether the records placed before every written entry were audited.
    started: bool,
    /// The previous entry in the merged order: its trailer, and whether it was dropped.
    last: Option<(u64, bool)>,
    /// Whether a record since the last written entry carried its own key (then `key` is that
    /// record's, not the written entry's).
    own_since_written: bool,
    /// A tombstone dropped at the bottom (sequence number, log offset) waits for the next
    /// written version of its key.
    awaiting: Option<(SeqNo, u64)>,
    /// A drop cites a version zeroed at the bottom: the key must end with a written value at 0.
    needs_zeroed: Option<(SeqNo, u64)>,
    /// Where in `versions` the key's value written at 0 (zeroed at the bottom) is.
    zeroed_at: Option<usize>,
    counts: DropCounts,
    /// Whether a drop was refused (the error went to the caller of `written`).
    refused: bool,
    /// A buffer for a record's own key.
    scratch: Vec<u8>,
    /// Key bytes and records the log may still hold ([`DropAudit::limit`]).
    key_budget: u64,
    record_budget: u64,
    /// Merge operands folded into one written entry, until the key's next version says
    /// whether a value with no base folded in was allowed.
    fold: Option<Fold>,
}

/// A run of merge-folded drops of the current key into one written entry.
#[derive(Clone, Copy, Debug)]
struct Fold {
    into: SeqNo,
    /// What the entry was written as (`None` while it is the zeroed one still to come).
    written: Option<ValueKind>,
    /// Whether a base (a value or tombstone) was folded in, not only operands.
    base: bool,
    offset: u64,
}

impl<'a> DropAudit<'a> {
    /// An audit of `log`, the drops of `spec`'s share `[lower, upper)`.
    pub fn new(
        spec: &'a CompactionSpec,
        lower: Option<&'a [u8]>,
        upper: Option<&'a [u8]>,
        log: &'a [u8],
    ) -> Result<DropAudit<'a>> {
        // The stripes the compaction iterator cut (`CompactionIterator::new`).
        let mut snapshots = spec.snapshots.clone();
        snapshots.sort_unstable();
        snapshots.dedup();
        snapshots.retain(|&s| s < MAX_SEQ);
        let mut log = DropLogReader::new(log);
        let log_ahead = log.advance()?;
        Ok(DropAudit {
            log,
            log_ahead,
            snapshots,
            bottommost: spec.bottommost,
            tombstones: spec.range_tombstones.as_deref(),
            lower,
            upper,
            key: Vec::new(),
            versions: Vec::new(),
            written: 0,
            started: false,
            last: None,
            own_since_written: false,
            awaiting: None,
            needs_zeroed: None,
            zeroed_at: None,
            counts: DropCounts::default(),
            refused: false,
            scratch: Vec::new(),
            key_budget: u64::MAX,
            record_budget: u64::MAX,
            fold: None,
        })
    }

    /// Refuses a log with more records than `entries` or whose own keys add up to more than
    /// `key_bytes`: every dropped entry is an input entry, so the inputs bound an honest
    /// log, and the audit's work stays in proportion to the compaction's.
    pub fn limit(&mut self, entries: u64, key_bytes: u64) {
        (self.record_budget, self.key_budget) = (entries, key_bytes);
    }

    /// Audits the next written entry, internal key `ikey`, and the drops placed after it.
    /// `same_user_key` says whether its user key is the previous written entry's, when the
    /// caller knows (the full read does, from its order check); with `None` the audit
    /// compares keys where it needs to.
    pub fn written(&mut self, ikey: &[u8], same_user_key: Option<bool>) -> Result<()> {
        let result = self.audit_written(ikey, same_user_key);
        self.refused |= result.is_err();
        result
    }

    /// True once [`DropAudit::written`] refused a drop: the error a caller got from reading
    /// the outputs is then the audit's, not the read's.
    pub fn refused(&self) -> bool {
        self.refused
    }

    fn audit_written(&mut self, ikey: &[u8], same_user_key: Option<bool>) -> Result<()> {
        if !self.started {
            self.started = true;
            self.drops_at(None)?;
        }
        let written_key = crate::key::user_key(ikey);
        let trailer = crate::key::trailer(ikey);
        // Whether this entry continues the key of the previous entry in the merged order.
        // With nothing open, the previous entry was written with no drop of its key near it,
        // and nothing about it is needed.
        let same = match self.last {
            _ if self.versions.is_empty() => false,
            Some((last, true)) => {
                let by_key = match (self.own_since_written, same_user_key) {
                    (false, Some(true)) => Ordering::Equal,
                    (false, Some(false)) => Ordering::Greater,
                    _ => written_key.cmp(self.key.as_slice()),
                };
                // A written entry sorts before a drop of the same trailer.
                if by_key.is_lt() || (by_key.is_eq() && trailer >= last) {
                    return Err(self
                        .log
                        .corrupt("a dropped entry placed after a written one it sorts after"));
                }
                by_key.is_eq()
            }
            _ => same_user_key.unwrap_or_else(|| written_key == self.key.as_slice()),
        };
        if !same && !self.versions.is_empty() {
            self.end_key()?;
        }
        // A written version matters only to a key with drops: the one open, or the next
        // record's when it names this entry's key. Every other entry (most of them) costs the
        // checks above and a count.
        let names_this_key = self.log_ahead
            && self.log.position() == self.written + 1
            && self.log.own_key().is_none();
        if same || names_this_key {
            self.written_version(ikey, same)?;
        }
        self.written += 1;
        self.last = Some((trailer, false));
        self.own_since_written = false;
        self.drops_at(Some(written_key))
    }

    /// Enters the written entry `ikey` among the versions of the key being audited (a new
    /// one unless `same`).
    fn written_version(&mut self, ikey: &[u8], same: bool) -> Result<()> {
        let Some(p) = parse_internal_key(ikey) else {
            return Err(Error::corruption(
                OUTPUTS,
                0,
                "an entry's key does not parse",
            ));
        };
        if !same {
            self.key.clear();
            self.key.extend_from_slice(p.user_key);
        }
        match self.fold {
            // The zeroed entry the operands were folded into.
            Some(f) if f.written.is_none() && p.seq == 0 => {
                self.fold = Some(Fold {
                    written: Some(p.kind),
                    ..f
                });
            }
            Some(_) => self.settle_fold(Some((p.seq, None)))?,
            None => {}
        }
        // A written version below a dropped tombstone is fine if a range tombstone deletes it
        // for every reader that saw the tombstone.
        if let Some((tombstone, offset)) = self.awaiting
            && p.kind != ValueKind::Deletion
            && !self
                .tombstones
                .is_some_and(|t| t.deletes(p.user_key, p.seq, tombstone))
        {
            return Err(Error::corruption(
                DROP_LOG,
                offset,
                format!(
                    "the tombstone at sequence number {tombstone} was dropped at the bottom, \
                     yet it hides the {:?} written at {}",
                    p.kind, p.seq
                ),
            ));
        }
        self.awaiting = None;
        if p.seq == 0 && zeroable(p.kind) {
            self.zeroed_at = Some(self.versions.len());
        }
        self.versions.push(Version {
            seq: p.seq,
            kind: p.kind,
            dropped: None,
        });
        Ok(())
    }

    /// Audits the records placed at the current position; `written_key` is the user key of
    /// the written entry before them (`None` before the first).
    fn drops_at(&mut self, written_key: Option<&[u8]>) -> Result<()> {
        while self.log_ahead && self.log.position() == self.written {
            self.next_drop(written_key)?;
        }
        Ok(())
    }

    /// Audits the drops placed after the last written entry and returns the drops counted.
    pub fn finish(mut self) -> Result<DropCounts> {
        if !self.started {
            self.started = true;
            self.drops_at(None)?;
        }
        if self.log_ahead {
            return Err(self
                .log
                .corrupt("a dropped entry placed past the last written entry"));
        }
        self.end_key()?;
        Ok(self.counts)
    }

    fn stripe(&self, seq: SeqNo) -> usize {
        self.snapshots.partition_point(|&s| s < seq)
    }

    /// Audits the log's current record and moves past it. `written_key` is the user key of
    /// the written entry the record is placed after, if any.
    fn next_drop(&mut self, written_key: Option<&[u8]>) -> Result<()> {
        self.record_budget = self
            .record_budget
            .checked_sub(1)
            .ok_or_else(|| self.log.corrupt("more drops than the inputs have entries"))?;
        let kind = self.log.kind();
        // The previous entry in the merged order is of the record's key when the record names
        // no key of its own: the open key. A record's own key starts a new one.
        let own_key = match self.log.own_key() {
            None => false,
            Some(own) => {
                let before = match self.versions.is_empty() {
                    false => Some(self.key.as_slice()),
                    true => written_key,
                };
                if before.is_some_and(|k| own <= k) {
                    return Err(self.log.corrupt(
                        "a key not after the entry before it (a record of that key names it \
                         by position)",
                    ));
                }
                let outside =
                    self.lower.is_some_and(|lo| own < lo) || self.upper.is_some_and(|hi| own >= hi);
                if outside {
                    return Err(self
                        .log
                        .corrupt("a dropped entry outside the share's key range"));
                }
                self.key_budget =
                    self.key_budget
                        .checked_sub(own.len() as u64)
                        .ok_or_else(|| {
                            self.log
                                .corrupt("the log's keys add up to more than the inputs'")
                        })?;
                self.scratch.clear();
                self.scratch.extend_from_slice(own);
                true
            }
        };
        let previous = match own_key {
            true => {
                if !self.versions.is_empty() {
                    self.end_key()?;
                }
                std::mem::swap(&mut self.key, &mut self.scratch);
                self.own_since_written = true;
                None
            }
            false if self.versions.is_empty() => {
                return Err(self.log.corrupt("names the key of no entry before it"));
            }
            false => self.last.map(|(trailer, _)| trailer),
        };
        let (seq, reason) = self.log.resolve(previous.map(|t| t >> 8))?;
        let trailer = pack_trailer(seq, kind);
        // Strictly after the previous entry, or equal to a written one (which sorts first);
        // after a value written at 0 (zeroed at the bottom), a version citing it, which
        // sorted below the number the value had.
        let after_written = matches!(self.last, Some((_, false)));
        let after_zeroed = after_written
            && previous
                .is_some_and(|p| p >> 8 == 0 && ValueKind::from_u8(p as u8).is_some_and(zeroable));
        let in_order = match previous {
            None => true,
            Some(_) if after_zeroed && reason.cites() == Some(0) => true,
            Some(p) => trailer < p || (trailer == p && after_written),
        };
        if !in_order {
            return Err(self
                .log
                .corrupt("a dropped entry placed after one it sorts before"));
        }
        let offset = self.log.offset();
        match (self.fold, reason) {
            (Some(f), DropReason::MergeFolded { into }) if f.into == into => {}
            (Some(_), _) => self.settle_fold(Some((seq, Some(reason))))?,
            (None, _) => {}
        }
        let bad = move |why: String| {
            Error::corruption(
                DROP_LOG,
                offset,
                format!("version {seq} dropped as {reason:?}: {why}"),
            )
        };
        match reason {
            DropReason::Shadowed { by } => {
                self.counts.shadowed += 1;
                self.check_cited(by, seq, |v| {
                    v.kind != ValueKind::Merge
                        || matches!(
                            v.dropped,
                            Some(DropReason::Shadowed { .. } | DropReason::RangeCovered)
                        )
                })
                .map_err(bad)?;
            }
            DropReason::MergeFolded { into } => {
                self.counts.merge_folded += 1;
                if !matches!(
                    kind,
                    ValueKind::Merge | ValueKind::Value | ValueKind::Deletion
                ) {
                    return Err(bad(format!("a merge never folds a {kind:?}")));
                }
                // A base folded in makes a full merge: a value. Only operands may make one.
                let base = kind != ValueKind::Merge;
                self.check_cited(into, seq, |v| {
                    v.dropped.is_none()
                        && (v.kind == ValueKind::Value || (!base && v.kind == ValueKind::Merge))
                })
                .map_err(bad)?;
                let written = self.cited_version(into).map(|v| v.kind);
                let f = self.fold.get_or_insert(Fold {
                    into,
                    written,
                    base: false,
                    offset,
                });
                f.base |= base;
            }
            DropReason::BottomTombstone => {
                self.counts.bottom_tombstones += 1;
                if !self.bottommost {
                    return Err(bad(
                        "the compaction is not bottommost: data below may be under it".into(),
                    ));
                }
                if kind != ValueKind::Deletion {
                    return Err(bad(format!("a {kind:?} is not a tombstone")));
                }
                self.awaiting = Some((seq, offset));
            }
            DropReason::RangeCovered => {
                self.counts.range_covered += 1;
                let covered = self
                    .tombstones
                    .is_some_and(|t| t.covers_in_stripe(&self.key, seq, &self.snapshots));
                if !covered {
                    return Err(bad("no range tombstone covers it in its stripe".into()));
                }
            }
        }
        self.versions.push(Version {
            seq,
            kind,
            dropped: Some(reason),
        });
        self.last = Some((trailer, true));
        self.log_ahead = self.log.advance()?;
        Ok(())
    }

    /// Checks that version `cited` of the current key justifies dropping version `seq`: newer,
    /// in the same stripe, and passing `hides` (or zeroed at the bottom, checked at the key's
    /// end).
    fn check_cited(
        &mut self,
        cited: SeqNo,
        seq: SeqNo,
        hides: impl Fn(&Version) -> bool,
    ) -> std::result::Result<(), String> {
        let stripe = self.stripe(cited);
        if stripe != self.stripe(seq) {
            return Err(format!(
                "{cited} is in another snapshot stripe: a snapshot sees the dropped version"
            ));
        }
        // 0 is the value written zeroed at the bottom (its own number is not in the outputs).
        if cited == 0 {
            return match self.cited_version(0) {
                _ if !self.bottommost => Err(
                    "cites a value zeroed at the bottom, in a compaction that is not bottommost"
                        .into(),
                ),
                Some(v) if hides(v) => Ok(()),
                Some(v) => Err(format!(
                    "the value zeroed at the bottom ({:?}) does not hide it",
                    v.kind
                )),
                None => Err("cites a value zeroed at the bottom, and none was written".into()),
            };
        }
        match self.version_at(cited) {
            Some(v) if hides(v) => Ok(()),
            Some(v) => Err(format!("{cited} ({:?}) does not hide it", v.kind)),
            None if self.bottommost && stripe == 0 => {
                self.needs_zeroed.get_or_insert((cited, self.log.offset()));
                Ok(())
            }
            None => Err(format!("{cited} is neither written nor dropped")),
        }
    }

    /// The version a drop cites: at sequence number `seq`, or for 0 the key's value written
    /// zeroed at the bottom.
    fn cited_version(&self, seq: SeqNo) -> Option<&Version> {
        match seq {
            0 => self.zeroed_at.and_then(|at| self.versions.get(at)),
            _ => self.version_at(seq),
        }
    }

    /// The version of the current key at sequence number `seq` (not 0), written or dropped.
    /// Versions are newest first, except that those after a value zeroed at the bottom sort
    /// below the number it had: two descending runs, each searched in `log n` (a drop most
    /// often cites the version just before it, looked at first).
    fn version_at(&self, seq: SeqNo) -> Option<&Version> {
        if let Some(last) = self.versions.last().filter(|v| v.seq == seq) {
            return Some(last);
        }
        let split = self.zeroed_at.map_or(self.versions.len(), |at| at + 1);
        let (before, after) = self.versions.split_at(split);
        [before, after].into_iter().find_map(|run| {
            let at = run.partition_point(|v| v.seq > seq);
            run.get(at).filter(|v| v.seq == seq)
        })
    }

    /// Decides a fold once the key's next version (`next`: its sequence number and why it was
    /// dropped, or `None` written) or its end (`None`) is known. Operands folded into a value
    /// with no base are a full merge, which is right only when nothing lies below them: the
    /// key's next version is deleted by a range tombstone in their stripe, or there is none
    /// and the compaction is bottommost. Otherwise the base lies below and was ignored.
    fn settle_fold(&mut self, next: Option<(SeqNo, Option<DropReason>)>) -> Result<()> {
        let Some(f) = self.fold.take() else {
            return Ok(());
        };
        if f.base || f.written == Some(ValueKind::Merge) {
            return Ok(());
        }
        let allowed = match next {
            Some((seq, Some(DropReason::RangeCovered))) => self.stripe(seq) == self.stripe(f.into),
            Some(_) => false,
            None => self.bottommost,
        };
        match allowed {
            true => Ok(()),
            false => Err(Error::corruption(
                DROP_LOG,
                f.offset,
                format!(
                    "operands folded into a value at {} with no base, while the key has \
                     older data the merge ignored",
                    f.into
                ),
            )),
        }
    }

    /// Closes the current key: a drop citing a zeroed version needs one.
    fn end_key(&mut self) -> Result<()> {
        self.settle_fold(None)?;
        if let Some((cited, offset)) = self.needs_zeroed.take()
            && self.zeroed_at.is_none()
        {
            return Err(Error::corruption(
                DROP_LOG,
                offset,
                format!(
                    "a drop cites version {cited}, which is neither written nor dropped, \
                     and no value was written at sequence number 0 in its place"
                ),
            ));
        }
        self.versions.clear();
        self.zeroed_at = None;
        self.awaiting = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::compact::plan::tests::spec;
    use crate::compaction_iter::drop_log::{DropLog, DropLogWriter, decode_with_written};
    use crate::key::make_internal_key;
    use crate::range_del::RangeTombstone;

    /// One entry of a share as the audit sees it: written, or dropped for a reason.
    type Seen = (&'static str, SeqNo, ValueKind, Option<DropReason>);

    const V: ValueKind = ValueKind::Value;
    const D: ValueKind = ValueKind::Deletion;
    const M: ValueKind = ValueKind::Merge;

    fn shadowed(by: SeqNo) -> Option<DropReason> {
        Some(DropReason::Shadowed { by })
    }

    /// The drop log of `seen`, as the compaction iterator would make it.
    fn encode(seen: &[Seen]) -> DropLog {
        let mut log = DropLogWriter::default();
        for &(key, seq, kind, reason) in seen {
            let ikey = make_internal_key(key.as_bytes(), seq, kind);
            match reason {
                Some(reason) => log.push(&ikey, reason),
                None => log.written(&ikey),
            }
        }
        log.take()
    }

    /// Audits `seen` (in internal-key order) for a compaction with snapshot 10 (stripes
    /// `..=10` and `11..`), `bottommost`, and a range tombstone over `[r, s)` at 30.
    fn audit(bottommost: bool, seen: &[Seen]) -> Result<DropCounts> {
        let mut spec = spec(Vec::new());
        spec.snapshots = vec![10];
        spec.bottommost = bottommost;
        spec.range_tombstones = Some(Arc::new(Tombstones::new(&[RangeTombstone {
            start: b"r".to_vec(),
            end: b"s".to_vec(),
            seq: 30,
        }])));
        let log = encode(seen);
        // Once with the read's word on repeated user keys, once comparing them itself.
        let mut result = None;
        for told in [true, false] {
            let mut audit = DropAudit::new(&spec, None, Some(b"z"), log.as_bytes())?;
            let mut previous: Option<&str> = None;
            for &(key, seq, kind, reason) in seen {
                if reason.is_none() {
                    let same = previous.map(|p| p == key).filter(|_| told);
                    audit.written(&make_internal_key(key.as_bytes(), seq, kind), same)?;
                    previous = Some(key);
                }
            }
            let counts = audit.finish()?;
            assert!(result.is_none_or(|r| r == counts));
            result = Some(counts);
        }
        Ok(result.unwrap_or_default())
    }

    fn refused(bottommost: bool, seen: &[Seen], why: &str) {
        match audit(bottommost, seen) {
            Err(Error::Corruption { file, reason, .. }) => {
                assert_eq!(file.to_str(), Some(DROP_LOG));
                assert!(reason.contains(why), "{reason} (wanted {why:?})");
            }
            other => panic!("{seen:?} was not refused: {other:?}"),
        }
    }

    #[test]
    fn honest_drops_pass_and_are_counted() {
        let counts = audit(
            true,
            &[
                // Shadowed in the latest stripe, and in stripe 0 by a kept version.
                ("a", 20, V, None),
                ("a", 15, V, shadowed(20)),
                ("a", 9, V, None),
                ("a", 5, D, shadowed(9)),
                // A tombstone at the bottom with only tombstones written below it.
                ("b", 20, D, Some(DropReason::BottomTombstone)),
                ("b", 8, D, None),
                // Shadowed by a value zeroed at the bottom: it ends at sequence number 0.
                ("c", 4, V, shadowed(7)),
                ("c", 0, V, None),
                // Operands folded into the newest one's full merge.
                ("m", 19, V, None),
                ("m", 17, M, Some(DropReason::MergeFolded { into: 19 })),
                ("m", 12, V, Some(DropReason::MergeFolded { into: 19 })),
                // Covered by the range tombstone in its stripe; below it, shadowed by it.
                ("r", 25, M, Some(DropReason::RangeCovered)),
                ("r", 22, V, shadowed(25)),
            ],
        )
        .unwrap();
        assert_eq!(
            counts,
            DropCounts {
                shadowed: 4,
                bottom_tombstones: 1,
                range_covered: 1,
                merge_folded: 2,
            }
        );
    }

    #[test]
    fn a_snapshot_visible_version_dropped_is_refused() {
        // 9 is the newest version a reader at snapshot 10 sees; 20 is in the stripe above.
        refused(
            true,
            &[("a", 20, V, None), ("a", 9, V, shadowed(20))],
            "another snapshot stripe",
        );
    }

    #[test]
    fn a_tombstone_dropped_above_older_data_is_refused() {
        // Not bottommost: data below the output may be under it.
        refused(
            false,
            &[("a", 20, D, Some(DropReason::BottomTombstone))],
            "not bottommost",
        );
        // Bottommost, with a value kept below for a snapshot: the value would come back.
        refused(
            true,
            &[
                ("a", 20, D, Some(DropReason::BottomTombstone)),
                ("a", 9, V, None),
            ],
            "hides the Value written at 9",
        );
        // A value is not a tombstone.
        refused(
            true,
            &[("a", 20, V, Some(DropReason::BottomTombstone))],
            "is not a tombstone",
        );
    }

    #[test]
    fn every_unjustified_drop_is_refused() {
        // Shadowed by a merge operand, which reads through to it.
        refused(
            false,
            &[("a", 20, M, None), ("a", 15, V, shadowed(20))],
            "does not hide it",
        );
        // Shadowed by a version that is nowhere (not bottommost: no zeroing to explain it).
        refused(
            false,
            &[("a", 15, V, shadowed(20))],
            "neither written nor dropped",
        );
        // The same at the bottom, with no value at 0 to stand for it.
        refused(
            true,
            &[("a", 5, V, shadowed(7))],
            "no value was written at sequence number 0",
        );
        // Covered, but no range tombstone covers it (outside [r, s), or newer than 30).
        refused(
            false,
            &[("a", 15, V, Some(DropReason::RangeCovered))],
            "no range tombstone",
        );
        refused(
            false,
            &[("r", 35, V, Some(DropReason::RangeCovered))],
            "no range tombstone",
        );
        // Folded into an operand that was not written.
        refused(
            false,
            &[("m", 17, M, Some(DropReason::MergeFolded { into: 19 }))],
            "neither written nor dropped",
        );
        // A drop outside the share ([.., z)).
        refused(false, &[("zz", 15, V, shadowed(20))], "outside the share");
    }

    fn folded(into: SeqNo) -> Option<DropReason> {
        Some(DropReason::MergeFolded { into })
    }

    #[test]
    fn a_range_tombstone_may_stand_in_for_a_dropped_tombstone() {
        // The tombstone at 40 is dropped at the bottom above the value at 25, which the range
        // tombstone at 30 over [r, s) deletes for every reader that saw the tombstone.
        audit(
            true,
            &[
                ("r", 40, D, Some(DropReason::BottomTombstone)),
                ("r", 25, V, None),
            ],
        )
        .unwrap();
    }

    /// The compaction iterator's own decisions over a tricky chain pass the audit: with
    /// snapshots 8 and 15 and a range tombstone at 13, the tombstone at 20 is dropped at the
    /// bottom (the next version is a tombstone), that one is dropped as covered, and the value
    /// at 5 is written, deleted by the range tombstone for every reader that saw the first.
    #[test]
    fn the_iterators_decisions_pass_over_a_covered_chain() {
        use crate::iter::VecIterator;
        let entries = vec![
            (make_internal_key(b"k", 20, D), Vec::new()),
            (make_internal_key(b"k", 12, D), Vec::new()),
            (make_internal_key(b"k", 5, V), b"v".to_vec()),
        ];
        let mut spec = spec(Vec::new());
        spec.snapshots = vec![8, 15];
        spec.range_tombstones = Some(Arc::new(Tombstones::new(&[RangeTombstone {
            start: b"k".to_vec(),
            end: b"l".to_vec(),
            seq: 13,
        }])));
        spec.log_drops = true;
        let mut it = spec.compaction_iter(VecIterator::new(entries));
        it.seek_to_first().unwrap();
        let mut written = Vec::new();
        while it.valid() {
            written.push(it.key().to_vec());
            it.next().unwrap();
        }
        let log = it.take_drop_log();
        assert_eq!(written, vec![make_internal_key(b"k", 5, V)]);
        let mut audit = DropAudit::new(&spec, None, None, log.as_bytes()).unwrap();
        for key in &written {
            audit.written(key, None).unwrap();
        }
        let counts = audit.finish().unwrap();
        counts.check_against(&it.stats()).unwrap();
        assert_eq!((counts.bottom_tombstones, counts.range_covered), (1, 1));
    }

    #[test]
    fn merges_must_fold_what_they_may() {
        // A base folded into an operand: readers would apply it to what lies below instead.
        refused(
            false,
            &[("m", 19, M, None), ("m", 17, V, folded(19))],
            "does not hide it",
        );
        // Operands folded into a value with no base while older data is in the next stripe
        // (below the snapshot at 10): the merge ignored it.
        refused(
            false,
            &[
                ("m", 19, V, None),
                ("m", 18, M, folded(19)),
                ("m", 5, V, None),
            ],
            "with no base",
        );
        // The same when the compaction is not bottommost and the key ends here.
        refused(
            false,
            &[("m", 19, V, None), ("m", 18, M, folded(19))],
            "with no base",
        );
        // At the bottom with nothing older, or folded into an operand, it is right.
        audit(true, &[("m", 19, V, None), ("m", 18, M, folded(19))]).unwrap();
        audit(false, &[("m", 19, M, None), ("m", 18, M, folded(19))]).unwrap();
    }

    /// The bottommost compaction of an overwritten key: the new value is written zeroed, and
    /// the old one, zeroed by an earlier compaction, is dropped as shadowed. Both are at
    /// sequence number 0; the written one comes first, and the drop is named by position.
    #[test]
    fn an_old_version_at_zero_below_a_value_zeroed_again_passes() {
        let counts = audit(true, &[("c", 0, V, None), ("c", 0, V, shadowed(7))]).unwrap();
        assert_eq!(counts.shadowed, 1);
        // Citing the zeroed value (as 0) needs one written, at the bottom.
        refused(true, &[("c", 0, V, shadowed(0))], "none was written");
        refused(
            false,
            &[("c", 0, V, None), ("c", 0, V, shadowed(0))],
            "not bottommost",
        );
        let mut log = DropLogWriter::default();
        log.push(
            &make_internal_key(b"c", 0, V),
            DropReason::Shadowed { by: 7 },
        );
        log.written_zeroed(&make_internal_key(b"c", 0, V), 7);
        // Gap, head, sequence number 0 and a cited 0 (the zeroed value): no key.
        let log = log.take();
        assert_eq!(log.as_bytes().len(), 4);
        let decoded = decode_with_written(log.as_bytes(), &[make_internal_key(b"c", 0, V)]);
        assert_eq!(decoded.unwrap()[0].1, DropReason::Shadowed { by: 0 });
        // Without the written value at 0, the cited version is nowhere.
        refused(
            true,
            &[("c", 0, V, shadowed(7))],
            "no value was written at sequence number 0",
        );
    }

    /// Only a value or blob reference is ever zeroed at the bottom: a tombstone or an operand
    /// written at 0 is not a zeroed value to cite, and nothing may sort above 0 after it.
    #[test]
    fn only_a_zeroed_value_may_be_cited_as_0() {
        let spec = {
            let mut spec = spec(Vec::new());
            spec.bottommost = true;
            spec
        };
        for (written_kind, reason) in [
            (D, DropReason::Shadowed { by: 0 }),
            (M, DropReason::MergeFolded { into: 0 }),
        ] {
            let written = make_internal_key(b"k", 0, written_kind);
            let dropped_kind = if written_kind == M { M } else { V };
            let mut log = DropLogWriter::in_order();
            log.written(&written);
            log.push(&make_internal_key(b"k", 9, dropped_kind), reason);
            let log = log.take();
            let mut audit = DropAudit::new(&spec, None, None, log.as_bytes()).unwrap();
            let result = audit
                .written(&written, None)
                .and_then(|()| audit.finish().map(|_| ()));
            match result {
                Err(Error::Corruption { file, reason, .. }) => {
                    assert_eq!(file.to_str(), Some(DROP_LOG));
                    assert!(reason.contains("sorts before"), "{reason}");
                }
                other => panic!("{written_kind:?} at 0 was cited: {other:?}"),
            }
        }
        // Placed before it instead, the citation finds no zeroed value.
        refused(
            true,
            &[("c", 9, V, shadowed(0)), ("c", 0, D, None)],
            "none was written",
        );
    }

    /// A log encoded among `encoded_among` (written, or dropped for a reason), audited
    /// against the written keys `audited`.
    fn misplaced(
        bottommost: bool,
        encoded_among: &[Seen],
        audited: &[(&str, SeqNo)],
        limit: Option<u64>,
    ) -> String {
        let mut spec = spec(Vec::new());
        spec.bottommost = bottommost;
        let log = encode(encoded_among);
        let mut audit = DropAudit::new(&spec, None, None, log.as_bytes()).unwrap();
        if let Some(entries) = limit {
            audit.limit(entries, u64::MAX);
        }
        let result = audited
            .iter()
            .try_for_each(|&(key, seq)| {
                audit.written(&make_internal_key(key.as_bytes(), seq, V), None)
            })
            .and_then(|()| audit.finish().map(|_| ()));
        match result {
            Err(Error::Corruption { file, reason, .. }) => {
                assert_eq!(file.to_str(), Some(DROP_LOG));
                reason
            }
            other => panic!("{encoded_among:?} among {audited:?} was not refused: {other:?}"),
        }
    }

    /// A log placed among other written entries than the outputs hold: every inconsistency
    /// is refused, however the records decode.
    #[test]
    fn records_out_of_the_merged_order_are_refused() {
        let bottom = Some(DropReason::BottomTombstone);
        // A key of its own not after the written entry before it.
        let why = misplaced(
            true,
            &[("b", 1, V, None), ("a", 5, D, bottom)],
            &[("b", 1)],
            None,
        );
        assert!(why.contains("not after the entry before it"), "{why}");
        // A drop placed before a written version of its key that is newer.
        let why = misplaced(
            true,
            &[("a", 5, D, bottom), ("b", 1, V, None)],
            &[("a", 7)],
            None,
        );
        assert!(why.contains("sorts after"), "{why}");
        // Placed past the last written entry.
        let why = misplaced(true, &[("a", 1, V, None), ("b", 2, D, bottom)], &[], None);
        assert!(why.contains("past the last written entry"), "{why}");
        // A version below the written one, which is older than it says.
        let why = misplaced(
            false,
            &[("a", 9, V, None), ("a", 5, V, shadowed(9))],
            &[("a", 3)],
            None,
        );
        assert!(why.contains("below one no entry has"), "{why}");
        // More records than the inputs have entries.
        let why = misplaced(
            false,
            &[("a", 9, V, None), ("a", 5, V, shadowed(9))],
            &[("a", 9)],
            Some(0),
        );
        assert!(why.contains("more drops than the inputs"), "{why}");
    }

    #[test]
    fn statistics_must_count_what_the_log_holds() {
        let counts = audit(true, &[("a", 20, V, None), ("a", 15, V, shadowed(20))]).unwrap();
        let mut stats = CompactionIterStats {
            shadowed_dropped: 1,
            ..CompactionIterStats::default()
        };
        counts.check_against(&stats).unwrap();
        stats.tombstones_dropped = 1;
        assert!(counts.check_against(&stats).is_err());
    }
}
