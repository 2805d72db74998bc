//! The user-facing iterator: turns the merged stream of internal entries from every source into
//! the user's view at one sequence number: newest visible version per key, tombstones and
//! shadowed versions hidden, within optional bounds.
//!
//! Direction handling follows LevelDB's `DBIter`: moving forward, the internal iterator sits on
//! the entry being returned; moving backward, it sits just before all entries of the returned
//! user key, and the key and value are saved copies.
//!
//! A key whose newest visible version is a merge operand is resolved as RocksDB's `DBIter`
//! does: moving forward, the operands are read on down to the key's base value (or its end)
//! and the merged value is saved, with the internal iterator left inside or past the key's
//! entries; moving backward, the key's versions arrive oldest first and the operands after the
//! last base are collected on the way.

use std::sync::Arc;

use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{
    KIND_FOR_SEEK, MAX_SEQ, SeqNo, ValueKind, make_internal_key, parse_internal_key,
};
use sluice_sst::merge::MergingIterator;
use sluice_sst::merge_operator::{self, MergeOperator};
use sluice_sst::range_del::Tombstones;
use sluice_sst::ttl::{Expiry, WRITE_TIME_LEN};

use super::Range;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the database as of one sequence number.
///
/// Movement methods return `Result`: they may read blocks from disk. Keys and values are only
/// available while [`DbIterator::valid`] is true.
pub struct DbIterator {
    inner: MergingIterator,
    seq: SeqNo,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    /// Forward direction only: the current entry is held in `saved_key` and `saved_value` (a
    /// merge result, or a value read from its blob file), and the internal iterator is on an
    /// older entry of it or past it.
    held: bool,
    /// Reverse direction, or `merged`: the current user key and value. Forward: scratch for
    /// skipping.
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// With a TTL: stored values end with their write time, and expired ones are hidden.
    expiry: Option<Expiry>,
    /// The range tombstones of every source, fragmented per source.
    tombstones: Vec<Arc<Tombstones>>,
    /// The current key's merge operands, collected while resolving it.
    operands: Vec<Vec<u8>>,
    /// Keeps the files read by `inner` alive, and resolves blob references.
    version: Arc<Version>,
    tables: Arc<TableCache>,
}

/// The error for a range tombstone among point entries, which only damage puts there.
fn range_deletion_entry() -> Error {
    Error::corruption("<iterator>", 0, "a range tombstone among point entries")
}

fn corrupt_key(key: &[u8]) -> Error {
    Error::corruption(
        "<iterator>",
        0,
        format!("unparseable internal key of {} bytes", key.len()),
    )
}

/// What turns the stored versions of a key into the value a reader sees, beyond picking the
/// newest: the merge operator, a TTL's expiry, and the range tombstones of every source.
pub(crate) struct ValueRules {
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    pub expiry: Option<Expiry>,
    pub tombstones: Vec<Arc<Tombstones>>,
    /// Where blob references are resolved (the tree's table cache).
    pub tables: Arc<TableCache>,
}

impl DbIterator {
    pub(crate) fn new(
        inner: MergingIterator,
        seq: SeqNo,
        (lower, upper): (Option<Vec<u8>>, Option<Vec<u8>>),
        version: Arc<Version>,
        rules: ValueRules,
    ) -> Self {
        let ValueRules {
            merge_operator,
            expiry,
            tombstones,
            tables,
        } = rules;
        DbIterator {
            inner,
            seq,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            held: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            merge_operator,
            expiry,
            tombstones,
            operands: Vec::new(),
            version,
            tables,
        }
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current user key. REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        match self.direction {
            Direction::Forward if !self.held => sluice_sst::key::user_key(self.inner.key()),
            _ => &self.saved_key,
        }
    }

