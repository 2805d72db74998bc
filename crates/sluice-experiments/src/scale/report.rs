//! What the scale experiment produces: one [`SizeReport`] per size and how each cost grows from
//! one size to the next ([`Growth`]). This is the schema of `scale.json`; the table and the
//! charts are drawn from it alone, and it reads back ([`ScaleReport::from_json`]).
//!
//! Units: bytes are bytes, MB/s is 10^6 bytes per second, seconds are wall-clock unless named
//! `cpu_seconds`. A `cpu_seconds` is `None` (`null`) where `/proc/self/stat` cannot be read.

use serde::{Deserialize, Serialize};
use sluice::{Error, Result};
use sluice_bench::shape::LsmShape;

use super::ScaleConfig;
use crate::copro::report::{median_by, ratio};

/// The fill of one size: fillrandom with automatic compactions on, until they are done.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FillRun {
    /// Writes made: the size.
    pub ops: u64,
    /// Key and value bytes the database accepted.
    pub user_bytes: u64,
    /// From the first write until the background work is done: `write_seconds + wait_seconds`.
    pub seconds: f64,
    /// Until the last write returned.
    pub write_seconds: f64,
    /// After it, waiting for the flushes and compactions the writes caused.
    pub wait_seconds: f64,
    /// Process CPU over `seconds`: the writer, flushes and compactions.
    pub cpu_seconds: Option<f64>,
    /// `ops / seconds`, as `sluice bench` reports fillrandom.
    pub ops_per_sec: f64,
    /// `user_bytes / seconds`, MB/s.
    pub mb_per_sec: f64,
    /// Table bytes written (flushes and compactions) per user byte; `None` without user bytes.
    /// The last memtable is not flushed (as in `sluice bench`), so this reads low at a size of
    /// a few memtables.
    pub write_amp: Option<f64>,
    /// Flushes and compactions that completed, and the compactions' bytes.
    pub flushes: u64,
    pub compactions: u64,
    pub compaction_input_bytes: u64,
    pub compaction_output_bytes: u64,
    /// Seconds writers spent stalled or slowed down by L0.
    pub write_stall_seconds: f64,
    /// The tree once the background work was done.
    pub lsm: LsmShape,
    /// `ops_per_sec` of every run, in the order they ran (the figures are the median run's).
    pub runs_ops_per_sec: Vec<f64>,
}

/// The inverted LSM of one size: what loading it left in L0, the compactions' input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct L0Load {
    /// Table files in L0.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Overlapping runs among them.
    pub sublevels: usize,
    /// Wall seconds of loading (the fill and the last flush; not a measurement of interest).
    pub seconds: f64,
}

/// One full manual compaction of the inverted LSM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompactionRun {
    /// `sequential` (`compact_range` with the sequential executor) or `parallel`
    /// (`compact_range_with` and `CompactOptions::parallel`).
    pub executor: String,
    /// Compute threads: 1, or for `parallel` one per CPU.
    pub threads: usize,
    /// Wall seconds of the call.
    pub seconds: f64,
    /// Process CPU over the call.
    pub cpu_seconds: Option<f64>,
    /// CPU the engine measured on the compaction jobs' own threads.
    pub job_cpu_seconds: f64,
    /// Compaction jobs the call ran.
    pub jobs: u64,
    /// Bytes read from L0, written to the output level, and entries written.
    pub input_bytes: u64,
    pub output_bytes: u64,
    pub output_entries: u64,
    /// `input_bytes / seconds`, MB/s.
    pub bandwidth_mb_s: f64,
    /// `seconds` of every run, in the order they ran (the figures are the median run's).
    pub runs_seconds: Vec<f64>,
}

/// Everything measured at one size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SizeReport {
    /// Keys written (N).
    pub entries: u64,
    pub fill: FillRun,
    pub l0: L0Load,
    pub sequential: CompactionRun,
    pub parallel: CompactionRun,
}

impl SizeReport {
    /// Sequential seconds over parallel seconds.
    pub fn parallel_speedup(&self) -> Option<f64> {
        ratio(self.sequential.seconds, self.parallel.seconds)
    }
}

/// How the costs grew from one size to the next, each as the exponent `k` of `cost ~ N^k`
/// between the two sizes: 1 is linear, above 1 each key costs more at the larger size. `None`
/// when a cost is missing or zero.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Growth {
    /// The smaller and the larger size.
    pub from_entries: u64,
    pub to_entries: u64,
    pub fill_seconds: Option<f64>,
    pub fill_cpu_seconds: Option<f64>,
    pub sequential_seconds: Option<f64>,
    pub sequential_cpu_seconds: Option<f64>,
    pub parallel_seconds: Option<f64>,
    pub parallel_cpu_seconds: Option<f64>,
}

