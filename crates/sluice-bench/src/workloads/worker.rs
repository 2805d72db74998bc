//! One client thread of a benchmark: the operation loops and what they count.
//!
//! Keys and values come from the thread's [`SplitMix64`] stream exactly as
//! `benches/peers/STREAM.md` specifies, so a single-threaded run writes and reads the same keys
//! and values, in the same order, as the peer engines' benchmark programs: the stream is seeded
//! from (seed, the benchmark's position in the run, the thread number); a write benchmark
//! builds its value buffer from it first and then draws one key number per operation; a read
//! benchmark only draws key numbers. Nothing else may draw from the stream. The benchmarks
//! the peers do not run ([`mixed`]) keep the same rule: a benchmark that writes values builds
//! the buffer first, and every operation draws exactly one key number.
//!
//! A thread stops early, at its next operation, when another thread failed, when the run is
//! interrupted, and when the benchmark's time limit ([`WorkloadOptions::duration`]) is up.

mod mixed;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;

use sluice::{Db, ReadOptions, Result, WriteOptions};

use super::share;
use crate::config::{BenchConfig, Benchmark, WorkloadOptions};
use crate::histogram::LatencyHistogram;
use crate::keys::KeyFormat;
use crate::progress::{Progress, Ticker};
use crate::stream::SplitMix64;
use crate::timeline::PerSecond;
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
    /// Puts of the benchmarks that mix reads and writes (see [`crate::BenchResult::writes`]).
    pub writes: u64,
    /// randomtransaction's commits that failed with `Busy` and ran again.
    pub conflicts: u64,
    /// Latency of every operation.
    pub hist: LatencyHistogram,
    /// Operations completed in each second since the benchmark began.
    pub per_second: PerSecond,
}

impl Tally {
    /// Adds another thread's counts.
    pub fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.found += other.found;
        self.writes += other.writes;
        self.conflicts += other.conflicts;
        self.hist.merge(&other.hist);
        self.per_second.merge(&other.per_second);
    }
}

/// What every client thread of one benchmark shares. Thread-safe: the flags and the counter
/// are atomics, everything else is read only.
pub(crate) struct Shared<'a> {
    pub db: &'a Db,
    pub config: &'a BenchConfig,
    pub workload: &'a WorkloadOptions,
    pub keys: KeyFormat,
    /// The benchmark's position in the run, which seeds the threads' streams.
    pub ordinal: u64,
    pub progress: &'a Progress,
    /// Set when a thread failed: the others stop.
    pub failed: AtomicBool,
    /// Set when the run is interrupted (Ctrl-C).
    pub interrupt: &'a AtomicBool,
    /// When the benchmark began, for the per-second counts.
    pub start: Instant,
    /// When the benchmark's time limit is up, if it has one.
    pub deadline: Option<Instant>,
    /// readwhilewriting's reader threads still reading; its writer stops when none is.
    pub readers_left: AtomicUsize,
    /// The keyspaces the keys are spread over (`WorkloadOptions::keyspaces`): key number `n`
    /// is in `targets[n % len]`.
    pub targets: &'a [sluice::Keyspace],
}

/// The state of one client thread.
pub(crate) struct Worker<'a> {
    shared: &'a Shared<'a>,
    db: &'a Db,
    config: &'a BenchConfig,
    keys: KeyFormat,
    index: usize,
    /// This thread's key/value stream for the current benchmark (STREAM.md section 2).
    stream: SplitMix64,
    ticker: Ticker<'a>,
    tally: Tally,
    /// Scratch buffer for the current key.
    key: Vec<u8>,
}

impl<'a> Worker<'a> {
    /// Thread `index` of the benchmark `shared` describes.
    pub fn new(shared: &'a Shared<'a>, index: usize) -> Self {
        let config = shared.config;
        Worker {
            shared,
            db: shared.db,
            config,
            keys: shared.keys,
            index,
            // Distinct, repeatable streams per (seed, benchmark position, thread).
            stream: SplitMix64::for_benchmark(config.seed, shared.ordinal, index as u64),
            ticker: shared.progress.ticker(),
            tally: Tally::default(),
            key: Vec::with_capacity(shared.keys.key_size()),
        }
    }

    /// The counts, once the thread is done.
    pub fn into_tally(self) -> Tally {
        self.tally
    }

