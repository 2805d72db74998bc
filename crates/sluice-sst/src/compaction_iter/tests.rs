use proptest::prelude::*;

use super::*;
use crate::iter::VecIterator;
use crate::key::{make_internal_key, seek_key};
use crate::merge::MergingIterator;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn put(user_key: &[u8], seq: SeqNo) -> (Vec<u8>, Vec<u8>) {
    let value = format!("{}@{seq}", String::from_utf8_lossy(user_key)).into_bytes();
    (make_internal_key(user_key, seq, ValueKind::Value), value)
}

fn del(user_key: &[u8], seq: SeqNo) -> (Vec<u8>, Vec<u8>) {
    (
        make_internal_key(user_key, seq, ValueKind::Deletion),
        Vec::new(),
    )
}

fn sorted(mut entries: Entries) -> Entries {
    entries.sort_by(|a, b| crate::key::compare_internal(&a.0, &b.0));
    entries
}

/// Runs a whole compaction over `entries` and returns the kept entries and the stats.
fn compact(
    entries: Entries,
    snapshots: &[SeqNo],
    bottommost: bool,
) -> (Entries, CompactionIterStats) {
    let mut it = CompactionIterator::new(
        VecIterator::new(sorted(entries)),
        snapshots.to_vec(),
        bottommost,
    );
    it.seek_to_first().unwrap();
    let out = drain(&mut it);
    (out, it.stats())
}

