//! One run of a variant: fresh owner directories, fresh workers serving them, a fresh
//! database, the workload with its reader and sampler threads, and the figures.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sluice::options::{PartitionOptions, PartitionOwner};
use sluice::partition::balance::BalanceOptions;
use sluice::partition::load::LoadBalanceOptions;
use sluice::{
    CompactionOptions, Db, Error, IoContext, MemtableOptions, Metrics, Options, Result,
    TableOptions,
};
use sluice_bench::delta::MetricsDelta;
use sluice_bench::keys::KeyFormat;
use sluice_bench::stream::SplitMix64;
use sluice_offload::{OffloadOptions, Secret};

use super::report::{Sample, VariantReport, skew};
use super::workload::{self, ReadCheck, Reference, Values};
use super::{MstoreConfig, Variant};
use crate::copro::Sizing;
use crate::copro::pin::CpuPlan;
use crate::workers::{WorkerSet, WorkerSettings, WorkerSpec};

/// What every run shares.
pub(super) struct Runner<'a> {
    pub config: &'a MstoreConfig,
    pub plan: &'a CpuPlan,
    pub secret: &'a Secret,
    pub secret_file: &'a Path,
    pub scratch: &'a Path,
}

/// What the threads of the measured phase brought back.
struct Measured {
    seconds: f64,
    during: ReadCheck,
    samples: Vec<Sample>,
}

