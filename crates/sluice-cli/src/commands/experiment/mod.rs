//! `experiment`: runs one of `sluice_experiments`' reproductions with the flags it takes
//! ([`args`]) and presents it: the table (or with `--json` the JSON document) on stdout, and
//! with `--out DIR` the JSON and the figures in DIR. `sluice bench --experiment NAME` arrives
//! here too, its flags turned into the same [`ExperimentCommand`].
//!
//! Experiments keep their databases in a temporary directory that is always removed; those
//! that offload start this executable's `worker` subcommand as their workers.

mod args;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use sluice_experiments::workers::WorkerProgram;
use sluice_experiments::{
    PcpConfig, copro, mstore, run_pcp, scale, scale_out, table, write_outputs,
};

pub use args::{
    CommonArgs, CoproArgs, ExperimentCommand, MstoreArgs, PcpArgs, ScaleArgs, ScaleOutArgs,
};

use super::{list_written, temp_dir};
use crate::failure::{CmdResult, Failure};

/// Runs the experiment `command` names.
pub fn run(command: &ExperimentCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        ExperimentCommand::Pcp(args) => pcp(args, out),
        ExperimentCommand::Copro(args) => copro(args, out),
        ExperimentCommand::Mstore(args) => mstore(args, out),
        ExperimentCommand::Scale(args) => scale(args, out),
        ExperimentCommand::ScaleOut(args) => scale_out(args, out),
    }
}

fn pcp(args: &PcpArgs, out: &mut dyn Write) -> CmdResult {
    let c = &args.common;
    let config = PcpConfig {
        num: args.num,
        key_size: c.key_size,
        value_size: args.value_size,
        compression: c.compression.into(),
        seed: c.seed,
        repeat: c.repeat,
        direct_io: args.direct_io,
        progress: std::io::stderr().is_terminal(),
        ..PcpConfig::default()
    };
    config.validate()?;
    let report = in_scratch(|scratch| run_pcp(&config, scratch))?;
    present(c, out, report.to_json(), table::render(&report), |dir| {
        write_outputs(&report, dir)
    })
}

/// The list given on the command line, or `default` when none was.
fn given_or<T: Clone>(given: &[T], default: &[T]) -> Vec<T> {
    match given.is_empty() {
        true => default.to_vec(),
        false => given.to_vec(),
    }
}

fn copro(args: &CoproArgs, out: &mut dyn Write) -> CmdResult {
    let c = &args.common;
    let defaults = copro::CoproConfig::default();
    let config = copro::CoproConfig {
        value_sizes: given_or(&args.value_sizes, &defaults.value_sizes),
        workloads: given_or(&args.workloads, &defaults.workloads),
        configurations: given_or(&args.configurations, &defaults.configurations),
        separations: args.separation.clone(),
        min_blob_size: args.min_blob_size,
        data_bytes: copro::CoproConfig::data_bytes_for_num(args.num),
        key_size: c.key_size,
        workers: args.workers,
        throttle: args.throttle,
        compression: c.compression.into(),
        seed: c.seed,
        repeat: c.repeat,
        progress: std::io::stderr().is_terminal(),
        worker_program: this_worker()?,
    };
    config.validate()?;
    let report = in_scratch(|scratch| copro::run_copro(&config, scratch))?;
    present(
        c,
        out,
        report.to_json(),
        copro::table::render(&report),
        |dir| copro::write_outputs(&report, dir),
    )
}

fn mstore(args: &MstoreArgs, out: &mut dyn Write) -> CmdResult {
    let c = &args.common;
    let config = mstore::MstoreConfig {
        num: args.num,
        key_size: c.key_size,
        value_size: args.value_size,
        workers: args.workers,
        throttle: args.throttle,
        compression: c.compression.into(),
        seed: c.seed,
        repeat: c.repeat,
        progress: std::io::stderr().is_terminal(),
        worker_program: this_worker()?,
        ..mstore::MstoreConfig::default()
    };
    config.validate()?;
    let report = in_scratch(|scratch| mstore::run_mstore(&config, scratch))?;
    present(
        c,
        out,
        report.to_json(),
        mstore::table::render(&report),
        |dir| mstore::write_outputs(&report, dir),
    )
}

fn scale(args: &ScaleArgs, out: &mut dyn Write) -> CmdResult {
    let c = &args.common;
    let defaults = scale::ScaleConfig::default();
    let config = scale::ScaleConfig {
        sizes: args.sizes.clone(),
        key_size: c.key_size,
        value_size: args.value_size,
        compression: c.compression.into(),
        seed: c.seed,
        repeat: c.repeat,
        direct_io: args.direct_io,
        write_buffer_size: args.write_buffer_size.unwrap_or(defaults.write_buffer_size),
        progress: std::io::stderr().is_terminal(),
        ..defaults
    };
    config.validate()?;
    let report = in_scratch(|scratch| scale::run_scale(&config, scratch))?;
    present(
        c,
        out,
        report.to_json(),
        scale::table::render(&report),
        |dir| scale::write_outputs(&report, dir),
    )
}

fn scale_out(args: &ScaleOutArgs, out: &mut dyn Write) -> CmdResult {
    let c = &args.common;
    let config = scale_out::ScaleOutConfig {
        num: args.num,
        key_size: c.key_size,
        value_size: args.value_size,
        compression: c.compression.into(),
        seed: c.seed,
        memtable_bytes: usize::try_from(args.table_size)
            .map_err(|_| Failure::Error("--table-size is too large".into()))?,
        output_table_bytes: args.table_size,
        object_store: args.object_store.clone(),
        measured_workers: args.measured_workers.clone(),
        predicted_workers: args.predicted_workers.clone(),
        predicted_bytes: args.predicted_bytes,
        check_threads: args.check_threads,
        repeat: c.repeat,
        ..scale_out::ScaleOutConfig::new(this_worker()?)
    };
    config.validate()?;
    let report = in_scratch(|scratch| scale_out::run_scale_out(&config, scratch))?;
    present(
        c,
        out,
        report.to_json(),
        scale_out::table::render(&report),
        |dir| scale_out::write_outputs(&report, dir),
    )
}

/// This `sluice` executable's `worker` subcommand, which the offloading experiments start.
fn this_worker() -> Result<WorkerProgram, Failure> {
    std::env::current_exe()
        .map(WorkerProgram::sluice)
        .map_err(|e| Failure::Error(format!("cannot find the sluice executable: {e}")))
}

/// Prints an experiment's JSON (with --json) or table, then writes its files into --out.
fn present(
    args: &CommonArgs,
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
    let scratch = temp_dir("sluice-experiment-")?;
    let outcome = f(scratch.path());
    if let Err(e) = scratch.close() {
        tracing::warn!(error = %e, "could not remove the experiment's temporary directory");
    }
    Ok(outcome?)
}
