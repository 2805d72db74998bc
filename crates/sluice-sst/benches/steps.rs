//! Criterion benchmarks of the compaction's compute steps on data already in memory: what one
//! core can do per step, the numbers the machine-limit estimate of the executors starts from.
//!
//! `cargo bench -p sluice-sst --bench steps`

#![allow(clippy::unwrap_used, reason = "benchmark set-up")]

mod common;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_sst::block::Block;
use sluice_sst::compact::plan::SubTask;
use sluice_sst::compact::steps::compress_block;
use sluice_sst::compact::subtask::merge_sub_task;
use sluice_sst::compact::{CompactionSpec, StepTimes};
use sluice_sst::compaction_iter::{CompactionFilter, FilterDecision};
use sluice_sst::compression::{CompressionType, decompress};
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::{SealedBlock, TableContentBuilder};

use common::{spec, table_options, value, whole};

/// Sorted runs, like L0 files flushed from random writes.
const RUNS: usize = 11;
const ENTRIES_PER_RUN: u64 = 4000;

/// The `sluice` binary's allocator, so that the two-thread figures measure the cores, not
/// glibc's arena locks.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Sealed data blocks of each run: 16-byte decimal keys spread over the whole key space.
fn runs() -> Vec<Vec<SealedBlock>> {
    (0..RUNS as u64)
        .map(|r| {
            let mut keys: Vec<u64> = (0..ENTRIES_PER_RUN)
                .map(|i| (i * RUNS as u64 + r).wrapping_mul(2_654_435_761) % 100_000_000)
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let mut builder = TableContentBuilder::new(&table_options());
            for k in keys {
                let ikey =
                    make_internal_key(format!("{k:016}").as_bytes(), r + 1, ValueKind::Value);
                builder.add(&ikey, &value(k, 100));
            }
            builder.seal_current();
            std::iter::from_fn(|| builder.take_sealed()).collect()
        })
        .collect()
}

fn decoded(runs: &[Vec<SealedBlock>]) -> Vec<Vec<Arc<Block>>> {
    let path: Arc<Path> = Arc::from(Path::new("bench"));
    runs.iter()
        .map(|run| {
            run.iter()
                .map(|s| Arc::new(Block::new(s.contents.clone(), Arc::clone(&path), 0).unwrap()))
                .collect()
        })
        .collect()
}

/// A compaction filter that decides nothing: what a filter costs before it does any work.
#[derive(Debug)]
struct KeepAll;

impl CompactionFilter for KeepAll {
    fn name(&self) -> &str {
        "keep-all"
    }
    fn filter(&self, _key: &[u8], value: &[u8]) -> FilterDecision {
        black_box(value);
        FilterDecision::Keep
    }
}

fn raw_bytes(runs: &[Vec<SealedBlock>]) -> u64 {
    runs.iter().flatten().map(|s| s.contents.len() as u64).sum()
}

fn bench_steps(c: &mut Criterion) {
    let runs = runs();
    let blocks = decoded(&runs);
    let spec = spec();
    let whole = whole();
    let mut group = c.benchmark_group("compute steps");
    group.throughput(Throughput::Bytes(raw_bytes(&runs)));
    group.bench_function("S4 merge 11 runs into blocks", |b| {
        b.iter(|| {
            let times = StepTimes::default();
            merge_sub_task(&spec, &whole, blocks.clone(), &times).unwrap()
        })
    });
    // The cost of a compaction filter that keeps everything: one virtual call per live value.
    let filtered = CompactionSpec {
        filter: Some(Arc::new(KeepAll)),
        ..spec.clone()
    };
    group.bench_function("S4 merge 11 runs, with a keep-all compaction filter", |b| {
        b.iter(|| {
            let times = StepTimes::default();
            merge_sub_task(&filtered, &whole, blocks.clone(), &times).unwrap()
        })
    });
    // The cost of a merge operator over input without operands: one kind check per entry.
    let merging = CompactionSpec {
        merge_operator: Some(Arc::new(sluice_sst::merge_operator::U64Add)),
        range_tombstones: None,
        ..spec.clone()
    };
    group.bench_function("S4 merge 11 runs, with a merge operator", |b| {
        b.iter(|| {
            let times = StepTimes::default();
            merge_sub_task(&merging, &whole, blocks.clone(), &times).unwrap()
        })
    });
    group.bench_function("S5 lz4 compress", |b| {
        let times = StepTimes::default();
        b.iter(|| {
            for s in runs.iter().flatten() {
                black_box(compress_block(s, &spec.table, &times));
            }
        })
    });
    let compressed: Vec<Vec<u8>> = runs
        .iter()
        .flatten()
        .map(|s| compress_block(s, &spec.table, &StepTimes::default()).0)
        .collect();
    group.bench_function("S3 lz4 decompress", |b| {
        b.iter(|| {
            for c in &compressed {
                let mut out = Vec::new();
                decompress(CompressionType::Lz4, c, 1 << 20, &mut out).unwrap();
                black_box(out);
            }
        })
    });
    group.finish();
    bench_digest(c, &runs, &blocks);
    bench_two_cores(c, &runs, &blocks, &spec, &whole);
}

