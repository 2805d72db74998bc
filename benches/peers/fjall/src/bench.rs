//! The benchmarks, their timing, and the JSON line each one prints.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

use crate::cpu::CpuUsage;
use crate::engine::{Engine, LevelShape, total_bytes};
use crate::stream::{KeyFormat, SplitMix64, ValueGenerator, share};

/// Sluice's `latency_us`: percentiles in microseconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// The compact benchmark's measurement (Sluice's `compaction` object, plus the flush before
/// it and the LSM shape around it).
#[derive(Clone, Debug, Serialize)]
pub struct Compaction {
    pub count: u64,
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub seconds: f64,
    /// The process's CPU seconds during the major compaction (fjall's workers included).
    pub cpu_seconds: f64,
    pub bandwidth_mb_s: f64,
    pub flush_seconds: f64,
    pub lsm_before: Vec<LevelShape>,
    pub lsm_after: Vec<LevelShape>,
}

/// Sluice's `options` object plus the peer's own knobs.
#[derive(Clone, Debug, Serialize)]
pub struct RunOptions {
    pub num: u64,
    pub reads: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub seed: u64,
    pub sync: bool,
    pub compression: String,
    pub write_buffer_size: u64,
    pub target_file_size: u64,
    pub block_size: u32,
    pub bloom_bits: u32,
    pub cache_size: u64,
    pub disable_auto_compactions: bool,
    pub parallel_compact: bool,
    pub compaction_threads: usize,
}

/// One JSON line. Fields shared with `sluice bench --json` keep its names.
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    pub name: String,
    pub engine: &'static str,
    pub engine_version: &'static str,
    pub ops: u64,
    pub threads: usize,
    pub seconds: f64,
    pub micros_per_op: f64,
    pub ops_per_sec: f64,
    pub bytes: u64,
    pub mb_per_sec: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<u64>,
    /// readwhilewriting: the writer's puts (`ops` and the latencies are the readers').
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    pub latency_us: LatencySummary,
    pub user_bytes: u64,
    pub write_stall_micros: u64,
    /// The process's CPU time during the benchmark.
    pub cpu: CpuUsage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Compaction>,
    pub lsm: Vec<LevelShape>,
    pub options: RunOptions,
    pub settings_differ: Vec<String>,
}

/// What a benchmark's operations did.
struct Tally {
    ops: u64,
    bytes: u64,
    found: u64,
    hist: Histogram<u64>,
}

/// Longest latency the histogram distinguishes, in nanoseconds (one hour), as Sluice's.
const MAX_LATENCY_NANOS: u64 = 3_600 * 1_000_000_000;

impl Tally {
    fn new() -> Result<Self, String> {
        Ok(Tally {
            ops: 0,
            bytes: 0,
            found: 0,
            hist: Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, 3).map_err(|e| e.to_string())?,
        })
    }

    #[inline]
    fn done(&mut self, elapsed: Duration, bytes: usize) {
        let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.clamp(1, MAX_LATENCY_NANOS));
        self.ops += 1;
        self.bytes += bytes as u64;
    }

    /// Adds another thread's operations.
    fn merge(&mut self, other: &Tally) -> Result<(), String> {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.found += other.found;
        self.hist.add(&other.hist).map_err(|e| e.to_string())
    }

    fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        let us = |q: f64| self.hist.value_at_quantile(q) as f64 / 1e3;
        LatencySummary {
            p50: us(0.5),
            p99: us(0.99),
            p999: us(0.999),
            max: self.hist.max() as f64 / 1e3,
            mean: self.hist.mean() / 1e3,
        }
    }
}

fn err(e: fjall::Error) -> String {
    e.to_string()
}

