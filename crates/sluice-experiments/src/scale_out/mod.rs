//! How far offloaded compaction scales (issue 37, item 5): `sluice experiment scale-out`.
//!
//! The experiment measures, on this machine and with the tables in a bucket, one compaction
//! of an inverted LSM by the host alone, and the same compaction offloaded whole to 1 and 2
//! worker processes that reach the data only through the bucket ([`measure`]). From the host
//! run, probes of table opens and of the bucket's bandwidth, and one worker compacting the
//! whole data set and half of it, it calibrates a model of a compaction
//! split over N workers ([`model`]: the workers' CPU and request waits, the bucket's request
//! rate, the network, the host's checks and install), and prints the model's prediction for
//! 1 to 64 workers beside the measured points. `docs/scale.md` explains the model and where
//! it breaks.
//!
//! The measured one-worker point is a calibration run: its prediction only shows that the
//! model's parts add up to the whole. The two-worker point is out of sample: it tests how the
//! parts compose when workers run at once.

pub mod calibrate;
pub mod charts;
pub mod measure;
pub mod model;
pub mod probes;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sluice::{CompressionType, Error, IoContext, Result};
use sluice_offload::Secret;

use self::measure::{Point, Setup};
use self::model::{Calibration, Cluster, Job, Prediction};
use self::probes::{BucketProbe, CoreProbe, OpenProbe};
use crate::Experiment;
use crate::copro::report::median_by;
use crate::dataset::DatasetSpec;
use crate::workers::{WorkerProgram, write_secret_file};

/// Worker counts the model predicts by default.
pub const PREDICTED_WORKERS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];
/// Keys of the data set by default.
pub const DEFAULT_NUM: u64 = 2_000_000;
/// Memtable and output table bytes by default: tables of a few MB, as an object store wants
/// (each open is a few requests whatever the size).
pub const DEFAULT_TABLE_BYTES: u64 = 8 << 20;
/// Input bytes of the predicted compaction by default: 16 GB, an L0 to base-level compaction
/// of a large database, or a full compaction of a moderate one.
pub const DEFAULT_PREDICTED_BYTES: u64 = 16_000_000_000;
/// The host's cores in the "what if" column by default.
pub const DEFAULT_CHECK_THREADS: usize = 8;

/// What to run.
#[derive(Clone, Debug)]
pub struct ScaleOutConfig {
    /// Keys of the data set, each written once.
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub compression: CompressionType,
    pub seed: u64,
    /// Memtable bytes (each L0 table is about this much data, compressed).
    pub memtable_bytes: usize,
    /// Compaction output table bytes.
    pub output_table_bytes: u64,
    /// The bucket: `s3://bucket/prefix` (endpoint and credentials from `AWS_*`), or
    /// `file:///dir`; `None` keeps the objects in the scratch directory (the store's local
    /// backend: no request latency).
    pub object_store: Option<String>,
    /// Worker counts to measure (besides the host alone), on this machine's cores beside the
    /// host and (for a local bucket) its server.
    pub measured_workers: Vec<usize>,
    /// Worker counts to predict.
    pub predicted_workers: Vec<usize>,
    /// Input bytes of the predicted compaction: the measured one grown to this size, with
    /// tables of the same size in as many runs.
    pub predicted_bytes: u64,
    /// The host's cores in the "what if" column: shares it checks at once.
    pub check_threads: usize,
    /// Runs per measured point; the median is reported.
    pub repeat: usize,
    pub worker_program: WorkerProgram,
}

