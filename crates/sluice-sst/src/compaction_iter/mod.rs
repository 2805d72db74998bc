//! The compaction iterator: the filter between the merged input and the table builder that
//! decides which versions a compaction must keep.
//!
//! # Snapshot stripes
//!
//! A reader at sequence number `S` (a live snapshot, or "latest" for everyone else) sees, for
//! each user key, the newest version with `seq <= S`; a tombstone there means "not found". Sort
//! the live snapshots `s_0 < s_1 < ... < s_{n-1}` and cut the sequence space into *stripes*:
//! stripe `i` holds `(s_{i-1}, s_i]` (with `s_{-1} = -inf`), and stripe `n`, "latest", holds
//! everything newer than `s_{n-1}`. An entry belongs to the stripe of the smallest snapshot
//! `>= seq`.
//!
//! Every reader's bound falls on a stripe boundary or above all data: a snapshot `s_i` is the
//! top of stripe `i`, and "latest" is above everything. So for any reader and any user key,
//! the versions with `seq <= S` are exactly the versions in all stripes up to some `j`, and the
//! newest of them is the newest version of the highest non-empty stripe `<= j`. **Only the
//! newest version of each stripe can ever be returned to anyone**; the older versions of the
//! same stripe are *shadowed* and dropping them changes no reader's answer. That is why they
//! are dropped no matter what lies outside the compaction (any older version elsewhere has a
//! smaller sequence number, so it is shadowed by what we keep, exactly as before).
//!
//! # Tombstones
//!
//! A kept tombstone is still needed if something older than it could become visible without
//! it: an older kept version in this compaction, or any version of the key in a level below the
//! output. When `bottommost` is false the second case is unknowable, so every stripe's newest
//! tombstone is kept. When `bottommost` is true (no data for these keys exists below the output
//! level) the only older versions are the ones in this input, and:
//!
//! * a tombstone in stripe 0 (no snapshot is below its sequence number) is dropped at once:
//!   every older version is also in stripe 0, hence shadowed and dropped, so every reader that
//!   saw the tombstone ("not found") now finds nothing at all ("not found");
//! * a tombstone in a higher stripe is dropped unless the next kept version of the same key is a
//!   value. If there is no next kept version, readers that saw the tombstone now find nothing.
//!   If the next kept version is a tombstone `T2`, then readers that saw the first tombstone now
//!   see `T2` (if it is kept) or, by the same rule applied to `T2`, nothing older that is a
//!   value. In both cases the answer stays "not found". Deciding this needs one version of
//!   look-ahead, so the tombstone is copied into a buffer while the input moves on; this is rare
//!   (only tombstones protected by a snapshot) and costs one key copy.
//!
//! Values are always kept as the newest of their stripe.
//!
//! # Zeroed sequence numbers
//!
//! When `bottommost` is true, a kept value (or blob reference) in stripe 0 is written with sequence number 0, as
//! RocksDB does. Every reader sees it either way: no snapshot is below its old sequence number,
//! and no other version of its key is left below it (older versions of stripe 0 were shadowed,
//! and `bottommost` says nothing lies under the output level). Later writes of the key get
//! larger sequence numbers and so still sort before it. Zeros are what a bottom level is mostly
//! made of then, and a trailer of zeros compresses to almost nothing. Tombstones are never
//! zeroed (a bottommost tombstone in stripe 0 is dropped anyway).
//!
//! The entry digest hashes the sequence number, so a zeroed entry is a different entry: the
//! iterator adds the difference of the two hashes to [`CompactionIterStats::rewrite_digest`],
//! and the digest equation becomes `inputs = outputs + dropped + rewritten`.
//!
//! # Compaction filters
//!
//! A [`CompactionFilter`] sees the newest version of each key in the latest stripe (newer than
//! every live snapshot: what only "latest" readers can see) when it is a value kept in the
//! table (never a blob reference: the database refuses a filter with value separation), and may keep
//! it, change its value, or remove it. A removed value becomes a tombstone at the same
//! sequence number, as RocksDB's `kRemove` does, and the tombstone rules above then apply: the
//! key reads as deleted, and older versions below stay hidden until the tombstone itself can
//! go. Versions a snapshot can see are never shown to the filter, so snapshot reads stay
//! repeatable. Both rewrites are accounted in [`CompactionIterStats::rewrite_digest`], like
//! zeroed sequence numbers.
//!
//! # Merge operands
//!
//! A merge operand does not shadow what is below it: a reader combines it with every older
//! version of its stripe down to the first value or tombstone (the *base*). So when the newest
//! version of a stripe is an operand, the iterator reads on through the stripe, copying the
//! operands, and then, with a [`MergeOperator`]:
//!
//! * if the stripe holds a base, or holds none and `bottommost` says nothing older exists
//!   anywhere, it writes the full merge as a value at the newest operand's sequence number
//!   (zeroed like any value in stripe 0 at the bottom). Every reader of the stripe computed
//!   exactly that; older stripes are untouched, as the merge never reads across a snapshot;
//! * otherwise the base lies below the output or in an older stripe, and it writes one operand
//!   equal to the stripe's operands combined with [`MergeOperator::partial_merge`].
//!
//! When there is no operator, the operator cannot combine these operands, a full merge
//! fails, or the base is a reference into a blob file ([`ValueKind::BlobIndex`]: compactions
//! move references and never read blob files), the stripe's operands and base are written as
//! they were read: nothing is lost, and
//! the read that needs the value reports the problem. Everything absorbed into a written entry
//! counts in [`CompactionIterStats::merge_absorbed`], and the written entry as a rewrite of the
//! newest operand. A tombstone awaiting the look-ahead verdict above is kept when the next
//! kept version is an operand, as when it is a value: it hides what the operand applies to.
//!
//! # Range tombstones
//!
//! With the database's range tombstones ([`crate::range_del`]), a version a newer tombstone
//! covers *in the same stripe* is dropped ([`CompactionIterStats::range_covered`]): every
//! reader that could see the version also sees the tombstone. The tombstones themselves are
//! not in the input and are not written: the version keeps them. A key any tombstone covers
//! is never written with a zeroed sequence number, which could put it under a tombstone
//! older than it.
//!
//! # Sub-tasks
//!
//! A compaction may be split into sub-tasks over user-key ranges `[lo, hi)`: seek to
//! `seek_key(lo, MAX_SEQ)` and set `hi` as the upper bound. Because every version of a user key
//! falls in one sub-task, each sub-task sees whole version chains and the rules above hold per
//! sub-task.
//!
//! # The drop log
//!
//! When asked ([`CompactionIterator::log_drops`]), the iterator records every drop with its
//! reason, placed among the entries it writes ([`drop_log`]): shadowed (citing the version examined just
//! before, which is in the same stripe), a tombstone at the bottom, covered by a range
//! tombstone, or folded by a merge (citing the written entry's sequence number). A worker
//! sends the log with its outputs and the host checks each decision against these rules
//! ([`crate::compact::drop_audit`]), so a drop-decision bug cannot pass as an honest drop.
//!
//! # Errors
//!
//! A key that does not parse as an internal key, or input that is not in internal-key order, is
//! reported as [`Error::Corruption`] naming the pseudo-file [`MERGE_INPUT`] at offset 0: this
//! iterator only sees the merged stream, so callers that know which table fed the entry should
//! wrap or replace the error with the real file and offset. Nothing is ever skipped silently.