impl Engine {
    /// Runs the benchmark `name` at `position` of the run and reports it.
    pub fn run_benchmark(&self, name: &str, position: usize) -> Result<BenchResult, String> {
        let keys = KeyFormat::new(self.cfg.key_size, self.cfg.num)?;
        let mut t = Tally::new()?;
        let mut compaction = None;
        let (mut writes, mut user_bytes) = (None, 0);
        // The threads that ran, and those whose operations `t` counts.
        let (mut threads, mut measured) = (1, 1);
        let cpu_before = CpuUsage::now();
        let start = Instant::now();
        match name {
            "fillseq" | "fillrandom" | "overwrite" => {
                self.fill(keys, position, name != "fillseq", &mut t)?;
                user_bytes = t.bytes;
                // The benchmark is not over until the flushes and compactions it caused are.
                self.wait_idle();
            }
            "readrandom" => self.read_random(keys, position, &mut t)?,
            "readwhilewriting" => {
                let (puts, bytes) = self.read_while_writing(keys, position, &mut t)?;
                (writes, user_bytes) = (Some(puts), bytes);
                (threads, measured) = (self.cfg.threads + 1, self.cfg.threads);
            }
            "compact" => compaction = Some(self.compact(&mut t)?),
            other => return Err(format!("unknown benchmark {other:?}")),
        }
        let mut seconds = start.elapsed().as_secs_f64();
        let cpu = CpuUsage::now().since(cpu_before);
        let mut bytes = t.bytes;
        if let Some(c) = &compaction {
            // Sluice's compact line: seconds and MB/s are the compaction's, bytes its input.
            seconds = c.seconds;
            bytes = c.input_bytes;
        }
        let per_second = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        Ok(BenchResult {
            name: name.to_string(),
            engine: "fjall",
            engine_version: env!("FJALL_VERSION"),
            ops: t.ops,
            threads,
            seconds,
            micros_per_op: if t.ops > 0 {
                seconds * measured as f64 * 1e6 / t.ops as f64
            } else {
                0.0
            },
            ops_per_sec: per_second(t.ops as f64),
            bytes,
            mb_per_sec: per_second(bytes as f64) / 1e6,
            found: matches!(name, "readrandom" | "readwhilewriting").then_some(t.found),
            writes,
            latency_us: t.summary(),
            user_bytes,
            // fjall does not report its write stalls.
            write_stall_micros: 0,
            cpu,
            compaction,
            lsm: self.shape(),
            options: self.options(),
            settings_differ: self.settings_differ.clone(),
        })
    }

    fn options(&self) -> RunOptions {
        let c = &self.cfg;
        RunOptions {
            num: c.num,
            reads: c.reads(),
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
            disable_auto_compactions: c.disable_auto_compactions,
            parallel_compact: c.parallel_compact,
            compaction_threads: c.compaction_threads,
        }
    }

    /// fillseq writes keys `0..num` in order; fillrandom and overwrite write `num` random keys.
    /// The journal is not synced (Sluice's default).
    fn fill(
        &self,
        keys: KeyFormat,
        position: usize,
        random: bool,
        t: &mut Tally,
    ) -> Result<(), String> {
        let c = &self.cfg;
        let mut g = SplitMix64::stream(c.seed, position as u64, 0);
        let mut values = ValueGenerator::new(&mut g, c.value_size);
        let mut key = Vec::with_capacity(c.key_size);
        for i in 0..c.num {
            // With no automatic compactions, fjall's L0 write halt would never lift: stop
            // before it (see settings_differ). One check per 256 writes sees every memtable.
            if c.disable_auto_compactions && i % 256 == 0 && self.l0_runs_ahead() >= 28 {
                return Err(format!(
                    "stopped after {i} writes: L0 holds 28 runs and fjall halts writes at {} \
                     runs, which with --disable-auto-compactions would never lift; use a larger \
                     --write-buffer-size or a smaller --num",
                    crate::engine::FJALL_L0_HALT_RUNS
                ));
            }
            let n = if random { g.below(c.num) } else { i };
            keys.write(n, &mut key);
            let value = values.generate(c.value_size);
            let start = Instant::now();
            self.ks.insert(key.as_slice(), value).map_err(err)?;
            t.done(start.elapsed(), key.len() + value.len());
        }
        Ok(())
    }

    /// `reads` point lookups of uniform keys.
    fn read_random(&self, keys: KeyFormat, position: usize, t: &mut Tally) -> Result<(), String> {
        let mut g = SplitMix64::stream(self.cfg.seed, position as u64, 0);
        self.lookups(keys, &mut g, self.cfg.reads(), t)
    }