    /// The current value. REQUIRES: `valid()`.
    pub fn value(&self) -> &[u8] {
        match self.direction {
            Direction::Forward if !self.held => {
                let stored = self.inner.value();
                match self.expiry {
                    // Positioned only on values long enough to hold one (`live` checked).
                    Some(_) => &stored[..stored.len().saturating_sub(WRITE_TIME_LEN)],
                    None => stored,
                }
            }
            _ => &self.saved_value,
        }
    }

    /// Positions on the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.direction = Direction::Forward;
        self.held = false;
        match self.lower.clone() {
            Some(lower) => self
                .inner
                .seek(&make_internal_key(&lower, self.seq, KIND_FOR_SEEK))?,
            None => self.inner.seek_to_first()?,
        }
        self.find_next_user_entry(false)
    }

    /// Positions on the first key `>= key` (and at or after the lower bound).
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.direction = Direction::Forward;
        self.held = false;
        let target = match &self.lower {
            Some(lower) if lower.as_slice() > key => lower.clone(),
            _ => key.to_vec(),
        };
        self.inner
            .seek(&make_internal_key(&target, self.seq, KIND_FOR_SEEK))?;
        self.find_next_user_entry(false)
    }

    /// Positions on the last key (before the upper bound).
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.direction = Direction::Reverse;
        self.held = false;
        match self.upper.clone() {
            Some(upper) => {
                self.inner
                    .seek(&make_internal_key(&upper, MAX_SEQ, KIND_FOR_SEEK))?;
                if self.inner.valid() {
                    self.inner.prev()?;
                } else {
                    self.inner.seek_to_last()?;
                }
            }
            None => self.inner.seek_to_last()?,
        }
        self.find_prev_user_entry()
    }

    /// Positions on the last key `<= key` (and before the upper bound).
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.seek(key)?;
        if self.valid && self.key() == key {
            return Ok(());
        }
        if self.valid {
            self.prev()
        } else {
            self.seek_to_last()
        }
    }

    /// Advances to the next key. REQUIRES: `valid()`.
    #[expect(
        clippy::should_implement_trait,
        reason = "a cursor method returning Result, like InternalIterator::next; `entries()` gives the Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The internal iterator is just before the entries of saved_key: step into them,
            // then skip past them all.
            if self.inner.valid() {
                self.inner.next()?;
            } else {
                self.inner.seek_to_first()?;
            }
            if !self.inner.valid() {
                self.valid = false;
                return Ok(());
            }
            // saved_key already holds the user key to skip.
        } else if self.held {
            // saved_key holds the held key; the internal iterator is already past its
            // newest entries.
            self.held = false;
        } else {
            self.saved_key.clear();
            self.saved_key
                .extend_from_slice(sluice_sst::key::user_key(self.inner.key()));
            self.inner.next()?;
        }
        self.find_next_user_entry(true)
    }

    /// Moves to the previous key. REQUIRES: `valid()`.
    pub fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid);
        if self.direction == Direction::Forward {
            // Back up to just before every entry of the current user key.
            if !self.held {
                self.saved_key.clear();
                self.saved_key
                    .extend_from_slice(sluice_sst::key::user_key(self.inner.key()));
            } else if !self.inner.valid() {
                // The merged key was the last: its entries ran to the end.
                self.inner.seek_to_last()?;
            }
            self.held = false;
            while self.inner.valid()
                && sluice_sst::key::user_key(self.inner.key()) >= self.saved_key.as_slice()
            {
                self.inner.prev()?;
            }
            if !self.inner.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.saved_value.clear();
                return Ok(());
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry()
    }

    /// Forward: from the internal position, find the next visible entry. With `skipping`,
    /// entries of user keys `<= saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) -> Result<()> {
        while self.inner.valid() {
            let ikey = self.inner.key();
            let parsed = parse_internal_key(ikey).ok_or_else(|| corrupt_key(ikey))?;
            if self
                .upper
                .as_deref()
                .is_some_and(|upper| parsed.user_key >= upper)
            {
                break;
            }
            if parsed.seq <= self.seq {
                let hidden = skipping && parsed.user_key <= self.saved_key.as_slice();
                if !hidden {
                    match parsed.kind {
                        ValueKind::RangeDeletion => return Err(range_deletion_entry()),
                        _ if self.range_deleted(parsed.user_key, parsed.seq) => {
                            // A range tombstone deletes this version and every older one.
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            skipping = true;
                        }
                        ValueKind::Deletion => {
                            // Every older entry of this key is hidden by the tombstone.
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            skipping = true;
                        }
                        ValueKind::Value if self.live(self.inner.value())?.is_none() => {
                            // Expired: hidden, and so is every older version of the key.
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            skipping = true;
                        }
                        ValueKind::Value => {
                            self.valid = true;
                            self.saved_key.clear();
                            return Ok(());
                        }
                        ValueKind::Merge => return self.merge_forward(),
                        ValueKind::BlobIndex => return self.blob_forward(),
                    }
                }
            }
            self.inner.next()?;
        }
        self.valid = false;
        self.saved_key.clear();
        Ok(())
    }

    /// True when a range tombstone this iterator sees deletes version `seq` of `key`.
    fn range_deleted(&self, key: &[u8], seq: SeqNo) -> bool {
        self.tombstones
            .iter()
            .any(|t| t.deletes(key, seq, self.seq))
    }

    /// The user's value in stored value `stored`: itself without a TTL, `None` once expired;
    /// an error when it cannot hold a write time.
    fn live<'a>(&self, stored: &'a [u8]) -> Result<Option<&'a [u8]>> {
        match self.expiry {
            Some(expiry) => expiry
                .live(stored)
                .map_err(|why| Error::corruption("<iterator>", 0, why)),
            None => Ok(Some(stored)),
        }
    }

    /// Forward, on the newest visible entry of a key, a blob reference: holds the value it
    /// points at and moves the internal iterator past the entry.
    fn blob_forward(&mut self) -> Result<()> {
        self.valid = false;
        self.saved_key.clear();
        self.saved_key
            .extend_from_slice(sluice_sst::key::user_key(self.inner.key()));
        self.saved_value = self.resolve_blob(&self.saved_key, self.inner.value())?;
        self.inner.next()?;
        self.held = true;
        self.valid = true;
        Ok(())
    }

    /// The value blob reference `encoded`, found for `key`, points at.
    fn resolve_blob(&self, key: &[u8], encoded: &[u8]) -> Result<Vec<u8>> {
        let at = std::path::Path::new("<iterator>");
        crate::blob::resolve(&self.tables, &self.version, key, encoded, at)
    }

    /// Forward, on the newest visible entry of a key, a merge operand: reads the key's older
    /// operands down to its base and saves the merged value.
    fn merge_forward(&mut self) -> Result<()> {
        self.valid = false;
        self.saved_key.clear();
        self.saved_key
            .extend_from_slice(sluice_sst::key::user_key(self.inner.key()));
        self.operands.clear();
        self.operands.push(self.inner.value().to_vec());
        self.inner.next()?;
        let mut base = None;
        while self.inner.valid() {
            let ikey = self.inner.key();
            let parsed = parse_internal_key(ikey).ok_or_else(|| corrupt_key(ikey))?;
            if parsed.user_key != self.saved_key.as_slice() {
                break;
            }
            // Older than a visible version, so visible too.
            match parsed.kind {
                ValueKind::RangeDeletion => return Err(range_deletion_entry()),
                // Deleted by a range tombstone, with everything older: no base.
                _ if self.range_deleted(parsed.user_key, parsed.seq) => break,
                ValueKind::Merge => self.operands.push(self.inner.value().to_vec()),
                ValueKind::Value => {
                    base = Some(self.inner.value().to_vec());
                    break;
                }
                ValueKind::BlobIndex => {
                    base = Some(self.resolve_blob(&self.saved_key, self.inner.value())?);
                    break;
                }
                ValueKind::Deletion => break,
            }
            self.inner.next()?;
        }
        self.operands.reverse();
        self.saved_value = self.resolve(base.as_deref())?;
        self.held = true;
        self.valid = true;
        Ok(())
    }

    /// The current key's value: `self.operands` (oldest first) applied to `base`.
    fn resolve(&self, base: Option<&[u8]>) -> Result<Vec<u8>> {
        let operands: Vec<&[u8]> = self.operands.iter().map(Vec::as_slice).collect();
        let operator = self.merge_operator.as_deref();
        Ok(merge_operator::resolve(
            operator,
            &self.saved_key,
            base,
            &operands,
        )?)
    }

    /// Reverse: collect the newest visible version of the user key just before the internal
    /// position, leaving the internal iterator before all of that key's entries. Versions
    /// arrive oldest first: a value or tombstone replaces everything before it, an operand
    /// adds to it.
    fn find_prev_user_entry(&mut self) -> Result<()> {
        // Whether the saved key has a visible value (its last version seen is no tombstone),
        // whether `saved_value` is a base under `operands`, and whether that base is a blob
        // reference, resolved once the key's newest version is known.
        let mut visible = false;
        let mut has_base = false;
        let mut blob_base = false;
        self.valid = false;
        self.operands.clear();
        while self.inner.valid() {
            let ikey = self.inner.key();
            let parsed = parse_internal_key(ikey).ok_or_else(|| corrupt_key(ikey))?;
            if parsed.seq <= self.seq {
                if visible && parsed.user_key < self.saved_key.as_slice() {
                    // Passed all entries of the saved key, which has a visible value.
                    break;
                }
                if parsed.kind == ValueKind::RangeDeletion {
                    return Err(range_deletion_entry());
                }
                let live = match parsed.kind {
                    ValueKind::Value => self.live(self.inner.value())?,
                    _ => Some(self.inner.value()),
                };
                // What a range tombstone deletes reads as a tombstone.
                let live = live.filter(|_| !self.range_deleted(parsed.user_key, parsed.seq));
                let kind = match live {
                    None if parsed.kind == ValueKind::Merge => ValueKind::Deletion,
                    _ => parsed.kind,
                };
                match (kind, live) {
                    // An expired value hides the key as a tombstone does.
                    (ValueKind::Deletion | ValueKind::RangeDeletion, _)
                    | (ValueKind::Value | ValueKind::BlobIndex, None) => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                        self.operands.clear();
                        (visible, blob_base) = (false, false);
                    }
                    (ValueKind::Value | ValueKind::BlobIndex, Some(value)) => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(parsed.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(value);
                        self.operands.clear();
                        (visible, has_base) = (true, true);
                        blob_base = kind == ValueKind::BlobIndex;
                    }
                    (ValueKind::Merge, _) => {
                        if !visible {
                            // The key's oldest visible version, or the first after a
                            // tombstone: the operands apply to nothing.
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(parsed.user_key);
                            self.saved_value.clear();
                            (visible, has_base, blob_base) = (true, false, false);
                        }
                        self.operands.push(self.inner.value().to_vec());
                    }
                }
            }
            self.inner.prev()?;
        }
        if !visible {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
            return Ok(());
        }
        if self
            .lower
            .as_deref()
            .is_some_and(|lower| self.saved_key.as_slice() < lower)
        {
            self.valid = false;
            return Ok(());
        }
        if blob_base {
            self.saved_value = self.resolve_blob(&self.saved_key, &self.saved_value)?;
        }
        if !self.operands.is_empty() {
            let base = has_base.then(|| std::mem::take(&mut self.saved_value));
            self.saved_value = self.resolve(base.as_deref())?;
        }
        self.valid = true;
        Ok(())
    }

    /// Consumes the cursor into a Rust iterator of `(key, value)` pairs within its bounds,
    /// from either end.
    pub fn entries(self) -> Range {
        Range::new(Ok(self))
    }
}
