//! What the scale-out model needs to know about the bucket and this machine beyond the
//! compactions themselves: what opening a table costs, how fast the bucket moves bytes when
//! several objects move at once, and how much slower two compactions run side by side than one
//! alone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use sluice::fs::{FileSystem, IoMode, Storage, StoreRequests};
use sluice::{CompactionMode, Db, Error, IoContext, Result};
use sluice_object::ObjectFs;
use sluice_sst::table::{Table, TableReadOptions};

use crate::dataset::{Dataset, DatasetSpec};

/// What opening every input table once, from the bucket and without a cache, cost.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpenProbe {
    pub tables: u64,
    pub requests: u64,
    pub seconds: f64,
}

/// What the bucket moves a second with [`PROBE_STREAMS`] objects of [`PROBE_BYTES`]
/// uploaded, then downloaded, at once: on this machine its server shares the cores and the
/// disk with everything else.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BucketProbe {
    pub upload_bytes_per_second: f64,
    pub download_bytes_per_second: f64,
    /// Ranged GETs of [`PROBE_READ_BYTES`] a second from one reader...
    pub gets_per_second_one: f64,
    /// ... and from [`PROBE_STREAMS`] readers at once, in all: what a single server does
    /// with requests that come together.
    pub gets_per_second_all: f64,
}

/// Objects the bucket probe moves at once.
pub const PROBE_STREAMS: usize = 4;
/// Bytes of each.
pub const PROBE_BYTES: usize = 8 << 20;
/// Bytes of each ranged GET of the request-rate probe (a compaction's reads start at this
/// window and grow to 2 MiB).
pub const PROBE_READ_BYTES: usize = 64 << 10;
/// Ranged GETs each reader of the request-rate probe makes.
const PROBE_READS: usize = 32;

/// Opens every table of the freshly loaded database in `db_dir` once, from the bucket
/// through `fs` and without a block cache, counting the requests and the time they take.
pub(super) fn probe_opens(fs: &ObjectFs, db_dir: &Path) -> Result<OpenProbe> {
    let names = sluice_object::list_objects(fs).with_path(db_dir)?;
    let tables: Vec<(PathBuf, u64)> = names
        .iter()
        .filter_map(|name| {
            let file = name.rsplit('/').next()?;
            let number = file.strip_suffix(".sst")?.parse::<u64>().ok()?;
            Some((db_dir.join(file), number))
        })
        .collect();
    let shared: Arc<dyn FileSystem> = Arc::new(fs.clone());
    let before = requests(fs);
    let start = Instant::now();
    for (path, number) in &tables {
        let opts = TableReadOptions {
            storage: Storage::new(Arc::clone(&shared), IoMode::Buffered),
            load_filter: false,
            ..TableReadOptions::default()
        };
        Table::open(path, *number, opts)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(OpenProbe {
        tables: tables.len() as u64,
        requests: requests(fs).since(&before).requests(),
        seconds,
    })
}

/// Uploads [`PROBE_STREAMS`] objects of [`PROBE_BYTES`] at once (tables of numbers no
/// database uses, next to the database in `db_dir`), downloads them at once, and removes them.
pub(super) fn probe_bucket(fs: &ObjectFs, db_dir: &Path) -> Result<BucketProbe> {
    let paths: Vec<PathBuf> = (0..PROBE_STREAMS)
        .map(|i| db_dir.join(format!("{:06}.sst", 900_000 + i)))
        .collect();
    let body: Vec<u8> = (0..PROBE_BYTES).map(|i| (i % 251) as u8).collect();
    let total = (PROBE_STREAMS * PROBE_BYTES) as f64;
    // Seconds to run `each` on every path at once.
    let timed = |each: &(dyn Fn(&Path) -> std::io::Result<()> + Sync)| -> Result<f64> {
        let start = Instant::now();
        std::thread::scope(|scope| {
            let runs: Vec<_> = paths.iter().map(|p| scope.spawn(move || each(p))).collect();
            runs.into_iter()
                .zip(&paths)
                .try_for_each(|(run, path)| match run.join() {
                    Ok(outcome) => outcome.with_path(path),
                    Err(_) => Err(Error::InvalidArgument(format!(
                        "the bucket probe of {} panicked",
                        path.display()
                    ))),
                })
        })?;
        Ok(start.elapsed().as_secs_f64().max(1e-9))
    };
    let upload = total
        / timed(&|path| {
            let mut file = fs.create(path, IoMode::Buffered)?;
            file.append(&body)?;
            file.sync()
        })?;
    let download = total
        / timed(&|path| {
            let file = fs.open_read(path, IoMode::Buffered)?;
            let mut buf = vec![0u8; PROBE_BYTES];
            file.read_exact_at(&mut buf, 0)
        })?;
    // Ranged reads scattered over the object, so that no read continues another and each is
    // one GET of its own.
    let gets = |path: &Path| -> std::io::Result<()> {
        let file = fs.open_read(path, IoMode::Buffered)?;
        let slots = PROBE_BYTES / PROBE_READ_BYTES;
        let mut buf = vec![0u8; PROBE_READ_BYTES];
        for k in 0..PROBE_READS {
            let offset = (k * 37 % slots * PROBE_READ_BYTES) as u64;
            file.read_exact_at(&mut buf, offset)?;
        }
        Ok(())
    };
    let one = {
        let start = Instant::now();
        gets(&paths[0]).with_path(&paths[0])?;
        PROBE_READS as f64 / start.elapsed().as_secs_f64().max(1e-9)
    };
    let all = (PROBE_STREAMS * PROBE_READS) as f64 / timed(&gets)?;
    for path in &paths {
        fs.remove(path).with_path(path)?;
    }
    Ok(BucketProbe {
        upload_bytes_per_second: upload,
        download_bytes_per_second: download,
        gets_per_second_one: one,
        gets_per_second_all: all,
    })
}

/// What `fs` has asked the bucket so far.
pub(super) fn requests(fs: &ObjectFs) -> StoreRequests {
    fs.store_requests().unwrap_or_default()
}

/// How much slower a compaction runs beside another than alone on this machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreProbe {
    /// Seconds of one sequential compaction of a local copy, alone.
    pub alone_seconds: f64,
    /// Seconds of two such compactions at once, each its own copy (the slower).
    pub together_seconds: f64,
}