    /// db_bench's readwhilewriting (STREAM.md section 5): `--threads` reader threads, reader
    /// `r` on thread `r + 1`'s stream looking up its share of `reads` uniform keys as
    /// readrandom does, while this thread, the writer, overwrites uniform keys from thread 0's
    /// stream (journal unsynced, no rate limit) until every reader is done. `t` gets the
    /// readers' operations; returns the writer's puts and their key and value bytes.
    fn read_while_writing(
        &self,
        keys: KeyFormat,
        position: usize,
        t: &mut Tally,
    ) -> Result<(u64, u64), String> {
        let c = &self.cfg;
        let readers_left = AtomicUsize::new(c.threads);
        let tallies = (0..c.threads)
            .map(|_| Tally::new())
            .collect::<Result<Vec<_>, _>>()?;
        std::thread::scope(|scope| {
            let readers: Vec<_> = tallies
                .into_iter()
                .enumerate()
                .map(|(r, mut tally)| {
                    let left = &readers_left;
                    scope.spawn(move || {
                        let (first, end) = share(c.reads(), c.threads, r);
                        let mut g = SplitMix64::stream(c.seed, position as u64, r as u64 + 1);
                        let outcome = self.lookups(keys, &mut g, end - first, &mut tally);
                        left.fetch_sub(1, Ordering::Release);
                        outcome.map(|()| tally)
                    })
                })
                .collect();
            let written = self.write_until_readers_done(keys, position, &readers_left);
            for reader in readers {
                let tally = reader.join().map_err(|_| "a reader thread panicked")??;
                t.merge(&tally)?;
            }
            written
        })
    }

    /// readwhilewriting's writer: puts uniform keys with values from thread 0's stream until no
    /// reader is left (at least once). Returns the puts and their key and value bytes.
    fn write_until_readers_done(
        &self,
        keys: KeyFormat,
        position: usize,
        readers_left: &AtomicUsize,
    ) -> Result<(u64, u64), String> {
        let c = &self.cfg;
        let mut g = SplitMix64::stream(c.seed, position as u64, 0);
        let mut values = ValueGenerator::new(&mut g, c.value_size);
        let mut key = Vec::with_capacity(c.key_size);
        let (mut puts, mut bytes) = (0, 0);
        loop {
            keys.write(g.below(c.num), &mut key);
            let value = values.generate(c.value_size);
            self.ks.insert(key.as_slice(), value).map_err(err)?;
            puts += 1;
            bytes += (key.len() + value.len()) as u64;
            // Acquire pairs with the readers' Release: once this reads 0 every read is done.
            if readers_left.load(Ordering::Acquire) == 0 {
                return Ok((puts, bytes));
            }
        }
    }

    /// `n` point lookups of uniform keys drawn from `g`.
    fn lookups(
        &self,
        keys: KeyFormat,
        g: &mut SplitMix64,
        n: u64,
        t: &mut Tally,
    ) -> Result<(), String> {
        let c = &self.cfg;
        let mut key = Vec::with_capacity(c.key_size);
        for _ in 0..n {
            keys.write(g.below(c.num), &mut key);
            let start = Instant::now();
            let value = self.ks.get(&key).map_err(err)?;
            let bytes = value.as_ref().map_or(0, |v| key.len() + v.len());
            t.found += u64::from(value.is_some());
            t.done(start.elapsed(), bytes);
        }
        Ok(())
    }

    /// Flushes the memtable (untimed), then times fjall's major compaction.
    fn compact(&self, t: &mut Tally) -> Result<Compaction, String> {
        let flush_start = Instant::now();
        self.ks.rotate_memtable_and_wait().map_err(err)?;
        self.wait_idle();
        let flush_seconds = flush_start.elapsed().as_secs_f64();
        let lsm_before = self.shape();
        let input_bytes = total_bytes(&lsm_before);
        let cpu_before = CpuUsage::now();
        let start = Instant::now();
        self.ks.major_compact().map_err(err)?;
        let elapsed = start.elapsed();
        let cpu = CpuUsage::now().since(cpu_before);
        t.done(elapsed, 0);
        let seconds = elapsed.as_secs_f64();
        let lsm_after = self.shape();
        Ok(Compaction {
            count: u64::from(input_bytes > 0),
            input_bytes,
            output_bytes: total_bytes(&lsm_after),
            seconds,
            cpu_seconds: cpu.total_seconds,
            bandwidth_mb_s: if seconds > 0.0 {
                input_bytes as f64 / 1e6 / seconds
            } else {
                0.0
            },
            flush_seconds,
            lsm_before,
            lsm_after,
        })
    }
}