impl Runner<'_> {
    /// Runs `variant` once on fresh directories, removed afterwards (also on failure).
    pub fn run(&self, variant: Variant, repetition: usize) -> Result<VariantReport> {
        let dir = self
            .scratch
            .join(format!("{}-{repetition}", variant.name()));
        tracing::info!(variant = variant.name(), repetition, "mstore run");
        let outcome = self.run_once(variant, &dir);
        if let Err(e) = std::fs::remove_dir_all(&dir)
            && dir.exists()
        {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a run directory");
        }
        outcome
    }

    fn run_once(&self, variant: Variant, dir: &Path) -> Result<VariantReport> {
        let c = self.config;
        let owner_dirs: Vec<PathBuf> = (0..c.workers)
            .map(|i| dir.join(format!("owner{i}")))
            .collect();
        for d in &owner_dirs {
            std::fs::create_dir_all(d).with_path(d)?;
        }
        let workers = WorkerSet::start(
            &WorkerSettings {
                program: &c.worker_program,
                secret_file: self.secret_file,
                throttle: c.throttle,
                log_dir: self.scratch,
                object_store: None,
                mode: "auto",
            },
            &self.worker_specs(&owner_dirs),
        )?;
        let keys = KeyFormat::new(c.key_size, c.num)?;
        let options = self.options(variant, &workers.addresses(), &owner_dirs, keys)?;
        let db = Db::open(dir.join("db"), options)?;
        let mut rng = SplitMix64::for_benchmark(c.seed, 0, 0);
        let mut values = Values::new(c.value_size, &mut rng);
        let reference = Reference {
            num: c.num,
            every: c.reference_every,
        };
        workload::load(&db, keys, &mut values, reference)?;
        db.flush()?;
        db.wait_for_background_work()?;
        let before = db.metrics();
        let measured = self.measure(&db, keys, &mut values, &mut rng, reference)?;
        let after = db.metrics();
        let stats = db
            .partition_stats()
            .ok_or_else(|| Error::InvalidArgument("the database is not partitioned".into()))?;
        let last = workload::check_all(&db, keys, reference, c.value_size);
        db.close()?;
        workers.stop()?;

        let engine = MetricsDelta::between(&before, &after);
        let owner_bytes: Vec<u64> = stats.owners.iter().map(|o| o.bytes).collect();
        let (shares_before, bytes_before) = worker_totals(&before, c.workers);
        let (shares_after, bytes_after) = worker_totals(&after, c.workers);
        let minus = |a: Vec<u64>, b: Vec<u64>| -> Vec<u64> {
            a.iter()
                .zip(&b)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect()
        };
        let seconds = measured.seconds;
        let per_second = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        let mut report = VariantReport {
            name: variant.name().into(),
            ops: c.num,
            seconds,
            ops_per_sec: per_second(c.num as f64),
            mb_per_sec: per_second(engine.user_bytes as f64) / 1e6,
            write_amp: engine.write_amp,
            skew: skew(&owner_bytes),
            owner_bytes,
            moves: after.range_moves.saturating_sub(before.range_moves),
            splits: after.range_splits.saturating_sub(before.range_splits),
            relocations: after.relocations.saturating_sub(before.relocations),
            read_misses: 0,
            reads_checked: 0,
            first_miss: None,
            range_owners: stats.ranges.iter().map(|r| r.owner).collect(),
            compactions: engine.compaction.count,
            compaction_input_bytes: engine.compaction.input_bytes,
            owner_shares: minus(shares_after, shares_before),
            owner_compaction_bytes: minus(bytes_after, bytes_before),
            retries: after
                .offload
                .as_ref()
                .map_or(0, |o| o.retries)
                .saturating_sub(before.offload.as_ref().map_or(0, |o| o.retries)),
            write_stall_seconds: engine.write_stall_micros as f64 / 1e6,
            samples: measured.samples,
            runs_ops_per_sec: Vec::new(),
        };
        report.add_reads(measured.during);
        report.add_reads(last);
        Ok(report)
    }

    /// The measured phase: the zipfian writes and the background work they cause, with the
    /// reader and the sampler running beside them.
    fn measure(
        &self,
        db: &Db,
        keys: KeyFormat,
        values: &mut Values,
        rng: &mut SplitMix64,
        reference: Reference,
    ) -> Result<Measured> {
        let c = self.config;
        let stop = AtomicBool::new(false);
        let start = Instant::now();
        let (written, during, samples) = std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut rng = SplitMix64::for_benchmark(c.seed, 1, 1);
                workload::check_until(db, keys, reference, c.value_size, &mut rng, &stop)
            });
            let sampler = s.spawn(|| sample_until(db, start, c.sample_interval, c.workers, &stop));
            let written = workload::write_zipfian(db, keys, values, c.num, c.num, rng)
                .and_then(|n| db.wait_for_background_work().map(|()| n));
            stop.store(true, Ordering::Relaxed);
            (written, reader.join(), sampler.join())
        });
        let seconds = start.elapsed().as_secs_f64();
        written?;
        let panicked = |what: &str| Error::InvalidArgument(format!("the {what} thread panicked"));
        Ok(Measured {
            seconds,
            during: during.map_err(|_| panicked("reader"))?,
            samples: samples.map_err(|_| panicked("sampler"))?,
        })
    }

    /// Worker `i` serves owner `i`'s directory first (its outputs' default), then the other
    /// owners' (it reads them when a range moves to it or it shares another's compaction).
    fn worker_specs(&self, owner_dirs: &[PathBuf]) -> Vec<WorkerSpec> {
        (0..owner_dirs.len())
            .map(|i| {
                let mut roots = owner_dirs.to_vec();
                roots.rotate_left(i);
                WorkerSpec {
                    roots,
                    cpu: self.plan.workers.get(i).copied().flatten(),
                }
            })
            .collect()
    }

    /// The engine options: the CoPro experiment's sizes for this data volume, owner `i` in
    /// `owner_dirs[i]` with the worker at `addresses[i]`, and the balancers as `variant` says.
    fn options(
        &self,
        variant: Variant,
        addresses: &[String],
        owner_dirs: &[PathBuf],
        keys: KeyFormat,
    ) -> Result<Options> {
        let c = self.config;
        let s = Sizing::for_data(c.data_bytes());
        let memtable = s.write_buffer_size as u64;
        let partitions = PartitionOptions {
            owners: owner_dirs
                .iter()
                .zip(addresses)
                .map(|(dir, worker)| PartitionOwner {
                    dir: dir.clone(),
                    worker: Some(worker.clone()),
                })
                .collect(),
            boundaries: workload::boundaries(keys, c.num, c.ranges())?,
            initial_owners: Vec::new(),
            // Scaled to the run: an owner holding two memtables' worth is worth balancing, and
            // a compaction of a memtable's worth is worth sharing.
            balance: variant.balanced().then(|| BalanceOptions {
                min_bytes: 2 * memtable,
                ..BalanceOptions::default()
            }),
            load_balance: variant.balanced().then(|| LoadBalanceOptions {
                min_compaction_bytes: memtable,
                ..LoadBalanceOptions::default()
            }),
        };
        Ok(Options {
            create_if_missing: true,
            error_if_exists: true,
            offload: Some(OffloadOptions::new(addresses.to_vec(), self.secret.clone()).into()),
            partitions: Some(partitions),
            memtable: MemtableOptions {
                write_buffer_size: s.write_buffer_size,
                ..MemtableOptions::default()
            },
            table: TableOptions {
                compression: c.compression,
                ..TableOptions::default()
            },
            compaction: CompactionOptions {
                // LevelDB's level sizing, as the paper's MStore: L0 into L1, and down.
                level_compaction_dynamic_level_bytes: false,
                target_file_size_base: s.target_file_size,
                max_bytes_for_level_base: s.max_bytes_for_level_base,
                sub_task_bytes: s.sub_task_bytes,
                // One compaction per owner at a time, as each device compacts its own tree.
                max_concurrent_compactions: c.workers,
                // LevelDB's write triggers: the MStore paper's MStore is built on LevelDB, whose
                // writers slow down at 8 L0 files and stop at 12 (RocksDB's 20 and 36 would let a
                // hot range's L0 absorb a slow owner's backlog for the whole run).
                l0_slowdown_writes_trigger: 8,
                l0_stop_writes_trigger: 12,
                ..CompactionOptions::default()
            },
            ..Options::default()
        })
    }
}

