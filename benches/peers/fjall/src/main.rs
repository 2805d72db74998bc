//! `fjall-bench` runs Sluice's db_bench-style workloads (fillseq, fillrandom, overwrite,
//! readrandom, readwhilewriting, compact) on fjall and prints one JSON object per benchmark, with the field names
//! of `sluice bench --json`, so the two can be compared side by side; with `--ycsb` it runs
//! YCSB A, B, C or F instead and prints the object of `sluice ycsb --json`. Keys, values and
//! YCSB operations follow `../STREAM.md`; the flags mirror `sluice bench` and the Pebble peer.

mod bench;
mod cpu;
mod engine;
mod stream;
mod ycsb;
mod ycsb_run;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgAction, Parser};
use serde::Serialize;

use stream::{KeyFormat, SplitMix64, ValueGenerator, fnv1a64, to_hex};

/// The benchmarks this program knows, in db_bench's names.
pub const KNOWN_BENCHMARKS: [&str; 6] = [
    "fillseq",
    "fillrandom",
    "overwrite",
    "readrandom",
    "readwhilewriting",
    "compact",
];

/// True for the benchmarks that build a value buffer before drawing keys (STREAM.md section 3).
pub fn writes_values(name: &str) -> bool {
    matches!(
        name,
        "fillseq" | "fillrandom" | "overwrite" | "readwhilewriting"
    )
}

/// Command-line flags (the same as the Pebble peer's).
#[derive(Parser, Debug, Clone)]
#[command(
    name = "fjall-bench",
    version,
    about = "db_bench-style benchmarks of fjall, printed as Sluice-compatible JSON lines"
)]
pub struct Config {
    /// Database directory (required unless --dump-keys; must be empty or absent unless
    /// --use-existing-db)
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Open the database --db already holds instead of requiring an empty directory (db_bench's
    /// flag)
    #[arg(long)]
    pub use_existing_db: bool,
    /// Comma-separated benchmarks, run in order on one database
    #[arg(
        long,
        default_value = "fillseq,fillrandom,overwrite,readrandom,compact"
    )]
    pub benchmarks: String,
    /// Number of keys: fills write N entries with keys from [0, N)
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Operations of readrandom, and of readwhilewriting's readers together [default: --num]
    #[arg(long)]
    pub reads: Option<u64>,
    /// readwhilewriting: reader threads, besides its one writer (the other benchmarks run on
    /// one thread)
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Bytes per key (zero-padded decimal key numbers)
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Bytes per value (generated to compress to about half)
    #[arg(long, default_value_t = 100)]
    pub value_size: usize,
    /// Seed of the key and value streams (../STREAM.md)
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Data block compression: none, lz4, snappy, zstd (fjall has only lz4: snappy and zstd use lz4)
    #[arg(long, default_value = "lz4")]
    pub compression: String,
    /// Uncompressed data block size in bytes
    #[arg(long, default_value_t = 4096)]
    pub block_size: u32,
    /// Bloom filter bits per key (0: no filters)
    #[arg(long, default_value_t = 10)]
    pub bloom_bits: u32,
    /// Memtable size in bytes
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: u64,
    /// Size at which compaction outputs are cut
    #[arg(long, default_value_t = 64 << 20)]
    pub target_file_size: u64,
    /// Block cache capacity in bytes
    #[arg(long, default_value_t = 64 << 20)]
    pub cache_size: u64,
    /// Turn off automatic compactions (flushes still happen)
    #[arg(long)]
    pub disable_auto_compactions: bool,
    /// compact: split the compaction into concurrent parts (no effect: fjall's major compaction
    /// is one job)
    #[arg(long, default_value_t = true, action = ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true")]
    pub parallel_compact: bool,
    /// Background worker threads (flushes and compactions)
    #[arg(long, default_value_t = 2)]
    pub compaction_threads: usize,
    /// Print the first K keys and the first value of each benchmark's stream as JSON, and exit
    #[arg(long, default_value_t = 0)]
    pub dump_keys: usize,
    /// Run YCSB workload a, b, c or f (load, then run) instead of --benchmarks
    #[arg(long, value_name = "WORKLOAD")]
    pub ycsb: Option<String>,
    /// YCSB: keys the load phase inserts
    #[arg(long, default_value_t = 100_000)]
    pub records: u64,
    /// YCSB: operations of the run phase
    #[arg(long, default_value_t = 100_000)]
    pub operations: u64,
    /// Print the YCSB run phase's operation digest and first N operations as JSON, and exit
    #[arg(long, default_value_t = 0)]
    pub dump_ycsb_ops: u64,
}

impl Config {
    /// The benchmark names, checked.
    pub fn benchmark_list(&self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        for b in self
            .benchmarks
            .split(',')
            .map(str::trim)
            .filter(|b| !b.is_empty())
        {
            if !KNOWN_BENCHMARKS.contains(&b) {
                return Err(format!(
                    "unknown benchmark {b:?} (expected one of {})",
                    KNOWN_BENCHMARKS.join(", ")
                ));
            }
            out.push(b.to_string());
        }
        Ok(out)
    }

