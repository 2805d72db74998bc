//! `repair`: rebuild a damaged database from the files that can still be read
//! ([`sluice::repair()`], RocksDB's `RepairDB`), then print what was kept and what was dropped.
//!
//! Exit status 0 once the database is repaired, even if data was dropped: the report lists
//! every dropped region and every file set aside in `lost/`. Status 2 if it could not be.

use std::io::Write;

use clap::Args;
use serde_json::json;
use sluice::RepairReport;

use super::DbArg;
use crate::engine_flags::EngineArgs;
use crate::failure::CmdResult;
use crate::units::size;

/// `sluice repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// The options the rebuilt tables are written with; `--data-dir` (`--data-dirs`) names
    /// the database's data directories, in order, whose tables are repaired too.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// In each key range a damaged or missing table took with it, delete every version no
    /// newer than what that table held: a key whose newest version was lost then reads as
    /// absent rather than as an older value.
    #[arg(long)]
    pub drop_older_in_lost_ranges: bool,
}

pub fn run(args: &RepairArgs, out: &mut dyn Write) -> CmdResult {
    if !args.db.owner_dirs.is_empty() {
        return Err(sluice::Error::InvalidArgument(
            "repair of a partitioned database is not supported".into(),
        )
        .into());
    }
    let how = sluice::RepairOptions {
        drop_older_in_lost_ranges: args.drop_older_in_lost_ranges,
    };
    let report = sluice::repair_with(
        &args.db.db,
        args.db.with_object_store(args.engine.options())?,
        &how,
    )?;
    if args.json {
        writeln!(out, "{}", report_json(&report))?;
    } else {
        write_text(&args.db.db, &report, out)?;
    }
    Ok(())
}

fn write_text(dir: &std::path::Path, r: &RepairReport, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "repaired {}: the MANIFEST was {}",
        dir.display(),
        if r.manifest_readable {
            "readable (its obsolete tables were set aside)"
        } else {
            "unreadable (every table found was used)"
        }
    )?;
    writeln!(
        out,
        "kept: {} whole tables, good blocks of {} damaged tables, {} WAL files ({} records)",
        r.tables_whole, r.tables_partial, r.wal_files, r.wal_records
    )?;
    writeln!(
        out,
        "wrote: {} tables, {} entries, {} into the bottom level; last sequence {}",
        r.output_tables,
        r.output_entries,
        size(r.output_bytes),
        r.last_sequence
    )?;
    for d in &r.dropped {
        writeln!(out, "dropped: {d}")?;
    }
    for m in &r.missing {
        writeln!(out, "missing: {} (listed in the MANIFEST)", m.display())?;
    }
    for range in &r.lost_ranges {
        writeln!(out, "lost range: {range}")?;
    }
    if let Some(file) = &r.lost_ranges_file {
        let done = match r.dropped_older_in_lost_ranges {
            true => "their older versions were deleted",
            false => "--drop-older-in-lost-ranges deletes them",
        };
        let at_risk: u64 = r.lost_ranges.iter().map(|l| l.keys_at_risk).sum();
        writeln!(
            out,
            "{at_risk} keys in lost ranges may read an older value ({done}); listed in {}",
            file.display()
        )?;
    }
    for l in &r.lost {
        writeln!(
            out,
            "set aside: {} -> {} ({})",
            l.path.display(),
            l.moved_to.display(),
            l.reason
        )?;
    }
    let dropped: u64 = r.dropped.iter().map(|d| d.bytes).sum();
    writeln!(
        out,
        "{} bytes dropped, {} files missing, {} files set aside",
        dropped,
        r.missing.len(),
        r.lost.len()
    )
}

fn report_json(r: &RepairReport) -> serde_json::Value {
    json!({
        "manifest_readable": r.manifest_readable,
        "tables_whole": r.tables_whole,
        "tables_partial": r.tables_partial,
        "wal_files": r.wal_files,
        "wal_records": r.wal_records,
        "output_tables": r.output_tables,
        "output_entries": r.output_entries,
        "output_bytes": r.output_bytes,
        "last_sequence": r.last_sequence,
        "dropped": r.dropped.iter().map(|d| json!({
            "file": d.file.display().to_string(), "offset": d.offset, "bytes": d.bytes,
            "reason": d.reason,
        })).collect::<Vec<_>>(),
        "missing": r.missing.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "lost_ranges": r.lost_ranges.iter().map(|l| json!({
            "file": l.file.display().to_string(),
            "smallest": l.smallest.escape_ascii().to_string(),
            "largest": l.largest.escape_ascii().to_string(),
            "smallest_seq": l.seqs.0, "largest_seq": l.seqs.1,
            "keys_at_risk": l.keys_at_risk,
        })).collect::<Vec<_>>(),
        "dropped_older_in_lost_ranges": r.dropped_older_in_lost_ranges,
        "lost_ranges_file": r.lost_ranges_file.as_ref().map(|p| p.display().to_string()),
        "lost": r.lost.iter().map(|l| json!({
            "file": l.path.display().to_string(),
            "moved_to": l.moved_to.display().to_string(),
            "reason": l.reason,
        })).collect::<Vec<_>>(),
    })
}
