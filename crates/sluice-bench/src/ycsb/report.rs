//! What a YCSB run reports: per-operation latency percentiles, throughput overall and per
//! second, what the engine and the process did during each phase, as a serde-serialized JSON
//! object (the schema below is stable: fields are only ever added) or a table.
//!
//! ```text
//! { "workload": "a", "distribution": "zipfian", "records": u64, "operations": u64,
//!   "threads": u64, "key_size": u64, "value_size": u64, "seed": u64,
//!   "load": Phase | null, "run": Phase | null }
//! Phase: { "phase": "load" | "run", "ops": u64, "seconds": f64, "ops_per_sec": f64,
//!          "not_found": u64, "stopped": bool, "per_second": [u64, ...],
//!          "operations": [ { "op": "read" | "update" | "insert" | "scan" | "read-modify-write",
//!                            "count": u64, "ops_per_sec": f64, "p50_us": f64, "p95_us": f64,
//!                            "p99_us": f64, "p999_us": f64, "max_us": f64, "mean_us": f64 } ],
//!          ...engine and process fields, named and typed as in a `sluice bench` object
//!          (`crate::report`): "user_bytes", "disk_bytes_written", "wal_bytes_written",
//!          "write_amp", "flush", "compaction", "trivial_moves", "write_slowdowns",
//!          "write_stall_micros", "cpu", "peak_rss_bytes", "io_write_bytes", "io_read_bytes",
//!          "lsm" (the tree when the phase ended) }
//! ```
//!
//! `per_second[i]` counts the operations that completed in second `i` of the phase, so a stall
//! shows as a dip. The last entry usually covers only part of a second, `seconds - (n - 1)`
//! when that is below 1: divide by that, not by 1, for its ops/s. The table and the throughput
//! chart do ([`crate::timeline::slices`]): the table prints `ops/s in each second`, the last
//! one marked partial with its count and length. `operations` lists only the types that ran, in a
//! fixed order.
//!
//! `write_amp` is the table bytes flushes and compactions wrote divided by the user bytes
//! (keys and values) written, RocksDB's `W-Amp` and the peers' definition. Tables hold their
//! blocks compressed, so it is below 1 when the blocks compress and little is rewritten (a
//! load that only flushed, say); the WAL is not counted.
//!
//! Units: MB is 10^6 bytes and rates are MB/s of 10^6 bytes (as in `sluice bench`, the
//! charts and the experiments); latencies are microseconds.

use std::fmt::Write as _;

use serde::Serialize;

use super::workload::{Distribution, Operation, Workload};
use crate::delta::MetricsDelta;
use crate::histogram::LatencyHistogram;
use crate::report::detail_lines;
use crate::resources::ProcessUsage;
use crate::shape::LsmShape;
use crate::timeline::rates_text;

/// One operation type's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpReport {
    pub op: Operation,
    pub count: u64,
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    /// Every operation's latency, for the latency CDF chart. Not in the JSON.
    #[serde(skip)]
    pub histogram: LatencyHistogram,
}

impl OpReport {
    /// The figures of `hist` over a phase of `seconds`.
    pub fn new(op: Operation, hist: &LatencyHistogram, seconds: f64) -> Self {
        let count = hist.len();
        OpReport {
            op,
            count,
            ops_per_sec: if seconds > 0.0 {
                count as f64 / seconds
            } else {
                0.0
            },
            p50_us: hist.percentile_us(50.0),
            p95_us: hist.percentile_us(95.0),
            p99_us: hist.percentile_us(99.0),
            p999_us: hist.percentile_us(99.9),
            max_us: hist.percentile_us(100.0),
            mean_us: hist.summary().mean,
            histogram: hist.clone(),
        }
    }
}

/// One phase (load or run).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PhaseReport {
    pub phase: String,
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Reads (and the reads of read-modify-writes) that found no value.
    pub not_found: u64,
    /// True when the stop flag ended the phase early.
    pub stopped: bool,
    /// Operations completed in each second; the last entry may cover only part of one (see
    /// the module doc).
    pub per_second: Vec<u64>,
    pub operations: Vec<OpReport>,
    /// What the engine did during the phase, flattened.
    #[serde(flatten)]
    pub engine: MetricsDelta,
    /// CPU, peak memory and storage I/O of the process during the phase, flattened.
    #[serde(flatten)]
    pub process: ProcessUsage,
    /// The tree when the phase ended.
    pub lsm: LsmShape,
}

/// The whole run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct YcsbReport {
    pub workload: Workload,
    pub distribution: Distribution,
    pub records: u64,
    pub operations: u64,
    pub threads: usize,
    pub key_size: usize,
    pub value_size: usize,
    pub seed: u64,
    pub load: Option<PhaseReport>,
    pub run: Option<PhaseReport>,
}

impl YcsbReport {
    /// The report as one line of JSON.
    pub fn to_json(&self) -> String {
        // Only strings, numbers, booleans and sequences: serialization cannot fail.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// What the table's `w-amp` divides by what (see the module doc).
pub const WRITE_AMP_RATIO: &str = "table bytes / user bytes";

/// The table of one phase: a header, what the engine and the process did, one row per
/// operation type, then the per-second throughput samples.
pub fn phase_table(p: &PhaseReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} ops in {:.2} s, {:.0} ops/s{}{}",
        p.phase,
        p.ops,
        p.seconds,
        p.ops_per_sec,
        if p.not_found > 0 {
            format!(", {} not found", p.not_found)
        } else {
            String::new()
        },
        if p.stopped { " (stopped early)" } else { "" },
    );
    let _ = writeln!(s, "  {}", engine_line(&p.engine));
    for line in detail_lines(&p.engine, &p.process, None) {
        let _ = writeln!(s, "  {line}");
    }
    let _ = writeln!(s, "  tree: {}", p.lsm.summary());
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "op", "count", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us", "ops/s"
    );
    for o in &p.operations {
        let _ = writeln!(
            s,
            "{:<18} {:>10} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.0}",
            o.op.name(),
            o.count,
            o.p50_us,
            o.p95_us,
            o.p99_us,
            o.p999_us,
            o.max_us,
            o.ops_per_sec
        );
    }
    let _ = writeln!(
        s,
        "ops/s in each second: {}",
        rates_text(&p.per_second, p.seconds)
    );
    s
}

/// `w-amp 1.23 (table bytes / user bytes), 3 flushes 12.0 MB, 2 compactions 30.1 MB ->
/// 25.0 MB at 85.2 MB/s, stalled 0.20 s`. The w-amp says what it divides, so that a value
/// below 1 (compressed tables, nothing rewritten yet) reads as what it is.
fn engine_line(e: &MetricsDelta) -> String {
    let mut parts = vec![match e.write_amp {
        Some(w) => format!("w-amp {w:.2} ({WRITE_AMP_RATIO})"),
        None => "w-amp -".to_string(),
    }];
    parts.push(format!(
        "{} flushes {:.1} MB",
        e.flush.count,
        e.flush.output_bytes as f64 / 1e6
    ));
    let c = &e.compaction;
    parts.push(format!(
        "{} compactions {:.1} MB -> {:.1} MB at {:.1} MB/s",
        c.count,
        c.input_bytes as f64 / 1e6,
        c.output_bytes as f64 / 1e6,
        c.bandwidth_mb_s
    ));
    if e.write_stall_micros > 0 {
        parts.push(format!(
            "stalled {:.2} s",
            e.write_stall_micros as f64 / 1e6
        ));
    }
    parts.join(", ")
}
