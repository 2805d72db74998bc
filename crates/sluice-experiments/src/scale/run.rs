//! The measurements of one size: the fills (fresh databases, `sluice bench`'s fillrandom) and
//! the compactions of the inverted LSM (hard-linked copies of one loaded template).

use std::path::Path;

use sluice::{CompactOptions, Db, Error, Result};
use sluice_bench::delta::MetricsDelta;
use sluice_bench::progress::Progress;
use sluice_bench::resources::ResourceSample;
use sluice_bench::workloads::run_benchmark;
use sluice_bench::{BenchConfig, BenchResult, Benchmark};

use super::ScaleConfig;
use super::report::{
    CompactionRun, FillRun, L0Load, SizeReport, cpus, median_compaction, median_fill,
};
use crate::dataset::link_tree;

/// The two ways of running the full manual compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Executor {
    /// `compact_range`: the configured (sequential) executor.
    Sequential,
    /// `compact_range_with` and `CompactOptions::parallel`, one compute thread per CPU.
    Parallel,
}

impl Executor {
    fn name(self) -> &'static str {
        match self {
            Executor::Sequential => "sequential",
            Executor::Parallel => "parallel",
        }
    }
}

/// What every measurement shares.
pub(super) struct Runner<'a> {
    pub config: &'a ScaleConfig,
    pub scratch: &'a Path,
    pub progress: &'a Progress,
}

