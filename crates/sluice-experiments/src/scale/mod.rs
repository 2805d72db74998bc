//! The scale experiment: how the cost of writing and of compacting grows with the data (issue
//! 21, item 7, "Cost as work grows").
//!
//! For each size N in [`ScaleConfig::sizes`] (keys), on fresh databases with the engine's
//! default options except compression and direct I/O (so 64 MiB memtables and output files, as
//! `sluice bench` runs them):
//!
//! - **fill**: fillrandom of N keys with automatic compactions on (at most
//!   [`ScaleConfig::background_compactions`] at once), then a wait until the flushes and
//!   compactions it caused are done. Figures: seconds of the writes and of the wait, process
//!   CPU seconds, ops/s, MB/s of user data, write amplification.
//! - **compaction**: fillrandom of N keys with automatic compactions off (every memtable stays
//!   in L0), flushed; then one full manual compaction of it, by `compact_range` (the sequential
//!   executor) and by `compact_range_with` with `CompactOptions::parallel`. Figures: seconds,
//!   process CPU seconds, input and output bytes, MB/s (input bytes over seconds).
//!
//! Both fills are `sluice bench`'s fillrandom ([`sluice_bench::workloads::run_benchmark`]), so
//! keys and values are those of `sluice bench --benchmarks fillrandom --num N --seed S`: N keys
//! drawn uniformly from `[0, N)` with repeats (about 63% of them distinct), so the compaction
//! drops shadowed versions and writes less than it reads. As in `sluice bench`, the fill ends
//! with its last memtable unflushed (its data is in the WAL), so at a size of a few memtables
//! the write amplification reads low: 1M keys fill about three 64 MiB memtables.
//!
//! The inverted LSM is loaded once per size into a template directory. Each compaction runs on a
//! copy whose tables are hard links into the template (`dataset::link_tree`): tables are never
//! modified, and the compaction unlinks its inputs from the copy only, so both executors merge
//! the same files and a copy takes no disk space beyond the compaction's output. (The tables are
//! as warm in the page cache as the last fill left them; with `direct_io` the compactions
//! bypass the cache. The largest default size, 64M keys, is larger than this machine's page
//! cache can hold warm.)
//!
//! Seconds are wall-clock around the measured call; CPU seconds are the whole process's (user
//! plus system, [`sluice_bench::resources`]) over the same interval, so background threads
//! count. MB is 10^6 bytes. Sizes are key counts; the command line's `M` is 2^20.

pub mod charts;
pub mod report;
mod run;
pub mod table;

use std::path::{Path, PathBuf};
use std::time::Instant;

use sluice::{CompressionType, Error, IoContext, Options, Result};
use sluice_bench::progress::Progress;

pub use report::{CompactionRun, FillRun, ScaleReport, SizeReport};

/// Fewest keys of a size: below it the fills are over before there is anything to measure.
pub const MIN_SIZE: u64 = 10_000;
/// Most keys of a size (2^34): far beyond a disk's worth at the default entry size.
pub const MAX_SIZE: u64 = 1 << 34;
/// Automatic compactions at once during the fill unless set: the engine's default on this
/// two-core machine, and issue 21's "2 background threads".
pub const DEFAULT_BACKGROUND_COMPACTIONS: usize = 2;

/// What to run.
#[derive(Clone, Debug)]
pub struct ScaleConfig {
    /// Keys of each size; measured in ascending order (duplicates are measured once).
    pub sizes: Vec<u64>,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Block compression.
    pub compression: CompressionType,
    /// Seed of keys and values (`sluice bench --seed`).
    pub seed: u64,
    /// Runs per measurement; the median is reported.
    pub repeat: usize,
    /// Flushes and compactions read and write with direct I/O (`O_DIRECT`).
    pub direct_io: bool,
    /// Automatic compactions at once during the fill (`max_concurrent_compactions`).
    pub background_compactions: usize,
    /// Memtable bytes (the engine's default unless set; smaller makes more L0 files of a
    /// size, which lets a test merge several at a small size).
    pub write_buffer_size: usize,
    /// Compaction output file bytes (the engine's default unless set).
    pub target_file_size: u64,
    /// Draw a progress bar on stderr (callers set it only when stderr is a terminal).
    pub progress: bool,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        let engine = Options::default();
        ScaleConfig {
            sizes: vec![1 << 20, 4 << 20, 16 << 20, 64 << 20],
            key_size: 16,
            value_size: 100,
            compression: CompressionType::Lz4,
            seed: 301,
            repeat: 1,
            direct_io: false,
            background_compactions: DEFAULT_BACKGROUND_COMPACTIONS,
            write_buffer_size: engine.memtable.write_buffer_size,
            target_file_size: engine.compaction.target_file_size_base,
            progress: false,
        }
    }
}

