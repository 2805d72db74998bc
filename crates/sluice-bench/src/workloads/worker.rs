//! One client thread of a benchmark: the operation loops and what they count.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use sluice::{Db, ReadOptions, Result, WriteOptions};

use super::share;
use crate::config::{BenchConfig, Benchmark};
use crate::histogram::LatencyHistogram;
use crate::keys::KeyFormat;
use crate::progress::{Progress, Ticker};
use crate::values::ValueGenerator;

/// What one or more threads did.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Operations completed.
    pub ops: u64,
    /// Key and value bytes written or read.
    pub bytes: u64,
    /// Lookups that found their key.
    pub found: u64,
    /// Latency of every operation.
    pub hist: LatencyHistogram,
}

impl Tally {
    /// Adds another thread's counts.
    pub fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.found += other.found;
        self.hist.merge(&other.hist);
    }
}

/// The state of one client thread.
pub(crate) struct Worker<'a> {
    db: &'a Db,
    config: &'a BenchConfig,
    keys: KeyFormat,
    index: usize,
    rng: SmallRng,
    ticker: Ticker<'a>,
    stop: &'a AtomicBool,
    tally: Tally,
    /// Scratch buffer for the current key.
    key: Vec<u8>,
}

impl<'a> Worker<'a> {
    pub fn new(
        db: &'a Db,
        config: &'a BenchConfig,
        keys: KeyFormat,
        index: usize,
        ordinal: u64,
        progress: &'a Progress,
        stop: &'a AtomicBool,
    ) -> Self {
        // Distinct, repeatable streams per (seed, benchmark position, thread).
        let seed = config
            .seed
            .wrapping_add(ordinal.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .wrapping_add((index as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9));
        Worker {
            db,
            config,
            keys,
            index,
            rng: SmallRng::seed_from_u64(seed),
            ticker: progress.ticker(),
            stop,
            tally: Tally::default(),
            key: Vec::with_capacity(keys.key_size()),
        }
    }

    /// The counts, once the thread is done.
    pub fn into_tally(self) -> Tally {
        self.tally
    }

    /// True when another thread failed and this one should stop early.
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Counts one finished operation that started at `start` and moved `bytes`.
    #[inline]
    fn done(&mut self, start: Instant, bytes: usize) {
        self.tally.hist.record(start.elapsed());
        self.tally.ops += 1;
        self.tally.bytes += bytes as u64;
        self.ticker.tick();
    }

    pub fn run(&mut self, bench: Benchmark) -> Result<()> {
        match bench {
            Benchmark::FillSeq => self.fill(false),
            Benchmark::FillRandom | Benchmark::Overwrite => self.fill(true),
            Benchmark::ReadRandom => self.read_random(),
            Benchmark::ReadSeq => self.read_seq(),
            Benchmark::SeekRandom => self.seek_random(),
            // Compaction is one call, run without client threads.
            Benchmark::Compact => Ok(()),
        }
    }

    /// fillseq writes this thread's slice of `0..num` in order; fillrandom and overwrite
    /// write this thread's share of `num` keys drawn uniformly from `[0, num)`.
    fn fill(&mut self, random: bool) -> Result<()> {
        let num = self.config.num;
        let (first, end) = share(num, self.config.threads, self.index);
        let mut values = ValueGenerator::new(&mut self.rng, self.config.value_size);
        let opts = WriteOptions {
            sync: self.config.sync,
        };
        for i in first..end {
            if self.stopped() {
                break;
            }
            let n = if random {
                self.rng.gen_range(0..num)
            } else {
                i
            };
            self.keys.write(n, &mut self.key);
            let value = values.generate(self.config.value_size);
            let start = Instant::now();
            self.db.put_opt(&opts, &self.key, value)?;
            let bytes = self.key.len() + value.len();
            self.done(start, bytes);
        }
        Ok(())
    }

    /// This thread's share of `reads` point lookups of uniform keys.
    fn read_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        for _ in first..end {
            if self.stopped() {
                break;
            }
            let n = self.rng.gen_range(0..self.config.num);
            self.keys.write(n, &mut self.key);
            let start = Instant::now();
            let value = self.db.get(&self.key)?;
            let bytes = value.as_ref().map_or(0, |v| self.key.len() + v.len());
            self.tally.found += u64::from(value.is_some());
            self.done(start, bytes);
        }
        Ok(())
    }

    /// A forward scan of this thread's slice of the key space (the first thread is unbounded
    /// below, the last above), reading at most its share of `reads` entries. Each step
    /// (the first seek, then every `next`) is one operation.
    fn read_seq(&mut self) -> Result<()> {
        let threads = self.config.threads;
        let (first, end) = share(self.config.num, threads, self.index);
        let (limit_first, limit_end) = share(self.config.reads, threads, self.index);
        let limit = limit_end - limit_first;
        let lower = (self.index > 0).then(|| self.keys.key(first));
        let upper = (self.index + 1 < threads).then(|| self.keys.key(end));
        let opts = ReadOptions {
            lower_bound: lower.as_deref(),
            upper_bound: upper.as_deref(),
            ..ReadOptions::default()
        };
        let mut it = self.db.iter(&opts)?;
        let mut start = Instant::now();
        it.seek_to_first()?;
        while it.valid() && self.tally.ops < limit && !self.stopped() {
            let bytes = it.key().len() + it.value().len();
            self.done(start, bytes);
            start = Instant::now();
            it.next()?;
        }
        Ok(())
    }

    /// This thread's share of `reads` seeks to uniform keys, reading the entry each lands on.
    /// One iterator serves every seek, as RocksDB's seekrandom does.
    fn seek_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        let mut it = self.db.iter(&ReadOptions::default())?;
        for _ in first..end {
            if self.stopped() {
                break;
            }
            let n = self.rng.gen_range(0..self.config.num);
            self.keys.write(n, &mut self.key);
            let start = Instant::now();
            it.seek(&self.key)?;
            let mut bytes = 0;
            if it.valid() {
                bytes = it.key().len() + it.value().len();
                self.tally.found += u64::from(it.key() == self.key.as_slice());
            }
            self.done(start, bytes);
        }
        Ok(())
    }
}
