//! `checkpoint`: an openable copy of a database in another directory, its tables hard-linked
//! where the file system allows ([`sluice::Db::checkpoint`]). The source is opened read-only,
//! so not a byte of it changes; a process holding it open read-write makes this fail as busy
//! (run the checkpoint from inside that process instead, with `Db::checkpoint`).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use super::{Access, OpenArgs, open};
use crate::failure::CmdResult;

/// `sluice checkpoint`.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    /// Directory to create the checkpoint in; must not exist, or be empty.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckpointArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::ReadOnly)?;
    let report = db.checkpoint(&args.to)?;
    db.close()?;
    if args.json {
        let v = json!({
            "dir": report.dir.display().to_string(),
            "tables_linked": report.tables_linked,
            "tables_copied": report.tables_copied,
            "wals_copied": report.wals_copied,
            "bytes_copied": report.bytes_copied,
            "sequence": report.sequence,
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "checkpoint of {} at sequence {} in {}: {} tables linked, {} copied, {} WALs \
             copied, {} bytes copied",
            args.db.at.db.display(),
            report.sequence,
            report.dir.display(),
            report.tables_linked,
            report.tables_copied,
            report.wals_copied,
            report.bytes_copied
        )?;
    }
    Ok(())
}
