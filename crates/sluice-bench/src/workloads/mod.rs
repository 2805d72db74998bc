//! Running benchmarks: splitting each one over client threads, timing it, and turning the
//! threads' counts and the engine's metrics into a [`BenchResult`].
//!
//! Work is divided, not repeated: with `threads` T, thread t of fillseq writes the t-th slice of
//! `0..num`, the random benchmarks give each thread a 1/T share of the operations, and readseq
//! gives each thread the t-th slice of the key space. Each thread has its own random generator,
//! seeded from `seed`, the benchmark's position in the run and the thread number, so a run is
//! repeatable. readwhilewriting is the exception: thread 0 writes until the other threads,
//! which divide the reads, are done.
//!
//! A benchmark ends when its operations are done, when Ctrl-C stops the run, or when its time
//! limit ([`WorkloadOptions::duration`]) is up; its result counts the operations that ran.
//!
//! Around each benchmark the engine's metrics and the process's resources
//! ([`crate::resources`]) are read before and after; each operation's completion also counts
//! in its thread's per-second samples ([`crate::timeline`]).

mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use sluice::{CompactOptions, Db, Keyspace, KeyspaceOptions, Result};

use crate::config::{BenchConfig, Benchmark, WorkloadOptions};
use crate::delta::MetricsDelta;
use crate::keys::KeyFormat;
use crate::progress::Progress;
use crate::report::{BenchResult, RunOptions, ThreadResult};
use crate::resources::ResourceSample;
use crate::shape::LsmShape;

use worker::{Shared, Tally, Worker};

/// Runs every benchmark of `config`, in order, on `db`, calling `report` as each one finishes
/// (so output streams while the run goes on). Stops at the first error.
pub fn run_benchmarks(
    config: &BenchConfig,
    db: &Db,
    report: &mut dyn FnMut(&BenchResult),
) -> Result<Vec<BenchResult>> {
    run_benchmarks_until(config, db, &Arc::new(AtomicBool::new(false)), report)
}

/// [`run_benchmarks`], ending early once `stop` is set (by Ctrl-C): the benchmark running then
/// ends at each thread's next operation (a compaction before its next output block) and is
/// reported with what it did so far, marked [`BenchResult::stopped`]; the rest do not run.
pub fn run_benchmarks_until(
    config: &BenchConfig,
    db: &Db,
    stop: &Arc<AtomicBool>,
    report: &mut dyn FnMut(&BenchResult),
) -> Result<Vec<BenchResult>> {
    run_benchmarks_with(config, &WorkloadOptions::default(), db, stop, report)
}

/// [`run_benchmarks_until`] with `workload`'s benchmark parameters and time limit.
pub fn run_benchmarks_with(
    config: &BenchConfig,
    workload: &WorkloadOptions,
    db: &Db,
    stop: &Arc<AtomicBool>,
    report: &mut dyn FnMut(&BenchResult),
) -> Result<Vec<BenchResult>> {
    config.validate()?;
    workload.validate()?;
    let mut results = Vec::with_capacity(config.benchmarks.len());
    for (ordinal, &bench) in config.benchmarks.iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        tracing::info!(benchmark = %bench, "starting");
        let run = (bench, ordinal as u64);
        let result = run_one(config, workload, db, run, stop)?;
        report(&result);
        results.push(result);
    }
    Ok(results)
}

/// Runs one benchmark. `ordinal` (its position in the run) varies the random seeds so that,
/// say, overwrite does not repeat fillrandom's key sequence.
pub fn run_benchmark(
    config: &BenchConfig,
    db: &Db,
    bench: Benchmark,
    ordinal: u64,
) -> Result<BenchResult> {
    run_benchmark_until(
        config,
        db,
        bench,
        ordinal,
        &Arc::new(AtomicBool::new(false)),
    )
}

/// [`run_benchmark`], ending early once `stop` is set (see [`run_benchmarks_until`]).
pub fn run_benchmark_until(
    config: &BenchConfig,
    db: &Db,
    bench: Benchmark,
    ordinal: u64,
    stop: &Arc<AtomicBool>,
) -> Result<BenchResult> {
    let workload = WorkloadOptions::default();
    run_one(config, &workload, db, (bench, ordinal), stop)
}