    /// True when another thread failed, the run was interrupted or the time limit is up: this
    /// thread stops early.
    fn stopped(&self) -> bool {
        let s = self.shared;
        s.failed.load(Ordering::Relaxed)
            || s.interrupt.load(Ordering::Relaxed)
            || s.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Counts one finished operation that started at `start` and moved `bytes`.
    #[inline]
    fn done(&mut self, start: Instant, bytes: usize) {
        let end = Instant::now();
        self.tally.hist.record(end - start);
        self.tally.per_second.record(end - self.shared.start);
        self.tally.ops += 1;
        self.tally.bytes += bytes as u64;
        self.ticker.tick();
    }

    /// The write options of every put and delete.
    fn write_options(&self) -> WriteOptions {
        WriteOptions {
            sync: self.config.sync,
        }
    }

    pub fn run(&mut self, bench: Benchmark) -> Result<()> {
        let threads = self.config.threads;
        match bench {
            Benchmark::FillSeq => self.fill(false),
            Benchmark::FillRandom | Benchmark::Overwrite => self.fill(true),
            Benchmark::ReadRandom => {
                self.read_random(share(self.config.reads, threads, self.index))
            }
            Benchmark::ReadSeq => self.read_seq(),
            Benchmark::SeekRandom => self.seek_random(),
            Benchmark::ReadWhileWriting => self.read_while_writing(),
            Benchmark::UpdateRandom => self.update_random(),
            Benchmark::ReadRandomWriteRandom => self.read_random_write_random(),
            Benchmark::DeleteRandom => self.delete_random(),
            Benchmark::RandomTransaction => self.random_transaction(),
            // Compaction and the range delete are one call each, run without client threads.
            Benchmark::Compact | Benchmark::DeleteRange => Ok(()),
        }
    }

    /// fillseq writes this thread's slice of `0..num` in order; fillrandom and overwrite
    /// write this thread's share of `num` keys drawn uniformly from `[0, num)`. The value
    /// buffer is built from the stream before any key is drawn (STREAM.md section 3).
    fn fill(&mut self, random: bool) -> Result<()> {
        let num = self.config.num;
        let (first, end) = share(num, self.config.threads, self.index);
        let mut values = ValueGenerator::from_stream(&mut self.stream, self.config.value_size);
        let opts = self.write_options();
        for i in first..end {
            if self.stopped() {
                break;
            }
            let n = if random { self.stream.below(num) } else { i };
            self.keys.write(n, &mut self.key);
            let value = values.generate(self.config.value_size);
            let start = Instant::now();
            match self.keyspace_of(n) {
                Some(target) => target.put_opt(&opts, &self.key, value)?,
                None => self.db.put_opt(&opts, &self.key, value)?,
            }
            let bytes = self.key.len() + value.len();
            self.done(start, bytes);
        }
        Ok(())
    }

    /// Puts the next operation's uniform key from `[0, num)` in `self.key` and returns its
    /// number; `None` (and no key drawn) once the benchmark is to stop.
    fn next_random_key(&mut self) -> Option<u64> {
        if self.stopped() {
            return None;
        }
        let n = self.stream.below(self.config.num);
        self.keys.write(n, &mut self.key);
        Some(n)
    }

    /// The keyspace of key number `n` when the run spreads its keys over several; `None` for
    /// the database itself.
    fn keyspace_of(&self, n: u64) -> Option<&'a sluice::Keyspace> {
        let targets = self.shared.targets;
        (targets.len() > 1).then(|| &targets[(n % targets.len() as u64) as usize])
    }

