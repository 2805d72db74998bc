//! `ingest`: place tables written by `sst write` (or `sluice::SstFileWriter`) into a database
//! ([`sluice::Db::ingest`]): each file goes to the deepest level it can without any older
//! version of its keys above it; a file that overlaps existing data is rewritten once with a
//! new sequence number. `--keyspace NAME` ingests into that keyspace.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;
use sluice::IngestOptions;

use super::keyspace::KeyspaceArg;
use super::{Access, OpenArgs};
use crate::failure::CmdResult;

/// `sluice ingest`.
#[derive(Debug, Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// The table files, none overlapping another.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Hard-link the files in and delete them afterwards, instead of copying them.
    #[arg(long = "move")]
    pub move_files: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &IngestArgs, out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::Existing)?;
    let report = db.ingest(
        &args.files,
        &IngestOptions {
            move_files: args.move_files,
        },
    )?;
    db.close()?;
    if args.json {
        let files: Vec<_> = report
            .files
            .iter()
            .map(|f| {
                json!({
                    "source": f.source.display().to_string(), "number": f.number,
                    "level": f.level, "rewritten": f.rewritten, "entries": f.entries,
                })
            })
            .collect();
        writeln!(
            out,
            "{}",
            json!({ "files": files, "sequence": report.sequence })
        )?;
    } else {
        for f in &report.files {
            writeln!(
                out,
                "{}: {} entries into L{} as table {}{}",
                f.source.display(),
                f.entries,
                f.level,
                f.number,
                if f.rewritten {
                    " (rewritten with a new sequence number: it overlaps existing data)"
                } else {
                    ""
                }
            )?;
        }
    }
    Ok(())
}
