//! One run: a fresh database (and, when offloaded, fresh workers serving its directory), one
//! workload, and the figures taken from `Db::metrics()`, `/proc` and the worker processes.
//!
//! A run's time starts before the first write and ends when the background work the writes
//! caused is done, so the compactions are inside the throughput. The database is new, so its
//! offload totals (`Metrics::offload`) are the run's own.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use sluice::{BlobOptions, CompactionOptions, Db, MemtableOptions, Options, Result, TableOptions};
use sluice_bench::delta::MetricsDelta;
use sluice_bench::progress::Progress;
use sluice_bench::resources::process_cpu_times;
use sluice_bench::ycsb::{Distribution, YcsbConfig};
use sluice_bench::{BenchConfig, Benchmark};
use sluice_offload::{OffloadOptions, Secret};

use super::pin::CpuPlan;
use super::report::{RunReport, SideReport, median};
use super::{Configuration, CoproConfig, Separation, Sizing, Workload};
use crate::workers::{WorkerSet, WorkerSettings, WorkerSpec};

/// What every run of an experiment shares.
pub(super) struct Runner<'a> {
    pub config: &'a CoproConfig,
    pub sizing: Sizing,
    pub plan: &'a CpuPlan,
    pub secret: &'a Secret,
    pub secret_file: &'a Path,
    pub scratch: &'a Path,
}

/// One data point: what runs, how, and where its values go.
#[derive(Clone, Copy, Debug)]
pub(super) struct Point {
    pub workload: Workload,
    pub separation: Separation,
    pub value_size: usize,
    pub configuration: Configuration,
}

/// What one run measured, before it is turned into a report.
struct Measured {
    entries: u64,
    ops: u64,
    seconds: f64,
    engine: MetricsDelta,
    offload: Option<sluice::compaction::remote::OffloadMetrics>,
    host_cpu: Option<f64>,
    worker_cpu: Vec<Option<f64>>,
    addresses: Vec<String>,
}

