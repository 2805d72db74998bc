//! Merge operands through the compaction iterator: every reader at every snapshot computes the
//! same value before and after, whatever lies below the compaction, with any operator or none.

use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::iter::VecIterator;
use crate::key::{compare_internal, make_internal_key, seek_key};
use crate::merge::MergingIterator;
use crate::merge_operator::{Append, MergeFailure};
use crate::range_del::{RangeTombstone, Tombstones};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

const KEYS: u8 = 4;

/// Append with `,`, but unable to combine operands without their base.
#[derive(Debug)]
struct NoPartial(Append);

impl MergeOperator for NoPartial {
    fn name(&self) -> &str {
        "no-partial"
    }
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        self.0.full_merge(key, existing, operands)
    }
}

/// Append with `,`, refusing any full merge that involves the operand `bad`.
#[derive(Debug)]
struct Picky(Append);

impl MergeOperator for Picky {
    fn name(&self) -> &str {
        "picky"
    }
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        if operands.contains(&&b"bad"[..]) {
            return Err("bad operand".into());
        }
        self.0.full_merge(key, existing, operands)
    }
    fn partial_merge(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        if older == b"bad" || newer == b"bad" {
            return None;
        }
        self.0.partial_merge(key, older, newer)
    }
}

fn operator(which: u8) -> Option<Arc<dyn MergeOperator>> {
    let append = || Append::with_delimiter(b",");
    match which {
        0 => None,
        1 => Some(Arc::new(append())),
        2 => Some(Arc::new(NoPartial(append()))),
        _ => Some(Arc::new(Picky(append()))),
    }
}

/// What a reader at `snapshot` reads for `user_key`: the versions of `entries` combined with
/// `below`, the key's value under the compaction (`None`: absent or deleted there), with
/// compaction `which`'s operator (`Append` when it has none, as a reopened database might).
/// `Err` when the operator refuses the operands.
fn read(
    which: u8,
    entries: &Entries,
    tombstones: &Tombstones,
    user_key: &[u8],
    snapshot: SeqNo,
    below: Option<&[u8]>,
) -> Result<Option<Vec<u8>>, String> {
    // Versions under the newest tombstone this reader sees are deleted, and so is `below`.
    let floor = tombstones.max_covering(user_key, snapshot);
    let below = below.filter(|_| floor.is_none());
    let model = operator(which).unwrap_or_else(|| Arc::new(Append::with_delimiter(b",")));
    let mut versions: Vec<(SeqNo, ValueKind, &[u8])> = entries
        .iter()
        .filter_map(|(k, v)| {
            let p = parse_internal_key(k).unwrap();
            (p.user_key == user_key && p.seq <= snapshot).then_some((p.seq, p.kind, v.as_slice()))
        })
        .collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.0));
    let mut operands = Vec::new();
    let mut base = below;
    for (seq, kind, value) in versions {
        if floor.is_some_and(|t| seq < t) {
            base = None;
            break;
        }
        match kind {
            ValueKind::Merge => operands.push(value),
            // A reference stands for its value: reads resolve it, compactions move it.
            ValueKind::Value | ValueKind::BlobIndex => {
                base = Some(value);
                break;
            }
            ValueKind::Deletion | ValueKind::RangeDeletion => {
                base = None;
                break;
            }
        }
    }
    if operands.is_empty() {
        return Ok(base.map(<[u8]>::to_vec));
    }
    operands.reverse();
    model.full_merge(user_key, base, &operands).map(Some)
}

fn strategy() -> impl Strategy<Value = (Entries, Vec<u8>)> {
    prop::collection::btree_map((0..KEYS, 1u64..30), 0u8..9, 0..30).prop_flat_map(|m| {
        let mut entries: Entries = m
            .into_iter()
            .map(|((k, seq), kind)| {
                let uk = [b'a' + k];
                let value = format!("{}{seq}", char::from(uk[0])).into_bytes();
                match kind {
                    0 => (make_internal_key(&uk, seq, ValueKind::Deletion), Vec::new()),
                    1 | 2 => (make_internal_key(&uk, seq, ValueKind::Value), value),
                    3 => (
                        make_internal_key(&uk, seq, ValueKind::Merge),
                        b"bad".to_vec(),
                    ),
                    8 => {
                        let blob = crate::blob::BlobRef {
                            file_number: seq,
                            offset: u64::from(k),
                            size: 20,
                        };
                        let ikey = make_internal_key(&uk, seq, ValueKind::BlobIndex);
                        (ikey, blob.encode())
                    }
                    _ => (make_internal_key(&uk, seq, ValueKind::Merge), value),
                }
            })
            .collect();
        entries.sort_by(|a, b| compare_internal(&a.0, &b.0));
        let n = entries.len();
        (Just(entries), prop::collection::vec(0u8..3, n))
    })
}

