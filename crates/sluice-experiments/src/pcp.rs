//! The PCP experiment: the PCP paper's evaluation (sections III and IV) on this machine.
//!
//! | figure | what varies                        | executors                               |
//! |--------|------------------------------------|-----------------------------------------|
//! | 8      | value size 64..1024 B              | SCP: the share of time of each step S1..S7 |
//! | 10     | data set: num/4, num/2, num        | every `CompactionMode` (SCP, PCP, ...)  |
//! | 11     | sub-task size 64 KiB..4 MiB        | PCP, with SCP for reference             |
//! | 12a    | compute threads 1..4               | C-PPCP (`parallel`), SCP reference      |
//! | 12b    | data directories 1..4              | S-PPCP (`parallel` over N directories)  |
//!
//! Fig. 8 keeps the data set's bytes constant (`num` entries of 100-byte values' worth), so
//! larger values mean fewer entries, which is what moves time out of the merge step in the
//! document. Figs. 11 and 12a reuse the largest data set of Fig. 10; Fig. 12b loads one data
//! set per directory count so that reads, not only writes, are spread. On one storage device
//! Fig. 12b measures the cost of the directories, not extra device bandwidth.

use std::path::{Path, PathBuf};
use std::time::Instant;

use sluice::options::CompactionMode;
use sluice::{CompressionType, Error, Options, Result};
use sluice_bench::progress::Progress;

use crate::dataset::{Dataset, DatasetSpec, TARGET_FILE_BYTES};
use crate::machine_limit::{DISK_PROBE_BYTES, disk_write_mb_s, machine_limit};
use crate::measure::{ExecSettings, measure};
use crate::results::{Figure, PcpReport, Point, Series, Settings, executor_label, summarize};

/// Smallest `num`: below it the data sets of Fig. 10 fill too few memtables to merge.
pub const MIN_NUM: u64 = 10_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct PcpConfig {
    /// Entries of the largest data set (Fig. 10's last point; Figs. 11 and 12).
    pub num: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value, except in Fig. 8.
    pub value_size: usize,
    /// Fig. 8's value sizes.
    pub value_sizes: Vec<usize>,
    /// Fig. 11's sub-task sizes, bytes.
    pub sub_task_sizes: Vec<u64>,
    /// Fig. 12a runs 1..=max_threads compute threads.
    pub max_threads: usize,
    /// Fig. 12b runs 1..=max_dirs data directories.
    pub max_dirs: usize,
    /// Block compression.
    pub compression: CompressionType,
    /// Seed of key order and values.
    pub seed: u64,
    /// Runs per data point; the median is reported.
    pub repeat: usize,
    /// Compactions read and write with direct I/O, so S1 and S7 cost device time as in the
    /// document's measurements rather than page-cache copies.
    pub direct_io: bool,
    /// Draw a progress bar on stderr (callers set it only when stderr is a terminal).
    pub progress: bool,
}

impl Default for PcpConfig {
    fn default() -> Self {
        PcpConfig {
            num: 1_000_000,
            key_size: 16,
            value_size: 100,
            value_sizes: vec![64, 128, 256, 512, 1024],
            sub_task_sizes: (0..7).map(|i| (64 << 10) << i).collect(),
            max_threads: 4,
            max_dirs: 4,
            compression: CompressionType::Lz4,
            seed: 301,
            repeat: 1,
            direct_io: false,
            progress: false,
        }
    }
}

