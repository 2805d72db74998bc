//! `compact`: a manual compaction of a key range, summarised in one line (or JSON).

use std::io::Write;
use std::time::Instant;

use serde::Serialize;
use sluice::metrics::StageSeconds;
use sluice_bench::delta::MetricsDelta;

use super::{Access, open};
use crate::args::CompactArgs;
use crate::failure::CmdResult;
use crate::units::size;

/// What `compact --json` prints.
#[derive(Debug, Serialize)]
struct CompactSummary {
    /// Wall seconds of the whole call (flush, compactions, waits).
    seconds: f64,
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
    /// Seconds per step S1..S7.
    stage_profile: StageSeconds,
}

pub fn run(args: &CompactArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db.db, Access::Existing)?;
    let before = db.metrics();
    let start = Instant::now();
    db.compact_range(
        args.from.as_deref().map(str::as_bytes),
        args.to.as_deref().map(str::as_bytes),
    )?;
    let seconds = start.elapsed().as_secs_f64();
    let d = MetricsDelta::between(&before, &db.metrics());
    db.close()?;
    let c = d.compaction;
    let summary = CompactSummary {
        seconds,
        compactions: c.count,
        trivial_moves: d.trivial_moves,
        input_bytes: c.input_bytes,
        output_bytes: c.output_bytes,
        bandwidth_mb_s: c.bandwidth_mb_s,
        stage_profile: c.stage_profile,
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
    }
    Ok(())
}