pub mod drop_log;
mod merge_stripe;
#[cfg(test)]
mod merge_tests;
#[cfg(test)]
mod tests;

use crate::blob::BlobRef;
use crate::coding::get_fixed64;
use crate::digest::{EntryDigest, EntryHash, entry_hash, entry_hash_parts};
use crate::filter::hash64;
use crate::key::{
    MAX_SEQ, SeqNo, ValueKind, append_internal_key, compare_bytes, pack_trailer,
    parse_internal_key, user_key,
};
use crate::merge_operator::MergeOperator;
use crate::range_del::Tombstones;
use crate::{Error, InternalIterator, Result};
use drop_log::{DropLog, DropLogWriter, DropReason};

/// What a [`CompactionFilter`] decides about one value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterDecision {
    /// Write it unchanged.
    Keep,
    /// Delete the key: the value becomes a tombstone at its sequence number.
    Remove,
    /// Write this value instead.
    Change(Vec<u8>),
}

/// A callback that sees each live value a compaction writes and may keep, change or remove it
/// (RocksDB's `CompactionFilter`). See the module docs for which versions it sees.
///
/// It runs on compaction threads, concurrently with itself, so it must be cheap and must not
/// call back into the database. Its name identifies it: a compaction worker can only run a
/// filter it knows by that name.
pub trait CompactionFilter: Send + Sync {
    /// A stable name, for logs and for matching the filter a worker runs.
    fn name(&self) -> &str;
    /// The decision about `value`, the newest value of user key `key`.
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision;
}

/// Shows the filter's name: options that hold one print, and the trait asks no `Debug` of an
/// application's type.
impl std::fmt::Debug for dyn CompactionFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CompactionFilter({:?})", self.name())
    }
}

