//! The merge's floor (issue "Twice RocksDB 11", item 1): what merging N sorted runs costs per
//! entry when a merge does nothing but the comparisons and copies it must, against S4 (the
//! merging iterator, the compaction iterator and block building, `merge_sub_task`) on the same
//! entries. The same 131,072 entries (16-byte decimal keys, 8-byte trailers, 100-byte values,
//! every key distinct) are dealt at random to 2, 8, 16 and 64 runs, so that only the number
//! of inputs changes.
//!
//! The floor is a loser tree over the runs, each an array of entries in memory: `log2 N`
//! comparisons of internal keys (the engine's `compare_internal`) per entry, and the entry's
//! key and value appended to one output buffer. It decodes nothing, keeps no statistics and
//! builds no block, so S4 can only approach it; the goal is S4 within 1.5x of it at 8
//! and 16 inputs. Throughput is in entries: criterion's time per iteration over 131,072 is
//! the ns per entry quoted in the notes.
//!
//! `cargo bench -p sluice-sst --bench merge_floor`

#![allow(clippy::unwrap_used, reason = "benchmark set-up")]

mod common;

use std::cmp::Ordering;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sluice_sst::block::Block;
use sluice_sst::compact::StepTimes;
use sluice_sst::compact::subtask::merge_sub_task;
use sluice_sst::key::{ValueKind, compare_internal, make_internal_key};
use sluice_sst::table::TableContentBuilder;

use common::{spec, table_options, value, whole};

/// The `sluice` binary's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Entries in every configuration.
const ENTRIES: u64 = 1 << 17;

/// Numbers of runs the entries are dealt to.
const INPUTS: [usize; 4] = [2, 8, 16, 64];

/// One sorted run in memory: entry `i` is `bytes[ends[i-1].1..ends[i].0]` (its internal key)
/// followed by `bytes[ends[i].0..ends[i].1]` (its value).
#[derive(Default)]
struct Run {
    bytes: Vec<u8>,
    ends: Vec<(usize, usize)>,
}

impl Run {
    fn push(&mut self, ikey: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(ikey);
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((key_end, self.bytes.len()));
    }

    /// Entry `i` as (internal key, value), if there is one.
    fn entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        let &(key_end, end) = self.ends.get(i)?;
        let start = i.checked_sub(1).map_or(0, |p| self.ends[p].1);
        Some((&self.bytes[start..key_end], &self.bytes[key_end..end]))
    }
}

/// The entries dealt to `n` runs: key `i` (in key order) goes to a run chosen by a hash of
/// `i`, with that run's sequence number, so every run is sorted and all of them hold
/// `ENTRIES` distinct keys between them.
fn runs(n: usize) -> Vec<Run> {
    let mut runs: Vec<Run> = (0..n).map(|_| Run::default()).collect();
    for i in 0..ENTRIES {
        let r = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % n;
        let key = format!("{:016}", i * 7_629_394_531);
        let ikey = make_internal_key(key.as_bytes(), r as u64 + 1, ValueKind::Value);
        runs[r].push(&ikey, &value(i, 100));
    }
    runs
}

/// A loser tree over `runs`: `tree[0]` is the run holding the smallest current entry and
/// `tree[1..n]` the losers of the matches at each inner node (node `j`'s children are `2j`
/// and `2j + 1`, run `r` is leaf `n + r`).
/// Each run's current entry is kept beside the tree, so that a match compares two keys
/// already at hand.
struct LoserTree<'a> {
    runs: &'a [Run],
    next: Vec<usize>,
    current: Vec<Option<(&'a [u8], &'a [u8])>>,
    tree: Vec<usize>,
}

impl<'a> LoserTree<'a> {
    fn new(runs: &'a [Run]) -> LoserTree<'a> {
        let n = runs.len();
        let mut t = LoserTree {
            runs,
            next: vec![1; n],
            current: runs.iter().map(|r| r.entry(0)).collect(),
            tree: vec![0; n],
        };
        t.tree[0] = t.play(1);
        t
    }

    /// Plays the matches of the subtree at `node`, recording its losers; returns its winner.
    fn play(&mut self, node: usize) -> usize {
        let n = self.current.len();
        if node >= n {
            return node - n;
        }
        let (a, b) = (self.play(2 * node), self.play(2 * node + 1));
        let (winner, loser) = if self.beats(a, b) { (a, b) } else { (b, a) };
        self.tree[node] = loser;
        winner
    }

    /// Whether run `a`'s current entry comes before run `b`'s (an exhausted run never does).
    fn beats(&self, a: usize, b: usize) -> bool {
        match (self.current[a], self.current[b]) {
            (Some((ka, _)), Some((kb, _))) => match compare_internal(ka, kb) {
                Ordering::Equal => a < b,
                order => order.is_lt(),
            },
            (Some(_), None) => true,
            (None, _) => false,
        }
    }

    /// The smallest current entry, after which its run moves on and the tree replays the
    /// matches on the path from that run's leaf to the root.
    fn pop(&mut self) -> Option<(&'a [u8], &'a [u8])> {
        let mut winner = self.tree[0];
        let entry = self.current[winner]?;
        self.current[winner] = self.runs[winner].entry(self.next[winner]);
        self.next[winner] += 1;
        let mut node = (self.current.len() + winner) / 2;
        while node >= 1 {
            if self.beats(self.tree[node], winner) {
                std::mem::swap(&mut self.tree[node], &mut winner);
            }
            node /= 2;
        }
        self.tree[0] = winner;
        Some(entry)
    }
}

/// The floor: every entry of `runs` in order, its key and value copied into `out`. Returns
/// the entries merged.
fn merge_floor(runs: &[Run], out: &mut Vec<u8>) -> u64 {
    out.clear();
    let mut tree = LoserTree::new(runs);
    let mut merged = 0;
    while let Some((key, value)) = tree.pop() {
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        merged += 1;
    }
    merged
}

/// The same runs as S4's input: each one's data blocks, decoded.
fn blocks(runs: &[Run]) -> Vec<Vec<Arc<Block>>> {
    let path: Arc<Path> = Arc::from(Path::new("bench"));
    runs.iter()
        .map(|run| {
            let mut builder = TableContentBuilder::new(&table_options());
            for i in 0..run.ends.len() {
                let (ikey, value) = run.entry(i).unwrap();
                builder.add(ikey, value);
            }
            builder.seal_current();
            std::iter::from_fn(|| builder.take_sealed())
                .map(|s| Arc::new(Block::new(s.contents, Arc::clone(&path), 0).unwrap()))
                .collect()
        })
        .collect()
}

fn bench_floor(c: &mut Criterion) {
    let spec = spec();
    let whole = whole();
    let mut group = c.benchmark_group("merge floor");
    group.throughput(Throughput::Elements(ENTRIES));
    group.sample_size(20);
    let mut out = Vec::new();
    for n in INPUTS {
        let runs = runs(n);
        // The floor merges every entry, in order: checked once, outside the timing.
        assert_eq!(merge_floor(&runs, &mut out), ENTRIES);
        let input = blocks(&runs);
        group.bench_with_input(BenchmarkId::new("floor", n), &runs, |b, runs| {
            b.iter(|| black_box(merge_floor(runs, &mut out)))
        });
        group.bench_with_input(BenchmarkId::new("S4", n), &input, |b, input| {
            b.iter(|| {
                let times = StepTimes::default();
                merge_sub_task(&spec, &whole, input.clone(), &times).unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_floor);
criterion_main!(benches);