impl PcpConfig {
    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(msg));
        if self.num < MIN_NUM {
            return bad(format!("num must be at least {MIN_NUM}, got {}", self.num));
        }
        if !(1..=100).contains(&self.repeat) {
            return bad(format!(
                "repeat must be between 1 and 100, got {}",
                self.repeat
            ));
        }
        if !(1..=64).contains(&self.max_threads) || !(1..=64).contains(&self.max_dirs) {
            return bad("max_threads and max_dirs must be between 1 and 64".into());
        }
        if self.value_sizes.is_empty() || self.sub_task_sizes.is_empty() {
            return bad("value_sizes and sub_task_sizes must not be empty".into());
        }
        if let Some(&s) = self.sub_task_sizes.iter().find(|&&s| s < 4 << 10) {
            return bad(format!("sub-task sizes must be at least 4 KiB, got {s}"));
        }
        for &v in self.value_sizes.iter().chain([&self.value_size]) {
            if v > 1 << 20 {
                return bad(format!("value sizes must be at most 1 MiB, got {v}"));
            }
        }
        sluice_bench::keys::KeyFormat::new(self.key_size, self.num)?;
        Ok(())
    }

    /// Entries of Fig. 8's data set with `value_size`-byte values: as many bytes as `num`
    /// entries of `self.value_size`-byte values.
    pub fn entries_for_value_size(&self, value_size: usize) -> u64 {
        let bytes = self.num as u128 * (self.key_size + self.value_size) as u128;
        let entries = bytes / (self.key_size + value_size).max(1) as u128;
        u64::try_from(entries).unwrap_or(u64::MAX).max(1)
    }

    /// Fig. 10's data set sizes, ascending and distinct.
    pub fn data_set_sizes(&self) -> Vec<u64> {
        let mut sizes = vec![self.num / 4, self.num / 2, self.num];
        sizes.dedup();
        sizes
    }

    fn spec(&self, entries: u64, value_size: usize, data_dirs: usize) -> DatasetSpec {
        DatasetSpec {
            entries,
            key_size: self.key_size,
            value_size,
            compression: self.compression,
            seed: self.seed,
            data_dirs,
            direct_io: self.direct_io,
            memtable_bytes: None,
            output_table_bytes: None,
        }
    }

    /// Runs (loads and compactions) the experiment will make, for the progress bar.
    fn steps(&self) -> u64 {
        let sizes = self.data_set_sizes().len();
        let loads = sizes + self.max_dirs + self.value_sizes.len();
        let points = sizes * CompactionMode::ALL.len()
            + 2 * self.sub_task_sizes.len()
            + self.max_threads
            + self.max_dirs
            + self.value_sizes.len();
        (loads + points * self.repeat) as u64
    }
}

/// The executor settings used where a figure does not vary them.
fn default_exec(mode: CompactionMode) -> ExecSettings {
    let d = Options::default();
    ExecSettings {
        mode,
        sub_task_bytes: d.compaction.sub_task_bytes,
        compute_threads: d.compaction.compaction_threads,
    }
}

/// Runs the experiment, using `scratch` (an existing, preferably empty directory) for the
/// data sets and their copies; everything created there is removed as soon as it is measured.
pub fn run_pcp(config: &PcpConfig, scratch: &Path) -> Result<PcpReport> {
    config.validate()?;
    let start = Instant::now();
    let mut runner = Runner {
        config,
        scratch,
        progress: Progress::new(config.progress, "pcp", Some(config.steps())),
        loads: 0,
    };
    let outcome = runner.run_all();
    runner.progress.finish();
    let figures = outcome?;
    let fig10 = figures.iter().find(|f| f.id == "fig10");
    let summary = fig10.map(summarize).unwrap_or_default();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let disk = disk_write_mb_s(scratch, DISK_PROBE_BYTES)?;
    let machine_limit = fig10.and_then(|f| machine_limit(f, &summary, cpus, disk));
    let d = Options::default();
    Ok(PcpReport {
        experiment: "pcp".into(),
        document: "000".into(),
        settings: Settings {
            num: config.num,
            key_size: config.key_size,
            value_size: config.value_size,
            compression: config.compression.name().into(),
            seed: config.seed,
            repeat: config.repeat,
            direct_io: config.direct_io,
            block_size: d.table.block_size,
            target_file_size: TARGET_FILE_BYTES,
            sub_task_bytes: d.compaction.sub_task_bytes,
            compute_threads: d.compaction.compaction_threads,
            executors: CompactionMode::ALL
                .iter()
                .map(|m| m.name().to_string())
                .collect(),
            cpus,
        },
        figures,
        summary,
        machine_limit,
        elapsed_seconds: start.elapsed().as_secs_f64(),
    })
}

