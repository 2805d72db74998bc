//! `range move` and `range split`: a partitioned database's range map changed by hand, as the
//! storage balancer changes it (`Db::move_range`, `Db::split_range`). Each prints the map
//! afterwards.

use std::io::Write;

use sluice::Db;

use super::{Access, open};
use crate::args::{RangeMoveArgs, RangeSplitArgs};
use crate::failure::CmdResult;

pub fn move_range(args: &RangeMoveArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::Existing)?;
    db.move_range(args.range, args.owner)?;
    print_map(db, out)
}

pub fn split(args: &RangeSplitArgs, out: &mut dyn Write) -> CmdResult {
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
