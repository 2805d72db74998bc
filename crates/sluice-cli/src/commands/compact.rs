//! `compact`: a manual compaction of a key range, with a progress bar on a terminal, summarised
//! in one line (or JSON). Ctrl-C cancels it: the level being compacted is abandoned, levels
//! already done stay compacted, and the database is consistent either way.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use sluice::compaction::remote::ShareReport;
use sluice::metrics::{ObjectStoreMetrics, PipelineStage, StageSeconds};
use sluice::{CompactOptions, CompactProgress, Error, Options};
use sluice_bench::delta::MetricsDelta;

use super::keyspace::KeyspaceArg;
use super::{Access, OpenArgs};
use crate::engine_flags::OffloadArgs;
use crate::failure::{CmdResult, Failure};
use crate::units::size;

/// `sluice compact`. `--compaction-mode` (an engine flag) picks the executor of each
/// compaction; with `--parallel` every piece runs on the parallel one.
#[derive(Debug, Args)]
pub struct CompactArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// First key of the range (inclusive; default: the first key).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Last key of the range (inclusive, as RocksDB's CompactRange; default: the last key).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Split each level's compaction by data and run the pieces on every core.
    #[arg(long)]
    pub parallel: bool,
    /// With `--parallel`: compute threads (default: one per core).
    #[arg(long, value_name = "N", requires = "parallel")]
    pub threads: Option<usize>,
    /// Print one JSON object instead of a line of text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub offload: OffloadArgs,
}

/// One level's compaction, as `compact --json` reports it.
#[derive(Clone, Debug, Serialize)]
struct LevelTiming {
    /// The level compacted.
    level: usize,
    /// The level it went into: the next one, or for L0 the base level.
    output_level: usize,
    /// Its input bytes (the level's files in the range and the next level's overlapping ones).
    input_bytes: u64,
    /// Wall seconds it took.
    seconds: f64,
}

/// One level of the tree, before or after the compaction.
#[derive(Clone, Debug, Serialize)]
struct LevelShape {
    level: usize,
    files: usize,
    bytes: u64,
}

fn shape(m: &sluice::Metrics) -> Vec<LevelShape> {
    m.levels
        .iter()
        .map(|l| LevelShape {
            level: l.level,
            files: l.files,
            bytes: l.size_bytes,
        })
        .collect()
}

/// `L0 8 files 167.3 MiB, L1 1 file 66.2 MiB` (empty levels left out).
fn shape_line(levels: &[LevelShape]) -> String {
    let parts: Vec<String> = levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| format!("L{} {} files {}", l.level, l.files, size(l.bytes)))
        .collect();
    if parts.is_empty() {
        "empty".into()
    } else {
        parts.join(", ")
    }
}

/// What `compact --json` prints.
#[derive(Debug, Serialize)]
struct CompactSummary {
    /// The keyspace compacted.
    keyspace: String,
    /// Wall seconds of the whole call (flush, compactions, waits).
    seconds: f64,
    /// Pieces of each level ran in parallel on every core.
    parallel: bool,
    /// Compactions run (trivial moves excluded).
    compactions: u64,
    /// Files moved down a level without rewriting.
    trivial_moves: u64,
    /// Bytes read from input tables.
    input_bytes: u64,
    /// Bytes written to output tables.
    output_bytes: u64,
    /// Input bytes per second of compaction, in MB/s (10^6 bytes).
    bandwidth_mb_s: f64,
    /// Each level compacted, in order.
    levels: Vec<LevelTiming>,
    /// The tree before and after.
    lsm_before: Vec<LevelShape>,
    lsm_after: Vec<LevelShape>,
    /// Seconds per step S1..S7.
    stage_profile: StageSeconds,
    /// Per pipeline stage (per executor thread kind): threads, busy and idle seconds.
    stages: Vec<PipelineStage>,
    /// With --worker: each side's part (host first), summed over the compactions.
    #[serde(skip_serializing_if = "Option::is_none")]
    shares: Option<Vec<ShareReport>>,
    /// With --worker: worker shares re-run on the host after a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    retries: Option<u64>,
    /// With --worker and the dynamic split: worker chunks the host also ran, and how many of
    /// those the host's copy finished first.
    #[serde(skip_serializing_if = "Option::is_none")]
    races: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    races_won_by_host: Option<u64>,
    /// With --worker: worker shares whose outputs did not account for their inputs (the
    /// digest check), re-run on the host; also counted in `retries`.
    #[serde(skip_serializing_if = "Option::is_none")]
    verify_failures: Option<u64>,
    /// With --object-store: the requests the call made, and the bytes they moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    object_store: Option<ObjectStoreMetrics>,
}