/// Runs `bench`, at position `ordinal` in the run, with `workload`'s parameters.
fn run_one(
    config: &BenchConfig,
    workload: &WorkloadOptions,
    db: &Db,
    (bench, ordinal): (Benchmark, u64),
    stop: &Arc<AtomicBool>,
) -> Result<BenchResult> {
    config.validate()?;
    workload.validate()?;
    let keys = KeyFormat::new(config.key_size, config.num)?;
    let spread = matches!(
        bench,
        Benchmark::FillSeq
            | Benchmark::FillRandom
            | Benchmark::Overwrite
            | Benchmark::ReadRandom
            | Benchmark::Compact
    );
    if workload.keyspaces > 1 && !spread {
        return Err(sluice::Error::InvalidArgument(format!(
            "{} runs on one keyspace; --keyspaces applies to fillseq, fillrandom, overwrite, \
             readrandom and compact",
            bench.name()
        )));
    }
    let targets = bench_keyspaces(db, workload.keyspaces)?;
    let expected_ops = match bench {
        Benchmark::FillSeq
        | Benchmark::FillRandom
        | Benchmark::Overwrite
        | Benchmark::DeleteRandom => Some(config.num),
        Benchmark::ReadRandom
        | Benchmark::SeekRandom
        | Benchmark::ReadWhileWriting
        | Benchmark::UpdateRandom
        | Benchmark::ReadRandomWriteRandom
        | Benchmark::RandomTransaction => Some(config.reads),
        Benchmark::ReadSeq => Some(config.reads.min(config.num)),
        Benchmark::Compact => None,
        Benchmark::DeleteRange => Some(1),
    };
    let progress = Progress::new(config.progress, bench.name(), expected_ops);
    let before = db.metrics();
    let resources = ResourceSample::now();
    let start = resources.at;
    let (tallies, threads) = match bench {
        Benchmark::Compact => (vec![compact(&targets, start, stop)?], 1),
        Benchmark::DeleteRange => (vec![delete_range(db, &keys, config.num, start)?], 1),
        _ => {
            let shared = Shared {
                db,
                config,
                workload,
                keys,
                ordinal,
                progress: &progress,
                failed: AtomicBool::new(false),
                interrupt: stop,
                start,
                // A limit too far away to represent is no limit.
                deadline: workload.duration.and_then(|d| start.checked_add(d)),
                readers_left: AtomicUsize::new(config.threads),
                targets: &targets,
            };
            let tallies = run_threads(&shared, bench)?;
            (tallies, thread_count(config, bench))
        }
    };
    let mut tally = Tally::default();
    for t in &tallies {
        tally.merge(t);
    }
    // The threads whose operations `tally` counts: readwhilewriting's writer is not one.
    let measured_threads = match bench {
        Benchmark::ReadWhileWriting => threads - 1,
        _ => threads,
    };
    let stopped = stop.load(Ordering::Relaxed);
    let mut wait_seconds = 0.0;
    if bench.is_fill() && !stopped {
        // The benchmark is not over until the flushes and compactions it caused are. A
        // stopped one reports at once: whoever pressed Ctrl-C is not waiting for compactions.
        let last_write = Instant::now();
        db.wait_for_background_work()?;
        wait_seconds = last_write.elapsed().as_secs_f64();
    }
    let seconds = start.elapsed().as_secs_f64();
    let end = ResourceSample::now();
    let after = db.metrics();
    progress.finish();
    let engine = MetricsDelta::between(&before, &after);
    let process = resources.usage_until(&end, &engine);
    let bytes = match bench {
        Benchmark::Compact => engine.compaction.input_bytes,
        _ => tally.bytes,
    };
    let per_second = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
    let per_thread = match tallies.len() {
        0 | 1 => Vec::new(),
        _ => tallies
            .iter()
            .enumerate()
            .map(|(thread, t)| ThreadResult {
                thread,
                ops: t.ops,
                writes: t.writes,
                ops_per_sec: per_second(t.ops as f64),
                latency_us: t.hist.summary(),
            })
            .collect(),
    };
    Ok(BenchResult {
        name: bench.name().to_string(),
        ops: tally.ops,
        threads,
        seconds,
        wait_seconds,
        micros_per_op: if tally.ops > 0 {
            seconds * measured_threads as f64 * 1e6 / tally.ops as f64
        } else {
            0.0
        },
        ops_per_sec: per_second(tally.ops as f64),
        bytes,
        mb_per_sec: per_second(bytes as f64) / 1e6,
        found: bench.counts_found().then_some(tally.found),
        writes: bench.counts_writes().then_some(tally.writes),
        conflicts: (bench == Benchmark::RandomTransaction).then_some(tally.conflicts),
        stopped,
        latency_us: tally.hist.summary(),
        per_second: tally.per_second.into_counts(),
        engine,
        process,
        lsm: LsmShape::of(&after),
        options: RunOptions::new(config, workload, db.options()),
        latency: tally.hist,
        per_thread,
    })
}

