//! Range tombstones: `delete_range(start, end)` deletes every version of every key in
//! `[start, end)` older than the tombstone's sequence number, for readers at or above it.
//!
//! A set of tombstones is kept *fragmented*, as Pebble's keyspan fragmenter and RocksDB's
//! `FragmentedRangeTombstoneList` keep them: cut at every start and end into non-overlapping
//! fragments, each listing the sequence numbers of the tombstones that cover it, newest first.
//! Every question about a key is then one binary search:
//!
//! * a reader at `read_seq` finds the newest tombstone over the key it can see
//!   ([`Tombstones::max_covering`]); every version of the key older than that is deleted;
//! * a compaction may drop a version only when a covering tombstone is newer *and in the same
//!   snapshot stripe* ([`Tombstones::covers_in_stripe`], the stripes of
//!   [`crate::compaction_iter`]): a snapshot between the two still sees the version.

use crate::key::SeqNo;

/// One `delete_range`: every version older than `seq` of every key in `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// First deleted key.
    pub start: Vec<u8>,
    /// First key past the deleted range (exclusive).
    pub end: Vec<u8>,
    /// The sequence number the deletion was written at.
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// True when `key` is in `[start, end)`.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key < self.end.as_slice()
    }

    /// True when the range and `[lo, hi]` (inclusive user keys) share a key.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.start.as_slice() <= hi && lo < self.end.as_slice()
    }
}

/// A key range covered by the same tombstones.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    /// Sequence numbers of the tombstones covering the whole fragment, descending.
    seqs: Vec<SeqNo>,
}

/// Tombstones fragmented for lookups (see the module docs). Empty ranges are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tombstones {
    /// Sorted, non-overlapping, each with at least one sequence number.
    fragments: Vec<Fragment>,
}

impl Tombstones {
    /// Fragments `tombstones` (in any order; duplicates allowed).
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Self {
        let tombstones: Vec<&RangeTombstone> =
            tombstones.into_iter().filter(|t| t.start < t.end).collect();
        let mut cuts: Vec<&[u8]> = tombstones
            .iter()
            .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut seqs: Vec<Vec<SeqNo>> = vec![Vec::new(); cuts.len().saturating_sub(1)];
        for t in &tombstones {
            // Cuts include every start and end, so both are found exactly.
            let from = cuts.partition_point(|c| *c < t.start.as_slice());
            let to = cuts.partition_point(|c| *c < t.end.as_slice());
            for s in &mut seqs[from..to] {
                s.push(t.seq);
            }
        }
        let fragments = seqs
            .into_iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .map(|(i, mut s)| {
                s.sort_unstable_by(|a, b| b.cmp(a));
                s.dedup();
                Fragment {
                    start: cuts[i].to_vec(),
                    end: cuts[i + 1].to_vec(),
                    seqs: s,
                }
            })
            .collect();
        Tombstones { fragments }
    }

    /// The set as tombstones again, one per fragment and sequence number: fragmenting them
    /// gives this set back (a compaction task carries them this way).
    pub fn pieces(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.fragments.iter().flat_map(|f| {
            f.seqs.iter().map(|&seq| RangeTombstone {
                start: f.start.clone(),
                end: f.end.clone(),
                seq,
            })
        })
    }

    /// True when no key is covered.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The fragment holding `key`, if any.
    fn fragment(&self, key: &[u8]) -> Option<&Fragment> {
        let i = self.fragments.partition_point(|f| f.end.as_slice() <= key);
        self.fragments.get(i).filter(|f| f.start.as_slice() <= key)
    }

    /// The newest tombstone over `key` that a reader at `read_seq` sees: the versions of `key`
    /// below it are deleted for that reader.
    pub fn max_covering(&self, key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        let f = self.fragment(key)?;
        f.seqs.iter().copied().find(|&s| s <= read_seq)
    }

    /// True when a reader at `read_seq` sees version `seq` of `key` deleted by a tombstone.
    pub fn deletes(&self, key: &[u8], seq: SeqNo, read_seq: SeqNo) -> bool {
        self.max_covering(key, read_seq).is_some_and(|t| t > seq)
    }