/// The file name used in corruption errors raised by this iterator, which does not know which
/// input table held the bad entry.
pub const MERGE_INPUT: &str = "<merge input>";

/// Counters describing what a compaction iterator consumed and produced.
///
/// Once the input is exhausted, `entries_in == entries_out + shadowed_dropped +
/// tombstones_dropped + merge_absorbed + range_covered`, `dropped_digest` sums the [`entry_hash`]es of exactly the dropped
/// entries, and `rewrite_digest` what zeroing sequence numbers took away, so the digest
/// equation of [`crate::digest`] can be checked ([`CompactionIterStats::unwritten`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactionIterStats {
    /// Input entries examined (within the upper bound).
    pub entries_in: u64,
    /// Entries yielded to the caller.
    pub entries_out: u64,
    /// Versions dropped because a newer version of the same key is in the same stripe.
    pub shadowed_dropped: u64,
    /// Tombstones dropped because nothing they hide can be visible to anyone.
    pub tombstones_dropped: u64,
    /// Sum of the internal-key lengths of the examined entries, in bytes.
    pub input_key_bytes: u64,
    /// Sum of the value lengths of the examined entries, in bytes.
    pub input_value_bytes: u64,
    /// Sum of the [`entry_hash`]es of every dropped entry (shadowed versions and tombstones),
    /// modulo 2^64.
    pub dropped_digest: u64,
    /// Entries written with their sequence number zeroed (see the module docs).
    pub seqs_zeroed: u64,
    /// Values a compaction filter removed (turned into tombstones).
    pub filter_removed: u64,
    /// Values a compaction filter changed.
    pub filter_changed: u64,
    /// Merge operands and bases combined into another written entry (see the module docs).
    pub merge_absorbed: u64,
    /// Versions dropped because a newer range tombstone in their stripe covers them.
    pub range_covered: u64,
    /// Sum over the rewritten entries (zeroed sequence numbers, filtered values, values moved
    /// to new blob files) of their hash as read minus their hash as written, modulo 2^64: what
    /// the outputs' digests lack of the inputs' beyond the dropped entries.
    pub rewrite_digest: u64,
    /// Values moved out of collected blob files ([`crate::compact::relocate`]).
    pub blob_values_relocated: u64,
    /// Their records' bytes, read from the collected files (and written again).
    pub blob_bytes_relocated: u64,
}

impl CompactionIterStats {
    /// The dropped entries' count and digest.
    pub fn dropped(&self) -> EntryDigest {
        EntryDigest {
            entries: self.drop_counts().iter().sum(),
            sum: self.dropped_digest,
        }
    }

    /// What the inputs hold that the outputs do not, as a digest: the dropped entries plus
    /// the hash differences of the rewritten ones. `inputs = outputs + unwritten()`.
    pub fn unwritten(&self) -> EntryDigest {
        EntryDigest {
            entries: self.dropped().entries,
            sum: self.dropped_digest.wrapping_add(self.rewrite_digest),
        }
    }

    /// [`CompactionIterStats::unwritten`] with the counts added in checked arithmetic:
    /// `None` when they overflow, as only counts that did not come from a compaction can
    /// (a worker's reply is checked with this before anything adds it up).
    pub fn checked_unwritten(&self) -> Option<EntryDigest> {
        let entries = self
            .drop_counts()
            .into_iter()
            .try_fold(0, u64::checked_add)?;
        Some(EntryDigest {
            entries,
            sum: self.dropped_digest.wrapping_add(self.rewrite_digest),
        })
    }

    /// The dropped entries by reason: shadowed, tombstones, merge-absorbed, range-covered.
    fn drop_counts(&self) -> [u64; 4] {
        [
            self.shadowed_dropped,
            self.tombstones_dropped,
            self.merge_absorbed,
            self.range_covered,
        ]
    }

    /// Accounts one dropped entry's hash (the counters say which kind it was).
    fn drop_hash(&mut self, hash: u64) {
        self.dropped_digest = self.dropped_digest.wrapping_add(hash);
    }

    /// Accounts an entry written differently from how it was read.
    fn rewrite(&mut self, before: u64, after: u64) {
        self.rewrite_digest = self.rewrite_digest.wrapping_add(before.wrapping_sub(after));
    }
}

