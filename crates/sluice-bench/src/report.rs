//! Benchmark results and their two renderings: a human table (one line per benchmark, like
//! db_bench's) and one JSON object per line.
//!
//! Units: MB is 10^6 bytes throughout (`MB/s` of operations and of compaction alike); latency
//! percentiles are microseconds; seconds are wall-clock.

use serde::Serialize;
use sluice::metrics::StageSeconds;

use crate::config::BenchConfig;
use crate::delta::MetricsDelta;
use crate::histogram::LatencySummary;

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
}

impl RunOptions {
    /// The options of a run of `config` on a database opened with `options`.
    pub fn new(config: &BenchConfig, options: &sluice::Options) -> Self {
        RunOptions {
            num: config.num,
            reads: config.reads,
            key_size: config.key_size,
            value_size: config.value_size,
            seed: config.seed,
            sync: config.sync,
            compression: options.compression.name().to_string(),
            write_buffer_size: options.write_buffer_size,
            target_file_size: options.target_file_size_base,
            block_size: options.block_size,
            bloom_bits: options.bloom_bits_per_key,
            cache_size: options.block_cache_bytes,
            disable_auto_compactions: options.disable_auto_compactions,
            direct_io: options.use_direct_io_for_flush_and_compaction,
            table_dirs: options.data_dirs.len().max(1),
            rate_limit: options
                .rate_limiter
                .as_ref()
                .map_or(0, |l| l.bytes_per_second()),
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
    /// `seconds * threads / ops` in microseconds: the time one thread spent per operation.
    pub micros_per_op: f64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// Key and value bytes the operations wrote or read.
    pub bytes: u64,
    /// `bytes / seconds` in MB/s; for compact, the compaction bandwidth (input bytes).
    pub mb_per_sec: f64,
    /// Lookups that found their key (readrandom, seekrandom).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub found: Option<u64>,
    /// Per-operation latency percentiles in microseconds.
    pub latency_us: LatencySummary,
    /// What the engine did meanwhile (`user_bytes`, `disk_bytes_written`, `write_amp`,
    /// `compaction`, ...), flattened into the top level of the JSON object.
    #[serde(flatten)]
    pub engine: MetricsDelta,
    /// The parameters of the run.
    pub options: RunOptions,
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
    let c = &r.engine.compaction;
    if r.name == "compact" && c.count > 0 {
        row.push_str("\n             stages: ");
        row.push_str(&stage_profile_line(&c.stage_profile));
        if !c.stages.is_empty() {
            row.push_str("\n             executor: ");
            row.push_str(&pipeline_line(&c.stages));
        }
    }
    row
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
    if let Some(found) = r.found {
        notes.push(format!("found {found} of {}", r.ops));
    }
    let e = &r.engine;
    if let Some(w) = e.write_amp {
        notes.push(format!("w-amp {w:.2}"));
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

    fn result(name: &str) -> BenchResult {
        BenchResult {
            name: name.into(),
            ops: 1000,
            threads: 1,
            seconds: 0.5,
            micros_per_op: 500.0,
            ops_per_sec: 2000.0,
            bytes: 116_000,
            mb_per_sec: 0.232,
            found: Some(900),
            latency_us: LatencySummary {
                p50: 1.5,
                p99: 10.0,
                p999: 20.0,
                max: 30.0,
                mean: 2.0,
            },
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
            options: RunOptions::new(&BenchConfig::default(), &sluice::Options::default()),
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
    fn table_rows_line_up_with_the_header() {
        let header = table_header();
        let row = table_row(&result("readrandom"));
        assert_eq!(row.find("found"), header.find("notes"));
        assert!(row.contains("found 900 of 1000"), "{row}");
        let compact = table_row(&result("compact"));
        assert!(compact.contains("S1 read 0.500 s (25.0%)"), "{compact}");
        assert!(compact.contains("S7 write 1.500 s (75.0%)"), "{compact}");
        let mut one = result("compact");
        one.ops = 1;
        let row = table_row(&one);
        assert!(row.contains("        -         -         -  "), "{row}");
        let mut quiet = result("readseq");
        quiet.found = None;
        quiet.engine = MetricsDelta::default();
        assert_eq!(table_row(&quiet), table_row(&quiet).trim_end());
    }
}