/// Records each level's time from the progress reports and draws the bar.
struct Tracker {
    bar: ProgressBar,
    levels: Mutex<(Vec<LevelTiming>, Instant)>,
}

impl Tracker {
    fn new(draw: bool) -> Self {
        let bar = if draw {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{msg:>14} [{bar:30}] {binary_bytes}/{binary_total_bytes} {binary_bytes_per_sec}, {eta} left",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        } else {
            ProgressBar::hidden()
        };
        Tracker {
            bar,
            levels: Mutex::new((Vec::new(), Instant::now())),
        }
    }

    fn update(&self, p: &CompactProgress) {
        let Ok(mut guard) = self.levels.lock() else {
            return;
        };
        let (done, level_start) = &mut *guard;
        if p.levels_done > done.len() {
            done.push(LevelTiming {
                level: p.level,
                output_level: p.output_level,
                input_bytes: p.bytes_total,
                seconds: level_start.elapsed().as_secs_f64(),
            });
            *level_start = Instant::now();
        }
        if self.bar.length() != Some(p.bytes_total) {
            self.bar.set_length(p.bytes_total);
            self.bar.reset_eta();
        }
        self.bar.set_position(p.bytes_done);
        self.bar.set_message(format!(
            "L{}->L{} ({}/{})",
            p.level,
            p.output_level,
            p.levels_done.min(p.levels) + usize::from(p.levels_done < p.levels),
            p.levels
        ));
    }

    fn levels(&self) -> Vec<LevelTiming> {
        self.levels.lock().map(|g| g.0.clone()).unwrap_or_default()
    }
}