    /// True when a compaction may drop version `seq` of `key`: a tombstone over it is newer
    /// and in the same stripe of `snapshots` (ascending), so no reader sees the version.
    pub fn covers_in_stripe(&self, key: &[u8], seq: SeqNo, snapshots: &[SeqNo]) -> bool {
        let Some(f) = self.fragment(key) else {
            return false;
        };
        let stripe = |s: SeqNo| snapshots.partition_point(|&snap| snap < s);
        let own = stripe(seq);
        f.seqs.iter().any(|&t| t > seq && stripe(t) == own)
    }

    /// True when any tombstone covers `key`, whatever its sequence number.
    pub fn covers_any(&self, key: &[u8]) -> bool {
        self.fragment(key).is_some()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn t(start: &str, end: &str, seq: SeqNo) -> RangeTombstone {
        RangeTombstone {
            start: start.into(),
            end: end.into(),
            seq,
        }
    }

    #[test]
    fn overlapping_tombstones_fragment_into_disjoint_pieces() {
        let set = Tombstones::new(&[t("b", "f", 10), t("d", "h", 20), t("x", "x", 99)]);
        let pieces: Vec<_> = set
            .fragments
            .iter()
            .map(|f| (f.start.as_slice(), f.end.as_slice(), f.seqs.clone()))
            .collect();
        assert_eq!(
            pieces,
            [
                (&b"b"[..], &b"d"[..], vec![10]),
                (b"d", b"f", vec![20, 10]),
                (b"f", b"h", vec![20])
            ]
        );
        assert_eq!(set.max_covering(b"e", 15), Some(10));
        assert_eq!(set.max_covering(b"e", 25), Some(20));
        assert_eq!(set.max_covering(b"e", 5), None);
        assert_eq!(set.max_covering(b"h", 25), None, "the end is exclusive");
        assert!(set.deletes(b"c", 9, 10) && !set.deletes(b"c", 10, 10));
        assert!(!set.covers_any(b"x") && set.covers_any(b"g"));
    }

    #[test]
    fn a_snapshot_between_keeps_the_version_for_compaction() {
        let set = Tombstones::new(&[t("a", "z", 50)]);
        assert!(set.covers_in_stripe(b"k", 10, &[]));
        assert!(
            !set.covers_in_stripe(b"k", 10, &[30]),
            "snapshot 30 sees version 10"
        );
        assert!(set.covers_in_stripe(b"k", 40, &[30]));
        assert!(
            !set.covers_in_stripe(b"k", 60, &[]),
            "newer than the tombstone"
        );
    }

    fn naive_max(ts: &[RangeTombstone], key: &[u8], read_seq: SeqNo) -> Option<SeqNo> {
        ts.iter()
            .filter(|t| t.contains(key) && t.seq <= read_seq)
            .map(|t| t.seq)
            .max()
    }

    proptest! {
        #[test]
        fn fragments_answer_as_the_tombstones_do(
            raw in prop::collection::vec((0u8..20, 0u8..20, 1u64..50), 0..12),
            key in 0u8..21,
            read_seq in 0u64..60,
            seq in 0u64..60,
            snapshots in prop::collection::btree_set(0u64..60, 0..4),
        ) {
            let ts: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(a, b, s)| RangeTombstone { start: vec![a], end: vec![b], seq: s })
                .collect();
            let set = Tombstones::new(&ts);
            let key = [key];
            prop_assert_eq!(set.max_covering(&key, read_seq), naive_max(&ts, &key, read_seq));
            let snapshots: Vec<SeqNo> = snapshots.into_iter().collect();
            let stripe = |s: SeqNo| snapshots.partition_point(|&x| x < s);
            let naive = ts.iter().any(|t| t.contains(&key) && t.seq > seq && stripe(t.seq) == stripe(seq));
            prop_assert_eq!(set.covers_in_stripe(&key, seq, &snapshots), naive);
            prop_assert_eq!(set.covers_any(&key), ts.iter().any(|t| t.contains(&key)));
            // Fragments are sorted and disjoint, and their pieces rebuild the set.
            prop_assert!(set.fragments.windows(2).all(|w| w[0].end <= w[1].start));
            let pieces: Vec<RangeTombstone> = set.pieces().collect();
            prop_assert_eq!(Tombstones::new(&pieces), set);
        }
    }
}
