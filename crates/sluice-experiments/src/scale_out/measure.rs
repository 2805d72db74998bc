//! The scale-out experiment's measurements, each on a fresh inverted LSM whose tables are in
//! the bucket ([`probes`](super::probes) beside the first): one compaction by the host alone, and
//! one per measured worker count with the whole job offloaded (a static split with a host
//! share of 0, so the host only checks and installs: the setting the model extrapolates).
//!
//! Every data point loads its data set under a prefix of its own (the same seed gives the same
//! tables), and removes its objects and directories afterwards, whatever the outcome. Neither
//! side has an object cache: a worker's ranged reads then fetch only its key range, which is
//! what lets the work spread (a whole-object cache would download every input table on every
//! worker).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sluice::compaction::remote::ShareReport;
use sluice::fs::{FileSystem, StoreRequests};
use sluice::{Db, Error, IoContext, Options, Result};
use sluice_object::ObjectFs;
use sluice_offload::{OffloadOptions, Secret, Split};

use super::probes::{BucketProbe, OpenProbe, probe_bucket, probe_opens, requests};
use crate::dataset::{Dataset, DatasetSpec};
use crate::workers::{WorkerProgram, WorkerSet, WorkerSettings, WorkerSpec};

/// One compaction of the data set, measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Worker processes; 0: the host compacted alone.
    pub workers: usize,
    /// Wall seconds of `compact_range` over the whole key space.
    pub seconds: f64,
    pub input_bytes: u64,
    pub input_tables: u64,
    /// The host's requests to the bucket during the compaction (the workers' are not seen).
    pub host_requests: StoreRequests,
    /// Each side's part (offloaded runs only).
    pub shares: Vec<ShareReport>,
    /// This process's CPU seconds during the compaction (the host: its own share, checks,
    /// gRPC and the bucket's client).
    pub host_cpu_seconds: f64,
    /// CPU seconds the whole machine spent busy during the compaction (every process and the
    /// kernel's threads: the bucket's server, writeback).
    pub machine_busy_seconds: f64,
    /// Each worker process's CPU seconds during the compaction (its compaction threads and
    /// the threads that talk to the bucket), in start order.
    pub worker_cpu_seconds: Vec<f64>,
}

impl Point {
    /// Input MB compacted a second.
    pub fn mb_per_second(&self) -> f64 {
        self.input_bytes as f64 / self.seconds.max(f64::MIN_POSITIVE) / 1e6
    }

    /// The workers' shares: every share but the host's.
    pub(super) fn worker_shares(&self) -> impl Iterator<Item = &ShareReport> {
        self.shares.iter().filter(|s| s.side != "host")
    }
}

/// Everything a data point needs.
pub struct Setup<'a> {
    /// The bucket URL the points' prefixes go under.
    pub url: &'a str,
    pub scratch: &'a Path,
    pub worker_program: &'a WorkerProgram,
    pub secret: &'a Secret,
    pub secret_file: &'a Path,
}

