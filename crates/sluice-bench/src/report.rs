//! Benchmark results and their two renderings: a human table (one line per benchmark, like
//! db_bench's) and one JSON object per line.
//!
//! Units: MB is 10^6 bytes throughout (`MB/s` of operations and of compaction alike); latency
//! percentiles are microseconds; seconds are wall-clock unless named `cpu`.
//!
//! The JSON object of a benchmark (fields are only ever added):
//!
//! ```text
//! { "name", "ops", "threads", "seconds", "wait_seconds", "micros_per_op", "ops_per_sec", "bytes",
//!   "mb_per_sec", "found"?, "writes"?, "conflicts"?, "stopped": bool, "latency_us": { "p50", "p99", "p999", "max", "mean" },
//!   "per_second": [u64, ...],                       // ops completed in each second
//!   "user_bytes", "disk_bytes_written", "wal_bytes_written",
//!   "write_amp": f64 | null,                        // table bytes written / user bytes
//!   "flush": { "count", "output_bytes", "seconds", "cpu_seconds" },
//!   "compaction": { "count", "input_bytes", "output_bytes", "seconds", "cpu_seconds",
//!                   "bandwidth_mb_s", "stage_profile": { "read", ..., "write" },
//!                   "stages": [...], "modes": { executor: count },
//!                   "mode_totals": { executor: { "jobs", "input_bytes", "seconds" } } },
//!   "trivial_moves", "write_slowdowns", "write_stall_micros",
//!   "object_store"?: { "gets", "puts", "heads", "lists", "deletes", "copies",
//!                      "bytes_downloaded", "bytes_uploaded", "cache_hits", "cache_misses" },
//!   "cpu": { "user_seconds", "system_seconds", "total_seconds", "foreground_seconds"
//!            (each f64 | null), "flush_seconds", "compaction_seconds" },
//!   "peak_rss_bytes", "io_write_bytes", "io_read_bytes": u64 | null,
//!   "lsm": { "levels": [ { "level", "files", "size_bytes" } x 7 ], "total_bytes",
//!            "l0_sublevels" },
//!   "options": { ... } }
//! ```

use serde::Serialize;
use sluice::metrics::StageSeconds;

use crate::config::{BenchConfig, WorkloadOptions};
use crate::delta::MetricsDelta;
use crate::histogram::{LatencyHistogram, LatencySummary};
use crate::resources::ProcessUsage;
use crate::shape::LsmShape;
use crate::timeline::spread;

/// The parameters a result was measured with, so every JSON line stands alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunOptions {
    /// Key numbers drawn from `[0, num)`.
    pub num: u64,
    /// Operations of the read benchmarks.
    pub reads: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Seed of the key and value generators.
    pub seed: u64,
    /// WAL synced on every write.
    pub sync: bool,
    /// Data block compression.
    pub compression: String,
    /// Memtable size in bytes.
    pub write_buffer_size: usize,
    /// Compaction output file size in bytes.
    pub target_file_size: u64,
    /// Uncompressed data block size in bytes.
    pub block_size: usize,
    /// Bloom filter bits per key.
    pub bloom_bits: u32,
    /// Block cache capacity in bytes.
    pub cache_size: usize,
    /// Automatic compactions turned off.
    pub disable_auto_compactions: bool,
    /// Flushes and compactions use direct I/O.
    pub direct_io: bool,
    /// Directories new tables are dealt over (the data directories, or the database directory).
    pub table_dirs: usize,
    /// Limit on background write bytes per second (0: none).
    pub rate_limit: u64,
    /// Values of at least this many bytes are kept in blob files (0: separation off).
    pub min_blob_size: usize,
    /// Blob file size in bytes.
    pub blob_file_size: u64,
    /// The share of blob files, oldest first, garbage collection collects (0: off).
    pub blob_gc_age_cutoff: f64,
    /// The least garbage share of a file collected.
    pub blob_gc_min_garbage_ratio: f64,
    /// `next` calls after each seek of seekrandom.
    pub seek_nexts: usize,
    /// Percent of readrandomwriterandom's operations that are reads.
    pub read_write_percent: u8,
    /// The time limit of each benchmark in seconds (0: none).
    pub duration_seconds: f64,
}