impl std::ops::AddAssign for CompactionIterStats {
    /// Adds another sub-task's (or share's) counters; saturating, as a worker's reply may
    /// carry any values (its drop counts are checked before they are used).
    fn add_assign(&mut self, s: CompactionIterStats) {
        self.entries_in = self.entries_in.saturating_add(s.entries_in);
        self.entries_out = self.entries_out.saturating_add(s.entries_out);
        self.shadowed_dropped = self.shadowed_dropped.saturating_add(s.shadowed_dropped);
        self.tombstones_dropped = self.tombstones_dropped.saturating_add(s.tombstones_dropped);
        self.input_key_bytes = self.input_key_bytes.saturating_add(s.input_key_bytes);
        self.input_value_bytes = self.input_value_bytes.saturating_add(s.input_value_bytes);
        self.dropped_digest = self.dropped_digest.wrapping_add(s.dropped_digest);
        self.seqs_zeroed = self.seqs_zeroed.saturating_add(s.seqs_zeroed);
        self.filter_removed = self.filter_removed.saturating_add(s.filter_removed);
        self.filter_changed = self.filter_changed.saturating_add(s.filter_changed);
        self.merge_absorbed = self.merge_absorbed.saturating_add(s.merge_absorbed);
        self.range_covered = self.range_covered.saturating_add(s.range_covered);
        self.rewrite_digest = self.rewrite_digest.wrapping_add(s.rewrite_digest);
        self.blob_values_relocated = self
            .blob_values_relocated
            .saturating_add(s.blob_values_relocated);
        self.blob_bytes_relocated = self
            .blob_bytes_relocated
            .saturating_add(s.blob_bytes_relocated);
    }
}

/// Where the current output entry lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Position {
    /// Not positioned on an output entry.
    Invalid,
    /// On the input iterator's current entry.
    AtInput,
    /// On the buffered tombstone; the input is already on the next, not yet examined, entry.
    AtPending,
    /// On `merged[merged_at]`, what a stripe of merge operands became; the input is already
    /// on the next, not yet examined, entry.
    AtMerged,
}

/// Filters a merged, internal-key-ordered input down to the entries a compaction must write.
/// See the module documentation for the rules and why they are safe. Forward-only.
pub struct CompactionIterator<I: InternalIterator> {
    input: I,
    /// Live snapshots, ascending, without duplicates.
    snapshots: Vec<SeqNo>,
    bottommost: bool,
    /// Exclusive user-key upper bound.
    upper_bound: Option<Vec<u8>>,
    position: Position,
    /// User key of the version chain being processed; valid when `has_current_key`.
    current_key: Vec<u8>,
    has_current_key: bool,
    /// Trailer of the last examined entry of `current_key` (input order check).
    last_trailer: u64,
    /// Stripe of the newest version kept (or dropped as a tombstone) in the current chain.
    last_stripe: usize,
    /// A tombstone awaiting the look-ahead verdict (bottommost, stripe > 0), copied here
    /// because the input has moved past it. Meaningful when `pending` is true or `position`
    /// is `AtPending`.
    pending: bool,
    pending_key: Vec<u8>,
    pending_value: Vec<u8>,
    /// The current entry's key as written, when it differs from the input's (sequence number
    /// zeroed, or a filtered value turned tombstone); what `key()` returns when `zeroed` is
    /// true (and `position` is `AtInput`).
    zeroed_key: Vec<u8>,
    zeroed: bool,
    /// The current entry's value as a filter changed it (empty for a removed one); what
    /// `value()` returns when `filtered` is true (and `position` is `AtInput`).
    filtered_value: Vec<u8>,
    filtered: bool,
    /// The hashes of the current entry as written, when computing them was part of accounting
    /// a change to it (and `position` is `AtInput`): see [`CompactionIterator::written_hash`].
    written_hash: Option<EntryHash>,
    filter: Option<std::sync::Arc<dyn CompactionFilter>>,
    merge_operator: Option<std::sync::Arc<dyn MergeOperator>>,
    tombstones: Option<std::sync::Arc<Tombstones>>,
    /// A stripe's merge operands (and base) as read, newest first, then what to write for
    /// them: both `(internal key, value)`.
    operands: Vec<(Vec<u8>, Vec<u8>)>,
    merged: Vec<(Vec<u8>, Vec<u8>)>,
    merged_at: usize,
    stats: CompactionIterStats,
    /// Every drop with its reason, when asked for ([`CompactionIterator::log_drops`]).
    drops: Option<DropLogWriter>,
}

