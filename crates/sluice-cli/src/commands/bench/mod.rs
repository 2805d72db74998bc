//! `bench`: wires the db_bench-style flags to `sluice_bench::run_benchmarks` and prints the
//! results as a table or as JSON lines.
//!
//! The database lives in `--db`, which must not already hold a database unless
//! `--use-existing-db` is given (nothing is ever deleted from a directory the user named), or
//! in a fresh temporary directory that is removed at the end unless `--keep-db`.
//!
//! With `--out DIR` the JSON lines also go to `DIR/bench.jsonl` and the run's charts (PNG and
//! SVG, `sluice_bench::charts::runs`) into DIR.
//!
//! With `--experiment NAME` it runs `sluice experiment NAME` instead, with the flags of this
//! command it takes ([`args`]).
//!
//! Ctrl-C ends the running benchmark at its next operation: it is reported with what it did
//! (`"stopped": true`), the rest are skipped, and the tree and charts are still written.

mod args;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sluice::internals::filename::current_file_name;
use sluice::{Db, IoContext, Options};
use sluice_bench::charts::write_bench_charts;
use sluice_bench::report::{json_line, table_header, table_row};
use sluice_bench::{BenchConfig, BenchResult, WorkloadOptions, run_benchmarks_with};

pub use args::BenchArgs;

use super::{list_written, temp_dir};
use crate::failure::{CmdResult, Failure};
use crate::units::{megabytes, size};

/// Engine options from the engine and offload flags, for a database this run creates unless
/// `--use-existing-db`.
fn options(args: &BenchArgs) -> Result<Options, Failure> {
    Ok(Options {
        create_if_missing: true,
        error_if_exists: !args.use_existing_db,
        offload: args
            .offload
            .options()
            .map_err(Failure::Error)?
            .map(Into::into),
        ..args.engine.options()
    })
}

fn config(args: &BenchArgs) -> BenchConfig {
    BenchConfig {
        benchmarks: args.benchmarks.clone(),
        num: args.num(),
        reads: args.reads.unwrap_or(args.num()),
        key_size: args.key_size,
        value_size: args.value_size,
        threads: args.threads,
        seed: args.seed,
        sync: args.sync,
        progress: std::io::stderr().is_terminal(),
    }
}

/// The benchmark parameters and time limit of `--read-write-percent`, `--seek-nexts` and
/// `--duration` (0: no limit).
fn workload(args: &BenchArgs) -> WorkloadOptions {
    WorkloadOptions {
        seek_nexts: args.seek_nexts,
        read_write_percent: args.read_write_percent,
        duration: (args.duration > 0).then(|| Duration::from_secs(args.duration)),
        keyspaces: args.keyspaces,
        transaction: args.transaction_db,
    }
}

pub fn run(args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    if let Some(experiment) = args.experiment_command()? {
        return super::experiment::run(&experiment, out);
    }
    let config = config(args);
    config.validate()?;
    workload(args).validate()?;
    let options = options(args)?;
    options.validate()?;
    let (dir, temp) = match &args.db {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = temp_dir("sluice-bench-")?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    if !args.json {
        write_header(args, &config, &options, &dir, temp.is_some(), out)?;
    }
    let cache = args
        .object_cache_dir
        .as_deref()
        .map(|d| (d, args.object_cache_bytes));
    let stored = super::with_object_store(options, args.object_store.as_deref(), cache, &dir);
    let outcome = match &stored {
        Ok(options) => run_on(&dir, options.clone(), &config, args, out),
        Err(_) => Ok(()),
    };
    if let Some(temp) = temp {
        if args.keep_db {
            let kept: PathBuf = temp.keep();
            eprintln!("database kept in {}", kept.display());
        } else {
            // In a bucket, the tables and the prefix's owner marker go too, so that the next
            // run may use the prefix.
            if let (Some(_), Ok(options)) = (&args.object_store, &stored)
                && let Err(e) = sluice::Db::destroy(&dir, options)
            {
                tracing::warn!(error = %e, "could not remove the temporary database's objects");
            }
            if let Err(e) = temp.close() {
                tracing::warn!(error = %e, "could not remove the temporary database");
            }
        }
    }
    stored?;
    outcome
}

/// Writes `dir/bench.jsonl` (one JSON object per benchmark) and the run's charts into `dir`,
/// creating it if needed. Returns the paths written, the JSON first.
fn write_bench_outputs(results: &[BenchResult], dir: &Path) -> sluice::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("bench.jsonl");
    let lines: String = results.iter().map(|r| json_line(r) + "\n").collect();
    std::fs::write(&json, lines).with_path(&json)?;
    let mut written = vec![json];
    written.extend(write_bench_charts(results, dir)?);
    Ok(written)
}

