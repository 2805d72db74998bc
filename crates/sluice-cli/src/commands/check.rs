//! `check`: verify every block checksum of every live table.
//!
//! Success prints `ok: N files, M blocks, B bytes verified`. Any failure to verify (damage
//! found while opening the database or reading a table, or an I/O error on a table) exits with
//! status 1 and a first line `check failed: <error>`; for damage the error starts with
//! `corrupt data in <file> at offset <n>`. Failing to open the database for other reasons
//! (say, the directory does not exist) is an ordinary error, status 2.

use std::io::Write;

use serde_json::json;
use sluice::{CheckReport, Error};

use super::{Access, open};
use crate::args::DbJsonArgs;
use crate::failure::{CmdResult, Failure};

pub fn run(args: &DbJsonArgs, out: &mut dyn Write) -> CmdResult {
    let db = match open(&args.db, Access::Existing) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => return failed(args.json, &e, out),
        Err(e) => return Err(e.into()),
    };
    let outcome = db.check();
    let closed = db.close();
    match outcome {
        Ok(report) => {
            closed?;
            passed(args.json, &report, out)
        }
        Err(e) => failed(args.json, &e, out),
    }
}

fn passed(json: bool, r: &CheckReport, out: &mut dyn Write) -> CmdResult {
    if json {
        let v = json!({ "ok": true, "files": r.files, "blocks": r.blocks, "bytes": r.bytes });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "ok: {} files, {} blocks, {} bytes verified",
            r.files, r.blocks, r.bytes
        )?;
    }
    Ok(())
}

fn failed(json: bool, e: &Error, out: &mut dyn Write) -> CmdResult {
    if json {
        let mut v = json!({ "ok": false, "corruption": e.is_corruption(), "error": e.to_string() });
        if let Error::Corruption {
            file,
            offset,
            reason,
        } = e
        {
            v["file"] = json!(file.display().to_string());
            v["offset"] = json!(offset);
            v["reason"] = json!(reason);
        }
        writeln!(out, "{v}")?;
    }
    Err(Failure::Negative(format!("check failed: {e}")))
}