impl Runner<'_> {
    /// Measures `entries` keys: `repeat` fills, then one inverted LSM loaded and compacted
    /// `repeat` times by each executor (alternating, so a drift in the shared machine's speed
    /// touches both alike).
    pub fn size(&self, entries: u64) -> Result<SizeReport> {
        let mut fills = Vec::with_capacity(self.config.repeat);
        for i in 0..self.config.repeat {
            tracing::info!(entries, run = i, "scale: fillrandom");
            let dir = self.scratch.join(format!("fill-{entries}-{i}"));
            fills.push(in_dir(&dir, || self.fill(entries, &dir))?);
            self.progress.inc(1);
        }
        let template = self.scratch.join(format!("l0-{entries}"));
        tracing::info!(entries, "scale: loading the inverted LSM");
        let measured = self.load_l0(entries, &template).and_then(|l0| {
            self.progress.inc(1);
            let runs = self.compactions(&template)?;
            Ok((l0, runs))
        });
        remove(&template);
        let (l0, (sequential, parallel)) = measured?;
        Ok(SizeReport {
            entries,
            fill: median_fill(fills)?,
            l0,
            sequential: median_compaction(sequential)?,
            parallel: median_compaction(parallel)?,
        })
    }

    /// `sluice bench --benchmarks fillrandom` at this size (ordinal 0, so its keys and values).
    fn bench(&self, entries: u64) -> BenchConfig {
        BenchConfig {
            benchmarks: vec![Benchmark::FillRandom],
            num: entries,
            reads: entries,
            key_size: self.config.key_size,
            value_size: self.config.value_size,
            threads: 1,
            seed: self.config.seed,
            sync: false,
            progress: false,
        }
    }

    /// Fills a new database in `dir` with automatic compactions on, until they are done.
    fn fill(&self, entries: u64, dir: &Path) -> Result<FillRun> {
        let db = Db::open(dir, self.config.options(true))?;
        let r = run_benchmark(&self.bench(entries), &db, Benchmark::FillRandom, 0);
        db.close()?;
        Ok(fill_run(&r?))
    }

    /// Loads the inverted LSM into `dir`: a fill with automatic compactions off, its last
    /// memtable flushed, the database closed. Fails if L0 holds fewer than two tables, which
    /// the manual compaction would move down without a merge.
    fn load_l0(&self, entries: u64, dir: &Path) -> Result<L0Load> {
        let db = Db::open(dir, self.config.options(false))?;
        let loaded = run_benchmark(&self.bench(entries), &db, Benchmark::FillRandom, 0)
            .and_then(|r| db.flush().map(|()| r));
        let metrics = db.metrics();
        db.close()?;
        let r = loaded?;
        let l0 = metrics.levels.first().cloned().unwrap_or_default();
        if l0.files < 2 {
            return Err(Error::InvalidArgument(format!(
                "{entries} keys of {} bytes made {} L0 table(s) with a {} byte memtable: too \
                 few to merge (use a larger size or a smaller --write-buffer-size)",
                self.config.key_size + self.config.value_size,
                l0.files,
                self.config.write_buffer_size
            )));
        }
        Ok(L0Load {
            files: l0.files,
            bytes: l0.size_bytes,
            sublevels: metrics.l0_sublevels,
            seconds: r.seconds,
        })
    }

    /// Every compaction of the template in `template`: (sequential runs, parallel runs).
    fn compactions(&self, template: &Path) -> Result<(Vec<CompactionRun>, Vec<CompactionRun>)> {
        let mut sequential = Vec::with_capacity(self.config.repeat);
        let mut parallel = Vec::with_capacity(self.config.repeat);
        for i in 0..self.config.repeat {
            for (executor, runs) in [
                (Executor::Sequential, &mut sequential),
                (Executor::Parallel, &mut parallel),
            ] {
                tracing::info!(executor = executor.name(), run = i, "scale: compacting");
                let dir = self.scratch.join(format!("{}-{i}", executor.name()));
                runs.push(in_dir(&dir, || self.compact(template, &dir, executor))?);
                self.progress.inc(1);
            }
        }
        Ok((sequential, parallel))
    }

    /// One full manual compaction of a copy of `template` in `dir`.
    fn compact(&self, template: &Path, dir: &Path, executor: Executor) -> Result<CompactionRun> {
        link_tree(template, dir)?;
        let mut options = self.config.options(false);
        options.create_if_missing = false;
        options.error_if_exists = false;
        let db = Db::open(dir, options)?;
        let before = db.metrics();
        let start = ResourceSample::now();
        let compacted = match executor {
            Executor::Sequential => db.compact_range(None, None),
            Executor::Parallel => db.compact_range_with(
                None,
                None,
                &CompactOptions {
                    parallel: true,
                    ..CompactOptions::default()
                },
            ),
        };
        let end = ResourceSample::now();
        let after = db.metrics();
        db.close()?;
        compacted?;
        let engine = MetricsDelta::between(&before, &after);
        let cpu_seconds = start.usage_until(&end, &engine).cpu.total_seconds;
        let seconds = end.at.duration_since(start.at).as_secs_f64();
        let c = &engine.compaction;
        let left_in_l0 = after.levels.first().map_or(0, |l| l.files);
        if c.input_bytes == 0 || left_in_l0 > 0 {
            return Err(Error::InvalidArgument(format!(
                "the {} compaction read {} bytes and left {left_in_l0} L0 table(s): not one \
                 full merge of L0",
                executor.name(),
                c.input_bytes
            )));
        }
        Ok(CompactionRun {
            executor: executor.name().into(),
            threads: match executor {
                Executor::Sequential => 1,
                Executor::Parallel => cpus(),
            },
            seconds,
            cpu_seconds,
            job_cpu_seconds: c.cpu_seconds,
            jobs: c.count,
            input_bytes: c.input_bytes,
            output_bytes: c.output_bytes,
            output_entries: after
                .compaction
                .entries_out
                .saturating_sub(before.compaction.entries_out),
            bandwidth_mb_s: if seconds > 0.0 {
                c.input_bytes as f64 / seconds / 1e6
            } else {
                0.0
            },
            runs_seconds: Vec::new(),
        })
    }
}

/// The fill's figures from the benchmark's result.
fn fill_run(r: &BenchResult) -> FillRun {
    let e = &r.engine;
    FillRun {
        ops: r.ops,
        user_bytes: e.user_bytes,
        seconds: r.seconds,
        write_seconds: (r.seconds - r.wait_seconds).max(0.0),
        wait_seconds: r.wait_seconds,
        cpu_seconds: r.process.cpu.total_seconds,
        ops_per_sec: r.ops_per_sec,
        mb_per_sec: if r.seconds > 0.0 {
            e.user_bytes as f64 / r.seconds / 1e6
        } else {
            0.0
        },
        write_amp: e.write_amp,
        flushes: e.flush.count,
        compactions: e.compaction.count,
        compaction_input_bytes: e.compaction.input_bytes,
        compaction_output_bytes: e.compaction.output_bytes,
        write_stall_seconds: e.write_stall_micros as f64 / 1e6,
        lsm: r.lsm.clone(),
        runs_ops_per_sec: Vec::new(),
    }
}

/// Runs `f`, which creates `dir`, then removes `dir` whatever the outcome.
fn in_dir<T>(dir: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let outcome = f();
    remove(dir);
    outcome
}

/// Removes a database directory, logging (not failing) if that is impossible.
fn remove(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && dir.exists()
    {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove a scratch directory");
    }
}
