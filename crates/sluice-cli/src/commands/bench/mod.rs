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
//! With `--experiment NAME` it runs an experiment instead (see `sluice_experiments`):
//! the table (or with `--json` the JSON document) goes to stdout, and with `--out DIR` the JSON
//! and the charts are also written into DIR. Experiments keep their databases in a temporary
//! directory that is always removed.
//!
//! Ctrl-C ends the running benchmark at its next operation: it is reported with what it did
//! (`"stopped": true`), the rest are skipped, and the tree and charts are still written.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sluice::filename::current_file_name;
use sluice::{Db, IoContext, Options, RateLimiter};
use sluice_bench::charts::write_bench_charts;
use sluice_bench::report::{json_line, table_header, table_row};
use sluice_bench::{BenchConfig, BenchResult, run_benchmarks_until};
use sluice_experiments::{Experiment, PcpConfig, copro, mstore, run_pcp, table, write_outputs};

use crate::args::BenchArgs;
use crate::failure::{CmdResult, Failure};
use crate::units::size;

/// Engine options from the flags; unspecified ones keep `Options::default()`.
fn options(args: &BenchArgs) -> Result<Options, Failure> {
    let defaults = Options::default();
    Ok(Options {
        create_if_missing: true,
        error_if_exists: !args.use_existing_db,
        compression: args.compression.into(),
        write_buffer_size: args.write_buffer_size,
        target_file_size_base: args.target_file_size,
        // L1 must hold at least one output file.
        max_bytes_for_level_base: defaults.max_bytes_for_level_base.max(args.target_file_size),
        block_size: args.block_size,
        bloom_bits_per_key: args.bloom_bits,
        block_cache_bytes: args.cache_size,
        disable_auto_compactions: args.disable_auto_compactions,
        compaction_mode: args.compaction_mode,
        compaction_threads: args.compaction_threads,
        compaction_queue_depth: args.compaction_queue_depth,
        max_concurrent_compactions: args.max_concurrent_compactions,
        sub_task_bytes: args.sub_task_bytes,
        l0_compaction_trigger: args.l0_compaction_trigger,
        l0_slowdown_writes_trigger: args.l0_slowdown_writes_trigger,
        l0_stop_writes_trigger: args.l0_stop_writes_trigger,
        l0_compaction_file_threshold: args.l0_compaction_file_threshold,
        l0_flush_split_bytes: args.l0_flush_split_bytes,
        data_dirs: args.data_dirs.clone(),
        use_direct_io_for_flush_and_compaction: args.direct_io,
        rate_limiter: (args.rate_limit > 0).then(|| RateLimiter::new(args.rate_limit)),
        offload: args.offload.options().map_err(Failure::Error)?,
        ..defaults
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

pub fn run(args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    if let Some(experiment) = args.experiment {
        return run_experiment(experiment, args, out);
    }
    let config = config(args);
    config.validate()?;
    let options = options(args)?;
    options.validate()?;
    let (dir, temp) = match &args.db {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = tempfile::Builder::new()
                .prefix("sluice-bench-")
                .tempdir()
                .map_err(|e| Failure::Error(format!("creating a temporary directory: {e}")))?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    if !args.json {
        write_header(args, &config, &options, &dir, temp.is_some(), out)?;
    }
    let outcome = run_on(&dir, options, &config, args, out);
    if let Some(temp) = temp {
        if args.keep_db {
            let kept: PathBuf = temp.keep();
            eprintln!("database kept in {}", kept.display());
        } else if let Err(e) = temp.close() {
            tracing::warn!(error = %e, "could not remove the temporary database");
        }
    }
    outcome
}

/// Runs `experiment` with the flags it uses, in a temporary directory removed at the end.
fn run_experiment(experiment: Experiment, args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    match experiment {
        Experiment::Pcp => run_pcp_experiment(args, out),
        Experiment::Copro => run_copro_experiment(args, out),
        Experiment::Mstore => run_mstore_experiment(args, out),
    }
}

fn run_pcp_experiment(args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    if args.experiment_workers.is_some() || args.throttle.is_some() {
        return Err(Failure::Error(
            "--workers and --throttle apply to --experiment copro and mstore only".into(),
        ));
    }
    let config = PcpConfig {
        num: args.num(),
        key_size: args.key_size,
        value_size: args.value_size,
        compression: args.compression.into(),
        seed: args.seed,
        repeat: args.repeat.unwrap_or(1),
        direct_io: args.direct_io,
        progress: std::io::stderr().is_terminal(),
        ..PcpConfig::default()
    };
    config.validate()?;
    let report = in_scratch(|scratch| run_pcp(&config, scratch))?;
    present(args, out, report.to_json(), table::render(&report), |dir| {
        write_outputs(&report, dir)
    })
}

/// The CoPro experiment; its workers are this executable's `worker` subcommand.
fn run_copro_experiment(args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    let config = copro::CoproConfig {
        data_bytes: copro::CoproConfig::data_bytes_for_num(args.num()),
        key_size: args.key_size,
        workers: args.experiment_workers.unwrap_or(1),
        throttle: args.throttle.unwrap_or(1.0),
        compression: args.compression.into(),
        seed: args.seed,
        repeat: args.repeat.unwrap_or(1),
        progress: std::io::stderr().is_terminal(),
        worker_program: copro::WorkerProgram::sluice(this_executable()?),
        ..copro::CoproConfig::default()
    };
    config.validate()?;
    let report = in_scratch(|scratch| copro::run_copro(&config, scratch))?;
    present(
        args,
        out,
        report.to_json(),
        copro::table::render(&report),
        |dir| copro::write_outputs(&report, dir),
    )
}

/// The MStore experiment; its workers are this executable's `worker` subcommand.
fn run_mstore_experiment(args: &BenchArgs, out: &mut dyn Write) -> CmdResult {
    let config = mstore::MstoreConfig {
        num: args.num.unwrap_or(mstore::DEFAULT_NUM),
        key_size: args.key_size,
        value_size: args.value_size,
        workers: args.experiment_workers.unwrap_or(2),
        throttle: args.throttle.unwrap_or(mstore::DEFAULT_THROTTLE),
        compression: args.compression.into(),
        seed: args.seed,
        repeat: args.repeat.unwrap_or(1),
        progress: std::io::stderr().is_terminal(),
        worker_program: copro::WorkerProgram::sluice(this_executable()?),
        ..mstore::MstoreConfig::default()
    };
    config.validate()?;
    let report = in_scratch(|scratch| mstore::run_mstore(&config, scratch))?;
    present(
        args,
        out,
        report.to_json(),
        mstore::table::render(&report),
        |dir| mstore::write_outputs(&report, dir),
    )
}

/// The path of this `sluice` executable, whose `worker` subcommand the experiments start.
fn this_executable() -> Result<PathBuf, Failure> {
    std::env::current_exe()
        .map_err(|e| Failure::Error(format!("cannot find the sluice executable: {e}")))
}

/// Prints an experiment's JSON (with --json) or table, then writes its files into --out.
fn present(
    args: &BenchArgs,
    out: &mut dyn Write,
    json: String,
    table: String,
    write: impl FnOnce(&Path) -> sluice::Result<Vec<PathBuf>>,
) -> CmdResult {
    if args.json {
        writeln!(out, "{json}")?;
    } else {
        write!(out, "{table}")?;
    }
    out.flush()?;
    if let Some(dir) = &args.out {
        let written = write(dir)?;
        if !args.json {
            list_written(dir, &written, out)?;
        }
    }
    Ok(())
}

/// Runs `f` in a fresh temporary directory, removed afterwards whatever the outcome.
fn in_scratch<T>(f: impl FnOnce(&Path) -> sluice::Result<T>) -> Result<T, Failure> {
    let scratch = tempfile::Builder::new()
        .prefix("sluice-experiment-")
        .tempdir()
        .map_err(|e| Failure::Error(format!("creating a temporary directory: {e}")))?;
    let outcome = f(scratch.path());
    if let Err(e) = scratch.close() {
        tracing::warn!(error = %e, "could not remove the experiment's temporary directory");
    }
    Ok(outcome?)
}

/// `wrote N files to DIR:` and their names, one per line.
pub(crate) fn list_written(
    dir: &Path,
    written: &[PathBuf],
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "wrote {} files to {}:", written.len(), dir.display())?;
    for path in written {
        let name = path.file_name().unwrap_or(path.as_os_str());
        writeln!(out, "  {}", name.to_string_lossy())?;
    }
    Ok(())
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
    let ran = run_benchmarks_until(config, &db, &stop, &mut emit);
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
        size(config.num * (config.key_size + config.value_size) as u64),
        options.compression,
        size(options.write_buffer_size as u64),
        size(options.target_file_size_base),
        size(options.block_size as u64),
        options.bloom_bits_per_key,
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
        if options.disable_auto_compactions {
            "off"
        } else {
            "on"
        },
        if options.use_direct_io_for_flush_and_compaction {
            "direct"
        } else {
            "buffered"
        },
        dir.display()
    )?;
    for d in &options.data_dirs {
        writeln!(out, "data directory: {}", d.display())?;
    }
    writeln!(out)
}

/// One line with the shape of the tree at the end of the run.
fn write_tree(db: &Db, out: &mut dyn Write) -> std::io::Result<()> {
    let m = db.metrics();
    let levels: Vec<String> = m
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| format!("L{} {} files {}", l.level, l.files, size(l.size_bytes)))
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
