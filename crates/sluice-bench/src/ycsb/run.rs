//! The two YCSB phases on a [`Db`]: load (insert keys `0..records` in order) and run
//! (`operations` requests of the workload's mix over `threads` client threads).
//!
//! Work is divided, not repeated: thread t loads the t-th slice of `0..records` and runs its
//! 1/T share of the operations. Inserts of the run phase take key numbers from a shared
//! counter starting at `records`; reads see keys below the highest acknowledged insert, which
//! with several threads may briefly include a key another thread is still writing (counted as
//! `not_found`, as YCSB without its acknowledgement window would).
//!
//! An update or insert puts a whole new value (YCSB's one-field record); a read-modify-write is
//! a get then a put of the same key, timed as one operation (YCSB also records its two halves
//! under READ and UPDATE; this does not); a scan opens an iterator, seeks, and reads up to its
//! length.
//!
//! Every operation is timed on its own and recorded in its type's histogram; its completion
//! time also counts in the per-second throughput samples. The run stops early, with what it
//! measured so far, when `stop` is set (Ctrl-C) or at the first error of any thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use sluice::{Db, Error, ReadOptions, Result, WriteOptions};

use super::YcsbConfig;
use super::dump::{LOAD_POSITION, RUN_POSITION};
use super::report::{OpReport, PhaseReport};
use super::workload::{Chooser, Operation, Request};
use crate::delta::MetricsDelta;
use crate::histogram::LatencyHistogram;
use crate::keys::KeyFormat;
use crate::progress::{Progress, Ticker};
use crate::resources::ResourceSample;
use crate::shape::LsmShape;
use crate::stream::SplitMix64;
use crate::timeline::PerSecond;
use crate::values::ValueGenerator;
use crate::workloads::share;

/// What one or more threads measured in a phase.
#[derive(Debug, Default)]
struct Tally {
    hists: [LatencyHistogram; 5],
    per_second: PerSecond,
    not_found: u64,
}

impl Tally {
    fn merge(&mut self, other: &Tally) {
        for (mine, theirs) in self.hists.iter_mut().zip(&other.hists) {
            mine.merge(theirs);
        }
        self.per_second.merge(&other.per_second);
        self.not_found += other.not_found;
    }

    /// Records `op`, which started at `start`, in a phase that began at `phase_start`.
    #[inline]
    fn record(&mut self, op: Operation, start: Instant, phase_start: Instant) {
        let end = Instant::now();
        if let Some(h) = self.hists.get_mut(op as usize) {
            h.record(end - start);
        }
        self.per_second.record(end - phase_start);
    }

    /// The phase's report, with the engine and process figures of `measured`.
    fn into_report(
        self,
        phase: &str,
        seconds: f64,
        stopped: bool,
        measured: Measured,
    ) -> PhaseReport {
        let operations: Vec<OpReport> = Operation::ALL
            .iter()
            .zip(&self.hists)
            .filter(|(_, h)| !h.is_empty())
            .map(|(&op, h)| OpReport::new(op, h, seconds))
            .collect();
        let ops = operations.iter().map(|o| o.count).sum();
        PhaseReport {
            phase: phase.to_string(),
            ops,
            seconds,
            ops_per_sec: if seconds > 0.0 {
                ops as f64 / seconds
            } else {
                0.0
            },
            not_found: self.not_found,
            stopped,
            per_second: self.per_second.into_counts(),
            operations,
            engine: measured.engine,
            process: measured.process,
            lsm: measured.lsm,
        }
    }
}

/// What a phase did to the engine and the process, measured around it.
struct Measured {
    engine: MetricsDelta,
    process: crate::resources::ProcessUsage,
    lsm: LsmShape,
}

/// State shared by the threads of one phase.
struct Shared<'a> {
    db: &'a Db,
    config: &'a YcsbConfig,
    keys: KeyFormat,
    progress: Progress,
    /// Set by the caller to end the phase early.
    stop: &'a AtomicBool,
    /// Set when a thread fails, so the others end too.
    failed: AtomicBool,
    /// The next key number an insert takes.
    next_insert: AtomicU64,
    /// One past the highest key number whose insert finished.
    inserted: AtomicU64,
    start: Instant,
}

impl Shared<'_> {
    fn halted(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }
}

/// Loads keys `0..records` (each thread its slice, in order), then waits for the flushes and
/// compactions the load caused, which count in its time.
pub fn load(config: &YcsbConfig, db: &Db, stop: &AtomicBool) -> Result<PhaseReport> {
    phase(config, db, stop, "load", |shared, index, tally| {
        load_thread(shared, index, tally)
    })
}

/// Runs `operations` requests of the workload on a database holding keys `0..records`.
pub fn run(config: &YcsbConfig, db: &Db, stop: &AtomicBool) -> Result<PhaseReport> {
    let proto = Chooser::new(
        config.workload,
        config.distribution(),
        config.records,
        config.operations,
        config.seed,
    );
    phase(config, db, stop, "run", move |shared, index, tally| {
        let mut chooser = proto.clone();
        chooser.reseed(config.seed, index as u64);
        run_thread(shared, index, &mut chooser, tally)
    })
}