impl ScaleOutConfig {
    /// The defaults, with workers started as `worker_program`: 2M keys of 16 + 100 bytes,
    /// lz4, 8 MiB memtables and 8 MiB output tables, 1 and 2 workers measured.
    pub fn new(worker_program: WorkerProgram) -> ScaleOutConfig {
        ScaleOutConfig {
            num: DEFAULT_NUM,
            key_size: 16,
            value_size: 100,
            compression: CompressionType::Lz4,
            seed: 301,
            memtable_bytes: DEFAULT_TABLE_BYTES as usize,
            output_table_bytes: DEFAULT_TABLE_BYTES,
            object_store: None,
            measured_workers: vec![1, 2],
            predicted_workers: PREDICTED_WORKERS.to_vec(),
            predicted_bytes: DEFAULT_PREDICTED_BYTES,
            check_threads: DEFAULT_CHECK_THREADS,
            repeat: 1,
            worker_program,
        }
    }

    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: &str| Err(Error::InvalidArgument(msg.into()));
        if self.num < 20_000 {
            return bad("--num must be at least 20000 (half of it is measured too)");
        }
        if !self.measured_workers.contains(&1) {
            return bad("--measured-workers must include 1: the model is calibrated from it");
        }
        if self.measured_workers.iter().any(|&n| n == 0 || n > 64) {
            return bad("--measured-workers must be between 1 and 64");
        }
        if self.predicted_workers.iter().any(|&n| n == 0 || n > 4096) {
            return bad("--predicted-workers must be between 1 and 4096");
        }
        if self.predicted_bytes == 0 {
            return bad("--predicted-bytes must be above 0");
        }
        if self.check_threads == 0 {
            return bad("--check-threads must be at least 1");
        }
        if self.repeat == 0 {
            return bad("--repeat must be at least 1");
        }
        Ok(())
    }

    /// The data set of `entries` keys.
    fn spec(&self, entries: u64) -> DatasetSpec {
        DatasetSpec {
            entries,
            key_size: self.key_size,
            value_size: self.value_size,
            compression: self.compression,
            seed: self.seed,
            data_dirs: 0,
            direct_io: false,
            memtable_bytes: Some(self.memtable_bytes),
            output_table_bytes: Some(self.output_table_bytes),
        }
    }
}

/// A measured worker count beside what the model says for this machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checked {
    pub measured: Point,
    pub predicted: Prediction,
    /// `predicted / measured - 1` of the seconds.
    pub error: f64,
}

/// Everything the experiment found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleOutReport {
    /// `scale-out`.
    pub experiment: String,
    /// The bucket, as given (or `file://` in the scratch directory).
    pub object_store: String,
    pub cores: usize,
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub host_only: Point,
    pub opens: OpenProbe,
    pub bucket: BucketProbe,
    pub cores_probe: CoreProbe,
    /// One worker compacting half the data set: with the one-worker point, it tells a
    /// worker's and a check's fixed costs from their costs per byte.
    pub one_worker_half: Point,
    pub calibration: Calibration,
    /// The measured compaction.
    pub measured_job: Job,
    /// The measured worker counts, against the model run as this machine.
    pub checked: Vec<Checked>,
    /// The model for workers on machines of their own, S3 Standard's request rates, a 10 Gb/s
    /// network, and a host of this machine's cores checking that many shares at once.
    pub cluster: Cluster,
    /// The predicted compaction.
    pub predicted_job: Job,
    pub predicted: Vec<Prediction>,
    /// The same with a host of `check_threads` cores.
    pub parallel_checks: Cluster,
    pub predicted_parallel_checks: Vec<Prediction>,
    pub elapsed_seconds: f64,
}

impl ScaleOutReport {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }
}