impl ScaleConfig {
    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.sizes.is_empty() {
            return bad("sizes must not be empty".into());
        }
        if let Some(&n) = self
            .sizes
            .iter()
            .find(|&&n| !(MIN_SIZE..=MAX_SIZE).contains(&n))
        {
            return bad(format!(
                "sizes must be {MIN_SIZE}..={MAX_SIZE} keys, got {n}"
            ));
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!("repeat must be 1..=100, got {}", self.repeat));
        }
        if !(1..=64).contains(&self.background_compactions) {
            return bad(format!(
                "background compactions must be 1..=64, got {}",
                self.background_compactions
            ));
        }
        if self.value_size > 1 << 20 {
            return bad(format!(
                "value size must be at most 1 MiB, got {}",
                self.value_size
            ));
        }
        let largest = self.sizes().last().copied().unwrap_or(MIN_SIZE);
        sluice_bench::keys::KeyFormat::new(self.key_size, largest)?;
        self.options(true).validate()
    }

    /// The sizes in the order they are measured: ascending, each once.
    pub fn sizes(&self) -> Vec<u64> {
        let mut sizes = self.sizes.clone();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// Key and value bytes of a fill of `entries` keys.
    pub fn user_bytes(&self, entries: u64) -> u64 {
        entries.saturating_mul((self.key_size + self.value_size) as u64)
    }

    /// The options of a new database: the engine's defaults with this configuration's
    /// compression, direct I/O and sizes; automatic compactions on (the fill) or off (the
    /// inverted LSM, whose L0 then neither compacts nor stalls writes).
    pub(crate) fn options(&self, auto_compactions: bool) -> Options {
        let mut options = Options {
            create_if_missing: true,
            error_if_exists: true,
            ..Options::default()
        };
        options.memtable.write_buffer_size = self.write_buffer_size;
        options.table.compression = self.compression;
        let c = &mut options.compaction;
        c.target_file_size_base = self.target_file_size;
        c.disable_auto_compactions = !auto_compactions;
        c.max_concurrent_compactions = self.background_compactions;
        c.use_direct_io_for_flush_and_compaction = self.direct_io;
        // The executor of `compact_range`; `compact_range_with(parallel)` brings its own.
        c.mode = sluice::options::CompactionMode::Sequential;
        options
    }

    /// Fills, loads and compactions the experiment makes, for the progress bar.
    fn steps(&self) -> u64 {
        let per_size = 3 * self.repeat + 1;
        (self.sizes().len() * per_size) as u64
    }
}

/// Runs the experiment, using `scratch` (an existing, preferably empty directory) for the
/// databases; each is removed as soon as it is measured (also on failure).
pub fn run_scale(config: &ScaleConfig, scratch: &Path) -> Result<ScaleReport> {
    config.validate()?;
    let start = Instant::now();
    let progress = Progress::new(config.progress, "scale", Some(config.steps()));
    let runner = run::Runner {
        config,
        scratch,
        progress: &progress,
    };
    let outcome: Result<Vec<SizeReport>> = config
        .sizes()
        .into_iter()
        .map(|entries| runner.size(entries))
        .collect();
    progress.finish();
    Ok(ScaleReport::new(
        report::Settings::new(config),
        outcome?,
        start.elapsed().as_secs_f64(),
    ))
}

/// Writes `dir/scale.json` and the charts (PNG and SVG) into `dir`, creating it if needed.
/// Returns every path written, the JSON first.
pub fn write_outputs(report: &ScaleReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("scale.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(charts::write_charts(report, dir)?);
    Ok(written)
}

#[cfg(test)]
mod tests;