impl RunOptions {
    /// The options of a run of `config` and `workload` on a database opened with `options`.
    pub fn new(
        config: &BenchConfig,
        workload: &WorkloadOptions,
        options: &sluice::Options,
    ) -> Self {
        RunOptions {
            num: config.num,
            reads: config.reads,
            key_size: config.key_size,
            value_size: config.value_size,
            seed: config.seed,
            sync: config.sync,
            compression: options.table.compression.name().to_string(),
            write_buffer_size: options.memtable.write_buffer_size,
            target_file_size: options.compaction.target_file_size_base,
            block_size: options.table.block_size,
            bloom_bits: options.table.bloom_bits_per_key,
            cache_size: options.block_cache_bytes,
            disable_auto_compactions: options.compaction.disable_auto_compactions,
            direct_io: options.compaction.use_direct_io_for_flush_and_compaction,
            table_dirs: options.data_dirs.len().max(1),
            rate_limit: options
                .rate_limiter
                .as_ref()
                .map_or(0, |l| l.bytes_per_second()),
            min_blob_size: options.blob.min_blob_size,
            blob_file_size: options.blob.blob_file_size,
            blob_gc_age_cutoff: match options.blob.garbage_collection {
                true => options.blob.gc_age_cutoff,
                false => 0.0,
            },
            blob_gc_min_garbage_ratio: options.blob.gc_min_garbage_ratio,
            seek_nexts: workload.seek_nexts,
            read_write_percent: workload.read_write_percent,
            duration_seconds: workload.duration.map_or(0.0, |d| d.as_secs_f64()),
        }
    }
}

/// The outcome of one benchmark.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchResult {
    /// Benchmark name (db_bench's).
    pub name: String,
    /// Operations performed (entries read, for readseq; 1 for compact).
    pub ops: u64,
    /// Client threads.
    pub threads: usize,
    /// Wall seconds, including waiting for background work after fills.
    pub seconds: f64,
    /// The part of `seconds` a fill spent after its last write waiting for the flushes and
    /// compactions it caused (0 for the other benchmarks, and for a fill Ctrl-C stopped).
    pub wait_seconds: f64,
    /// `seconds * threads / ops` in microseconds: the time one thread spent per operation.
    pub micros_per_op: f64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// Key and value bytes the operations wrote or read.
    pub bytes: u64,
    /// `bytes / seconds` in MB/s; for compact, the compaction bandwidth (input bytes).
    pub mb_per_sec: f64,
    /// Lookups that found their key (readrandom, seekrandom and the mixed benchmarks below).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<u64>,
    /// Writes of the benchmarks that mix reads and writes: readrandomwriterandom's share of
    /// `ops`, updaterandom's one per operation, and readwhilewriting's writer thread's, which
    /// `ops`, `bytes` and the latency leave out (as db_bench's report does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes: Option<u64>,
    /// randomtransaction: commits that failed with `Busy` and ran again (db_bench's aborts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conflicts: Option<u64>,
    /// True when Ctrl-C ended the benchmark early: every figure covers the part that ran.
    pub stopped: bool,
    /// Per-operation latency percentiles in microseconds.
    pub latency_us: LatencySummary,
    /// Operations completed in each second of the benchmark ([`crate::timeline`]).
    pub per_second: Vec<u64>,
    /// What the engine did meanwhile (`user_bytes`, `disk_bytes_written`, `write_amp`,
    /// `compaction`, ...), flattened into the top level of the JSON object.
    #[serde(flatten)]
    pub engine: MetricsDelta,
    /// CPU, peak memory and storage I/O of the process during the benchmark, flattened:
    /// `cpu`, `peak_rss_bytes`, `io_write_bytes`, `io_read_bytes`.
    #[serde(flatten)]
    pub process: ProcessUsage,
    /// The tree when the benchmark ended.
    pub lsm: LsmShape,
    /// The parameters of the run.
    pub options: RunOptions,
    /// Every operation's latency, for the latency CDF chart. Not in the JSON.
    #[serde(skip)]
    pub latency: LatencyHistogram,
    /// With more than one thread: what each did (the figures above combine them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_thread: Vec<ThreadResult>,
}

