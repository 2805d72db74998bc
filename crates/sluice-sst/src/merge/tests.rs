use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use proptest::prelude::*;

use super::*;
use crate::Error;
use crate::iter::VecIterator;
use crate::key::{ValueKind, make_internal_key};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn ikey(user_key: &[u8], seq: u64) -> Vec<u8> {
    make_internal_key(user_key, seq, ValueKind::Value)
}

fn boxed(runs: Vec<Entries>) -> Vec<Box<dyn InternalIterator>> {
    runs.into_iter()
        .map(|r| Box::new(VecIterator::new(r)) as Box<dyn InternalIterator>)
        .collect()
}

use crate::iter::test_util::{collect_backward, collect_forward};

#[test]
fn empty_and_unpositioned_are_invalid() {
    let mut it: MergingIterator = MergingIterator::new(Vec::new());
    assert_eq!(it.num_children(), 0);
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(&ikey(b"a", 1)).unwrap();
    assert!(!it.valid());

    let mut it = MergingIterator::new(boxed(vec![vec![], vec![]]));
    assert_eq!(it.num_children(), 2);
    it.seek_to_first().unwrap();
    assert!(!it.valid());
}

#[test]
fn interleaves_runs_and_orders_versions_newest_first() {
    let a = vec![
        (ikey(b"a", 5), b"a5".to_vec()),
        (ikey(b"c", 1), b"c1".to_vec()),
    ];
    let b = vec![
        (ikey(b"a", 9), b"a9".to_vec()),
        (ikey(b"b", 2), b"b2".to_vec()),
    ];
    let c = vec![(ikey(b"d", 3), b"d3".to_vec())];
    let mut it = MergingIterator::new(boxed(vec![a, b, c]));
    let values: Vec<Vec<u8>> = collect_forward(&mut it).into_iter().map(|e| e.1).collect();
    assert_eq!(values, [&b"a9"[..], b"a5", b"b2", b"c1", b"d3"]);
    let back: Vec<Vec<u8>> = collect_backward(&mut it).into_iter().map(|e| e.1).collect();
    assert_eq!(back, [&b"d3"[..], b"c1", b"b2", b"a5", b"a9"]);
}

#[test]
fn identical_keys_lower_child_first_and_switching_is_consistent() {
    let k = ikey(b"k", 7);
    let runs = vec![
        vec![(k.clone(), b"child0".to_vec())],
        vec![(k.clone(), b"child1".to_vec())],
        vec![(k.clone(), b"child2".to_vec())],
    ];
    let mut it = MergingIterator::new(boxed(runs));
    it.seek(&k).unwrap();
    assert_eq!(it.value(), b"child0");
    it.next().unwrap();
    assert_eq!(it.value(), b"child1");
    it.prev().unwrap();
    assert_eq!(it.value(), b"child0");
    it.prev().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert_eq!(it.value(), b"child2");
    it.prev().unwrap();
    assert_eq!(it.value(), b"child1");
    it.next().unwrap();
    assert_eq!(it.value(), b"child2");
    it.next().unwrap();
    assert!(!it.valid());
}

/// A child that fails on a chosen call, to check error propagation.
struct Failing {
    entries: Entries,
    inner: VecIterator,
    fail_next_after: u64,
    nexts: u64,
}