impl Growth {
    /// From `a` to `b` (`b` the larger size).
    pub fn between(a: &SizeReport, b: &SizeReport) -> Growth {
        let size = ratio(b.entries as f64, a.entries as f64).filter(|r| *r > 1.0);
        let k = |from: Option<f64>, to: Option<f64>| -> Option<f64> {
            let cost = ratio(to?, from?).filter(|r| *r > 0.0)?;
            Some(cost.ln() / size?.ln())
        };
        Growth {
            from_entries: a.entries,
            to_entries: b.entries,
            fill_seconds: k(Some(a.fill.seconds), Some(b.fill.seconds)),
            fill_cpu_seconds: k(a.fill.cpu_seconds, b.fill.cpu_seconds),
            sequential_seconds: k(Some(a.sequential.seconds), Some(b.sequential.seconds)),
            sequential_cpu_seconds: k(a.sequential.cpu_seconds, b.sequential.cpu_seconds),
            parallel_seconds: k(Some(a.parallel.seconds), Some(b.parallel.seconds)),
            parallel_cpu_seconds: k(a.parallel.cpu_seconds, b.parallel.cpu_seconds),
        }
    }
}

/// The median of `runs` (at least one) by throughput, for an even count the lower middle, so
/// every figure comes from one real run; its `runs_ops_per_sec` lists every run.
pub fn median_fill(runs: Vec<FillRun>) -> Result<FillRun> {
    let (mut median, all) = median_by(runs, |r| r.ops_per_sec)
        .ok_or_else(|| Error::InvalidArgument("a fill needs at least one run".into()))?;
    median.runs_ops_per_sec = all;
    Ok(median)
}

/// The median of `runs` (at least one) by seconds, for an even count the faster middle run;
/// its `runs_seconds` lists every run.
pub fn median_compaction(runs: Vec<CompactionRun>) -> Result<CompactionRun> {
    let (mut median, all) = median_by(runs, |r| r.seconds)
        .ok_or_else(|| Error::InvalidArgument("a compaction needs at least one run".into()))?;
    median.runs_seconds = all;
    Ok(median)
}

/// The parameters of the run, so `scale.json` stands alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Keys of each size, ascending.
    pub sizes: Vec<u64>,
    pub key_size: usize,
    pub value_size: usize,
    pub compression: String,
    pub seed: u64,
    /// Runs per measurement (the median is reported).
    pub repeat: usize,
    /// Flushes and compactions used direct I/O.
    pub direct_io: bool,
    /// Automatic compactions at once during the fill.
    pub background_compactions: usize,
    /// Memtable bytes.
    pub write_buffer_size: usize,
    /// Compaction output file bytes.
    pub target_file_size: u64,
    /// Uncompressed data block bytes.
    pub block_size: usize,
    /// CPUs available to the process (the parallel compaction's threads).
    pub cpus: usize,
}

impl Settings {
    pub fn new(config: &ScaleConfig) -> Settings {
        Settings {
            sizes: config.sizes(),
            key_size: config.key_size,
            value_size: config.value_size,
            compression: config.compression.name().into(),
            seed: config.seed,
            repeat: config.repeat,
            direct_io: config.direct_io,
            background_compactions: config.background_compactions,
            write_buffer_size: config.write_buffer_size,
            target_file_size: config.target_file_size,
            block_size: config.options(true).table.block_size,
            cpus: cpus(),
        }
    }
}

/// CPUs available to the process.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScaleReport {
    /// `scale`.
    pub experiment: String,
    pub settings: Settings,
    /// One per size, ascending.
    pub sizes: Vec<SizeReport>,
    /// One per pair of consecutive sizes.
    pub growth: Vec<Growth>,
    /// Wall seconds of the whole experiment.
    pub elapsed_seconds: f64,
}

impl ScaleReport {
    /// The report of `sizes` (ascending), with the growth between them computed.
    pub fn new(settings: Settings, sizes: Vec<SizeReport>, elapsed_seconds: f64) -> ScaleReport {
        let growth = sizes
            .windows(2)
            .filter_map(|w| match w {
                [a, b] => Some(Growth::between(a, b)),
                _ => None,
            })
            .collect();
        ScaleReport {
            experiment: "scale".into(),
            settings,
            sizes,
            growth,
            elapsed_seconds,
        }
    }

    /// Pretty-printed JSON (plain numbers and strings cannot fail to serialize; a non-finite
    /// float becomes `null`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A report read back from its JSON (a `scale.json`).
    pub fn from_json(json: &str) -> Result<ScaleReport> {
        serde_json::from_str(json)
            .map_err(|e| Error::InvalidArgument(format!("not a scale experiment's JSON: {e}")))
    }
}
