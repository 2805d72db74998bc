//! `range move` and `range split`: a partitioned database's range map changed by hand, as the
//! storage balancer changes it (`Db::move_range`, `Db::split_range`). Each prints the map
//! afterwards.

use std::io::Write;

use clap::{Args, Subcommand};
use sluice::Db;

use super::{Access, OpenArgs, open};
use crate::failure::CmdResult;

/// `sluice range`.
#[derive(Debug, Subcommand)]
pub enum RangeCommand {
    /// Give range RANGE to owner OWNER. Its tables stay with the old owner, still read
    /// through a forwarding entry, until compactions rewrite them into OWNER's directory.
    Move(RangeMoveArgs),
    /// Cut range RANGE in two at KEY: the keys from KEY on become range RANGE + 1, with the
    /// same owner. Tables holding keys on both sides are rewritten in two.
    Split(RangeSplitArgs),
}

/// `sluice range move`.
#[derive(Debug, Args)]
pub struct RangeMoveArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    /// The range's index in the map (`sluice stats` lists them).
    pub range: usize,
    /// The owner's index: its position among the --owner-dir flags.
    pub owner: u32,
}

/// `sluice range split`.
#[derive(Debug, Args)]
pub struct RangeSplitArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    /// The range's index in the map (`sluice stats` lists them).
    pub range: usize,
    /// The first key of the new range; strictly inside RANGE.
    pub key: String,
}

pub fn run(command: &RangeCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        RangeCommand::Move(args) => move_range(args, out),
        RangeCommand::Split(args) => split(args, out),
    }
}

fn move_range(args: &RangeMoveArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::Existing)?;
    db.move_range(args.range, args.owner)?;
    print_map(db, out)
}

fn split(args: &RangeSplitArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::Existing)?;
    db.split_range(args.range, args.key.as_bytes())?;
    print_map(db, out)
}

fn print_map(db: Db, out: &mut dyn Write) -> CmdResult {
    let map = db.range_map();
    db.close()?;
    if let Some(map) = map {
        write!(out, "{map}")?;
    }
    Ok(())
}