impl InternalIterator for Failing {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.nexts = 0;
        self.inner = VecIterator::new(self.entries.clone());
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        Err(Error::corruption(
            "child.sst",
            99,
            "injected seek_to_last failure",
        ))
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
    fn next(&mut self) -> Result<()> {
        self.nexts += 1;
        if self.nexts > self.fail_next_after {
            // An iterator is invalid after an error.
            self.inner = VecIterator::default();
            return Err(Error::corruption("child.sst", 42, "injected next failure"));
        }
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

#[test]
fn child_errors_propagate_and_invalidate_until_reseek() {
    let entries: Entries = (0..4u64).map(|i| (ikey(b"f", 10 - i), vec![])).collect();
    let failing = Failing {
        inner: VecIterator::new(entries.clone()),
        entries,
        fail_next_after: 2,
        nexts: 0,
    };
    let other = VecIterator::new(vec![(ikey(b"z", 1), vec![])]);
    let children: Vec<Box<dyn InternalIterator>> = vec![Box::new(failing), Box::new(other)];
    let mut it = MergingIterator::new(children);
    it.seek_to_first().unwrap();
    it.next().unwrap();
    it.next().unwrap();
    let err = it.next().unwrap_err();
    assert!(err.is_corruption());
    assert!(err.to_string().contains("offset 42"), "{err}");
    assert!(!it.valid(), "invalid after a child error");
    // A seek that succeeds makes it usable again.
    it.seek_to_first().unwrap();
    assert!(it.valid());
    assert_eq!(it.key(), ikey(b"f", 10));
    // Errors from seeks propagate too.
    assert!(it.seek_to_last().unwrap_err().is_corruption());
    assert!(!it.valid());
}

/// Counts `key()` calls on children: every comparison reads two child keys.
struct Counting {
    inner: VecIterator,
    key_reads: Arc<AtomicU64>,
}

impl InternalIterator for Counting {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.inner.seek(target)
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.key_reads.fetch_add(1, AtomicOrdering::Relaxed);
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

/// Merges `runs` sorted runs of `per_run` entries each (interleaved keys) and returns the number
/// of child key reads the merge performed, excluding the caller's own reads.
fn key_reads_for_merge(runs: usize, per_run: usize) -> u64 {
    let key_reads = Arc::new(AtomicU64::new(0));
    let children: Vec<Box<dyn InternalIterator>> = (0..runs)
        .map(|r| {
            let entries = (0..per_run)
                .map(|i| {
                    let user_key = format!("{:08}", i * runs + r).into_bytes();
                    (ikey(&user_key, 1), vec![])
                })
                .collect();
            Box::new(Counting {
                inner: VecIterator::new(entries),
                key_reads: Arc::clone(&key_reads),
            }) as Box<dyn InternalIterator>
        })
        .collect();
    let mut it = MergingIterator::new(children);
    it.seek_to_first().unwrap();
    let mut seen = 0;
    while it.valid() {
        seen += 1;
        it.next().unwrap();
    }
    assert_eq!(seen, runs * per_run);
    key_reads.load(AtomicOrdering::Relaxed)
}

/// Keys that differ in their first 8 bytes are ordered by their cached prefixes alone: the
/// merge reads each key once, when its child moves onto it, and never in a comparison.
#[test]
fn keys_that_differ_early_are_read_once() {
    for runs in [2usize, 8, 13] {
        let total = (runs * 200) as u64;
        assert_eq!(key_reads_for_merge(runs, 200), total, "runs={runs}");
    }
}

#[test]
fn merging_is_n_log_k_not_quadratic() {
    for runs in [1usize, 2, 3, 8, 13, 64] {
        let per_run = 200;
        let total = (runs * per_run) as u64;
        let depth = (runs as f64).log2().ceil() as u64;
        let reads = key_reads_for_merge(runs, per_run);
        // Each step reads the moved child's key once for its prefix and replays one root
        // path: at most `depth` comparisons of two key reads (when prefixes tie). The initial
        // build reads every child's key for its prefix and plays `runs - 1` matches.
        let bound = total * (2 * depth + 1) + 3 * runs as u64;
        assert!(
            reads <= bound,
            "runs={runs}: {reads} key reads > bound {bound}"
        );
        // Linear in the input size: doubling the entries doubles the work, up to a constant
        // for building the tree and for the cheaper matches against exhausted children.
        let doubled = key_reads_for_merge(runs, 2 * per_run);
        let slack = 4 * runs as u64 * (depth + 1);
        assert!(
            doubled <= 2 * reads + slack,
            "runs={runs}: {reads} -> {doubled}"
        );
    }
}

#[derive(Clone, Debug)]
enum Op {
    SeekToFirst,
    SeekToLast,
    Seek(u8, u64),
    Next,
    Prev,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => Just(Op::SeekToFirst),
        1 => Just(Op::SeekToLast),
        2 => (0u8..13, 0u64..12).prop_map(|(k, s)| Op::Seek(k, s)),
        4 => Just(Op::Next),
        4 => Just(Op::Prev),
    ]
}

/// User key number `k` of a small set of awkward keys: empty, zero bytes, keys that are
/// prefixes of others, and long keys that share their first 16 bytes and differ after them, by
/// a byte or by length.
fn tricky_key(k: u8) -> Vec<u8> {
    const KEYS: [&[u8]; 12] = [
        b"",
        b"\0",
        b"\0\0",
        b"a",
        b"a\0",
        b"a\0\0b",
        b"0123456789abcdef",
        b"0123456789abcdef\0",
        b"0123456789abcdefg",
        b"0123456789abcdefh",
        b"0123456789abcdeg",
        b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    ];
    KEYS[usize::from(k) % KEYS.len()].to_vec()
}

/// Children drawn from a small key space so that versions interleave across children and the
/// same internal key can occur in several children (ties).
fn children_strategy() -> impl Strategy<Value = Vec<Vec<(u8, u64)>>> {
    prop::collection::vec(
        prop::collection::btree_set((0u8..12, 0u64..10), 0..12)
            .prop_map(|s| s.into_iter().collect::<Vec<_>>()),
        0..7,
    )
}

proptest! {
    #[test]
    fn matches_sorted_model_under_random_moves(
        children in children_strategy(),
        ops in prop::collection::vec(op_strategy(), 1..60),
    ) {
        // Reference: every entry keyed by (internal key, child index).
        let mut model = std::collections::BTreeMap::new();
        let mut runs = Vec::new();
        for (idx, child) in children.iter().enumerate() {
            let mut run: Entries = child
                .iter()
                .map(|&(k, s)| (ikey(&tricky_key(k), s), format!("{idx}:{k}:{s}").into_bytes()))
                .collect();
            run.sort_by(|a, b| compare_internal(&a.0, &b.0));
            for (k, v) in &run {
                model.insert((crate::key::InternalKey(k.clone()), idx), v.clone());
            }
            runs.push(run);
        }
        let model: Vec<(Vec<u8>, Vec<u8>)> =
            model.into_iter().map(|((k, _), v)| (k.0, v)).collect();

        let mut it = MergingIterator::new(boxed(runs));
        prop_assert_eq!(it.num_children(), children.len());
        // Model cursor: Some(index into `model`) when valid.
        let mut pos: Option<usize> = None;
        for op in ops {
            match op {
                Op::SeekToFirst => {
                    it.seek_to_first().unwrap();
                    pos = (!model.is_empty()).then_some(0);
                }
                Op::SeekToLast => {
                    it.seek_to_last().unwrap();
                    pos = model.len().checked_sub(1);
                }
                Op::Seek(k, s) => {
                    let target = ikey(&tricky_key(k), s);
                    it.seek(&target).unwrap();
                    let p = model.partition_point(|(mk, _)| compare_internal(mk, &target).is_lt());
                    pos = (p < model.len()).then_some(p);
                }
                Op::Next => {
                    let Some(p) = pos else { continue };
                    it.next().unwrap();
                    pos = (p + 1 < model.len()).then_some(p + 1);
                }
                Op::Prev => {
                    let Some(p) = pos else { continue };
                    it.prev().unwrap();
                    pos = p.checked_sub(1);
                }
            }
            prop_assert_eq!(it.valid(), pos.is_some());
            if let Some(p) = pos {
                prop_assert_eq!(it.key(), &model[p].0[..]);
                prop_assert_eq!(it.value(), &model[p].1[..]);
            }
        }
    }

    /// Arbitrary byte strings as keys (too short for a trailer, unknown kinds): the merge never
    /// panics and still emits everything in `compare_internal` order.
    #[test]
    fn garbage_keys_never_panic(
        children in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..12), 0..8), 0..5),
    ) {
        let mut total = 0;
        let runs: Vec<Entries> = children
            .into_iter()
            .map(|keys| {
                let mut run: Entries = keys.into_iter().map(|k| (k, vec![])).collect();
                run.sort_by(|a, b| compare_internal(&a.0, &b.0));
                run.dedup_by(|a, b| compare_internal(&a.0, &b.0).is_eq());
                total += run.len();
                run
            })
            .collect();
        let mut it = MergingIterator::new(boxed(runs));
        let forward = collect_forward(&mut it);
        prop_assert_eq!(forward.len(), total);
        prop_assert!(forward.windows(2).all(|w| compare_internal(&w[0].0, &w[1].0).is_le()));
        let mut backward = collect_backward(&mut it);
        backward.reverse();
        prop_assert_eq!(backward.len(), total);
        prop_assert!(backward.windows(2).all(|w| compare_internal(&w[0].0, &w[1].0).is_le()));
    }
}