fn run_on(
    dir: &Path,
    options: Options,
    config: &BenchConfig,
    args: &BenchArgs,
    out: &mut dyn Write,
) -> CmdResult {
    let json = args.json;
    if !config_allows_existing(options.error_if_exists, dir) {
        return Err(Failure::Error(format!(
            "{} already holds a database: pass --use-existing-db to run on it, or choose another --db",
            dir.display()
        )));
    }
    let db = Db::open(dir, options)?;
    if !json {
        writeln!(out, "{}", table_header())?;
        out.flush()?;
    }
    // Lines are flushed as each benchmark ends, so a long run shows progress on a pipe too.
    let mut write_error = None;
    let mut emit = |r: &BenchResult| {
        let line = if json { json_line(r) } else { table_row(r) };
        if write_error.is_none()
            && let Err(e) = writeln!(out, "{line}").and_then(|()| out.flush())
        {
            write_error = Some(e);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let on_interrupt = Arc::clone(&stop);
    // Without a handler (one is already installed) Ctrl-C ends the process, which recovery
    // leaves consistent.
    let _ = ctrlc::set_handler(move || on_interrupt.store(true, Ordering::Relaxed));
    let ran = run_benchmarks_with(config, &workload(args), &db, &stop, &mut emit);
    if let Some(e) = write_error {
        return Err(e.into());
    }
    let results = ran?;
    if stop.load(Ordering::Relaxed) {
        eprintln!(
            "stopped by Ctrl-C after {} of {} benchmarks; the last one's figures cover the part that ran",
            results.len(),
            config.benchmarks.len()
        );
    }
    if !json {
        write_tree(&db, out)?;
    }
    db.close()?;
    if let Some(out_dir) = &args.out {
        let written = write_bench_outputs(&results, out_dir)?;
        if !json {
            list_written(out_dir, &written, out)?;
        }
    }
    Ok(())
}

/// False when `dir` holds a database and the run must not reuse one.
fn config_allows_existing(error_if_exists: bool, dir: &Path) -> bool {
    !(error_if_exists && current_file_name(dir).exists())
}

fn write_header(
    args: &BenchArgs,
    config: &BenchConfig,
    options: &Options,
    dir: &Path,
    temporary: bool,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "keys: {} bytes, values: {} bytes (about {} after compression), entries: {}, reads: {}",
        config.key_size,
        config.value_size,
        config.value_size / 2,
        config.num,
        config.reads
    )?;
    writeln!(
        out,
        "raw size: {}, compression: {}, write buffer: {}, target file: {}, block: {}, bloom bits: {}, cache: {}",
        megabytes(config.num * (config.key_size + config.value_size) as u64),
        options.table.compression,
        size(options.memtable.write_buffer_size as u64),
        size(options.compaction.target_file_size_base),
        size(options.table.block_size as u64),
        options.table.bloom_bits_per_key,
        size(options.block_cache_bytes as u64),
    )?;
    let fate = match (temporary, args.keep_db) {
        (true, false) => " (temporary, removed at the end)",
        (true, true) => " (temporary, kept)",
        _ => "",
    };
    writeln!(
        out,
        "threads: {}, sync: {}, auto compactions: {}, background I/O: {}, database: {}{fate}",
        config.threads,
        config.sync,
        if options.compaction.disable_auto_compactions {
            "off"
        } else {
            "on"
        },
        if options.compaction.use_direct_io_for_flush_and_compaction {
            "direct"
        } else {
            "buffered"
        },
        dir.display()
    )?;
    let w = workload(args);
    if let Some(limit) = w.duration {
        writeln!(
            out,
            "duration: each benchmark stops after {} s",
            limit.as_secs()
        )?;
    }
    let named = |b| config.benchmarks.contains(&b);
    if named(sluice_bench::Benchmark::SeekRandom) && w.seek_nexts > 0 {
        writeln!(out, "seek nexts: {}", w.seek_nexts)?;
    }
    if named(sluice_bench::Benchmark::ReadRandomWriteRandom) {
        writeln!(out, "read/write percent: {}", w.read_write_percent)?;
    }
    if named(sluice_bench::Benchmark::RandomTransaction) {
        writeln!(out, "transactions: {:?}", w.transaction)?;
    }
    if w.keyspaces > 1 {
        writeln!(out, "keyspaces: {} (keys spread round-robin)", w.keyspaces)?;
    }
    for d in &options.data_dirs {
        writeln!(out, "data directory: {}", d.display())?;
    }
    writeln!(
        out,
        "units: MB = 10^6 bytes (sizes, MB/s and disk writes measured); option sizes in \
         binary units (1 MiB = 2^20 bytes)"
    )?;
    writeln!(out)
}

/// One line with the shape of the tree at the end of the run.
fn write_tree(db: &Db, out: &mut dyn Write) -> std::io::Result<()> {
    let m = db.metrics();
    let levels: Vec<String> = m
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| format!("L{} {} files {}", l.level, l.files, megabytes(l.size_bytes)))
        .collect();
    let tree = if levels.is_empty() {
        "empty".to_string()
    } else {
        levels.join(", ")
    };
    writeln!(out)?;
    writeln!(
        out,
        "tree: {tree}; total w-amp {:.2}; compaction {:.1} MB/s over {} jobs",
        m.write_amp(),
        m.compaction.bandwidth_mb_s(),
        m.compaction.count
    )
}