/// Records the owners' bytes and their workers' compaction bandwidth every `interval` until
/// `stop` is set, and once more then.
fn sample_until(
    db: &Db,
    start: Instant,
    interval: Duration,
    owners: usize,
    stop: &AtomicBool,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    let mut last = (0.0, worker_totals(&db.metrics(), owners).1);
    loop {
        let done = stop.load(Ordering::Relaxed);
        let seconds = start.elapsed().as_secs_f64();
        let owner_bytes = db
            .partition_stats()
            .map(|s| s.owners.iter().map(|o| o.bytes).collect())
            .unwrap_or_default();
        let compacted = worker_totals(&db.metrics(), owners).1;
        let dt = seconds - last.0;
        let owner_compaction_mb_s = compacted
            .iter()
            .zip(&last.1)
            .map(|(now, then)| {
                let mb = now.saturating_sub(*then) as f64 / 1e6;
                if dt > 0.0 { mb / dt } else { 0.0 }
            })
            .collect();
        samples.push(Sample {
            seconds,
            owner_bytes,
            owner_compaction_mb_s,
        });
        last = (seconds, compacted);
        if done {
            return samples;
        }
        // Sleep in short steps so the last sample follows the stop promptly.
        let next = start + Duration::from_secs_f64(seconds) + interval;
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(10).min(interval));
        }
    }
}

/// Each owner's worker's shares and their input bytes so far. Side 0 of the offload totals is
/// the host; side `i + 1` is owner `i`'s worker (the workers are listed in owner order).
fn worker_totals(m: &Metrics, owners: usize) -> (Vec<u64>, Vec<u64>) {
    let sides = m
        .offload
        .as_ref()
        .map(|o| o.sides.as_slice())
        .unwrap_or(&[]);
    let side = |i: usize| sides.get(i + 1);
    (
        (0..owners)
            .map(|i| side(i).map_or(0, |s| s.shares))
            .collect(),
        (0..owners)
            .map(|i| side(i).map_or(0, |s| s.input_bytes))
            .collect(),
    )
}
