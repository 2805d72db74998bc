//! `ycsb`: YCSB core workloads A to F (`sluice_bench::ycsb`) with a load and a run phase,
//! printed as a table per phase or as one JSON object.
//!
//! The database lives in `--db` or, by default, in a fresh temporary directory removed at the
//! end. `--run` alone needs a database already loaded in `--db`. Ctrl-C stops the current
//! phase and still prints what it measured. With `--out DIR` the JSON object also goes to
//! `DIR/ycsb.json` and the run's charts (PNG and SVG, `sluice_bench::charts::runs`) into DIR.
//! `--dump-ycsb-ops N` opens no database: it prints the operation stream the run phase would
//! draw (`sluice_bench::ycsb::dump`), which `benches/peers/run` compares with the peers'.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::Args;
use sluice::internals::filename::current_file_name;
use sluice::{Db, IoContext, Options};
use sluice_bench::charts::write_ycsb_charts;
use sluice_bench::ycsb::report::phase_table;
use sluice_bench::ycsb::{Distribution, Workload, YcsbConfig, YcsbReport, dump_ops, run_ycsb};

use crate::engine_flags::EngineArgs;
use crate::failure::{CmdResult, Failure};
use crate::units::{parse_size, parse_usize};

/// `sluice ycsb`: counts and sizes accept `_` separators and K/M/G (binary) suffixes.
#[derive(Debug, Args)]
pub struct YcsbArgs {
    /// Core workload: a (50% read, 50% update), b (95/5), c (read only), d (95% read latest,
    /// 5% insert), e (95% short scans, 5% insert), f (50% read, 50% read-modify-write).
    #[arg(long, value_parser = parse_workload, default_value = "a")]
    pub workload: Workload,
    /// Request distribution: zipfian, uniform or latest [default: latest for d, else zipfian].
    #[arg(long, value_parser = parse_distribution)]
    pub distribution: Option<Distribution>,
    /// Keys the load phase inserts.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "100000")]
    pub records: u64,
    /// Requests of the run phase.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "100000")]
    pub operations: u64,
    /// Client threads; each phase's work is divided among them.
    #[arg(long, value_name = "N", value_parser = parse_usize, default_value = "1")]
    pub threads: usize,
    /// Bytes per value.
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "100")]
    pub value_size: usize,
    /// Bytes per key (zero-padded decimal key numbers).
    #[arg(long, value_name = "BYTES", value_parser = parse_usize, default_value = "16")]
    pub key_size: usize,
    /// Only the load phase (default: load, then run).
    #[arg(long)]
    pub load: bool,
    /// Only the run phase, on the database already loaded in --db.
    #[arg(long, requires = "db")]
    pub run: bool,
    /// Database directory [default: a fresh temporary directory, removed at the end].
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Seed of the key and value generators.
    #[arg(long, value_name = "N", value_parser = parse_size, default_value = "301")]
    pub seed: u64,
    /// Sync the write-ahead log on every write.
    #[arg(long)]
    pub sync: bool,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON object (ycsb.json) and charts (PNG and SVG: throughput over time,
    /// latency CDF per operation and, if anything compacted, compaction bandwidth and stage
    /// profile) into DIR, creating it if needed.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Run nothing: print the run phase's operation stream as one JSON line (both value
    /// buffers' digests, the count of each operation, the digest of every operation and the
    /// first N operations) and exit. The peer programs print the same bytes
    /// (benches/peers/STREAM.md section 8.4). Workloads a, b, c and f, zipfian, one thread.
    #[arg(long, value_name = "N", value_parser = parse_size, conflicts_with_all = ["load", "run", "db", "out", "json"])]
    pub dump_ycsb_ops: Option<u64>,
    #[command(flatten)]
    pub engine: EngineArgs,
}

fn parse_workload(s: &str) -> Result<Workload, String> {
    s.parse()
}

fn parse_distribution(s: &str) -> Result<Distribution, String> {
    s.parse()
}

fn config(args: &YcsbArgs) -> YcsbConfig {
    YcsbConfig {
        workload: args.workload,
        distribution: args.distribution,
        records: args.records,
        operations: args.operations,
        threads: args.threads,
        key_size: args.key_size,
        value_size: args.value_size,
        seed: args.seed,
        sync: args.sync,
        progress: std::io::stderr().is_terminal(),
    }
}

pub fn run(args: &YcsbArgs, out: &mut dyn Write) -> CmdResult {
    let config = config(args);
    if let Some(first) = args.dump_ycsb_ops {
        writeln!(out, "{}", dump_ops(&config, first)?.to_json())?;
        return Ok(());
    }
    config.validate()?;
    // Neither flag, or both: load then run.
    let (load, run) = if args.load == args.run {
        (true, true)
    } else {
        (args.load, args.run)
    };
    let (dir, temp) = match &args.db {
        Some(dir) => (dir.clone(), None),
        None => {
            let temp = super::temp_dir("sluice-ycsb-")?;
            (temp.path().to_path_buf(), Some(temp))
        }
    };
    let outcome = run_in(&dir, args, &config, load, run);
    if let Some(temp) = temp
        && let Err(e) = temp.close()
    {
        tracing::warn!(error = %e, "could not remove the temporary database");
    }
    let report = outcome?;
    if args.json {
        writeln!(out, "{}", report.to_json())?;
    } else {
        write_tables(&report, &dir, out)?;
    }
    if let Some(out_dir) = &args.out {
        let written = write_outputs(&report, out_dir)?;
        if !args.json {
            super::list_written(out_dir, &written, out)?;
        }
    }
    Ok(())
}

/// Writes `dir/ycsb.json` and the run's charts into `dir`, creating it if needed. Returns the
/// paths written, the JSON first.
fn write_outputs(report: &YcsbReport, dir: &Path) -> sluice::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("ycsb.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(write_ycsb_charts(report, dir)?);
    Ok(written)
}

fn run_in(
    dir: &Path,
    args: &YcsbArgs,
    config: &YcsbConfig,
    load: bool,
    run: bool,
) -> Result<YcsbReport, Failure> {
    let must_exist = !load;
    if must_exist && !current_file_name(dir).exists() {
        return Err(Failure::Error(format!(
            "no database in {} to run on: load one first (--load)",
            dir.display()
        )));
    }
    let options = Options {
        create_if_missing: !must_exist,
        ..args.engine.options()
    };
    options.validate()?;
    let db = Db::open(dir, options)?;
    let stop = Arc::new(AtomicBool::new(false));
    let on_interrupt = Arc::clone(&stop);
    // Without a handler (one is already installed) Ctrl-C ends the process, which recovery
    // leaves consistent.
    let _ = ctrlc::set_handler(move || on_interrupt.store(true, Ordering::Relaxed));
    let report = run_ycsb(config, &db, load, run, &stop)?;
    db.close()?;
    Ok(report)
}

fn write_tables(report: &YcsbReport, dir: &Path, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "workload {} ({} distribution), {} records, {} operations, {} threads, values {} bytes, database {}",
        report.workload,
        report.distribution,
        report.records,
        report.operations,
        report.threads,
        report.value_size,
        dir.display()
    )?;
    for phase in [&report.load, &report.run].into_iter().flatten() {
        writeln!(out)?;
        write!(out, "{}", phase_table(phase))?;
    }
    Ok(())
}