pub fn run(args: &CompactArgs, out: &mut dyn Write) -> CmdResult {
    let base = Options {
        offload: args
            .offload
            .options()
            .map_err(Failure::Error)?
            .map(Into::into),
        ..args.db.engine.options()
    };
    let db = args.keyspace.open_with(&args.db, Access::Existing, base)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let on_interrupt = Arc::clone(&cancel);
    // Without a handler (another one is installed, as in tests) Ctrl-C simply ends the process,
    // which recovery also leaves consistent.
    let _ = ctrlc::set_handler(move || on_interrupt.store(true, Ordering::Relaxed));
    let tracker = Arc::new(Tracker::new(std::io::stderr().is_terminal()));
    let sink = Arc::clone(&tracker);
    let opts = CompactOptions {
        parallel: args.parallel,
        threads: args.threads.unwrap_or(0),
        progress: Some(Arc::new(move |p: &CompactProgress| sink.update(p))),
        cancel: Some(cancel),
    };
    let before = db.metrics()?;
    let start = Instant::now();
    let result = db.compact_range_with(
        args.from.as_deref().map(str::as_bytes),
        args.to.as_deref().map(str::as_bytes),
        &opts,
    );
    let seconds = start.elapsed().as_secs_f64();
    tracker.bar.finish_and_clear();
    let after = db.metrics()?;
    let d = MetricsDelta::between(&before, &after);
    let offload = db.db().offload_metrics();
    let keyspace = db.name().to_string();
    db.close()?;
    match result {
        Err(Error::Cancelled) => {
            return Err(Failure::Error(format!(
                "compaction cancelled after {:.1} s; {} level(s) finished and stay compacted, \
                 the rest is as it was",
                seconds,
                tracker.levels().len()
            )));
        }
        other => other?,
    }
    let c = d.compaction;
    let summary = CompactSummary {
        keyspace,
        seconds,
        parallel: args.parallel,
        compactions: c.count,
        trivial_moves: d.trivial_moves,
        input_bytes: c.input_bytes,
        output_bytes: c.output_bytes,
        bandwidth_mb_s: c.bandwidth_mb_s,
        levels: tracker.levels(),
        lsm_before: shape(&before),
        lsm_after: shape(&after),
        stage_profile: c.stage_profile,
        stages: c.stages,
        shares: offload
            .as_ref()
            .map(|m| m.sides.iter().map(|s| s.report()).collect()),
        retries: offload.as_ref().map(|m| m.retries),
        races: offload.as_ref().map(|m| m.races),
        races_won_by_host: offload.as_ref().map(|m| m.races_won_by_host),
        verify_failures: offload.as_ref().map(|m| m.verify_failures),
        object_store: after
            .object_store
            .map(|a| a.since(&before.object_store.unwrap_or_default())),
    };
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&summary)?)?;
    } else {
        writeln!(
            out,
            "compacted in {:.3} s: {} compactions, {} trivial moves, {} read, {} written, {:.1} MB/s",
            summary.seconds,
            summary.compactions,
            summary.trivial_moves,
            size(summary.input_bytes),
            size(summary.output_bytes),
            summary.bandwidth_mb_s
        )?;
        for s in summary.shares.iter().flatten() {
            if s.input_bytes == 0 {
                let why = if s.retried {
                    " (it failed; re-run elsewhere)"
                } else {
                    ""
                };
                writeln!(out, "  {}: no share{why}", s.side)?;
                continue;
            }
            writeln!(
                out,
                "  {}: {} in {:.3} s ({:.1} MB/s, {}, cpu {:.2} s)",
                s.side,
                size(s.input_bytes),
                s.seconds,
                s.bandwidth_mb_s,
                s.mode,
                s.cpu_seconds
            )?;
        }
        if let Some(r) = summary.retries.filter(|r| *r > 0) {
            writeln!(out, "  {r} worker task(s) re-run on the host")?;
        }
        if let Some(d) = summary.verify_failures.filter(|d| *d > 0) {
            writeln!(
                out,
                "  {d} of them failed the digest check: their outputs did not account for their \
                 inputs"
            )?;
        }
        if let Some(r) = summary.races.filter(|r| *r > 0) {
            let won = summary.races_won_by_host.unwrap_or(0);
            writeln!(
                out,
                "  {r} worker chunk(s) also run on the host, its copy first {won} time(s)"
            )?;
        }
        if let Some(o) = &summary.object_store {
            let gb = summary.input_bytes as f64 / 1e9;
            writeln!(
                out,
                "  object store: {} requests ({} GET, {} PUT, {} HEAD, {} LIST, {} DELETE, {} COPY; \
                 {:.0} per GB compacted), {} down, {} up",
                o.requests(),
                o.gets,
                o.puts,
                o.heads,
                o.lists,
                o.deletes,
                o.copies,
                if gb > 0.0 {
                    o.requests() as f64 / gb
                } else {
                    0.0
                },
                size(o.bytes_downloaded),
                size(o.bytes_uploaded)
            )?;
        }
        writeln!(out, "  before: {}", shape_line(&summary.lsm_before))?;
        writeln!(out, "  after:  {}", shape_line(&summary.lsm_after))?;
        for l in &summary.levels {
            writeln!(
                out,
                "  L{} -> L{}: {} in {:.3} s",
                l.level,
                l.output_level,
                size(l.input_bytes),
                l.seconds
            )?;
        }
    }
    Ok(())
}