impl<I: InternalIterator> CompactionIterator<I> {
    /// Wraps `input`, a merged stream in internal-key order. `snapshots` are the live snapshot
    /// sequence numbers in any order (duplicates allowed). `bottommost` promises that no data
    /// for these keys exists below the output level. The iterator starts unpositioned.
    pub fn new(input: I, mut snapshots: Vec<SeqNo>, bottommost: bool) -> Self {
        snapshots.sort_unstable();
        snapshots.dedup();
        // A snapshot at or above MAX_SEQ is "latest" and needs no stripe of its own.
        snapshots.retain(|&s| s < MAX_SEQ);
        CompactionIterator {
            input,
            snapshots,
            bottommost,
            upper_bound: None,
            position: Position::Invalid,
            current_key: Vec::new(),
            has_current_key: false,
            last_trailer: 0,
            last_stripe: 0,
            pending: false,
            pending_key: Vec::new(),
            pending_value: Vec::new(),
            zeroed_key: Vec::new(),
            zeroed: false,
            filtered_value: Vec::new(),
            filtered: false,
            written_hash: None,
            filter: None,
            merge_operator: None,
            tombstones: None,
            operands: Vec::new(),
            merged: Vec::new(),
            merged_at: 0,
            stats: CompactionIterStats::default(),
            drops: None,
        }
    }

    /// Logs every dropped entry with the reason ([`drop_log`]) from the next movement on.
    pub fn log_drops(&mut self) {
        self.drops.get_or_insert_with(DropLogWriter::default);
    }

    /// The drops logged so far, in internal-key order (empty unless
    /// [`CompactionIterator::log_drops`] was called). Call once the input is exhausted: a
    /// tombstone whose fate is still open is not in it yet.
    pub fn take_drop_log(&mut self) -> DropLog {
        self.drops
            .as_mut()
            .map(DropLogWriter::take)
            .unwrap_or_default()
    }

    /// Logs a drop, when drops are logged.
    fn log_drop(&mut self, ikey: &[u8], reason: DropReason) {
        if let Some(log) = &mut self.drops {
            log.push(ikey, reason);
        }
    }

    /// Drops the tombstone awaiting its verdict: counted, hashed and logged.
    fn drop_pending(&mut self) {
        self.pending = false;
        drop_awaited(
            &mut self.stats,
            &mut self.drops,
            &self.pending_key,
            &self.pending_value,
        );
    }

    /// Tells the drop log that the current output entry is written.
    fn log_written(&mut self) {
        // Out and back, as `key()` reads the rest of the iterator.
        if let Some(mut log) = self.drops.take() {
            let key = self.key();
            let zeroed_from = match self.position == Position::AtInput && self.zeroed {
                true => parse_internal_key(self.input.key())
                    .map(|p| p.seq)
                    .filter(|&seq| seq != 0 && parse_internal_key(key).is_some_and(|k| k.seq == 0)),
                false => None,
            };
            match zeroed_from {
                Some(seq) => log.written_zeroed(key, seq),
                None => log.written(key),
            }
            self.drops = Some(log);
        }
    }

    /// Shows each live value to `filter` (see the module docs). Takes effect at the next
    /// movement.
    pub fn set_filter(&mut self, filter: Option<std::sync::Arc<dyn CompactionFilter>>) {
        self.filter = filter;
    }

    /// Combines merge operands with `operator` (see the module docs); without one they are
    /// written as they are. Takes effect at the next movement.
    pub fn set_merge_operator(&mut self, operator: Option<std::sync::Arc<dyn MergeOperator>>) {
        self.merge_operator = operator;
    }

    /// Drops what the database's range tombstones cover (see the module docs). Takes effect at
    /// the next movement.
    pub fn set_range_tombstones(&mut self, tombstones: Option<std::sync::Arc<Tombstones>>) {
        self.tombstones = tombstones.filter(|t| !t.is_empty());
    }

    /// True when a range tombstone in the same stripe covers version `seq` of `key`.
    fn covered(&self, key: &[u8], seq: SeqNo) -> bool {
        self.tombstones
            .as_ref()
            .is_some_and(|t| t.covers_in_stripe(key, seq, &self.snapshots))
    }

    /// True when a value of `key` may be written with sequence number 0.
    fn may_zero(&self, key: &[u8]) -> bool {
        !self.tombstones.as_ref().is_some_and(|t| t.covers_any(key))
    }

    /// Sets the exclusive user-key upper bound: an entry whose user key is `>= bound` makes the
    /// iterator invalid. Takes effect at the next movement.
    pub fn set_upper_bound(&mut self, bound: Option<Vec<u8>>) {
        self.upper_bound = bound;
    }

