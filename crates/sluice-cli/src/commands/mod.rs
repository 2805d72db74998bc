//! The subcommands, one module each, and the way they open a database.

mod bench;
pub mod chart;
mod check;
mod compact;
mod kv;
mod manifest;
mod range;
pub mod repair;
mod sst;
mod stats;
pub mod stress;
pub mod ycsb;

use std::io::Write;

use sluice::filename::current_file_name;
use sluice::options::{PartitionOptions, PartitionOwner};
use sluice::{Db, Options};

use crate::args::{Command, DbArg, ManifestCommand, RangeCommand, SstCommand};
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
        Command::Repair(a) => repair::run(&a, out),
        Command::Sst(SstCommand::Dump(a)) => sst::dump(&a, out),
        Command::Manifest(ManifestCommand::Dump(a)) => manifest::dump(&a, out),
        Command::Range(RangeCommand::Move(a)) => range::move_range(&a, out),
        Command::Range(RangeCommand::Split(a)) => range::split(&a, out),
        Command::Bench(a) => bench::run(&a, out),
        Command::Ycsb(a) => ycsb::run(&a, out),
        Command::Stress(a) => stress::run(&a, out),
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
    /// Maintains an existing database (a missing one is an error). No automatic compaction
    /// starts, so the command returns as soon as its own work is done and figures it prints
    /// are its own (opening still replays the WAL, as every read-write open does).
    Existing,
    /// Reads an existing database without changing a byte of it ([`Db::open_read_only`]): the
    /// WAL's records are served from memory.
    ReadOnly,
}

/// Opens the database in `dir` with default options adjusted for `access`.
fn open(db: &DbArg, access: Access) -> sluice::Result<Db> {
    open_with(db, access, Options::default())
}

/// Opens the database `db` names with `base` options adjusted for `access` and, with
/// `--owner-dir`, for its partitions. The CLI never balances: it inspects or edits the data.
fn open_with(db: &DbArg, access: Access, base: Options) -> sluice::Result<Db> {
    let dir = db.db.as_path();
    if access != Access::Create && !current_file_name(dir).exists() {
        return Err(sluice::Error::InvalidArgument(format!(
            "no database in {} (it has no CURRENT file)",
            dir.display()
        )));
    }
    let partitions = (!db.owner_dirs.is_empty()).then(|| PartitionOptions {
        owners: db
            .owner_dirs
            .iter()
            .map(|dir| PartitionOwner {
                dir: dir.clone(),
                worker: None,
            })
            .collect(),
        balance: None,
        load_balance: None,
        ..PartitionOptions::default()
    });
    let options = Options {
        create_if_missing: access == Access::Create,
        disable_auto_compactions: access != Access::Create,
        partitions: partitions.or(base.partitions.clone()),
        ..base
    };
    let opened = match access {
        Access::ReadOnly => Db::open_read_only(dir, options),
        Access::Create | Access::Existing => Db::open(dir, options),
    };
    opened.map_err(|e| match e {
        sluice::Error::InvalidArgument(m) if m.contains("partitioned") => {
            sluice::Error::InvalidArgument(format!(
                "{m} (pass its owner directories with --owner-dir, in owner order)"
            ))
        }
        other => other,
    })
}
