//! Manual compaction: `compact_range` pushes everything in a key range down the tree.
//!
//! Level by level from the top, as LevelDB and Pebble's `manualCompact` do: each level's
//! files in the range are compacted with the overlapping files of the next level, and the next
//! level starts only when that is installed. Files with nothing to merge with move down by a
//! version edit instead of being rewritten (`compaction::manual_pick`). With [`CompactOptions::parallel`] each level's
//! compaction is cut into sub-tasks by its data (the planner's key ranges of about
//! `sub_task_bytes`, not the gaps between files, so even an L0 of overlapping random-key files
//! splits evenly) and run by the parallel executor, with a compute thread per core unless
//! [`CompactOptions::threads`] says how many.
//!
//! Progress is reported to a callback from a ticker thread, and the cancel flag, which the
//! running compaction's writer looks at before every output block, stops it there: its outputs
//! are deleted, levels already finished stay compacted, and the tree is consistent either way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sluice_exec::{CompactionMode, ExecOptions, JobControl};

use super::Compaction;
use super::choose::Request;
use super::manual_pick::{pick_in_place, pick_manual};
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;
use crate::{Error, Result};

/// How often progress is reported and the cancel flag looked at.
const TICK: Duration = Duration::from_millis(100);

/// Where a manual compaction is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactProgress {
    /// The level being compacted.
    pub level: usize,
    /// The level it is compacted into: the next one, or for L0 the base level.
    pub output_level: usize,
    /// Levels done so far, and to do in all (levels holding data in the range).
    pub levels_done: usize,
    /// Levels to compact.
    pub levels: usize,
    /// Input bytes of the running level's compaction read so far.
    pub bytes_done: u64,
    /// Input bytes of the running level's compaction.
    pub bytes_total: u64,
    /// Compute threads working on the level's pieces (sub-tasks).
    pub pieces_running: usize,
}

/// Called with progress about every 100 ms and when each level ends.
pub type ProgressFn = dyn Fn(&CompactProgress) + Send + Sync;

/// How [`crate::Db::compact_range_with`] runs.
#[derive(Clone, Default)]
pub struct CompactOptions {
    /// Split each level's compaction by data and run the pieces on `threads` compute
    /// threads of the parallel executor; `false` uses the configured executor.
    pub parallel: bool,
    /// With `parallel`: the compute threads. 0 (the default): one per core.
    pub threads: usize,
    /// Progress reports.
    pub progress: Option<Arc<ProgressFn>>,
    /// Set to `true` to stop; the call then returns [`Error::Cancelled`].
    pub cancel: Option<Arc<AtomicBool>>,
}

impl std::fmt::Debug for CompactOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactOptions")
            .field("parallel", &self.parallel)
            .field("threads", &self.threads)
            .field("progress", &self.progress.is_some())
            .field("cancel", &self.cancel)
            .finish()
    }
}

impl CompactOptions {
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    fn report(&self, progress: &CompactProgress) {
        if let Some(f) = &self.progress {
            f(progress);
        }
    }
}

/// Until `done` closes: reports progress, `finished` bytes of the level's compactions that
/// are done plus what `control`'s running one has read.
fn tick(
    control: &JobControl,
    finished: &AtomicU64,
    done: &crossbeam_channel::Receiver<()>,
    opts: &CompactOptions,
    mut progress: CompactProgress,
) {
    loop {
        progress.bytes_done =
            (finished.load(Ordering::Relaxed) + control.bytes_read()).min(progress.bytes_total);
        opts.report(&progress);
        if let Err(crossbeam_channel::RecvTimeoutError::Disconnected) = done.recv_timeout(TICK) {
            return;
        }
    }
}

/// What a manual compaction needs of the database.
pub(crate) trait ManualEnv {
    /// The current version, to pick from.
    fn current_version(&self) -> Arc<Version>;

    /// The level L0 compacts into in `version` (`LevelTargets::base_level`).
    fn base_level(&self, version: &Version) -> usize;

    /// The local executor for the levels' compactions.
    fn exec(&self, request: Request) -> ExecOptions;

    /// Runs `c` with `exec` and installs it; `control` sees its progress and may cancel it.
    fn run(&self, c: &Compaction, exec: ExecOptions, control: Arc<JobControl>) -> Result<()>;