struct Runner<'a> {
    config: &'a PcpConfig,
    scratch: &'a Path,
    progress: Progress,
    /// Data sets loaded so far, to name their directories.
    loads: usize,
}

impl Runner<'_> {
    fn run_all(&mut self) -> Result<Vec<Figure>> {
        let (fig10, largest) = self.fig10()?;
        let outcome = self.on_largest(&largest, &fig10);
        remove(&largest.dir);
        let (fig11, fig12a) = outcome?;
        let fig12b = self.fig12b(&fig10)?;
        let fig8 = self.fig8()?;
        Ok(vec![fig8, fig10, fig11, fig12a, fig12b])
    }

    fn load(&mut self, spec: &DatasetSpec) -> Result<Dataset> {
        self.loads += 1;
        let dir: PathBuf = self.scratch.join(format!("data-{}", self.loads));
        tracing::info!(
            entries = spec.entries,
            value_size = spec.value_size,
            "loading"
        );
        let loaded = Dataset::load(spec, &dir);
        if loaded.is_err() {
            remove(&dir);
        }
        self.progress.inc(1);
        loaded
    }

    fn point(&self, ds: &Dataset, exec: ExecSettings, x: u64) -> Result<Point> {
        tracing::info!(executor = %exec.mode, x, "measuring");
        let measurement = measure(ds, exec, self.config.repeat, self.scratch)?;
        self.progress.inc(self.config.repeat as u64);
        Ok(Point {
            x,
            entries: ds.spec.entries,
            value_size: ds.spec.value_size,
            data_dirs: ds.spec.data_dirs,
            l0_files: ds.l0_files,
            exec,
            measurement,
        })
    }

    /// Fig. 10; also returns the largest data set, still on disk, for Figs. 11 and 12a.
    fn fig10(&mut self) -> Result<(Figure, Dataset)> {
        let mut series: Vec<Series> = CompactionMode::ALL.iter().map(|&m| new_series(m)).collect();
        let sizes = self.config.data_set_sizes();
        let mut largest = None;
        for (i, &entries) in sizes.iter().enumerate() {
            let ds = self.load(&self.config.spec(entries, self.config.value_size, 0))?;
            let measured: Result<()> =
                series
                    .iter_mut()
                    .zip(CompactionMode::ALL)
                    .try_for_each(|(s, mode)| {
                        s.points.push(self.point(&ds, default_exec(mode), entries)?);
                        Ok(())
                    });
            if i + 1 == sizes.len() && measured.is_ok() {
                largest = Some(ds);
            } else {
                remove(&ds.dir);
            }
            measured?;
        }
        let largest = largest
            .ok_or_else(|| Error::InvalidArgument("Fig. 10 has no data set sizes".into()))?;
        let figure = Figure {
            id: "fig10".into(),
            title: "Compaction bandwidth vs data set size".into(),
            x_label: "data set (entries)".into(),
            series,
        };
        Ok((figure, largest))
    }

    /// Figs. 11 and 12a, on the largest data set.
    fn on_largest(&mut self, ds: &Dataset, fig10: &Figure) -> Result<(Figure, Figure)> {
        let mut pcp = new_series(CompactionMode::Pipelined);
        let mut scp = new_series(CompactionMode::Sequential);
        for &bytes in &self.config.sub_task_sizes {
            for (mode, s) in [
                (CompactionMode::Pipelined, &mut pcp),
                (CompactionMode::Sequential, &mut scp),
            ] {
                let exec = ExecSettings {
                    sub_task_bytes: bytes,
                    ..default_exec(mode)
                };
                s.points.push(self.point(ds, exec, bytes)?);
            }
        }
        let fig11 = Figure {
            id: "fig11".into(),
            title: format!(
                "Compaction bandwidth vs sub-task size ({} entries)",
                ds.spec.entries
            ),
            x_label: "sub-task size (bytes of input)".into(),
            series: vec![pcp, scp],
        };
        let mut cppcp = new_series(CompactionMode::Parallel);
        for threads in 1..=self.config.max_threads {
            let exec = ExecSettings {
                compute_threads: threads,
                ..default_exec(CompactionMode::Parallel)
            };
            cppcp.points.push(self.point(ds, exec, threads as u64)?);
        }
        let fig12a = Figure {
            id: "fig12a".into(),
            title: "C-PPCP: bandwidth vs compute threads".into(),
            x_label: "compute threads".into(),
            series: vec![cppcp, scp_reference(fig10, self.config.max_threads)],
        };
        Ok((fig11, fig12a))
    }

    /// Fig. 12b: the parallel executor over 1..=max_dirs data directories.
    fn fig12b(&mut self, fig10: &Figure) -> Result<Figure> {
        let mut sppcp = new_series(CompactionMode::Parallel);
        sppcp.label = "S-PPCP (parallel, N directories)".into();
        for dirs in 1..=self.config.max_dirs {
            let ds = self.load(
                &self
                    .config
                    .spec(self.config.num, self.config.value_size, dirs),
            )?;
            let point = self.point(&ds, default_exec(CompactionMode::Parallel), dirs as u64);
            remove(&ds.dir);
            sppcp.points.push(point?);
        }
        Ok(Figure {
            id: "fig12b".into(),
            title: "S-PPCP: bandwidth vs data directories".into(),
            x_label: "data directories".into(),
            series: vec![sppcp, scp_reference(fig10, self.config.max_dirs)],
        })
    }

    /// Fig. 8: SCP's step profile per value size, at constant data set bytes.
    fn fig8(&mut self) -> Result<Figure> {
        let mut scp = new_series(CompactionMode::Sequential);
        for &value_size in &self.config.value_sizes {
            let entries = self.config.entries_for_value_size(value_size);
            let ds = self.load(&self.config.spec(entries, value_size, 0))?;
            let point = self.point(
                &ds,
                default_exec(CompactionMode::Sequential),
                value_size as u64,
            );
            remove(&ds.dir);
            scp.points.push(point?);
        }
        Ok(Figure {
            id: "fig8".into(),
            title: "SCP step breakdown vs value size".into(),
            x_label: "value size (bytes)".into(),
            series: vec![scp],
        })
    }
}