    /// Point lookups of uniform keys, `end - first` of them: readrandom passes this thread's
    /// share of `reads`, readwhilewriting its reader's share.
    fn read_random(&mut self, (first, end): (u64, u64)) -> Result<()> {
        for _ in first..end {
            let Some(n) = self.next_random_key() else {
                break;
            };
            let start = Instant::now();
            let value = match self.keyspace_of(n) {
                Some(target) => target.get(&self.key)?,
                None => self.db.get(&self.key)?,
            };
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
        let mut it = self.db.raw_iter(&opts)?;
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

    /// This thread's share of `reads` seeks to uniform keys, reading the entry each lands on
    /// and then, with `seek_nexts` N, up to N more entries (fewer at the end of the keys), all
    /// one operation. One iterator serves every seek, as RocksDB's seekrandom does.
    fn seek_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        let nexts = self.shared.workload.seek_nexts;
        let mut it = self.db.raw_iter(&ReadOptions::default())?;
        for _ in first..end {
            if self.next_random_key().is_none() {
                break;
            }
            let start = Instant::now();
            it.seek(&self.key)?;
            let mut bytes = 0;
            if it.valid() {
                bytes = it.key().len() + it.value().len();
                self.tally.found += u64::from(it.key() == self.key.as_slice());
            }
            for _ in 0..nexts {
                if !it.valid() {
                    break;
                }
                it.next()?;
                if it.valid() {
                    bytes += it.key().len() + it.value().len();
                }
            }
            self.done(start, bytes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The workloads draw STREAM.md's stream in its order: checked against the specification's
    //! key vectors, and by predicting a whole run's database contents from the stream.
    use std::collections::BTreeMap;

    use sluice::{CompactionOptions, MemtableOptions, Options};

    use super::*;
    use crate::workloads::run_benchmarks;

    /// The first `k` key numbers of the benchmark at `position`, drawn as the workers draw
    /// them: the value buffer first for the write benchmarks, then one draw per key.
    fn first_key_numbers(seed: u64, position: u64, writes: bool, num: u64, k: usize) -> Vec<u64> {
        let mut stream = SplitMix64::for_benchmark(seed, position, 0);
        if writes {
            ValueGenerator::from_stream(&mut stream, 100);
        }
        (0..k).map(|_| stream.below(num)).collect()
    }

    /// STREAM.md section 6: `--seed 301 --num 1000000 --benchmarks
    /// fillrandom,readrandom,overwrite`.
    #[test]
    fn stream_md_key_vectors() {
        let num = 1_000_000;
        assert_eq!(
            first_key_numbers(301, 0, true, num, 5),
            [568985, 555461, 548675, 856306, 142518]
        );
        assert_eq!(
            first_key_numbers(301, 1, false, num, 5),
            [200265, 681718, 426965, 265444, 238721]
        );
        assert_eq!(
            first_key_numbers(301, 2, true, num, 5),
            [587334, 706572, 126095, 749313, 128125]
        );
        let keys = KeyFormat::new(16, num).unwrap();
        assert_eq!(keys.key(568985), b"0000000000568985");
    }

    fn small_options() -> Options {
        Options {
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                target_file_size_base: 64 << 10,
                max_bytes_for_level_base: 256 << 10,
                ..CompactionOptions::default()
            },
            ..Options::default()
        }
    }

    /// readrandom at position 1 of a 1,000,000-key run reads STREAM.md's five keys: a database
    /// holding exactly those finds all five.
    #[test]
    fn readrandom_reads_the_stream_md_keys() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let keys = KeyFormat::new(16, 1_000_000).unwrap();
        for n in [200265, 681718, 426965, 265444, 238721] {
            db.put(keys.key(n), b"v").unwrap();
        }
        let config = BenchConfig {
            // compact takes position 0 and draws nothing.
            benchmarks: vec![Benchmark::Compact, Benchmark::ReadRandom],
            num: 1_000_000,
            reads: 5,
            ..BenchConfig::default()
        };
        let results = run_benchmarks(&config, &db, &mut |_| {}).unwrap();
        assert_eq!(results[1].found, Some(5));
    }

    /// readwhilewriting's reader r draws thread r + 1's stream, each its share of `reads`
    /// (STREAM.md sections 4 to 6): a database holding the first five keys of readers 0 and 1
    /// finds all ten, whatever the writer adds meanwhile.
    #[test]
    fn readwhilewriting_readers_read_the_stream_md_keys() {
        let keys = KeyFormat::new(16, 1_000_000).unwrap();
        let readers = [
            [262325, 89055, 863800, 829571, 336372],
            [655449, 522333, 949794, 372108, 980815],
        ];
        for (r, want) in readers.iter().enumerate() {
            let mut stream = SplitMix64::for_benchmark(301, 0, r as u64 + 1);
            let drawn: Vec<u64> = (0..5).map(|_| stream.below(1_000_000)).collect();
            assert_eq!(&drawn, want, "reader {r}");
        }
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        for n in readers.iter().flatten() {
            db.put(keys.key(*n), b"v").unwrap();
        }
        let config = BenchConfig {
            benchmarks: vec![Benchmark::ReadWhileWriting],
            num: 1_000_000,
            reads: 10,
            threads: 2,
            ..BenchConfig::default()
        };
        let results = run_benchmarks(&config, &db, &mut |_| {}).unwrap();
        assert_eq!((results[0].ops, results[0].found), (10, Some(10)));
    }

    /// fillrandom, readrandom and overwrite leave exactly the database (and the hit count) that
    /// replaying the stream predicts: values are built before keys are drawn, value i goes
    /// with key draw i, and each benchmark uses its own position's stream.
    #[test]
    fn a_run_writes_and_reads_what_the_stream_predicts() {
        let (num, value_size, seed) = (3000, 100, 301);
        let keys = KeyFormat::new(16, num).unwrap();
        let mut model = BTreeMap::new();
        let fill = |position, model: &mut BTreeMap<Vec<u8>, Vec<u8>>| {
            let mut stream = SplitMix64::for_benchmark(seed, position, 0);
            let mut values = ValueGenerator::from_stream(&mut stream, value_size);
            for _ in 0..num {
                let key = keys.key(stream.below(num));
                model.insert(key, values.generate(value_size).to_vec());
            }
        };
        fill(0, &mut model);
        let mut reads = SplitMix64::for_benchmark(seed, 1, 0);
        let expected_found = (0..num)
            .filter(|_| model.contains_key(&keys.key(reads.below(num))))
            .count() as u64;
        fill(2, &mut model);

        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        use Benchmark::*;
        let config = BenchConfig {
            benchmarks: vec![FillRandom, ReadRandom, Overwrite],
            num,
            reads: num,
            value_size,
            seed,
            ..BenchConfig::default()
        };
        let results = run_benchmarks(&config, &db, &mut |_| {}).unwrap();
        assert_eq!(results[1].found, Some(expected_found));
        let contents: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().collect::<Result<_>>().unwrap();
        assert_eq!(contents.len(), model.len());
        assert!(
            contents == model,
            "database differs from the stream's prediction"
        );
    }
}
