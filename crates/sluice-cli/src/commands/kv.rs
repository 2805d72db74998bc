//! `put`, `merge`, `get`, `delete`, `delete-range` and `scan`, each in one keyspace
//! (`--keyspace`, default `default`).

use std::io::Write;

use clap::Args;
use sluice::{ReadOptions, WriteOptions};

use super::keyspace::{KeyspaceArg, WriteKeyspaceArg};
use super::{Access, OpenArgs};
use crate::escape::escape;
use crate::failure::{CmdResult, Failure};
use crate::units::parse_size;

/// `sluice put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub keyspace: WriteKeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

/// `sluice merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    #[command(flatten)]
    pub keyspace: WriteKeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// The key.
    pub key: String,
    /// The operand, for the database's `--merge-operator`.
    pub operand: String,
    /// The operand is a decimal number, written as the 8-byte little-endian u64 that `u64_add`
    /// adds.
    #[arg(long)]
    pub u64: bool,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

/// `sluice delete-range`.
#[derive(Debug, Args)]
pub struct DeleteRangeArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// First key deleted (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: String,
    /// First key kept after the range (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: String,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

/// `sluice get` and `sluice delete`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// The key.
    pub key: String,
}

/// `sluice scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// First key (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Print at most N entries.
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub limit: Option<u64>,
}

pub fn put(args: &PutArgs, _out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db)?;
    let opts = WriteOptions { sync: args.sync };
    db.put_opt(&opts, args.key.as_bytes(), args.value.as_bytes())?;
    db.close()?;
    Ok(())
}

pub fn merge(args: &MergeArgs, _out: &mut dyn Write) -> CmdResult {
    let operand = if args.u64 {
        let n: u64 = args.operand.parse().map_err(|_| {
            Failure::Error(format!(
                "--u64: {:?} is not a non-negative decimal number",
                args.operand
            ))
        })?;
        n.to_le_bytes().to_vec()
    } else {
        args.operand.as_bytes().to_vec()
    };
    let db = args.keyspace.open(&args.db)?;
    let opts = WriteOptions { sync: args.sync };
    db.merge_opt(&opts, args.key.as_bytes(), &operand)?;
    db.close()?;
    Ok(())
}

pub fn delete_range(args: &DeleteRangeArgs, _out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::Create)?;
    let opts = WriteOptions { sync: args.sync };
    db.delete_range_opt(&opts, args.from.as_bytes(), args.to.as_bytes())?;
    db.close()?;
    Ok(())
}

pub fn get(args: &KeyArgs, out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::ReadOnly)?;
    let value = db.get(args.key.as_bytes())?;
    db.close()?;
    match value {
        Some(v) => Ok(writeln!(out, "{}", escape(&v))?),
        None => Err(Failure::Negative(format!(
            "not found: {}",
            escape(args.key.as_bytes())
        ))),
    }
}

pub fn delete(args: &KeyArgs, _out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::Create)?;
    db.delete_opt(&WriteOptions::default(), args.key.as_bytes())?;
    db.close()?;
    Ok(())
}

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::ReadOnly)?;
    let opts = ReadOptions {
        lower_bound: args.from.as_deref().map(str::as_bytes),
        upper_bound: args.to.as_deref().map(str::as_bytes),
        ..ReadOptions::default()
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut it = db.iter(&opts)?;
    it.seek_to_first()?;
    let mut printed = 0u64;
    while it.valid() && printed < limit {
        writeln!(out, "{}\t{}", escape(it.key()), escape(it.value()))?;
        printed += 1;
        it.next()?;
    }
    drop(it);
    db.close()?;
    Ok(())
}