/// Runs `body` on `config.threads` threads and merges what they measured.
fn phase<F>(
    config: &YcsbConfig,
    db: &Db,
    stop: &AtomicBool,
    name: &str,
    body: F,
) -> Result<PhaseReport>
where
    F: Fn(&Shared<'_>, usize, &mut Tally) -> Result<()> + Sync,
{
    config.validate()?;
    let total = if name == "load" {
        config.records
    } else {
        config.operations
    };
    let shared = Shared {
        db,
        config,
        keys: KeyFormat::new(config.key_size, config.key_space())?,
        progress: Progress::new(
            config.progress,
            &format!("{name} {}", config.workload),
            Some(total),
        ),
        stop,
        failed: AtomicBool::new(false),
        next_insert: AtomicU64::new(config.records),
        inserted: AtomicU64::new(config.records),
        start: Instant::now(),
    };
    let metrics_before = db.metrics();
    let resources = ResourceSample::now();
    let outcomes: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.threads)
            .map(|index| {
                let (shared, body) = (&shared, &body);
                std::thread::Builder::new()
                    .name(format!("ycsb-{index}"))
                    .spawn_scoped(scope, move || {
                        let mut tally = Tally::default();
                        let outcome = body(shared, index, &mut tally);
                        if outcome.is_err() {
                            shared.failed.store(true, Ordering::Relaxed);
                        }
                        outcome.map(|()| tally)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|spawned| match spawned {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(e) => {
                    shared.failed.store(true, Ordering::Relaxed);
                    Err(Error::io("<ycsb thread>", e))
                }
            })
            .collect()
    });
    let mut total = Tally::default();
    for outcome in outcomes {
        total.merge(&outcome?);
    }
    if name == "load" {
        db.wait_for_background_work()?;
    }
    let seconds = shared.start.elapsed().as_secs_f64();
    let resources_after = ResourceSample::now();
    let metrics_after = db.metrics();
    shared.progress.finish();
    let engine = MetricsDelta::between(&metrics_before, &metrics_after);
    let measured = Measured {
        process: resources.usage_until(&resources_after, &engine),
        engine,
        lsm: LsmShape::of(&metrics_after),
    };
    Ok(total.into_report(name, seconds, stop.load(Ordering::Relaxed), measured))
}

/// One thread's scratch state.
struct Client<'a> {
    shared: &'a Shared<'a>,
    values: ValueGenerator,
    key: Vec<u8>,
    ticker: Ticker<'a>,
    opts: WriteOptions,
}

impl<'a> Client<'a> {
    /// A client of thread `index` whose values come from the buffer of stream `position`
    /// ([`LOAD_POSITION`] or [`RUN_POSITION`]: load and run write different values).
    fn new(shared: &'a Shared<'a>, index: usize, position: u64) -> Self {
        let mut stream = SplitMix64::for_benchmark(shared.config.seed, position, index as u64);
        Client {
            shared,
            values: ValueGenerator::from_stream(&mut stream, shared.config.value_size),
            key: Vec::with_capacity(shared.keys.key_size()),
            ticker: shared.progress.ticker(),
            opts: WriteOptions {
                sync: shared.config.sync,
            },
        }
    }

    fn put(&mut self, n: u64) -> Result<()> {
        self.shared.keys.write(n, &mut self.key);
        let value = self.values.generate(self.shared.config.value_size);
        self.shared.db.put_opt(&self.opts, &self.key, value)
    }

    /// Reads key `n`; false if it has no value.
    fn get(&mut self, n: u64) -> Result<bool> {
        self.shared.keys.write(n, &mut self.key);
        Ok(self.shared.db.get(&self.key)?.is_some())
    }

    /// Reads up to `len` entries from key `start` with a fresh iterator, as a YCSB scan does.
    fn scan(&mut self, start: u64, len: u64) -> Result<()> {
        self.shared.keys.write(start, &mut self.key);
        let mut it = self.shared.db.raw_iter(&ReadOptions::default())?;
        it.seek(&self.key)?;
        let mut read = 0;
        while it.valid() && read < len {
            std::hint::black_box((it.key(), it.value()));
            read += 1;
            it.next()?;
        }
        Ok(())
    }
}

fn load_thread(shared: &Shared<'_>, index: usize, tally: &mut Tally) -> Result<()> {
    let (first, end) = share(shared.config.records, shared.config.threads, index);
    let mut client = Client::new(shared, index, LOAD_POSITION);
    for n in first..end {
        if shared.halted() {
            break;
        }
        let start = Instant::now();
        client.put(n)?;
        tally.record(Operation::Insert, start, shared.start);
        client.ticker.tick();
    }
    Ok(())
}

fn run_thread(
    shared: &Shared<'_>,
    index: usize,
    chooser: &mut Chooser,
    tally: &mut Tally,
) -> Result<()> {
    let (first, end) = share(shared.config.operations, shared.config.threads, index);
    let mut client = Client::new(shared, index, RUN_POSITION);
    for _ in first..end {
        if shared.halted() {
            break;
        }
        let request = chooser.next(shared.inserted.load(Ordering::Acquire));
        let start = Instant::now();
        let op = match request {
            Request::Insert => {
                let n = shared.next_insert.fetch_add(1, Ordering::Relaxed);
                client.put(n)?;
                shared.inserted.fetch_max(n + 1, Ordering::Release);
                Operation::Insert
            }
            Request::Scan { start: from, len } => {
                client.scan(from, len)?;
                Operation::Scan
            }
            Request::Point(op, n) => {
                match op {
                    Operation::Update => client.put(n)?,
                    Operation::ReadModifyWrite => {
                        tally.not_found += u64::from(!client.get(n)?);
                        client.put(n)?;
                    }
                    _ => tally.not_found += u64::from(!client.get(n)?),
                }
                op
            }
        };
        tally.record(op, start, shared.start);
        client.ticker.tick();
    }
    Ok(())
}