fn merged(entries: &Entries, run_of: &[u8]) -> MergingIterator {
    let mut runs: Vec<Entries> = vec![Vec::new(); 3];
    for (e, &r) in entries.iter().zip(run_of) {
        runs[usize::from(r)].push(e.clone());
    }
    MergingIterator::new(
        runs.into_iter()
            .map(|r| Box::new(VecIterator::new(r)) as Box<dyn InternalIterator>)
            .collect(),
    )
}

#[allow(
    clippy::too_many_arguments,
    reason = "a test helper spelling out every knob"
)]
fn compact_with(
    input: &Entries,
    run_of: &[u8],
    snapshots: &[SeqNo],
    bottommost: bool,
    op: Option<Arc<dyn MergeOperator>>,
    tombstones: Option<Arc<Tombstones>>,
    upper: Option<Vec<u8>>,
    seek: Option<&[u8]>,
) -> (Entries, CompactionIterStats) {
    let mut it = CompactionIterator::new(merged(input, run_of), snapshots.to_vec(), bottommost);
    it.set_merge_operator(op);
    it.set_range_tombstones(tombstones);
    it.set_upper_bound(upper);
    match seek {
        Some(lo) => it.seek(&seek_key(lo, MAX_SEQ)).unwrap(),
        None => it.seek_to_first().unwrap(),
    }
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    (out, it.stats())
}

fn compact(
    input: &Entries,
    run_of: &[u8],
    snapshots: &[SeqNo],
    bottommost: bool,
    op: Option<Arc<dyn MergeOperator>>,
    upper: Option<Vec<u8>>,
    seek: Option<&[u8]>,
) -> (Entries, CompactionIterStats) {
    compact_with(input, run_of, snapshots, bottommost, op, None, upper, seek)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn merging_preserves_every_readers_value_and_the_digest(
        (input, run_of) in strategy(),
        snapshots in prop::collection::vec(0u64..32, 0..4),
        bottommost: bool,
        which in 0u8..4,
        split in 0..KEYS,
        ranges in prop::collection::vec((0..=KEYS, 0..=KEYS, 1u64..30), 0..3),
    ) {
        let raw: Vec<RangeTombstone> = ranges
            .iter()
            .map(|&(a, b, seq)| RangeTombstone { start: vec![b'a' + a], end: vec![b'a' + b], seq })
            .collect();
        let tombstones = Arc::new(Tombstones::new(&raw));
        let ts = Some(Arc::clone(&tombstones));
        let (out, stats) = compact_with(&input, &run_of, &snapshots, bottommost, operator(which), ts.clone(), None, None);

        prop_assert!(out.windows(2).all(|w| compare_internal(&w[0].0, &w[1].0).is_lt()),
            "output out of order");
        let belows: &[Option<&[u8]>] = if bottommost { &[None] } else { &[None, Some(b"B")] };
        let readers: Vec<SeqNo> = snapshots.iter().copied().chain([MAX_SEQ]).collect();
        for k in 0..KEYS {
            let uk = [b'a' + k];
            for &s in &readers {
                for &below in belows {
                    prop_assert_eq!(read(which, &out, &tombstones, &uk, s, below),
                        read(which, &input, &tombstones, &uk, s, below),
                        "key {} at {} over {:?}", k, s, below);
                }
            }
        }

        prop_assert_eq!(stats.entries_in, input.len() as u64);
        prop_assert_eq!(stats.entries_out, out.len() as u64);
        prop_assert_eq!(stats.entries_in, stats.entries_out + stats.shadowed_dropped
            + stats.tombstones_dropped + stats.merge_absorbed + stats.range_covered);
        if which == 0 {
            prop_assert_eq!(stats.merge_absorbed, 0);
        }
        let digest = |entries: &Entries| {
            let mut d = crate::digest::EntryDigest::default();
            for (k, v) in entries {
                d.add(k, v);
            }
            d
        };
        prop_assert_eq!(digest(&input), digest(&out) + stats.unwritten());

        // Split into two sub-tasks at a user key: the same output.
        let bound = vec![b'a' + split];
        let (mut parts, _) = compact_with(&input, &run_of, &snapshots, bottommost, operator(which),
            ts.clone(), Some(bound.clone()), None);
        parts.extend(compact_with(&input, &run_of, &snapshots, bottommost, operator(which), ts,
            None, Some(&bound)).0);
        prop_assert_eq!(parts, out);
    }
}