/// What the entry digest costs (`sluice_sst::digest`): hashing every entry, which a
/// compaction does once per input entry (S4 for what it writes, the compaction iterator for
/// what it drops), against the "S4 merge" figure above; and the check at install, which
/// sums the digests of a compaction's tables from their properties.
fn bench_digest(c: &mut Criterion, runs: &[Vec<SealedBlock>], blocks: &[Vec<Arc<Block>>]) {
    use sluice_sst::digest::EntryDigest;
    use sluice_sst::iter::InternalIterator;
    use sluice_sst::properties::TableProperties;
    let mut entries = Vec::new();
    for block in blocks.iter().flatten() {
        let mut it = block.iter();
        it.seek_to_first().unwrap();
        while it.valid() {
            entries.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
    }
    let mut group = c.benchmark_group("entry digest");
    group.throughput(Throughput::Bytes(raw_bytes(runs)));
    group.bench_function("hash every entry", |b| {
        b.iter(|| {
            let mut d = EntryDigest::default();
            for (k, v) in &entries {
                d.add(k, v);
            }
            black_box(d)
        })
    });
    // A big compaction: 1000 tables in and out.
    let tables: Vec<TableProperties> = (0..1000u64)
        .map(|i| TableProperties {
            num_entries: 40_000 + i,
            entry_digest: Some(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            ..TableProperties::default()
        })
        .collect();
    group.throughput(Throughput::Elements(tables.len() as u64));
    group.bench_function("check: sum 1000 tables' digests", |b| {
        b.iter(|| {
            black_box(
                tables
                    .iter()
                    .map(|p| p.digest())
                    .sum::<Option<EntryDigest>>(),
            )
        })
    });
    group.finish();
}

/// The machine limit the executors are held to is "2 cores times one core's bandwidth". This
/// measures what two cores actually deliver here: the same merge and compression on two
/// threads at once, each on its own copy of the data. On a VM whose two vCPUs share a
/// physical core, or whose host is busy, the pair gets well under 2x; compare the two groups'
/// throughput.
fn bench_two_cores(
    c: &mut Criterion,
    runs: &[Vec<SealedBlock>],
    blocks: &[Vec<Arc<Block>>],
    spec: &CompactionSpec,
    whole: &SubTask,
) {
    let one_pass = |blocks: Vec<Vec<Arc<Block>>>| {
        let times = StepTimes::default();
        let merged = merge_sub_task(spec, whole, blocks, &times).unwrap();
        for s in runs.iter().flatten() {
            black_box(compress_block(s, &spec.table, &times));
        }
        black_box(merged);
    };
    let mut group = c.benchmark_group("two cores");
    group.throughput(Throughput::Bytes(raw_bytes(runs)));
    group.bench_function("S4+S5 on one thread", |b| {
        b.iter(|| one_pass(blocks.to_vec()))
    });
    // Twice the bytes per iteration: the throughput shown is the pair's.
    group.throughput(Throughput::Bytes(2 * raw_bytes(runs)));
    group.bench_function("S4+S5 on two threads at once", |b| {
        b.iter(|| {
            std::thread::scope(|scope| {
                let other = scope.spawn(|| one_pass(blocks.to_vec()));
                one_pass(blocks.to_vec());
                other.join().unwrap();
            })
        })
    });
    group.finish();
}

criterion_group!(benches, bench_steps);
criterion_main!(benches);