/// One client thread's part of a benchmark.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThreadResult {
    /// Thread index; readwhilewriting's writer is thread 0.
    pub thread: usize,
    /// Operations the thread completed (0 for readwhilewriting's writer).
    pub ops: u64,
    /// Puts of the mixed benchmarks (see [`BenchResult::writes`]).
    pub writes: u64,
    /// `ops / seconds` of the benchmark.
    pub ops_per_sec: f64,
    /// Latency percentiles of the thread's operations in microseconds.
    pub latency_us: LatencySummary,
}

impl ThreadResult {
    /// `thread 0: 10000 ops, 51234 ops/s, p50 1.20 p99 4.10 p99.9 9.80 us`, or for a thread
    /// that only wrote beside the measured ones, its puts.
    pub fn line(&self, seconds: f64) -> String {
        let rate = |n: u64| match seconds > 0.0 {
            true => n as f64 / seconds,
            false => 0.0,
        };
        match self.ops {
            0 => format!(
                "thread {} (writer): {} writes, {:.0} writes/s",
                self.thread,
                self.writes,
                rate(self.writes)
            ),
            ops => {
                let l = &self.latency_us;
                format!(
                    "thread {}: {ops} ops, {:.0} ops/s, p50 {:.2} p99 {:.2} p99.9 {:.2} us",
                    self.thread, self.ops_per_sec, l.p50, l.p99, l.p999
                )
            }
        }
    }
}