impl Setup<'_> {
    /// Loads a fresh data set, compacts it with `workers` workers (0: the host alone) and
    /// cleans up; with `probe`, first measures opening its tables.
    pub fn point(
        &self,
        spec: &DatasetSpec,
        workers: usize,
        run: usize,
        probe: bool,
    ) -> Result<(Point, OpenProbe, BucketProbe)> {
        let name = format!("w{workers}-n{}-r{run}", spec.entries);
        let dir = self.scratch.join(&name);
        let url = format!("{}/{name}", self.url.trim_end_matches('/'));
        let db_dir = dir.join("db");
        std::fs::create_dir_all(&dir).with_path(&dir)?;
        let fs = ObjectFs::from_url(Options::default().fs, &url, &db_dir)
            .map_err(|e| Error::InvalidArgument(format!("--object-store {url}: {e}")))?;
        let outcome = self.measure(spec, workers, probe, &fs, &url, &dir);
        let removed = sluice_object::remove_objects(&fs).with_path(Path::new(&url));
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(dir = %dir.display(), error = %e, "could not remove a run directory");
        }
        let point = outcome?;
        removed?;
        Ok(point)
    }

    fn measure(
        &self,
        spec: &DatasetSpec,
        workers: usize,
        probe: bool,
        fs: &ObjectFs,
        url: &str,
        dir: &Path,
    ) -> Result<(Point, OpenProbe, BucketProbe)> {
        let db_dir = dir.join("db");
        let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
        let dataset = Dataset::load_on(spec, &db_dir, Arc::clone(&shared))?;
        let (opens, bucket) = match probe {
            true => (probe_opens(fs, &db_dir)?, probe_bucket(fs, &db_dir)?),
            false => (OpenProbe::default(), BucketProbe::default()),
        };
        let set = match workers {
            0 => None,
            n => Some(self.start_workers(n, url, dir)?),
        };
        let addresses = set.as_ref().map(WorkerSet::addresses).unwrap_or_default();
        let mut options = Options {
            fs: shared,
            ..spec.options(&db_dir)
        };
        if !addresses.is_empty() {
            options.offload = Some(
                OffloadOptions {
                    split: Split::Static { host_share: 0.0 },
                    min_offload_bytes: 0,
                    // One task per worker: the model (docs/scale.md) is calibrated from a
                    // share's call, its opens and its check, one after another.
                    piece_bytes: 0,
                    ..OffloadOptions::new(addresses, self.secret.clone())
                }
                .into(),
            );
        }
        let db = Db::open(&db_dir, options)?;
        let before = requests(fs);
        let cpu_before = set.as_ref().map(WorkerSet::cpu_seconds).unwrap_or_default();
        let host_before = host_cpu_seconds()?;
        let machine_before = machine_busy_seconds()?;
        let start = Instant::now();
        db.compact_range(None, None)?;
        let seconds = start.elapsed().as_secs_f64();
        let host_requests = requests(fs).since(&before);
        let host_cpu_seconds = (host_cpu_seconds()? - host_before).max(0.0);
        let machine_busy_seconds = (machine_busy_seconds()? - machine_before).max(0.0);
        let cpu_after = set.as_ref().map(WorkerSet::cpu_seconds).unwrap_or_default();
        let worker_cpu_seconds = cpu_before
            .iter()
            .zip(&cpu_after)
            .map(|(b, a)| match (b, a) {
                (Some(b), Some(a)) => Ok((a - b).max(0.0)),
                _ => Err(Error::InvalidArgument(
                    "a worker's CPU time is unreadable (/proc/PID/stat)".into(),
                )),
            })
            .collect::<Result<Vec<f64>>>()?;
        let shares = db
            .metrics()
            .offload
            .map(|o| o.last_shares)
            .unwrap_or_default();
        db.close()?;
        if let Some(set) = set {
            set.stop()?;
        }
        let point = Point {
            workers,
            seconds,
            input_bytes: dataset.l0_bytes,
            input_tables: dataset.l0_files as u64,
            host_requests,
            shares,
            host_cpu_seconds,
            machine_busy_seconds,
            worker_cpu_seconds,
        };
        if workers > 0 && point.worker_shares().count() != workers {
            return Err(Error::InvalidArgument(format!(
                "{workers} workers, but the compaction reports shares {:?}: the split did not \
                 give every worker a part",
                point.shares
            )));
        }
        if let Some(retried) = point.shares.iter().find(|s| s.retried) {
            return Err(Error::InvalidArgument(format!(
                "the share of {} failed and was re-run on the host: not a measurement of \
                 {workers} workers (run with RUST_LOG=warn to see why)",
                retried.side
            )));
        }
        Ok((point, opens, bucket))
    }

    /// `n` workers, each in an empty directory of its own under `dir`, not pinned: on this
    /// machine the bucket's server shares their cores, and a worker pinned to a core would
    /// wait for the server's answers behind the other worker.
    fn start_workers(&self, n: usize, url: &str, dir: &Path) -> Result<WorkerSet> {
        let specs: Vec<WorkerSpec> = (0..n)
            .map(|i| {
                let root: PathBuf = dir.join(format!("worker-{i}"));
                std::fs::create_dir_all(&root).with_path(&root)?;
                Ok(WorkerSpec {
                    roots: vec![root],
                    cpu: None,
                })
            })
            .collect::<Result<_>>()?;
        WorkerSet::start(
            &WorkerSettings {
                program: self.worker_program,
                secret_file: self.secret_file,
                throttle: 1.0,
                log_dir: self.scratch,
                object_store: Some(url),
                // One thread per worker: its CPU seconds are then its critical path.
                mode: "sequential",
            },
            &specs,
        )
    }
}

/// This process's CPU seconds so far.
fn host_cpu_seconds() -> Result<f64> {
    let t = sluice_bench::resources::process_cpu_times().ok_or_else(|| {
        Error::InvalidArgument("this process's CPU time is unreadable (/proc/self/stat)".into())
    })?;
    Ok((t.user + t.system).as_secs_f64())
}

/// Seconds every core of the machine has been busy so far.
fn machine_busy_seconds() -> Result<f64> {
    let t = sluice_bench::resources::machine_busy_times().ok_or_else(|| {
        Error::InvalidArgument("the machine's CPU time is unreadable (/proc/stat)".into())
    })?;
    Ok(t.as_secs_f64())
}
