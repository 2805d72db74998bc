//! `put`, `get`, `delete` and `scan`.

use std::io::Write;

use sluice::{ReadOptions, WriteOptions};

use super::{Access, open};
use crate::args::{KeyArgs, PutArgs, ScanArgs};
use crate::escape::escape;
use crate::failure::{CmdResult, Failure};

pub fn put(args: &PutArgs, _out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::Create)?;
    let opts = WriteOptions { sync: args.sync };
    db.put_opt(&opts, args.key.as_bytes(), args.value.as_bytes())?;
    db.close()?;
    Ok(())
}

pub fn get(args: &KeyArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::ReadOnly)?;
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
    let db = open(&args.db, Access::Create)?;
    db.delete(args.key.as_bytes())?;
    db.close()?;
    Ok(())
}

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::ReadOnly)?;
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
