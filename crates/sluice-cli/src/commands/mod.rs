//! The subcommands, one module each, and the way they open a database.

mod bench;
pub mod chart;
mod check;
mod compact;
mod kv;
mod manifest;
mod sst;
mod stats;
pub mod ycsb;

use std::io::Write;
use std::path::Path;

use sluice::filename::current_file_name;
use sluice::{Db, Options};

use crate::args::{Command, ManifestCommand, SstCommand};
use crate::failure::{CmdResult, Failure};

/// Runs `command`, writing its output to `out`.
pub fn run(command: Command, out: &mut dyn Write) -> CmdResult {
    match command {
        Command::Put(a) => kv::put(&a, out),
        Command::Get(a) => kv::get(&a, out),
        Command::Delete(a) => kv::delete(&a, out),
        Command::Scan(a) => kv::scan(&a, out),
        Command::Compact(a) => compact::run(&a, out),
        Command::Stats(a) => stats::run(&a, out),
        Command::Check(a) => check::run(&a, out),
        Command::Sst(SstCommand::Dump(a)) => sst::dump(&a, out),
        Command::Manifest(ManifestCommand::Dump(a)) => manifest::dump(&a, out),
        Command::Bench(a) => bench::run(&a, out),
        Command::Ycsb(a) => ycsb::run(&a, out),
        Command::Chart(c) => chart::run(&c, out),
        Command::Worker(a) => sluice_worker::run(*a).map_err(Failure::Error),
    }
}

/// How a command uses the database it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Writes user data: creates the database if the directory holds none, and lets automatic
    /// compactions run as they would in an application.
    Create,
    /// Reads or maintains an existing database (a missing one is an error). No automatic
    /// compaction starts, so the command returns as soon as its own work is done and figures
    /// it prints are its own (opening still replays the WAL, as every open does).
    Existing,
}

/// Opens the database in `dir` with default options adjusted for `access`.
fn open(dir: &Path, access: Access) -> sluice::Result<Db> {
    open_with(dir, access, Options::default())
}

/// Opens the database in `dir` with `base` options adjusted for `access`.
fn open_with(dir: &Path, access: Access, base: Options) -> sluice::Result<Db> {
    if access == Access::Existing && !current_file_name(dir).exists() {
        return Err(sluice::Error::InvalidArgument(format!(
            "no database in {} (it has no CURRENT file)",
            dir.display()
        )));
    }
    let options = Options {
        create_if_missing: access == Access::Create,
        disable_auto_compactions: access == Access::Existing,
        ..base
    };
    Db::open(dir, options)
}