fn entry(key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (make_internal_key(key, seq, kind), value.to_vec())
}

#[test]
fn operands_over_a_base_become_one_value_and_absorb_the_rest() {
    let input = vec![
        entry(b"k", 9, ValueKind::Merge, b"c"),
        entry(b"k", 8, ValueKind::Merge, b"b"),
        entry(b"k", 7, ValueKind::Value, b"a"),
        entry(b"k", 3, ValueKind::Value, b"old"),
    ];
    let (out, stats) = compact(&input, &[0; 4], &[], false, operator(1), None, None);
    assert_eq!(out, [entry(b"k", 9, ValueKind::Value, b"a,b,c")]);
    assert_eq!((stats.merge_absorbed, stats.shadowed_dropped), (2, 1));
}

#[test]
fn operands_without_their_base_are_combined_into_one_operand() {
    let input = vec![
        entry(b"k", 9, ValueKind::Merge, b"c"),
        entry(b"k", 8, ValueKind::Merge, b"b"),
    ];
    let (out, _) = compact(&input, &[0; 2], &[], false, operator(1), None, None);
    assert_eq!(out, [entry(b"k", 9, ValueKind::Merge, b"b,c")]);
    // At the bottom nothing is below: they become a value, its sequence zeroed.
    let (out, _) = compact(&input, &[0; 2], &[], true, operator(1), None, None);
    assert_eq!(out, [entry(b"k", 0, ValueKind::Value, b"b,c")]);
}

#[test]
fn a_snapshot_stops_the_merge_and_keeps_what_it_sees() {
    let input = vec![
        entry(b"k", 9, ValueKind::Merge, b"c"),
        entry(b"k", 5, ValueKind::Merge, b"b"),
        entry(b"k", 2, ValueKind::Value, b"a"),
    ];
    let (out, _) = compact(&input, &[0; 3], &[6], true, operator(1), None, None);
    assert_eq!(
        out,
        [
            entry(b"k", 9, ValueKind::Merge, b"c"),
            entry(b"k", 0, ValueKind::Value, b"a,b")
        ]
    );
}

#[test]
fn without_an_operator_or_when_it_refuses_everything_is_kept() {
    let input = vec![
        entry(b"k", 9, ValueKind::Merge, b"c"),
        entry(b"k", 8, ValueKind::Merge, b"bad"),
        entry(b"k", 7, ValueKind::Deletion, b""),
        entry(b"k", 3, ValueKind::Value, b"old"),
    ];
    for which in [0, 3] {
        let (out, stats) = compact(&input, &[0; 4], &[], true, operator(which), None, None);
        assert_eq!(out, input[..3], "operator {which}");
        assert_eq!((stats.merge_absorbed, stats.shadowed_dropped), (0, 1));
    }
}

#[test]
fn a_pending_tombstone_is_kept_above_an_operand() {
    // Snapshot 6 sees the operand over nothing; "latest" sees the tombstone.
    let input = vec![
        entry(b"k", 9, ValueKind::Deletion, b""),
        entry(b"k", 5, ValueKind::Merge, b"a"),
    ];
    let (out, _) = compact(&input, &[0; 2], &[6], true, None, None, None);
    assert_eq!(out, input);
}

#[test]
fn operands_over_a_blob_reference_are_written_as_read() {
    let blob = crate::blob::BlobRef {
        file_number: 7,
        offset: 16,
        size: 30,
    };
    let input = vec![
        (make_internal_key(b"k", 9, ValueKind::Merge), b"x".to_vec()),
        (make_internal_key(b"k", 8, ValueKind::Merge), b"y".to_vec()),
        (
            make_internal_key(b"k", 3, ValueKind::BlobIndex),
            blob.encode(),
        ),
    ];
    let run_of = vec![0; input.len()];
    let op: Arc<dyn MergeOperator> = Arc::new(Append::with_delimiter(b","));
    let (out, stats) = compact_with(&input, &run_of, &[], true, Some(op), None, None, None);
    assert_eq!(
        out, input,
        "nothing merged into a base the compaction does not read"
    );
    assert_eq!(stats.merge_absorbed, 0);
}