/// Every kept entry, checking on the way that the hashes the iterator hands on are the
/// entry's own (a table builder trusts them).
fn drain<I: InternalIterator>(it: &mut CompactionIterator<I>) -> Entries {
    let mut out = Vec::new();
    while it.valid() {
        if let Some(hash) = it.written_hash() {
            assert_eq!(
                hash,
                EntryHash::of(it.key(), it.value()),
                "hash of another entry"
            );
        }
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// `(user key, seq, kind)` of each entry, for readable assertions.
fn shape(entries: &Entries) -> Vec<(String, SeqNo, ValueKind)> {
    entries
        .iter()
        .map(|(k, _)| {
            let p = parse_internal_key(k).unwrap();
            (
                String::from_utf8_lossy(p.user_key).into_owned(),
                p.seq,
                p.kind,
            )
        })
        .collect()
}

use ValueKind::{Deletion as D, Value as V};

#[test]
fn no_snapshots_keeps_only_newest_version() {
    let input = vec![
        put(b"a", 3),
        put(b"a", 7),
        put(b"a", 5),
        del(b"b", 4),
        put(b"b", 2),
        put(b"c", 1),
    ];
    let (out, stats) = compact(input.clone(), &[], false);
    assert_eq!(
        shape(&out),
        [("a".into(), 7, V), ("b".into(), 4, D), ("c".into(), 1, V)]
    );
    assert_eq!(out[0].1, b"a@7");
    assert_eq!(stats.entries_in, 6);
    assert_eq!(stats.entries_out, 3);
    assert_eq!(stats.shadowed_dropped, 3);
    assert_eq!(stats.tombstones_dropped, 0);

    // Bottommost: the tombstone and everything it hid vanish, and with no snapshot every
    // value is visible to everyone: its sequence number is zeroed, its value kept.
    let (out, stats) = compact(input, &[], true);
    assert_eq!(shape(&out), [("a".into(), 0, V), ("c".into(), 0, V)]);
    assert_eq!(out[0].1, b"a@7");
    assert_eq!((stats.shadowed_dropped, stats.tombstones_dropped), (3, 1));
    assert_eq!(stats.seqs_zeroed, 2);
}

#[test]
fn snapshots_keep_the_newest_version_of_each_stripe() {
    // Stripes for snapshots {4, 8}: [..4], (4..8], (8..].
    let input = vec![
        put(b"k", 1),
        put(b"k", 3),
        put(b"k", 4),
        put(b"k", 6),
        put(b"k", 9),
        put(b"k", 12),
    ];
    let (out, stats) = compact(input, &[8, 4, 8], false);
    assert_eq!(
        shape(&out),
        [("k".into(), 12, V), ("k".into(), 6, V), ("k".into(), 4, V)]
    );
    assert_eq!(stats.shadowed_dropped, 3);
}

#[test]
fn tombstone_protected_by_snapshot_is_kept_only_if_it_hides_a_value() {
    // Snapshot 5 still sees k@3; the tombstone at 7 hides it from newer readers.
    // (k@3 is below every snapshot, so it is zeroed.)
    let (out, _) = compact(vec![del(b"k", 7), put(b"k", 3)], &[5], true);
    assert_eq!(shape(&out), [("k".into(), 7, D), ("k".into(), 0, V)]);

    // Nothing older than the tombstone: snapshot 5 and latest both find nothing without it.
    let (out, stats) = compact(vec![del(b"k", 7), put(b"z", 1)], &[5], true);
    assert_eq!(shape(&out), [("z".into(), 0, V)]);
    assert_eq!(stats.tombstones_dropped, 1);

    // Not bottommost: something below may be hidden, so the tombstone stays.
    let (out, _) = compact(vec![del(b"k", 7)], &[5], false);
    assert_eq!(shape(&out), [("k".into(), 7, D)]);

    // A tombstone in the earliest stripe goes even when the key has older versions.
    let (out, stats) = compact(vec![del(b"k", 4), put(b"k", 2)], &[5], true);
    assert!(out.is_empty());
    assert_eq!((stats.tombstones_dropped, stats.shadowed_dropped), (1, 1));
}

#[test]
fn chained_tombstones_collapse_at_bottommost() {
    // Snapshots {5, 10}: V@3 in stripe 0, T@8 in stripe 1, T@12 in the latest stripe.
    let input = vec![del(b"k", 12), del(b"k", 8), put(b"k", 3)];
    let (out, stats) = compact(input.clone(), &[5, 10], true);
    assert_eq!(shape(&out), [("k".into(), 8, D), ("k".into(), 0, V)]);
    assert_eq!(stats.tombstones_dropped, 1);
    assert_eq!(
        stats.entries_in,
        stats.entries_out + stats.shadowed_dropped + stats.tombstones_dropped
    );

    let (out, _) = compact(input, &[5, 10], false);
    assert_eq!(
        out.len(),
        3,
        "not bottommost: every stripe's newest version stays"
    );

    // Without the value, every tombstone goes.
    let (out, stats) = compact(
        vec![del(b"k", 12), del(b"k", 8), del(b"k", 7)],
        &[5, 10],
        true,
    );
    assert!(out.is_empty());
    assert_eq!((stats.tombstones_dropped, stats.shadowed_dropped), (2, 1));
}

#[test]
fn only_bottommost_values_below_every_snapshot_are_zeroed() {
    // Snapshot 5: k@3 is in stripe 0, k@9 above it; j@2 is a value of stripe 0 too.
    let input = vec![put(b"j", 2), put(b"k", 9), put(b"k", 3)];
    let (out, stats) = compact(input.clone(), &[5], true);
    assert_eq!(
        shape(&out),
        [("j".into(), 0, V), ("k".into(), 9, V), ("k".into(), 0, V)]
    );
    assert_eq!(stats.seqs_zeroed, 2);
    // Zeroing changes the hash; the rewrite digest makes up for it, so nothing is unaccounted.
    let digest = |entries: &Entries| {
        let mut d = crate::digest::EntryDigest::default();
        for (k, v) in entries {
            d.add(k, v);
        }
        d
    };
    assert_ne!(digest(&input), digest(&out) + stats.dropped());
    assert_eq!(digest(&input), digest(&out) + stats.unwritten());
    // The zeroed entries' hashes, computed for the rewrite, go on to the table builder; an
    // entry written as read has none (the builder hashes it).
    let mut it = CompactionIterator::new(VecIterator::new(sorted(input.clone())), vec![5], true);
    it.seek_to_first().unwrap();
    let mut known = Vec::new();
    while it.valid() {
        known.push(it.written_hash().is_some());
        it.next().unwrap();
    }
    assert_eq!(known, [true, false, true]);
    // Not bottommost: something older may lie below, so every sequence number stays.
    let (out, stats) = compact(input, &[5], false);
    assert_eq!(
        shape(&out),
        [("j".into(), 2, V), ("k".into(), 9, V), ("k".into(), 3, V)]
    );
    assert_eq!((stats.seqs_zeroed, stats.rewrite_digest), (0, 0));
}

#[test]
fn upper_bound_and_seek_delimit_a_sub_task() {
    let input: Entries = [b"a", b"b", b"c", b"d"]
        .iter()
        .flat_map(|k| [put(*k, 9), put(*k, 2)])
        .collect();
    let mut it = CompactionIterator::new(VecIterator::new(sorted(input)), vec![], false);
    it.set_upper_bound(Some(b"d".to_vec()));
    it.seek(&seek_key(b"b", MAX_SEQ)).unwrap();
    let out = drain(&mut it);
    assert_eq!(shape(&out), [("b".into(), 9, V), ("c".into(), 9, V)]);
    assert_eq!(
        it.stats().entries_in,
        4,
        "entries at or past the bound are not consumed"
    );
    // Seeking again starts a fresh chain; lifting the bound reaches the end.
    it.set_upper_bound(None);
    it.seek_to_first().unwrap();
    assert_eq!(drain(&mut it).len(), 4);
}

#[test]
fn identical_keys_from_two_sources_are_shadowed_not_corrupt() {
    let dup = put(b"k", 5);
    let children: Vec<Box<dyn InternalIterator>> = vec![
        Box::new(VecIterator::new(vec![dup.clone()])),
        Box::new(VecIterator::new(vec![dup.clone()])),
    ];
    let mut it = CompactionIterator::new(MergingIterator::new(children), vec![], false);
    it.seek_to_first().unwrap();
    assert_eq!(drain(&mut it), vec![dup]);
    assert_eq!(it.stats().shadowed_dropped, 1);
}

/// Yields entries in the order given, sorted or not: for corruption tests.
struct RawIterator {
    entries: Entries,
    pos: usize,
}

impl InternalIterator for RawIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.pos = self.entries.len().saturating_sub(1);
        Ok(())
    }
    fn seek(&mut self, _target: &[u8]) -> Result<()> {
        self.pos = 0;
        Ok(())
    }
    fn next(&mut self) -> Result<()> {
        self.pos += 1;
        Ok(())
    }
    fn prev(&mut self) -> Result<()> {
        self.pos = self.pos.checked_sub(1).unwrap_or(self.entries.len());
        Ok(())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

/// Compacts raw (possibly unsorted or garbage) input; returns the entries produced before the
/// first error, and the error.
fn compact_raw(
    entries: Entries,
    snapshots: Vec<SeqNo>,
    bottommost: bool,
) -> (Entries, Option<Error>) {
    let mut it = CompactionIterator::new(RawIterator { entries, pos: 0 }, snapshots, bottommost);
    let mut out = Vec::new();
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        step = it.next();
    }
    if step.is_err() {
        assert!(!it.valid(), "invalid after an error");
    }
    (out, step.err())
}

fn assert_merge_corruption(err: Option<Error>, reason_part: &str) {
    match err {
        Some(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!(file.to_str(), Some(MERGE_INPUT));
            assert_eq!(offset, 0);
            assert!(reason.contains(reason_part), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn corrupt_keys_are_errors_never_skipped() {
    let mut bad_kind = make_internal_key(b"b", 5, ValueKind::Value);
    let n = bad_kind.len();
    bad_kind[n - 8] = 0x7f;
    let (out, err) = compact_raw(
        vec![put(b"a", 1), (bad_kind, vec![]), put(b"c", 1)],
        vec![],
        false,
    );
    assert_eq!(shape(&out), [("a".into(), 1, V)]);
    assert_merge_corruption(err, "unparseable");

    let (out, err) = compact_raw(vec![(b"short".to_vec(), vec![])], vec![], false);
    assert!(out.is_empty());
    assert_merge_corruption(err, "unparseable");

    let (_, err) = compact_raw(vec![put(b"b", 1), put(b"a", 1)], vec![], false);
    assert_merge_corruption(err, "user key went backwards");

    let (_, err) = compact_raw(vec![put(b"a", 1), put(b"a", 2)], vec![], false);
    assert_merge_corruption(err, "out of order");

    // A pending tombstone is never emitted past a corrupt successor.
    let (out, err) = compact_raw(vec![del(b"a", 9), (b"bad".to_vec(), vec![])], vec![1], true);
    assert!(out.is_empty());
    assert!(err.is_some());
}

// ---------------------------------------------------------------------------------------------
// Model test: visibility at every snapshot is unchanged by compaction.

#[derive(Clone, Debug, PartialEq, Eq)]
enum Lookup {
    Found(Vec<u8>),
    Deleted,
    Missing,
}

/// The answer a reader at `snapshot` gets for `user_key` from `entries`.
fn lookup(entries: &Entries, user_key: &[u8], snapshot: SeqNo) -> Lookup {
    entries
        .iter()
        .filter_map(|(k, v)| {
            let p = parse_internal_key(k).unwrap();
            (p.user_key == user_key && p.seq <= snapshot).then_some((p.seq, p.kind, v))
        })
        .max_by_key(|&(seq, _, _)| seq)
        .map_or(Lookup::Missing, |(_, kind, v)| match kind {
            ValueKind::Value | ValueKind::BlobIndex => Lookup::Found(v.clone()),
            ValueKind::Deletion => Lookup::Deleted,
            ValueKind::Merge | ValueKind::RangeDeletion => {
                unreachable!("operands and range tombstones are modelled in merge_tests.rs")
            }
        })
}

/// At the bottommost level "deleted" and "never written" are the same answer.
fn lookup_bottom(entries: &Entries, user_key: &[u8], snapshot: SeqNo) -> Option<Vec<u8>> {
    match lookup(entries, user_key, snapshot) {
        Lookup::Found(v) => Some(v),
        Lookup::Deleted | Lookup::Missing => None,
    }
}

const KEYS: u8 = 5;

/// `entry` with sequence number 0.
fn zeroed(entry: &(Vec<u8>, Vec<u8>)) -> (Vec<u8>, Vec<u8>) {
    let p = parse_internal_key(&entry.0).unwrap();
    (make_internal_key(p.user_key, 0, p.kind), entry.1.clone())
}

fn seq_of(entry: &(Vec<u8>, Vec<u8>)) -> SeqNo {
    parse_internal_key(&entry.0).unwrap().seq
}

fn readers(snapshots: &[SeqNo]) -> Vec<SeqNo> {
    snapshots.iter().copied().chain([MAX_SEQ]).collect()
}

fn stripe_of(snapshots: &[SeqNo], seq: SeqNo) -> usize {
    let mut s = snapshots.to_vec();
    s.sort_unstable();
    s.dedup();
    s.iter().filter(|&&x| x < seq).count()
}

fn input_strategy() -> impl Strategy<Value = (Entries, Vec<u8>)> {
    prop::collection::btree_map((0..KEYS, 1u64..40), any::<bool>(), 0..40).prop_flat_map(|m| {
        let entries: Entries = m
            .into_iter()
            .map(|((k, seq), is_value)| {
                let uk = [b'a' + k];
                if is_value {
                    put(&uk, seq)
                } else {
                    del(&uk, seq)
                }
            })
            .collect();
        let n = entries.len();
        (Just(sorted(entries)), prop::collection::vec(0u8..3, n))
    })
}

/// Splits `entries` into up to three sorted runs and merges them back, so the compaction
/// iterator is tested on a real merged stream.
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

proptest! {
    #[test]
    fn compaction_preserves_every_readers_view(
        (input, run_of) in input_strategy(),
        snapshots in prop::collection::vec(0u64..45, 0..5),
        bottommost: bool,
        split in 0..KEYS,
    ) {
        let mut it = CompactionIterator::new(merged(&input, &run_of), snapshots.clone(), bottommost);
        it.seek_to_first().unwrap();
        let out = drain(&mut it);
        let stats = it.stats();

        // Output is a subsequence of the input, byte for byte, except that at the bottom the
        // values of stripe 0 (below every snapshot) have sequence number 0, and only they.
        let mut rest = input.iter();
        for e in &out {
            let (_, seq, kind) = shape(&vec![e.clone()]).remove(0);
            if seq == 0 {
                prop_assert!(bottommost && kind == ValueKind::Value, "zeroed {:?}", e);
                let from = rest.find(|i| zeroed(i) == *e);
                prop_assert!(from.is_some_and(|i| stripe_of(&snapshots, seq_of(i)) == 0),
                    "zeroed entry not from stripe 0 in input order: {:?}", e);
            } else {
                prop_assert!(rest.any(|i| i == e), "output entry not in input order: {:?}", e);
                let should_zero = bottommost && kind == ValueKind::Value
                    && stripe_of(&snapshots, seq) == 0;
                prop_assert!(!should_zero, "not zeroed: {:?}", e);
            }
        }
        prop_assert_eq!(stats.seqs_zeroed, out.iter().filter(|e| shape(&vec![(*e).clone()])[0].1 == 0).count() as u64);

        // Every reader sees what it saw before.
        for k in 0..KEYS {
            let uk = [b'a' + k];
            for s in readers(&snapshots) {
                if bottommost {
                    prop_assert_eq!(lookup_bottom(&out, &uk, s), lookup_bottom(&input, &uk, s),
                        "key {} at {}", k, s);
                } else {
                    // Data below may exist: "deleted" must stay distinguishable from "missing".
                    prop_assert_eq!(lookup(&out, &uk, s), lookup(&input, &uk, s), "key {} at {}", k, s);
                }
            }
        }

        // At most one version per key and stripe.
        let mut stripes: Vec<(Vec<u8>, usize)> = shape(&out)
            .into_iter()
            .map(|(k, seq, _)| (k.into_bytes(), stripe_of(&snapshots, seq)))
            .collect();
        let n = stripes.len();
        stripes.dedup();
        prop_assert_eq!(stripes.len(), n);
        if snapshots.is_empty() {
            let mut keys: Vec<String> = shape(&out).into_iter().map(|e| e.0).collect();
            keys.dedup();
            prop_assert_eq!(keys.len(), out.len(), "a user key appears twice without snapshots");
            if bottommost {
                prop_assert!(shape(&out).iter().all(|e| e.2 == ValueKind::Value));
            }
        }

        // At the bottommost level every surviving tombstone is needed by some reader.
        if bottommost {
            for (i, e) in out.iter().enumerate() {
                if parse_internal_key(&e.0).unwrap().kind != ValueKind::Deletion {
                    continue;
                }
                let uk = crate::key::user_key(&e.0).to_vec();
                let mut without = out.clone();
                without.remove(i);
                let needed = readers(&snapshots)
                    .into_iter()
                    .any(|s| lookup_bottom(&without, &uk, s) != lookup_bottom(&out, &uk, s));
                prop_assert!(needed, "tombstone {:?} is needed by no reader", shape(&vec![e.clone()]));
            }
        }

        // Stats add up.
        prop_assert_eq!(stats.entries_in, input.len() as u64);
        prop_assert_eq!(stats.entries_out, out.len() as u64);
        prop_assert_eq!(stats.entries_in,
            stats.entries_out + stats.shadowed_dropped + stats.tombstones_dropped);
        prop_assert_eq!(stats.input_key_bytes, input.iter().map(|e| e.0.len() as u64).sum::<u64>());
        prop_assert_eq!(stats.input_value_bytes, input.iter().map(|e| e.1.len() as u64).sum::<u64>());

        // The digest equation: what went in is what came out plus what was dropped.
        let digest = |entries: &Entries| {
            let mut d = crate::digest::EntryDigest::default();
            for (k, v) in entries {
                d.add(k, v);
            }
            d
        };
        prop_assert_eq!(digest(&input), digest(&out) + stats.unwritten());

        // Two sub-tasks split at a user key produce the same output as one task.
        let bound = vec![b'a' + split];
        let mut lo = CompactionIterator::new(merged(&input, &run_of), snapshots.clone(), bottommost);
        lo.set_upper_bound(Some(bound.clone()));
        lo.seek_to_first().unwrap();
        let mut parts = drain(&mut lo);
        let mut hi = CompactionIterator::new(merged(&input, &run_of), snapshots.clone(), bottommost);
        hi.seek(&seek_key(&bound, MAX_SEQ)).unwrap();
        parts.extend(drain(&mut hi));
        prop_assert_eq!(&parts, &out);
        prop_assert_eq!(lo.stats().entries_in + hi.stats().entries_in, stats.entries_in);
        prop_assert_eq!(lo.stats().tombstones_dropped + hi.stats().tombstones_dropped,
            stats.tombstones_dropped);
        let mut summed = lo.stats();
        summed += hi.stats();
        prop_assert_eq!(summed.dropped(), stats.dropped());
    }

    /// Arbitrary bytes as keys, in arbitrary order: never a panic, only output or corruption.
    #[test]
    fn garbage_input_never_panics(
        keys in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..14), 0..20),
        snapshots in prop::collection::vec(any::<u64>(), 0..4),
        bottommost: bool,
    ) {
        let entries: Entries = keys.into_iter().map(|k| (k, vec![1, 2])).collect();
        let total = entries.len();
        let (out, err) = compact_raw(entries, snapshots, bottommost);
        prop_assert!(out.len() <= total);
        if let Some(e) = err {
            prop_assert!(e.is_corruption());
        }
        prop_assert!(out.iter().all(|e| parse_internal_key(&e.0).is_some()));
    }
}

#[test]
fn usable_as_a_forward_only_internal_iterator() {
    fn walk(it: &mut dyn InternalIterator) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        it.seek_to_first().unwrap();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next().unwrap();
        }
        keys
    }
    let input = vec![put(b"a", 2), put(b"a", 1), put(b"b", 1)];
    let mut it = CompactionIterator::new(VecIterator::new(sorted(input)), vec![], false);
    assert_eq!(walk(&mut it).len(), 2);
    InternalIterator::seek_to_first(&mut it).unwrap();
    assert!(matches!(
        InternalIterator::prev(&mut it),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!InternalIterator::valid(&it));
    assert!(matches!(
        InternalIterator::seek_to_last(&mut it),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!InternalIterator::valid(&it));
}

/// Removes the values of key `a`, rewrites those of `b`, keeps the rest.
#[derive(Debug)]
struct TestFilter;

impl CompactionFilter for TestFilter {
    fn name(&self) -> &str {
        "test"
    }
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision {
        match key {
            b"a" => FilterDecision::Remove,
            b"b" => FilterDecision::Change([b"changed:", value].concat()),
            _ => FilterDecision::Keep,
        }
    }
}

#[test]
fn a_filter_sees_only_values_no_snapshot_can_see() {
    let input = vec![put(b"a", 9), put(b"a", 3), put(b"b", 4), put(b"c", 8)];
    // Snapshot 5: a@9 is above it (filtered), a@3 and b@4 below (not shown to the filter).
    let mut it = CompactionIterator::new(VecIterator::new(sorted(input)), vec![5], false);
    it.set_filter(Some(std::sync::Arc::new(TestFilter)));
    it.seek_to_first().unwrap();
    let out = drain(&mut it);
    assert_eq!(
        shape(&out),
        [
            ("a".into(), 9, ValueKind::Deletion),
            ("a".into(), 3, V),
            ("b".into(), 4, V),
            ("c".into(), 8, V)
        ]
    );
    assert_eq!(out[0].1, b"", "a removed value is an empty tombstone");
    assert_eq!(out[2].1, b"b@4", "below the snapshot: unchanged");
    assert_eq!(
        (it.stats().filter_removed, it.stats().filter_changed),
        (1, 0)
    );
}

proptest! {
    #[test]
    fn a_filter_changes_exactly_the_latest_view_and_the_digest_adds_up(
        (input, run_of) in input_strategy(),
        snapshots in prop::collection::vec(0u64..45, 0..4),
        bottommost: bool,
    ) {
        let mut it = CompactionIterator::new(merged(&input, &run_of), snapshots.clone(), bottommost);
        it.set_filter(Some(std::sync::Arc::new(TestFilter)));
        it.seek_to_first().unwrap();
        let out = drain(&mut it);
        let stats = it.stats();
        let top = {
            let mut s = snapshots.clone();
            s.sort_unstable();
            s.dedup();
            s.len()
        };
        for k in 0..KEYS {
            let uk = [b'a' + k];
            for s in readers(&snapshots) {
                let before = lookup(&input, &uk, s);
                let newest = input
                    .iter()
                    .map(|(k, _)| parse_internal_key(k).unwrap())
                    .filter(|p| p.user_key == uk)
                    .map(|p| (p.seq, p.kind))
                    .max();
                let filtered = s == MAX_SEQ
                    && newest.is_some_and(|(seq, kind)| {
                        kind == ValueKind::Value && stripe_of(&snapshots, seq) == top
                    });
                let expected = match (filtered, before) {
                    (true, Lookup::Found(v)) => match TestFilter.filter(&uk, &v) {
                        FilterDecision::Keep => Lookup::Found(v),
                        FilterDecision::Remove => Lookup::Deleted,
                        FilterDecision::Change(new) => Lookup::Found(new),
                    },
                    (_, before) => before,
                };
                let got = lookup(&out, &uk, s);
                if bottommost {
                    let found = |l: Lookup| match l { Lookup::Found(v) => Some(v), _ => None };
                    prop_assert_eq!(found(got), found(expected), "key {} at {}", k, s);
                } else {
                    prop_assert_eq!(got, expected, "key {} at {}", k, s);
                }
            }
        }
        let digest = |entries: &Entries| {
            let mut d = crate::digest::EntryDigest::default();
            for (k, v) in entries {
                d.add(k, v);
            }
            d
        };
        prop_assert_eq!(digest(&input), digest(&out) + stats.unwritten());
        prop_assert_eq!(stats.entries_in,
            stats.entries_out + stats.shadowed_dropped + stats.tombstones_dropped);
    }
}

#[test]
fn blob_references_move_like_values_and_bad_ones_are_corruption() {
    let blob = |key: &[u8], seq: SeqNo, file_number: u64| {
        let r = BlobRef {
            file_number,
            offset: 16,
            size: 100,
        };
        (
            make_internal_key(key, seq, ValueKind::BlobIndex),
            r.encode(),
        )
    };
    // Shadowed like values, and zeroed like values at the bottom.
    let (out, stats) = compact(
        vec![blob(b"a", 9, 4), blob(b"a", 5, 3), put(b"b", 2)],
        &[],
        true,
    );
    assert_eq!(
        shape(&out),
        [
            ("a".into(), 0, ValueKind::BlobIndex),
            ("b".into(), 0, ValueKind::Value)
        ]
    );
    assert_eq!(BlobRef::decode(&out[0].1).map(|r| r.file_number), Some(4));
    assert_eq!(stats.shadowed_dropped, 1);

    let mut bad = blob(b"c", 4, 1);
    bad.1.push(0);
    let (out, err) = compact_raw(vec![put(b"a", 5), bad.clone()], vec![], false);
    assert_eq!(
        out.len(),
        1,
        "entries before the bad reference are produced"
    );
    assert_merge_corruption(err, "blob reference of 4 bytes");
}