impl Tally {
    /// The tally of one operation that started at `start`, ending now.
    fn one_op(start: Instant, bench_start: Instant) -> Tally {
        let end = Instant::now();
        let mut tally = Tally {
            ops: 1,
            ..Tally::default()
        };
        tally.hist.record(end - start);
        tally.per_second.record(end - bench_start);
        tally
    }
}

/// The keys `deleterange` deletes: the middle tenth of the key space.
pub fn deleted_range(num: u64) -> std::ops::Range<u64> {
    num * 45 / 100..num * 55 / 100
}

/// deleterange: one operation, a range tombstone over [`deleted_range`].
fn delete_range(db: &Db, keys: &KeyFormat, num: u64, bench_start: Instant) -> Result<Tally> {
    let range = deleted_range(num);
    let start = Instant::now();
    db.delete_range(keys.key(range.start), keys.key(range.end))?;
    Ok(Tally::one_op(start, bench_start))
}

/// compact: one operation, the whole key space of every keyspace the run writes; none if
/// `stop` cancelled it.
fn compact(targets: &[Keyspace], bench_start: Instant, stop: &Arc<AtomicBool>) -> Result<Tally> {
    let start = Instant::now();
    let opts = CompactOptions {
        cancel: Some(Arc::clone(stop)),
        ..CompactOptions::default()
    };
    for target in targets {
        match target.compact_range_with(None, None, &opts) {
            // Cancelled between output blocks: the tree is consistent, the operation
            // unfinished.
            Err(sluice::Error::Cancelled) => return Ok(Tally::default()),
            other => other?,
        }
    }
    Ok(Tally::one_op(start, bench_start))
}

/// The keyspaces a run spreads its keys over: the default one, then `bench-1` ... created if
/// the database lacks them.
fn bench_keyspaces(db: &Db, n: usize) -> Result<Vec<Keyspace>> {
    (0..n)
        .map(|i| {
            let name = match i {
                0 => sluice::keyspace::DEFAULT_KEYSPACE.to_string(),
                i => format!("bench-{i}"),
            };
            match db.keyspace(&name) {
                Some(ks) => Ok(ks),
                None => db.create_keyspace(&name, &KeyspaceOptions::of_default(db.options())),
            }
        })
        .collect()
}

/// Runs `bench` on `shared.config.threads` threads and returns what each did. If one thread
/// fails the others stop at their next operation, and the first error is returned; once the
/// run is interrupted or the time limit is up every thread stops at its next operation.
fn run_threads(shared: &Shared<'_>, bench: Benchmark) -> Result<Vec<Tally>> {
    let outcomes: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..thread_count(shared.config, bench))
            .map(|index| {
                std::thread::Builder::new()
                    .name(format!("bench-{index}"))
                    .spawn_scoped(scope, move || {
                        let mut worker = Worker::new(shared, index);
                        let outcome = worker.run(bench);
                        if outcome.is_err() {
                            shared.failed.store(true, Ordering::Relaxed);
                        }
                        outcome.map(|()| worker.into_tally())
                    })
            })
            .collect::<Vec<_>>();
        if handles.iter().any(|h| h.is_err()) {
            shared.failed.store(true, Ordering::Relaxed);
        }
        handles
            .into_iter()
            .map(|spawned| match spawned {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => Err(sluice::Error::io("<benchmark thread>", e)),
            })
            .collect()
    });
    outcomes.into_iter().collect()
}

/// The threads that run `bench`: the client threads, and for readwhilewriting one writer
/// besides them, as db_bench adds it (`--threads N` are its readers).
fn thread_count(config: &BenchConfig, bench: Benchmark) -> usize {
    config.threads + usize::from(bench == Benchmark::ReadWhileWriting)
}

/// The `[start, end)` slice of `0..total` that thread `index` of `threads` owns.
pub(crate) fn share(total: u64, threads: usize, index: usize) -> (u64, u64) {
    let at = |i: usize| (u128::from(total) * i as u128 / threads.max(1) as u128) as u64;
    (at(index), at(index + 1))
}

#[cfg(test)]
mod tests;