    /// Positions on the first entry to keep.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.reset();
        let result = self.input.seek_to_first();
        self.settle_after(result)
    }

    /// Positions on the first entry to keep at or after internal key `target`.
    ///
    /// REQUIRES: `target` is at or before the newest version of its user key (for a sub-task
    /// starting at user key `lo`, use `seek_key(lo, MAX_SEQ)`); otherwise the first versions
    /// seen would be taken for the newest of their key.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.reset();
        let result = self.input.seek(target);
        self.settle_after(result)
    }

    /// True when positioned on an entry to keep.
    pub fn valid(&self) -> bool {
        self.position != Position::Invalid
    }

    /// The current internal key (its sequence number zeroed when the module docs say so).
    /// REQUIRES: `valid()`.
    pub fn key(&self) -> &[u8] {
        debug_assert!(self.valid());
        match self.position {
            Position::AtPending => &self.pending_key,
            Position::AtMerged => &self.merged[self.merged_at].0,
            _ if self.zeroed => &self.zeroed_key,
            _ => self.input.key(),
        }
    }

    /// The current value. REQUIRES: `valid()`.
    pub fn value(&self) -> &[u8] {
        debug_assert!(self.valid());
        match self.position {
            Position::AtPending => &self.pending_value,
            Position::AtMerged => &self.merged[self.merged_at].1,
            _ if self.filtered => &self.filtered_value,
            _ => self.input.value(),
        }
    }

    /// The hashes of `(key(), value())` when the iterator computed them, which it does when it
    /// changed the entry (a zeroed sequence number, a filtered value): a table builder given
    /// them ([`crate::table::TableContentBuilder::add_hashed`]) need not hash the entry again.
    /// REQUIRES: `valid()`.
    pub fn written_hash(&self) -> Option<EntryHash> {
        match self.position {
            Position::AtInput => self.written_hash,
            _ => None,
        }
    }

    /// Advances to the next entry to keep. REQUIRES: `valid()`.
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step like InternalIterator::next, not std::iter::Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "CompactionIterator::next requires valid()");
        let result = match self.position {
            Position::AtInput => self.input.next(),
            // The input already sits on the entry after the buffered tombstone.
            Position::AtPending => Ok(()),
            Position::AtMerged => {
                self.merged_at += 1;
                if self.merged_at < self.merged.len() {
                    return Ok(());
                }
                Ok(())
            }
            Position::Invalid => return Ok(()),
        };
        self.settle_after(result)
    }

    /// What has been consumed and produced so far.
    pub fn stats(&self) -> CompactionIterStats {
        self.stats
    }

    /// Forgets the version chain in progress (before a seek).
    fn reset(&mut self) {
        self.position = Position::Invalid;
        self.has_current_key = false;
        self.pending = false;
    }

    /// Finishes a movement: finds the next output entry, or records the failure.
    fn settle_after(&mut self, moved: Result<()>) -> Result<()> {
        let result = moved.and_then(|()| self.settle());
        if result.is_err() {
            self.position = Position::Invalid;
            self.pending = false;
        }
        result
    }

    /// Consumes input until it reaches an entry to output (or the end / upper bound).
    /// REQUIRES: the input is on an entry not yet examined, or invalid.
    fn settle(&mut self) -> Result<()> {
        loop {
            self.zeroed = false;
            self.filtered = false;
            self.written_hash = None;
            if !self.input.valid() {
                self.finish();
                return Ok(());
            }
            let ikey = self.input.key();
            let Some(parsed) = parse_internal_key(ikey) else {
                return Err(corrupt(format!(
                    "unparseable internal key of {} bytes",
                    ikey.len()
                )));
            };
            if let Some(bound) = &self.upper_bound
                && parsed.user_key >= bound.as_slice()
            {
                self.finish();
                return Ok(());
            }
            if parsed.kind == ValueKind::RangeDeletion {
                return Err(corrupt("a range tombstone among point entries"));
            }
            let trailer = pack_trailer(parsed.seq, parsed.kind);
            // One comparison gives whether the key repeats and whether it went backwards.
            let order = self
                .has_current_key
                .then(|| compare_bytes(parsed.user_key, &self.current_key));
            let same_key = order == Some(std::cmp::Ordering::Equal);
            if same_key {
                // Versions must arrive newest first. An identical key (possible only from
                // duplicated input) is tolerated: it falls in the same stripe and is shadowed.
                if trailer > self.last_trailer {
                    return Err(corrupt(format!(
                        "input out of order: sequence {} after a newer-sorting version",
                        parsed.seq
                    )));
                }
            } else if order == Some(std::cmp::Ordering::Less) {
                return Err(corrupt("input out of order: user key went backwards"));
            }

            let stripe = self.snapshots.partition_point(|&s| s < parsed.seq);
            let shadowed = same_key && stripe == self.last_stripe;
            if self.pending && !shadowed {
                // This entry is the next kept version after the pending tombstone, or the
                // start of another key: the verdict on the tombstone is in.
                if same_key && parsed.kind != ValueKind::Deletion {
                    // The tombstone hides this value (or what this operand applies to) from
                    // newer readers: emit it first. The
                    // current entry stays unexamined for the next call.
                    self.pending = false;
                    self.position = Position::AtPending;
                    self.stats.entries_out += 1;
                    self.log_written();
                    return Ok(());
                }
                // Field by field: `parsed` still borrows the input.
                self.pending = false;
                drop_awaited(
                    &mut self.stats,
                    &mut self.drops,
                    &self.pending_key,
                    &self.pending_value,
                );
            }

            let value_len = self.input.value().len();
            self.stats.entries_in += 1;
            self.stats.input_key_bytes += ikey.len() as u64;
            self.stats.input_value_bytes += value_len as u64;
            let newer = self.last_trailer >> 8;
            if shadowed && parsed.seq == self.last_trailer >> 8 && self.drops.is_some() {
                // Tolerated above, but its drop would cite its own sequence number, which no
                // log can hold (sequence numbers are unique: only damage repeats one).
                return Err(corrupt("a sequence number appears twice in the input"));
            }
            self.last_trailer = trailer;

            if shadowed {
                self.stats.shadowed_dropped += 1;
                let (ikey, value) = (self.input.key(), self.input.value());
                self.stats.drop_hash(entry_hash(ikey, value));
                if let Some(log) = &mut self.drops {
                    log.push(ikey, DropReason::Shadowed { by: newer });
                }
                self.input.next()?;
                continue;
            }
            if !same_key {
                self.current_key.clear();
                self.current_key.extend_from_slice(parsed.user_key);
                self.has_current_key = true;
            }
            self.last_stripe = stripe;
            if self.covered(parsed.user_key, parsed.seq) {
                // Every older version of this stripe is covered too, and now shadowed.
                self.stats.range_covered += 1;
                let (ikey, value) = (self.input.key(), self.input.value());
                self.stats.drop_hash(entry_hash(ikey, value));
                if let Some(log) = &mut self.drops {
                    log.push(ikey, DropReason::RangeCovered);
                }
                self.input.next()?;
                continue;
            }
            if parsed.kind == ValueKind::Merge {
                return self.merge_stripe(stripe);
            }
            check_blob_ref(parsed.kind, self.input.value())?;

            let mut kind = parsed.kind;
            let decision = match &self.filter {
                Some(filter) if kind == ValueKind::Value && stripe == self.snapshots.len() => {
                    filter.filter(parsed.user_key, self.input.value())
                }
                _ => FilterDecision::Keep,
            };
            let mut change = None;
            match decision {
                FilterDecision::Keep => {}
                FilterDecision::Change(value) => change = Some(value),
                FilterDecision::Remove => {
                    // From here on the entry is a tombstone of the same key and sequence.
                    self.zeroed_key.clear();
                    append_internal_key(
                        &mut self.zeroed_key,
                        parsed.user_key,
                        parsed.seq,
                        ValueKind::Deletion,
                    );
                    self.filtered_value.clear();
                    let written = EntryHash::of(&self.zeroed_key, &[]);
                    self.stats
                        .rewrite(entry_hash(ikey, self.input.value()), written.entry);
                    self.written_hash = Some(written);
                    self.stats.filter_removed += 1;
                    (self.zeroed, self.filtered) = (true, true);
                    kind = ValueKind::Deletion;
                }
            }

            if kind == ValueKind::Deletion && self.bottommost {
                let (key, value) = match self.filtered {
                    true => (self.zeroed_key.as_slice(), self.filtered_value.as_slice()),
                    false => (ikey, self.input.value()),
                };
                if stripe == 0 {
                    self.stats.tombstones_dropped += 1;
                    self.stats.drop_hash(entry_hash(key, value));
                    if let Some(log) = &mut self.drops {
                        log.push(key, DropReason::BottomTombstone);
                    }
                } else {
                    self.pending_key.clear();
                    self.pending_key.extend_from_slice(key);
                    self.pending_value.clear();
                    self.pending_value.extend_from_slice(value);
                    self.pending = true;
                }
                self.input.next()?;
                continue;
            }
            if matches!(kind, ValueKind::Value | ValueKind::BlobIndex)
                && self.bottommost
                && stripe == 0
                && parsed.seq != 0
                && self.may_zero(parsed.user_key)
            {
                self.zero_sequence(kind);
            }
            if let Some(value) = change {
                let key = if self.zeroed {
                    self.zeroed_key.as_slice()
                } else {
                    self.input.key()
                };
                // A zeroed entry's hash as it stood was computed when it was zeroed.
                let before = self
                    .written_hash
                    .map_or_else(|| entry_hash(key, self.input.value()), |h| h.entry);
                let written = EntryHash::of(key, &value);
                self.stats.rewrite(before, written.entry);
                self.written_hash = Some(written);
                self.stats.filter_changed += 1;
                self.filtered_value = value;
                self.filtered = true;
            }
            self.position = Position::AtInput;
            self.stats.entries_out += 1;
            self.log_written();
            return Ok(());
        }
    }

    /// Makes `key()` the current entry's key with sequence number 0 and accounts the change
    /// of its hash. REQUIRES: the input is on a kept value of stripe 0 at the bottom.
    fn zero_sequence(&mut self, kind: ValueKind) {
        let (ikey, value) = (self.input.key(), self.input.value());
        let key = user_key(ikey);
        self.zeroed_key.clear();
        append_internal_key(&mut self.zeroed_key, key, 0, kind);
        // One user-key hash for both; the value is hashed twice, as the seeds differ.
        let key_hash = hash64(key);
        let trailer_before = get_fixed64(&ikey[key.len()..]).unwrap_or(0);
        let before = entry_hash_parts(key_hash, trailer_before, value);
        let after = EntryHash::parts(key_hash, pack_trailer(0, kind), value);
        self.stats.seqs_zeroed += 1;
        self.stats.rewrite_digest = self
            .stats
            .rewrite_digest
            .wrapping_add(before.wrapping_sub(after.entry));
        self.written_hash = Some(after);
        self.zeroed = true;
    }

    /// The input is exhausted or past the upper bound: a pending tombstone has no older kept
    /// version below it and is dropped.
    fn finish(&mut self) {
        if self.pending {
            self.drop_pending();
        }
        self.position = Position::Invalid;
    }
}