impl CoreProbe {
    /// Seconds of work together per second alone: 1.0 where the cores do not get in each
    /// other's way (shared caches and memory bandwidth make it more).
    pub fn slowdown(&self) -> f64 {
        (self.together_seconds / self.alone_seconds.max(1e-9)).max(1.0)
    }
}

/// Loads `spec` on local disk in `dir`, then times one sequential compaction of a copy of it
/// alone and two of two copies at once, each in its own database and thread.
pub(super) fn probe_cores(spec: &DatasetSpec, dir: &Path) -> Result<CoreProbe> {
    let outcome = time_compactions(spec, dir);
    // Whatever the outcome, the probe leaves nothing behind.
    let removed = std::fs::remove_dir_all(dir).with_path(dir);
    let probe = outcome?;
    removed?;
    Ok(probe)
}

fn time_compactions(spec: &DatasetSpec, dir: &Path) -> Result<CoreProbe> {
    let template = Dataset::load(spec, &dir.join("template"))?;
    let compact = |name: &str| -> Result<f64> {
        let copy = dir.join(name);
        let mut options = template.copy_to(&copy)?;
        options.compaction.mode = CompactionMode::Sequential;
        let db = Db::open(&copy, options)?;
        let start = Instant::now();
        db.compact_range(None, None)?;
        let seconds = start.elapsed().as_secs_f64();
        db.close()?;
        std::fs::remove_dir_all(&copy).with_path(&copy)?;
        Ok(seconds)
    };
    let alone_seconds = compact("alone")?;
    let together_seconds = std::thread::scope(|scope| {
        let runs: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| scope.spawn(move || compact(name)))
            .collect();
        runs.into_iter()
            .try_fold(0.0f64, |slowest, run| match run.join() {
                Ok(seconds) => Ok(slowest.max(seconds?)),
                Err(_) => Err(Error::InvalidArgument(
                    "a core probe compaction panicked".into(),
                )),
            })
    })?;
    Ok(CoreProbe {
        alone_seconds,
        together_seconds,
    })
}