    /// Deletes the files no version needs any more.
    fn delete_obsolete_files(&self);

    /// A compaction filter is set: every file in the range is rewritten, none moved, the
    /// deepest level's in place too.
    fn rewrites_everything(&self) -> bool;
}

/// Compacts every level holding data in `[start, end]` into the next, from L0 down, until the
/// range lives in one level (the deepest that held it, or the base level). L0 goes into the
/// base level, which with dynamic level sizing may be below L1: the levels above it are
/// empty. The caller has flushed the memtable and holds the right to run alone.
pub(crate) fn compact_levels(
    db: &dyn ManualEnv,
    start: Option<&[u8]>,
    end: Option<&[u8]>,
    opts: &CompactOptions,
) -> Result<()> {
    let rewrite_all = db.rewrites_everything();
    let v = db.current_version();
    let base = db.base_level(&v);
    let deepest = (1..NUM_LEVELS)
        .rev()
        .find(|&l| !v.overlapping_files(l, start, end).is_empty())
        .unwrap_or(base)
        .max(base);
    // (level, output level) of each step, L0 first.
    let steps: Vec<(usize, usize)> = std::iter::once((0, base))
        .chain((base..deepest).map(|l| (l, l + 1)))
        .collect();
    let levels = steps
        .iter()
        .filter(|&&(l, _)| !v.overlapping_files(l, start, end).is_empty())
        .count()
        + usize::from(rewrite_all);
    // Each step picks from the version the one before it left.
    drop(v);
    let exec = db.exec(if opts.parallel {
        Request::Parallel {
            threads: opts.threads,
        }
    } else {
        Request::Configured
    });
    let pieces = match exec.mode {
        CompactionMode::Parallel => exec.compute_threads,
        _ => 1,
    };
    let mut progress = CompactProgress {
        levels,
        pieces_running: pieces,
        ..CompactProgress::default()
    };
    for (level, output_level) in steps {
        // Moves and merges (see `manual_pick`), cut per range in partitioned mode.
        let picked = pick_manual(
            &db.current_version(),
            level,
            output_level,
            start,
            end,
            rewrite_all,
        );
        run_level(db, (level, output_level), picked, exec, opts, &mut progress)?;
    }
    if rewrite_all {
        let picked = pick_in_place(&db.current_version(), deepest, start, end);
        run_level(db, (deepest, deepest), picked, exec, opts, &mut progress)?;
    }
    Ok(())
}

/// Runs the compactions picked for `(level, output level)`, reporting progress; nothing if none
/// were picked.
fn run_level(
    db: &dyn ManualEnv,
    (level, output_level): (usize, usize),
    picked: Vec<Compaction>,
    exec: ExecOptions,
    opts: &CompactOptions,
    progress: &mut CompactProgress,
) -> Result<()> {
    if opts.cancelled() {
        return Err(Error::Cancelled);
    }
    if picked.is_empty() {
        return Ok(());
    }
    progress.level = level;
    progress.output_level = output_level;
    progress.bytes_done = 0;
    progress.bytes_total = picked.iter().map(|c| c.input_bytes()).sum();
    // One control for the level: its byte count is the level's progress.
    let control = Arc::new(match &opts.cancel {
        Some(flag) => JobControl::with_cancel_flag(Arc::clone(flag)),
        None => JobControl::default(),
    });
    let finished = AtomicU64::new(0);
    let run_all = || {
        picked.iter().try_for_each(|c| {
            db.run(c, exec, Arc::clone(&control))?;
            finished.fetch_add(c.input_bytes(), Ordering::Relaxed);
            Ok::<(), Error>(())
        })
    };
    let result = if opts.progress.is_some() {
        let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(0);
        let snapshot = *progress;
        std::thread::scope(|scope| {
            scope.spawn(|| tick(&control, &finished, &done_rx, opts, snapshot));
            let result = run_all();
            // Wakes the ticker at once.
            drop(done_tx);
            result
        })
    } else {
        run_all()
    };
    // The picked compactions pin their inputs; release them before collecting.
    drop(picked);
    db.delete_obsolete_files();
    result?;
    progress.levels_done += 1;
    progress.bytes_done = progress.bytes_total;
    opts.report(progress);
    Ok(())
}