/// One JSON object, without a trailing newline.
pub fn json_line(r: &BenchResult) -> String {
    // Every field is a plain number, string or struct of them; serde_json writes non-finite
    // floats as null rather than failing, so serialization cannot fail.
    serde_json::to_string(r).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// The header of the human table.
pub fn table_header() -> String {
    format!(
        "{:<12} {:>10} {:>10} {:>11} {:>8} {:>9} {:>9} {:>9}  {}",
        "benchmark", "ops", "micros/op", "ops/sec", "MB/s", "p50 us", "p99 us", "p99.9 us", "notes"
    )
}

/// One row of the human table; compact adds a second line with the stage profile. Latency
/// percentiles of a single operation (compact) would only repeat micros/op, so they show `-`.
pub fn table_row(r: &BenchResult) -> String {
    let l = &r.latency_us;
    let pct = |v: f64| {
        if r.ops > 1 {
            format!("{v:.2}")
        } else {
            "-".to_string()
        }
    };
    let mut row = format!(
        "{:<12} {:>10} {:>10.3} {:>11.0} {:>8.1} {:>9} {:>9} {:>9}  {}",
        r.name,
        r.ops,
        r.micros_per_op,
        r.ops_per_sec,
        r.mb_per_sec,
        pct(l.p50),
        pct(l.p99),
        pct(l.p999),
        notes(r)
    );
    row.truncate(row.trim_end().len());
    for t in &r.per_thread {
        row.push_str("\n             ");
        row.push_str(&t.line(r.seconds));
    }
    let per_second = (r.ops > 1).then_some(r.per_second.as_slice());
    for line in detail_lines(&r.engine, &r.process, per_second) {
        row.push_str("\n             ");
        row.push_str(&line);
    }
    row
}

/// The lines under a benchmark's row (or a YCSB phase's header), unindented: the stage
/// profile and executor stages if it compacted, CPU, memory and disk writes, and the spread
/// of the per-second throughput if `per_second` is given.
pub fn detail_lines(
    engine: &MetricsDelta,
    process: &ProcessUsage,
    per_second: Option<&[u64]>,
) -> Vec<String> {
    let mut lines = Vec::new();
    let c = &engine.compaction;
    if c.count > 0 {
        lines.push(format!("stages: {}", stage_profile_line(&c.stage_profile)));
        if !c.stages.is_empty() {
            lines.push(format!("executor: {}", pipeline_line(&c.stages)));
        }
    }
    lines.push(resources_line(engine, process));
    if let Some((min, median, max)) = per_second.and_then(spread) {
        lines.push(format!(
            "ops/s by second: min {min}, median {median}, max {max} over {} s",
            per_second.map_or(0, <[u64]>::len)
        ));
    }
    lines
}

/// `cpu 1.52 s (user 1.40, system 0.12; foreground 0.90, flush 0.30, compaction 0.32), peak
/// RSS 85.3 MB, disk writes 12.5 MB (kernel 13.1 MB)`; unknown figures show as `?`.
pub fn resources_line(engine: &MetricsDelta, process: &ProcessUsage) -> String {
    let secs = |s: Option<f64>| s.map_or_else(|| "?".to_string(), |s| format!("{s:.2}"));
    let mb =
        |b: Option<u64>| b.map_or_else(|| "?".to_string(), |b| format!("{:.1}", b as f64 / 1e6));
    let cpu = &process.cpu;
    let mut line = format!(
        "cpu {} s (user {}, system {}; foreground {}, flush {:.2}, compaction {:.2}), \
         peak RSS {} MB, disk writes {} MB",
        secs(cpu.total_seconds),
        secs(cpu.user_seconds),
        secs(cpu.system_seconds),
        secs(cpu.foreground_seconds),
        cpu.flush_seconds,
        cpu.compaction_seconds,
        mb(process.peak_rss_bytes),
        mb(Some(engine.disk_bytes_written)),
    );
    if process.io_write_bytes.is_some() {
        line.push_str(&format!(" (kernel {} MB)", mb(process.io_write_bytes)));
    }
    line
}

/// Busy and idle seconds per executor stage: `read busy 0.10 s idle 0.40 s (1 thread) ...`.
/// The busiest stage is the bottleneck; a stage mostly idle waits on its neighbours.
pub fn pipeline_line(stages: &[sluice::metrics::PipelineStage]) -> String {
    stages
        .iter()
        .map(|s| {
            format!(
                "{} busy {:.3} s idle {:.3} s ({} thread{})",
                s.stage,
                s.busy_seconds,
                s.idle_seconds,
                s.threads,
                if s.threads == 1 { "" } else { "s" }
            )
        })
        .collect::<Vec<_>>()
        .join("  ")
}

fn notes(r: &BenchResult) -> String {
    let mut notes = Vec::new();
    if r.stopped {
        notes.push("stopped early".to_string());
    }
    match (r.found, r.writes) {
        (Some(found), None) => notes.push(format!("found {found} of {}", r.ops)),
        (Some(found), Some(writes)) => notes.push(format!("found {found}, {writes} writes")),
        (None, Some(writes)) => notes.push(format!("{writes} writes")),
        (None, None) => {}
    }
    if let Some(conflicts) = r.conflicts {
        notes.push(format!("{conflicts} conflicts retried"));
    }
    let e = &r.engine;
    if let Some(w) = e.write_amp {
        notes.push(format!("w-amp {w:.2} (table bytes / user bytes)"));
    }
    let c = &e.compaction;
    if c.count > 0 {
        notes.push(format!(
            "{} compactions {:.1} MB -> {:.1} MB in {:.2} s ({:.1} MB/s)",
            c.count,
            c.input_bytes as f64 / 1e6,
            c.output_bytes as f64 / 1e6,
            c.seconds,
            c.bandwidth_mb_s
        ));
    }
    let f = &e.flush;
    if f.count > 0 {
        notes.push(format!(
            "{} flushes {:.1} MB in {:.2} s",
            f.count,
            f.output_bytes as f64 / 1e6,
            f.seconds
        ));
    }
    if e.write_stall_micros > 0 {
        notes.push(format!(
            "stalled {:.2} s",
            e.write_stall_micros as f64 / 1e6
        ));
    }
    notes.join(", ")
}

/// The seven steps with seconds and share of their sum: `S1 read 0.120 s (10.0%) ...`.
pub fn stage_profile_line(s: &StageSeconds) -> String {
    let total = s.total();
    s.entries()
        .iter()
        .enumerate()
        .map(|(i, (name, secs))| {
            let pct = if total > 0.0 {
                secs / total * 100.0
            } else {
                0.0
            };
            format!("S{} {name} {secs:.3} s ({pct:.1}%)", i + 1)
        })
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::CompactionDelta;
    use crate::resources::CpuUsage;

    fn result(name: &str) -> BenchResult {
        BenchResult {
            name: name.into(),
            ops: 1000,
            threads: 1,
            seconds: 0.5,
            wait_seconds: 0.1,
            micros_per_op: 500.0,
            ops_per_sec: 2000.0,
            bytes: 116_000,
            mb_per_sec: 0.232,
            found: Some(900),
            writes: None,
            conflicts: None,
            stopped: false,
            latency_us: LatencySummary {
                p50: 1.5,
                p99: 10.0,
                p999: 20.0,
                max: 30.0,
                mean: 2.0,
            },
            per_second: vec![600, 400],
            engine: MetricsDelta {
                user_bytes: 116_000,
                write_amp: Some(1.5),
                compaction: CompactionDelta {
                    count: 2,
                    input_bytes: 3_000_000,
                    output_bytes: 2_000_000,
                    seconds: 1.5,
                    bandwidth_mb_s: 2.0,
                    stage_profile: StageSeconds {
                        read: 0.5,
                        write: 1.5,
                        ..StageSeconds::default()
                    },
                    ..CompactionDelta::default()
                },
                ..MetricsDelta::default()
            },
            process: ProcessUsage {
                cpu: CpuUsage {
                    user_seconds: Some(1.25),
                    system_seconds: Some(0.25),
                    total_seconds: Some(1.5),
                    foreground_seconds: Some(0.5),
                    flush_seconds: 0.25,
                    compaction_seconds: 0.75,
                },
                peak_rss_bytes: Some(50_000_000),
                io_write_bytes: None,
                io_read_bytes: Some(0),
            },
            lsm: LsmShape::default(),
            options: RunOptions::new(
                &BenchConfig::default(),
                &WorkloadOptions::default(),
                &sluice::Options::default(),
            ),
            latency: LatencyHistogram::new(),
            per_thread: Vec::new(),
        }
    }

    #[test]
    fn json_has_the_documented_fields_at_the_top_level() {
        let v: serde_json::Value = serde_json::from_str(&json_line(&result("readrandom"))).unwrap();
        for field in [
            "name",
            "ops",
            "seconds",
            "ops_per_sec",
            "latency_us",
            "user_bytes",
            "disk_bytes_written",
            "write_amp",
            "compaction",
            "found",
            "threads",
            "options",
        ] {
            assert!(v.get(field).is_some(), "missing {field}: {v}");
        }
        assert_eq!(v["latency_us"]["p999"], 20.0);
        assert_eq!(v["compaction"]["bandwidth_mb_s"], 2.0);
        assert_eq!(v["compaction"]["stage_profile"]["write"], 1.5);
        assert_eq!(v["options"]["compression"], "lz4");
        let mut r = result("fillseq");
        r.found = None;
        r.engine.write_amp = None;
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        assert!(v.get("found").is_none());
        assert!(v["write_amp"].is_null());
    }

    #[test]
    fn mixed_benchmarks_report_their_writes_and_workload_options() {
        let mut r = result("readwhilewriting");
        r.writes = Some(42);
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        assert_eq!(
            (v["writes"].as_u64(), v["found"].as_u64()),
            (Some(42), Some(900))
        );
        let o = &v["options"];
        assert_eq!(
            (o["seek_nexts"].as_u64(), o["read_write_percent"].as_u64()),
            (Some(0), Some(90))
        );
        assert_eq!(o["duration_seconds"], 0.0);
        assert!(
            table_row(&r).contains("found 900, 42 writes"),
            "{}",
            table_row(&r)
        );
        let v: serde_json::Value = serde_json::from_str(&json_line(&result("readrandom"))).unwrap();
        assert!(v.get("writes").is_none(), "{v}");
        assert!(v.get("per_thread").is_none(), "{v}");
    }

    #[test]
    fn several_threads_each_get_a_line_and_a_json_entry() {
        let mut r = result("readwhilewriting");
        r.threads = 2;
        r.per_thread = vec![
            ThreadResult {
                thread: 0,
                ops: 0,
                writes: 300,
                ops_per_sec: 0.0,
                latency_us: LatencySummary::default(),
            },
            ThreadResult {
                thread: 1,
                ops: 1000,
                writes: 0,
                ops_per_sec: 2000.0,
                latency_us: r.latency_us,
            },
        ];
        let row = table_row(&r);
        let lines: Vec<&str> = row.lines().collect();
        assert_eq!(
            lines[1].trim(),
            "thread 0 (writer): 300 writes, 600 writes/s"
        );
        assert_eq!(
            lines[2].trim(),
            "thread 1: 1000 ops, 2000 ops/s, p50 1.50 p99 10.00 p99.9 20.00 us"
        );
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        assert_eq!(v["per_thread"][0]["writes"], 300);
        assert_eq!(v["per_thread"][1]["latency_us"]["p99"], 10.0);
    }

    /// The fields issue 5 added: CPU per thread group, memory, storage I/O, the per-second
    /// throughput and the tree's shape, with their JSON types.
    #[test]
    fn json_has_resource_timeline_and_shape_fields_with_their_types() {
        let mut r = result("fillrandom");
        r.lsm = LsmShape::of(&sluice::Metrics {
            levels: (0..7)
                .map(|level| sluice::metrics::LevelMetrics {
                    level,
                    files: level % 2,
                    size_bytes: 1000 * (level as u64 % 2),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        let v: serde_json::Value = serde_json::from_str(&json_line(&r)).unwrap();
        let cpu = &v["cpu"];
        for f in [
            "user_seconds",
            "system_seconds",
            "total_seconds",
            "foreground_seconds",
            "flush_seconds",
            "compaction_seconds",
        ] {
            assert!(cpu[f].is_f64(), "cpu.{f}: {cpu}");
        }
        assert_eq!(cpu["foreground_seconds"], 0.5);
        assert!(v["peak_rss_bytes"].is_u64(), "{v}");
        assert!(v["io_write_bytes"].is_null(), "unavailable is null: {v}");
        assert!(v["io_read_bytes"].is_u64(), "{v}");
        assert_eq!(v["per_second"], serde_json::json!([600, 400]));
        assert!(v["flush"]["cpu_seconds"].is_f64());
        assert!(v["compaction"]["cpu_seconds"].is_f64());
        let levels = v["lsm"]["levels"].as_array().unwrap();
        assert_eq!(levels.len(), 7);
        for (i, l) in levels.iter().enumerate() {
            assert_eq!(l["level"], i);
            assert!(l["files"].is_u64() && l["size_bytes"].is_u64(), "{l}");
        }
        assert_eq!(v["lsm"]["total_bytes"], 3000);
        assert!(v["lsm"]["l0_sublevels"].is_u64());
        assert!(
            v.get("latency").is_none(),
            "the histogram stays out of the JSON"
        );
    }

    #[test]
    fn table_rows_line_up_with_the_header() {
        let header = table_header();
        let row = table_row(&result("readrandom"));
        assert_eq!(row.find("found"), header.find("notes"));
        assert!(row.contains("found 900 of 1000"), "{row}");
        assert!(
            row.contains(
                "\n             cpu 1.50 s (user 1.25, system 0.25; foreground 0.50, flush 0.25, \
                 compaction 0.75), peak RSS 50.0 MB, disk writes 0.0 MB"
            ),
            "{row}"
        );
        assert!(
            row.ends_with("\n             ops/s by second: min 600, median 600, max 600 over 2 s"),
            "{row}"
        );
        let compact = table_row(&result("compact"));
        assert!(compact.contains("S1 read 0.500 s (25.0%)"), "{compact}");
        assert!(compact.contains("S7 write 1.500 s (75.0%)"), "{compact}");
        let mut one = result("compact");
        one.ops = 1;
        let row = table_row(&one);
        assert!(row.contains("        -         -         -  "), "{row}");
        assert!(!row.contains("ops/s by second"), "{row}");
        let mut quiet = result("readseq");
        quiet.found = None;
        quiet.engine = MetricsDelta::default();
        assert_eq!(table_row(&quiet), table_row(&quiet).trim_end());
    }
}
