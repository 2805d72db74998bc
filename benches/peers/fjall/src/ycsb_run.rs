//! YCSB's load and run phases on fjall, and the JSON object of `sluice ycsb --json` they print.

use std::time::Instant;

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::engine::{Engine, LevelShape};
use crate::stream::{KeyFormat, SplitMix64, ValueGenerator};
use crate::ycsb::{Chooser, INSERT, Mix, NUM_OPS, OP_NAMES, READ_MODIFY_WRITE, UPDATE};

/// One operation type's figures, as Sluice's `OpReport`.
#[derive(Serialize)]
pub struct OpReport {
    op: &'static str,
    count: u64,
    ops_per_sec: f64,
    p50_us: f64,
    p95_us: f64,
    p99_us: f64,
    p999_us: f64,
    max_us: f64,
    mean_us: f64,
}

/// One phase, as Sluice's `PhaseReport`.
#[derive(Serialize)]
pub struct PhaseReport {
    phase: &'static str,
    ops: u64,
    seconds: f64,
    ops_per_sec: f64,
    not_found: u64,
    stopped: bool,
    per_second: Vec<u64>,
    operations: Vec<OpReport>,
}

/// What the engine ran with (compression as used).
#[derive(Serialize)]
pub struct YcsbOptions {
    records: u64,
    operations: u64,
    key_size: usize,
    value_size: usize,
    seed: u64,
    sync: bool,
    compression: String,
    write_buffer_size: u64,
    target_file_size: u64,
    block_size: u32,
    bloom_bits: u32,
    cache_size: u64,
    compaction_threads: usize,
}

/// The object of `sluice ycsb --json`, plus the peer's engine, LSM shape, options and notes.
#[derive(Serialize)]
pub struct YcsbReport {
    workload: String,
    distribution: &'static str,
    records: u64,
    operations: u64,
    threads: usize,
    key_size: usize,
    value_size: usize,
    seed: u64,
    load: PhaseReport,
    run: PhaseReport,
    engine: &'static str,
    engine_version: &'static str,
    lsm: Vec<LevelShape>,
    options: YcsbOptions,
    settings_differ: Vec<String>,
}

/// Longest latency the histograms distinguish, in nanoseconds (one hour), as Sluice's.
const MAX_LATENCY_NANOS: u64 = 3_600 * 1_000_000_000;

/// One phase's measurements: an HDR histogram per operation type (1 ns to 1 h, 3 significant
/// digits, as Sluice's) and completions per second.
struct Phase {
    start: Instant,
    hists: Vec<Histogram<u64>>,
    per_second: Vec<u64>,
    not_found: u64,
}

impl Phase {
    fn new() -> Result<Self, String> {
        let hists = (0..NUM_OPS)
            .map(|_| Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, 3))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        Ok(Phase {
            start: Instant::now(),
            hists,
            per_second: Vec::new(),
            not_found: 0,
        })
    }

    #[inline]
    fn record(&mut self, op: usize, t0: Instant) {
        let end = Instant::now();
        let ns = u64::try_from((end - t0).as_nanos()).unwrap_or(u64::MAX);
        if let Some(h) = self.hists.get_mut(op) {
            h.saturating_record(ns.clamp(1, MAX_LATENCY_NANOS));
        }
        let second = (end - self.start).as_secs() as usize;
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
    }

    /// Ends the phase (its seconds run from `new` to now) and reports it.
    fn finish(self, phase: &'static str) -> PhaseReport {
        let seconds = self.start.elapsed().as_secs_f64();
        let rate = |n: u64| {
            if seconds > 0.0 {
                n as f64 / seconds
            } else {
                0.0
            }
        };
        let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1e3;
        let operations: Vec<OpReport> = self
            .hists
            .iter()
            .enumerate()
            .filter(|(_, h)| !h.is_empty())
            .map(|(op, h)| OpReport {
                op: OP_NAMES[op],
                count: h.len(),
                ops_per_sec: rate(h.len()),
                p50_us: us(h, 0.5),
                p95_us: us(h, 0.95),
                p99_us: us(h, 0.99),
                p999_us: us(h, 0.999),
                max_us: h.max() as f64 / 1e3,
                mean_us: h.mean() / 1e3,
            })
            .collect();
        let ops = operations.iter().map(|o| o.count).sum();
        PhaseReport {
            phase,
            ops,
            seconds,
            ops_per_sec: rate(ops),
            not_found: self.not_found,
            stopped: false,
            per_second: self.per_second,
            operations,
        }
    }
}

impl Engine {
    /// Loads keys `0..records` in order (values from stream position 0) and waits for the
    /// background work, then runs the operations (values from stream position 1), as
    /// `sluice ycsb` does.
    pub fn run_ycsb(&self, workload: &str) -> Result<YcsbReport, String> {
        let c = &self.cfg;
        let err = |e: fjall::Error| e.to_string();
        let mix = Mix::of(workload)?;
        let keys = KeyFormat::new(c.key_size, c.records.saturating_add(c.operations))?;
        let mut key = Vec::with_capacity(c.key_size);

        let mut load = Phase::new()?;
        let mut values = ValueGenerator::new(&mut SplitMix64::stream(c.seed, 0, 0), c.value_size);
        for n in 0..c.records {
            let t0 = Instant::now();
            keys.write(n, &mut key);
            self.ks
                .insert(key.as_slice(), values.generate(c.value_size))
                .map_err(err)?;
            load.record(INSERT, t0);
        }
        self.wait_idle(); // The load is not over until the work it caused is, as in Sluice.
        let load = load.finish("load");

        let mut chooser = Chooser::new(mix, c.records, c.operations, c.seed);
        let mut run = Phase::new()?;
        let mut values = ValueGenerator::new(&mut SplitMix64::stream(c.seed, 1, 0), c.value_size);
        for _ in 0..c.operations {
            let (op, n) = chooser.next(c.records);
            let t0 = Instant::now();
            keys.write(n, &mut key);
            if op == UPDATE {
                self.ks
                    .insert(key.as_slice(), values.generate(c.value_size))
                    .map_err(err)?;
            } else {
                let found = self.ks.get(&key).map_err(err)?;
                run.not_found += u64::from(found.is_none());
                if op == READ_MODIFY_WRITE {
                    self.ks
                        .insert(key.as_slice(), values.generate(c.value_size))
                        .map_err(err)?;
                }
            }
            run.record(op, t0);
        }
        let run = run.finish("run");

        Ok(YcsbReport {
            workload: workload.to_string(),
            distribution: "zipfian",
            records: c.records,
            operations: c.operations,
            threads: 1,
            key_size: c.key_size,
            value_size: c.value_size,
            seed: c.seed,
            load,
            run,
            engine: "fjall",
            engine_version: env!("FJALL_VERSION"),
            lsm: self.shape(),
            options: YcsbOptions {
                records: c.records,
                operations: c.operations,
                key_size: c.key_size,
                value_size: c.value_size,
                seed: c.seed,
                sync: false,
                compression: self.compression.clone(),
                write_buffer_size: c.write_buffer_size,
                target_file_size: c.target_file_size,
                block_size: c.block_size,
                bloom_bits: c.bloom_bits,
                cache_size: c.cache_size,
                compaction_threads: c.compaction_threads,
            },
            settings_differ: self.settings_differ.clone(),
        })
    }
}