/// Lets the compaction iterator feed code written against [`InternalIterator`] (the block
/// builder step). It is forward-only: `seek_to_last` and `prev` return
/// [`Error::InvalidArgument`] and leave it invalid.
impl<I: InternalIterator> InternalIterator for CompactionIterator<I> {
    fn valid(&self) -> bool {
        CompactionIterator::valid(self)
    }
    fn seek_to_first(&mut self) -> Result<()> {
        CompactionIterator::seek_to_first(self)
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.reset();
        Err(Error::InvalidArgument(
            "the compaction iterator is forward-only: seek_to_last is unsupported".into(),
        ))
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        CompactionIterator::seek(self, target)
    }
    fn next(&mut self) -> Result<()> {
        CompactionIterator::next(self)
    }
    fn prev(&mut self) -> Result<()> {
        self.reset();
        Err(Error::InvalidArgument(
            "the compaction iterator is forward-only: prev is unsupported".into(),
        ))
    }
    fn key(&self) -> &[u8] {
        CompactionIterator::key(self)
    }
    fn value(&self) -> &[u8] {
        CompactionIterator::value(self)
    }
}

impl<I: InternalIterator> std::fmt::Debug for CompactionIterator<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactionIterator")
            .field("snapshots", &self.snapshots)
            .field("bottommost", &self.bottommost)
            .field("position", &self.position)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// Accounts the drop of the tombstone that awaited its verdict (`key`, `value`): counted,
/// hashed and logged (the log sorts it before the versions dropped while it waited).
fn drop_awaited(
    stats: &mut CompactionIterStats,
    drops: &mut Option<DropLogWriter>,
    key: &[u8],
    value: &[u8],
) {
    stats.tombstones_dropped += 1;
    stats.drop_hash(entry_hash(key, value));
    if let Some(log) = drops {
        log.push(key, DropReason::BottomTombstone);
    }
}

/// A blob reference that does not decode is corruption: written on, it would name no value,
/// and the writer's count of references per blob file would miss it.
fn check_blob_ref(kind: ValueKind, value: &[u8]) -> Result<()> {
    match kind == ValueKind::BlobIndex && BlobRef::decode(value).is_none() {
        true => Err(corrupt(format!(
            "a blob reference of {} bytes that does not decode",
            value.len()
        ))),
        false => Ok(()),
    }
}

fn corrupt(reason: impl Into<String>) -> Error {
    Error::corruption(MERGE_INPUT, 0, reason)
}
