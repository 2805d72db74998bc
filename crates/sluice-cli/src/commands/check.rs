//! `check`: verify the MANIFEST, every WAL, every block checksum of every live table and
//! every record of every blob file, without changing the database (it is opened read-only).
//!
//! Success prints `ok: N files, M blocks, B bytes verified; MANIFEST: E edits; WAL: W files,
//! R records`; a database with blob files (value separation) adds `blob: F files, R
//! references; ` before `MANIFEST`: the blob files whose every record was read, and the
//! references in the tables checked to land on a record of their key (B counts the blob
//! files' bytes too). `--json` always has `blob_files` and `blob_references`, and
//! `file_checksums`: the tables whose every byte matched the checksum the MANIFEST recorded
//! (all but those written by older builds).
//!
//! A live table that is not the file the MANIFEST pinned (another table renamed over it, of
//! any size; a symbolic link) fails the check naming it, as damage does.
//!
//! Any failure to verify exits with status 1 and a first line `check failed: <error>`: damage
//! found while opening the database or reading a table or blob file (the error starts with
//! `corrupt data in <file> at offset <n>`), an I/O error on a table, or any byte of the
//! MANIFEST or a WAL that recovery would not apply (a torn tail included: the line names the
//! file, the offset and why). Failing to open the database for other reasons (say, the
//! directory does not exist) is an ordinary error, status 2.

use std::io::Write;

use clap::Args;
use serde_json::json;
use sluice::{CheckReport, Error};

use super::{Access, OpenArgs, open};
use crate::failure::{CmdResult, Failure};

/// `sluice check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs, out: &mut dyn Write) -> CmdResult {
    let db = match open(&args.db, Access::ReadOnly) {
        Ok(db) => db,
        Err(e) if e.is_corruption() => return failed(args.json, &e, out),
        Err(e) => return Err(e.into()),
    };
    let outcome = db.check();
    let closed = db.close();
    match outcome {
        Ok(report) if report.recovery.dropped.is_empty() => {
            closed?;
            passed(args.json, &report, out)
        }
        Ok(report) => dropped(args.json, &report, out),
        Err(e) => failed(args.json, &e, out),
    }
}

fn passed(json: bool, r: &CheckReport, out: &mut dyn Write) -> CmdResult {
    let rec = &r.recovery;
    if json {
        let v = json!({
            "ok": true, "files": r.files, "blocks": r.blocks, "bytes": r.bytes,
            "manifest_edits": rec.manifest_edits, "wal_files": rec.wal_files,
            "wal_records": rec.wal_records, "blob_files": r.blob_files,
            "blob_references": r.blob_references, "file_checksums": r.file_checksums,
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "ok: {} files, {} blocks, {} bytes verified; {}MANIFEST: {} edits; WAL: {} files, \
             {} records",
            r.files,
            r.blocks,
            r.bytes,
            blob_text(r),
            rec.manifest_edits,
            rec.wal_files,
            rec.wal_records
        )?;
    }
    Ok(())
}

/// `blob: F files, R references; `, or nothing for a database without blob files, whose line
/// stays as it was before value separation (scripts may match it).
fn blob_text(r: &CheckReport) -> String {
    if r.blob_files == 0 && r.blob_references == 0 {
        String::new()
    } else {
        format!(
            "blob: {} files, {} references; ",
            r.blob_files, r.blob_references
        )
    }
}

/// Recovery would not apply part of the MANIFEST or a WAL: data on disk is not accounted for.
fn dropped(json: bool, r: &CheckReport, out: &mut dyn Write) -> CmdResult {
    let drops = &r.recovery.dropped;
    if json {
        let v = json!({
            "ok": false, "corruption": false,
            "error": format!("recovery drops {} bytes", r.recovery.dropped_bytes()),
            "dropped": drops.iter().map(|d| json!({
                "file": d.file.display().to_string(), "offset": d.offset, "bytes": d.bytes,
                "reason": d.reason,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
    } else {
        for d in drops {
            writeln!(out, "dropped: {d}")?;
        }
    }
    Err(Failure::Negative(format!(
        "check failed: recovery drops {} bytes of {} (run with RUST_LOG=warn for details; \
         `sluice repair` salvages what is readable)",
        r.recovery.dropped_bytes(),
        drops
            .iter()
            .map(|d| format!("{} at offset {}", d.file.display(), d.offset))
            .collect::<Vec<_>>()
            .join(", ")
    )))
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