/// Runs the experiment in `scratch` (databases, worker directories and logs, and the objects
/// when no bucket is given), removing each point's files and objects as it goes.
pub fn run_scale_out(config: &ScaleOutConfig, scratch: &Path) -> Result<ScaleOutReport> {
    config.validate()?;
    let started = Instant::now();
    let url = match &config.object_store {
        Some(url) => url.clone(),
        None => {
            let bucket = scratch.join("bucket");
            std::fs::create_dir_all(&bucket).with_path(&bucket)?;
            format!("file://{}", bucket.display())
        }
    };
    let secret_file = scratch.join("secret");
    let secret: Secret = write_secret_file(&secret_file)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let spec = config.spec(config.num);
    let half = config.spec(config.num / 2);
    let setup = Setup {
        url: &url,
        scratch,
        worker_program: &config.worker_program,
        secret: &secret,
        secret_file: &secret_file,
    };
    let (host_only, opens, bucket) =
        median_of(config.repeat, |run| setup.point(&spec, 0, run, run == 0))?;
    let one_of_half = median_of(config.repeat, |run| setup.point(&half, 1, run, false))?.0;
    let mut measured = Vec::new();
    for &n in &config.measured_workers {
        measured.push(median_of(config.repeat, |run| setup.point(&spec, n, run, false))?.0);
    }
    let one = measured
        .iter()
        .find(|p| p.workers == 1)
        .ok_or_else(|| Error::InvalidArgument("no one-worker point".into()))?;
    // Two compactions at once on local disk, of a data set an eighth the size in about 16
    // runs whatever --table-size says, so that even the smallest data set makes several.
    let small = DatasetSpec {
        memtable_bytes: None,
        output_table_bytes: None,
        ..config.spec(config.num / 8)
    };
    let cores_probe = probes::probe_cores(&small, &scratch.join("cores"))?;
    let calibration = calibrate::calibrate(&host_only, &opens, &bucket, one, &one_of_half)?;
    let measured_job = calibrate::job(one);
    let predicted_job = measured_job.scaled_to(config.predicted_bytes);
    let machine = Cluster::this_machine(cores, cores_probe.slowdown(), bucket.gets_per_second_all);
    let counts: Vec<usize> = measured.iter().map(|p| p.workers).collect();
    let checked = model::predict(&calibration, &machine, &measured_job, &counts)
        .into_iter()
        .zip(measured)
        .map(|(predicted, measured)| Checked {
            error: predicted.seconds / measured.seconds.max(f64::MIN_POSITIVE) - 1.0,
            measured,
            predicted,
        })
        .collect();
    let cluster = Cluster::s3_standard(cores);
    let parallel_checks = Cluster {
        check_threads: config.check_threads,
        ..cluster.clone()
    };
    Ok(ScaleOutReport {
        experiment: Experiment::ScaleOut.name().into(),
        object_store: url,
        cores,
        num: config.num,
        key_size: config.key_size,
        value_size: config.value_size,
        predicted: model::predict(
            &calibration,
            &cluster,
            &predicted_job,
            &config.predicted_workers,
        ),
        predicted_parallel_checks: model::predict(
            &calibration,
            &parallel_checks,
            &predicted_job,
            &config.predicted_workers,
        ),
        measured_job,
        predicted_job,
        host_only,
        opens,
        bucket,
        cores_probe,
        one_worker_half: one_of_half,
        calibration,
        checked,
        cluster,
        parallel_checks,
        elapsed_seconds: started.elapsed().as_secs_f64(),
    })
}

/// The run with the median seconds of `repeat` runs of `run` (the lower middle, so one real
/// run), with the probes of the run that made them (the first).
fn median_of(
    repeat: usize,
    mut run: impl FnMut(usize) -> Result<(Point, OpenProbe, BucketProbe)>,
) -> Result<(Point, OpenProbe, BucketProbe)> {
    let runs = (0..repeat).map(&mut run).collect::<Result<Vec<_>>>()?;
    let probes = runs
        .first()
        .map(|(_, opens, bucket)| (opens.clone(), bucket.clone()));
    match (median_by(runs, |r| r.0.seconds), probes) {
        (Some(((median, _, _), _)), Some((opens, bucket))) => Ok((median, opens, bucket)),
        _ => Err(Error::InvalidArgument(
            "a data point needs at least one run".into(),
        )),
    }
}

/// Writes `dir/scale-out.json` and the chart into `dir`, creating it; returns the paths.
pub fn write_outputs(report: &ScaleOutReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("scale-out.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(charts::write_charts(report, dir)?);
    Ok(written)
}