    /// readrandom's operation count.
    pub fn reads(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    fn validate(&self) -> Result<(), String> {
        if self.num == 0 {
            return Err("num must be at least 1".into());
        }
        if self.value_size > 64 << 20 {
            return Err(format!(
                "value-size must be at most 64 MiB, got {}",
                self.value_size
            ));
        }
        if self.compaction_threads == 0 || self.threads == 0 {
            return Err("compaction-threads and threads must be at least 1".into());
        }
        if !["none", "lz4", "snappy", "zstd"].contains(&self.compression.as_str()) {
            return Err(format!(
                "unknown compression {:?} (expected none, lz4, snappy or zstd)",
                self.compression
            ));
        }
        if !(1024..=1 << 20).contains(&self.block_size) {
            return Err("block-size must be between 1 KiB and 1 MiB (fjall's limits)".into());
        }
        if self.write_buffer_size == 0 || self.target_file_size == 0 {
            return Err("write-buffer-size and target-file-size must be positive".into());
        }
        if let Some(w) = self.ycsb_workload() {
            ycsb::Mix::of(w)?;
            if self.records == 0 {
                return Err("records must be at least 1".into());
            }
            return KeyFormat::new(self.key_size, self.records.saturating_add(self.operations))
                .map(|_| ());
        }
        KeyFormat::new(self.key_size, self.num).map(|_| ())
    }

    /// The YCSB workload, if this is a YCSB run or dump (a dump defaults to workload a).
    pub fn ycsb_workload(&self) -> Option<&str> {
        match &self.ycsb {
            Some(w) => Some(w.as_str()),
            None if self.dump_ycsb_ops > 0 => Some("a"),
            None => None,
        }
    }
}

/// One line of --dump-keys output; the other peers print the same bytes.
#[derive(Serialize)]
struct StreamDump {
    benchmark: String,
    position: usize,
    keys: Vec<String>,
    first_value: String,
    value_buffer_fnv1a64: String,
    /// readwhilewriting: the first keys of each reader thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    reader_keys: Option<Vec<Vec<String>>>,
}

/// Prints the first `k` keys and the first value of every benchmark's stream (for
/// readwhilewriting, its writer's, and the first `k` keys of each reader thread).
fn dump_streams(c: &Config, k: usize) -> Result<(), String> {
    let keys = KeyFormat::new(c.key_size, c.num)?;
    let key_text = |n: u64| {
        let mut buf = Vec::new();
        keys.write(n, &mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    };
    let drawn =
        |g: &mut SplitMix64| -> Vec<String> { (0..k).map(|_| key_text(g.below(c.num))).collect() };
    let mut out = std::io::stdout().lock();
    for (pos, name) in c.benchmark_list()?.into_iter().enumerate() {
        let mut g = SplitMix64::stream(c.seed, pos as u64, 0);
        let mut d = StreamDump {
            benchmark: name.clone(),
            position: pos,
            keys: Vec::new(),
            first_value: String::new(),
            value_buffer_fnv1a64: String::new(),
            reader_keys: None,
        };
        if writes_values(&name) {
            let mut v = ValueGenerator::new(&mut g, c.value_size);
            d.value_buffer_fnv1a64 = format!("{:016x}", fnv1a64(&v.data));
            d.first_value = to_hex(v.generate(c.value_size));
        }
        match name.as_str() {
            "compact" => {}
            "fillseq" => d.keys = (0..k as u64).map(key_text).collect(),
            _ => d.keys = drawn(&mut g),
        }
        if name == "readwhilewriting" {
            let readers = (1..=c.threads as u64)
                .map(|thread| drawn(&mut SplitMix64::stream(c.seed, pos as u64, thread)));
            d.reader_keys = Some(readers.collect());
        }
        let line = serde_json::to_string(&d).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Fails unless `dir` is absent or an empty directory.
fn check_empty_dir(dir: &std::path::Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(format!("--db {}: {e}", dir.display())),
        Ok(mut entries) => match entries.next() {
            None => Ok(()),
            Some(_) => Err(format!("--db {} is not empty", dir.display())),
        },
    }
}

/// Opens the database and runs every benchmark in order, printing each result as it ends.
fn run(c: &Config) -> Result<(), String> {
    let dir = c.db.clone().ok_or("--db is required")?;
    if !c.use_existing_db {
        check_empty_dir(&dir)?;
    }
    let engine = engine::Engine::open(c, &dir)?;
    for note in engine
        .settings_differ
        .iter()
        .filter(|n| n.starts_with("compression"))
    {
        eprintln!("fjall-bench: note: {note}");
    }
    let mut out = std::io::stdout().lock();
    if let Some(w) = c.ycsb_workload() {
        let report = engine.run_ycsb(w).map_err(|e| format!("ycsb {w}: {e}"))?;
        drop(engine); // Closed before the line is printed, as Sluice closes its database.
        let line = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        return writeln!(out, "{line}").map_err(|e| e.to_string());
    }
    for (pos, name) in c.benchmark_list()?.into_iter().enumerate() {
        let result = engine
            .run_benchmark(&name, pos)
            .map_err(|e| format!("{name}: {e}"))?;
        let line = serde_json::to_string(&result).map_err(|e| e.to_string())?;
        writeln!(out, "{line}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let c = Config::parse();
    let outcome = c.validate().and_then(|()| {
        c.benchmark_list()?;
        if c.dump_ycsb_ops > 0 {
            let w = c.ycsb_workload().unwrap_or("a");
            let d = ycsb::dump(
                w,
                c.records,
                c.operations,
                c.seed,
                c.value_size,
                c.dump_ycsb_ops,
            )?;
            println!("{}", serde_json::to_string(&d).map_err(|e| e.to_string())?);
            Ok(())
        } else if c.dump_keys > 0 {
            dump_streams(&c, c.dump_keys)
        } else {
            run(&c)
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fjall-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