impl Runner<'_> {
    /// Measures one data point `repeat` times, each on a fresh database that is removed
    /// afterwards (also on failure); reports the median run by throughput.
    pub fn point(&self, point: Point, progress: &Progress) -> Result<RunReport> {
        let mut runs = Vec::with_capacity(self.config.repeat);
        for i in 0..self.config.repeat {
            let dir = self.scratch.join(format!(
                "{}-{}-{}-{}-{i}",
                point.workload.name(),
                point.separation.name(),
                point.value_size,
                point.configuration.name()
            ));
            tracing::info!(
                workload = point.workload.name(),
                separation = point.separation.name(),
                value_size = point.value_size,
                configuration = point.configuration.name(),
                "run"
            );
            let outcome = self.run_once(point, &dir);
            if let Err(e) = std::fs::remove_dir_all(&dir)
                && dir.exists()
            {
                tracing::warn!(dir = %dir.display(), error = %e, "could not remove a run directory");
            }
            runs.push(outcome?);
            progress.inc(1);
        }
        median(runs)
    }

    fn run_once(&self, point: Point, dir: &Path) -> Result<RunReport> {
        let configuration = point.configuration;
        std::fs::create_dir_all(dir).map_err(|e| sluice::Error::io(dir, e))?;
        let workers = match configuration.offloaded() {
            true => Some(WorkerSet::start(
                &WorkerSettings {
                    program: &self.config.worker_program,
                    secret_file: self.secret_file,
                    throttle: self.config.throttle,
                    log_dir: self.scratch,
                    object_store: None,
                    mode: "auto",
                },
                &WorkerSpec::serving(dir, &self.plan.workers),
            )?),
            false => None,
        };
        let addresses = workers
            .as_ref()
            .map(WorkerSet::addresses)
            .unwrap_or_default();
        let options = self.options(configuration, point.separation, addresses.clone());
        let db = Db::open(dir, options)?;
        let before = db.metrics();
        let host_before = process_cpu_times();
        let workers_before = workers
            .as_ref()
            .map(WorkerSet::cpu_seconds)
            .unwrap_or_default();
        let start = Instant::now();
        let (entries, ops) = self.workload(&db, point.workload, point.value_size)?;
        db.wait_for_background_work()?;
        let seconds = start.elapsed().as_secs_f64();
        let after = db.metrics();
        let host_after = process_cpu_times();
        let workers_after = workers
            .as_ref()
            .map(WorkerSet::cpu_seconds)
            .unwrap_or_default();
        db.close()?;
        if let Some(workers) = workers {
            workers.stop()?;
        }
        let host_cpu = match (host_before, host_after) {
            (Some(b), Some(a)) => Some(
                ((a.user + a.system).as_secs_f64() - (b.user + b.system).as_secs_f64()).max(0.0),
            ),
            _ => None,
        };
        let worker_cpu = workers_before
            .iter()
            .zip(&workers_after)
            .map(|(b, a)| Some((a.as_ref()? - b.as_ref()?).max(0.0)))
            .collect();
        let m = Measured {
            entries,
            ops,
            seconds,
            engine: MetricsDelta::between(&before, &after),
            offload: after.offload,
            host_cpu,
            worker_cpu,
            addresses,
        };
        Ok(self.report(point, m))
    }

    /// The engine options of `configuration` and `separation`, offloading to `workers`.
    fn options(
        &self,
        configuration: Configuration,
        separation: Separation,
        workers: Vec<String>,
    ) -> Options {
        let s = &self.sizing;
        let offload = configuration
            .offload()
            .map(|(split, host_mode, worker_mode)| OffloadOptions {
                split,
                host_mode,
                worker_mode,
                min_offload_bytes: s.min_offload_bytes,
                min_chunk_bytes: s.min_chunk_bytes,
                ..OffloadOptions::new(workers, self.secret.clone())
            });
        Options {
            create_if_missing: true,
            error_if_exists: true,
            offload: offload.map(Into::into),
            blob: BlobOptions {
                min_blob_size: match separation {
                    Separation::Inline => 0,
                    Separation::Blobs => self.config.min_blob_size,
                },
                // Compressed like the tables, so the two ways write values alike.
                blob_compression: self.config.compression,
                ..BlobOptions::default()
            },
            memtable: MemtableOptions {
                write_buffer_size: s.write_buffer_size,
                ..MemtableOptions::default()
            },
            table: TableOptions {
                compression: self.config.compression,
                ..TableOptions::default()
            },
            compaction: CompactionOptions {
                // The paper's LSM-tree (RocksDB's sizing of its day): L0 into L1, and L1,
                // at four memtables, into L2.
                level_compaction_dynamic_level_bytes: false,
                target_file_size_base: s.target_file_size,
                max_bytes_for_level_base: s.max_bytes_for_level_base,
                sub_task_bytes: s.sub_task_bytes,
                mode: configuration.local_mode(),
                // One compaction at a time: each side's bandwidth is then its own, not shared
                // with a concurrent job on the same core.
                max_concurrent_compactions: 1,
                ..CompactionOptions::default()
            },
            ..Options::default()
        }
    }

    /// Runs `workload`; returns (entries, operations).
    fn workload(&self, db: &Db, workload: Workload, value_size: usize) -> Result<(u64, u64)> {
        let entries = self.config.entries(value_size);
        match workload {
            Workload::FillRandom => {
                let config = BenchConfig {
                    benchmarks: vec![Benchmark::FillRandom],
                    num: entries,
                    reads: entries,
                    key_size: self.config.key_size,
                    value_size,
                    threads: 1,
                    seed: self.config.seed,
                    sync: false,
                    progress: false,
                };
                let r =
                    sluice_bench::workloads::run_benchmark(&config, db, Benchmark::FillRandom, 0)?;
                Ok((entries, r.ops))
            }
            Workload::YcsbA => {
                let config = YcsbConfig {
                    workload: sluice_bench::ycsb::Workload::A,
                    distribution: Some(Distribution::Zipfian),
                    records: (entries / 2).max(1),
                    operations: entries,
                    threads: 1,
                    key_size: self.config.key_size,
                    value_size,
                    seed: self.config.seed,
                    sync: false,
                    progress: false,
                };
                let r =
                    sluice_bench::ycsb::run_ycsb(&config, db, true, true, &AtomicBool::new(false))?;
                let ops = [&r.load, &r.run].into_iter().flatten().map(|p| p.ops).sum();
                Ok((config.records, ops))
            }
        }
    }

    fn report(&self, point: Point, m: Measured) -> RunReport {
        let Point {
            workload,
            separation,
            value_size,
            configuration,
        } = point;
        let per_second = |x: f64| if m.seconds > 0.0 { x / m.seconds } else { 0.0 };
        let c = &m.engine.compaction;
        let host_cpu_core = self.plan.host;
        let mut host = match m.offload.as_ref().and_then(|o| o.sides.first()) {
            Some(totals) => SideReport::from_totals("host", None, totals),
            // Host only: every compaction is the host's.
            None => SideReport {
                side: "host".into(),
                address: None,
                shares: c.count,
                input_bytes: c.input_bytes,
                seconds: c.seconds,
                cpu_seconds: c.cpu_seconds,
                modes: c.modes.clone(),
                ..SideReport::default()
            },
        };
        host.finish(m.host_cpu, m.seconds, host_cpu_core);
        let workers = m
            .offload
            .as_ref()
            .map(|o| o.sides.iter().skip(1).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, totals)| {
                let mut side = SideReport::from_totals(
                    &format!("worker{}", i + 1),
                    m.addresses.get(i).cloned(),
                    totals,
                );
                side.finish(
                    m.worker_cpu.get(i).copied().flatten(),
                    m.seconds,
                    self.plan.workers.get(i).copied().flatten(),
                );
                side
            })
            .collect();
        let offload = m.offload.as_ref();
        RunReport {
            workload: workload.name().into(),
            separation,
            value_size,
            configuration,
            label: configuration.label().into(),
            entries: m.entries,
            ops: m.ops,
            seconds: m.seconds,
            ops_per_sec: per_second(m.ops as f64),
            mb_per_sec: per_second(m.engine.user_bytes as f64) / 1e6,
            user_bytes: m.engine.user_bytes,
            write_amp: m.engine.write_amp,
            compactions: c.count,
            compaction_input_bytes: c.input_bytes,
            compaction_output_bytes: c.output_bytes,
            compaction_bandwidth_mb_s: c.bandwidth_mb_s,
            offloaded_jobs: offload.map_or(0, |o| o.jobs),
            retries: offload.map_or(0, |o| o.retries),
            races: offload.map_or(0, |o| o.races),
            races_won_by_host: offload.map_or(0, |o| o.races_won_by_host),
            host_pipelined_decisions: offload.map_or(0, |o| o.host_pipelined_decisions),
            host_sequential_decisions: offload.map_or(0, |o| o.host_sequential_decisions),
            host,
            workers,
            runs_ops_per_sec: Vec::new(),
        }
    }
}