fn new_series(mode: CompactionMode) -> Series {
    Series {
        label: executor_label(mode),
        executor: mode.name().into(),
        reference: false,
        points: Vec::new(),
    }
}

/// SCP on Fig. 10's largest data set, repeated at x = 1..=n as a flat reference line.
fn scp_reference(fig10: &Figure, n: usize) -> Series {
    let base = fig10
        .series_of(CompactionMode::Sequential.name())
        .and_then(|s| s.points.last());
    Series {
        label: "SCP (reference)".into(),
        executor: CompactionMode::Sequential.name().into(),
        reference: true,
        points: base
            .map(|p| (1..=n as u64).map(|x| Point { x, ..p.clone() }).collect())
            .unwrap_or_default(),
    }
}

/// Removes a data set or run directory, logging (not failing) if that is impossible.
fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && dir.exists()
    {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove a scratch directory");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_the_document() {
        let c = PcpConfig::default();
        c.validate().unwrap();
        assert_eq!(c.sub_task_sizes.first(), Some(&(64 << 10)));
        assert_eq!(c.sub_task_sizes.last(), Some(&(4 << 20)));
        assert_eq!(c.data_set_sizes(), vec![250_000, 500_000, 1_000_000]);
        // Constant bytes: 1M entries of 16 + 100 bytes.
        assert_eq!(c.entries_for_value_size(100), 1_000_000);
        assert_eq!(c.entries_for_value_size(1024), 116_000_000 / 1040);
    }

    #[test]
    fn bad_parameters_are_named() {
        let c = PcpConfig {
            num: 10,
            ..PcpConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("num"));
        let c = PcpConfig {
            repeat: 0,
            ..PcpConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("repeat"));
        let c = PcpConfig {
            sub_task_sizes: vec![100],
            ..PcpConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("sub-task"));
    }
}
