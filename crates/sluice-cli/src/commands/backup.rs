//! `backup`: incremental backups of a database into a backup directory
//! ([`sluice::backup::BackupEngine`]): `create` copies only the tables no earlier backup
//! stored, `list` shows them, `verify` reads every file back against its recorded CRC32C (exit
//! 1 on damage), `restore` writes one into a new directory, `delete` and `purge` remove them.
//! `create` opens the database read-only, so not a byte of it changes.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;
use sluice::backup::{BackupEngine, BackupMeta};
use sluice::fs::os_fs;

use super::{Access, OpenArgs, open};
use crate::failure::{CmdResult, Failure};
use crate::units::size;

/// `sluice backup`.
#[derive(Debug, Subcommand)]
pub enum BackupCommand {
    /// Back the database up as of now; prints the new backup's id and what was copied.
    Create(Box<CreateArgs>),
    /// List the backups, oldest first.
    List(DirArgs),
    /// Read every file of a backup (default: every backup) and check its size and CRC32C;
    /// exit 1 on damage.
    Verify(IdArgs),
    /// Restore a backup (default: the newest) into --to, which must not exist or be empty.
    Restore(RestoreArgs),
    /// Delete a backup, and the stored files no other backup needs.
    Delete(IdArgs),
    /// Delete all but the newest --keep backups.
    Purge(PurgeArgs),
}

/// The backup directory.
#[derive(Debug, Args)]
pub struct DirArgs {
    /// The backup directory (created by the first `backup create`).
    #[arg(long, value_name = "DIR")]
    pub backup_dir: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `sluice backup create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub dir: DirArgs,
}

/// A backup directory and, optionally, one backup in it.
#[derive(Debug, Args)]
pub struct IdArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// The backup's id (`backup list` shows them).
    #[arg(long)]
    pub id: Option<u64>,
}

/// `sluice backup restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub backup: IdArgs,
    /// Directory to restore into.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
}

/// `sluice backup purge`.
#[derive(Debug, Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub dir: DirArgs,
    /// How many of the newest backups to keep.
    #[arg(long)]
    pub keep: usize,
}

pub fn run(command: &BackupCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        BackupCommand::Create(a) => create(a, out),
        BackupCommand::List(a) => list(a, out),
        BackupCommand::Verify(a) => verify(a, out),
        BackupCommand::Restore(a) => restore(a, out),
        BackupCommand::Delete(a) => {
            let engine = BackupEngine::open(&a.dir.backup_dir, os_fs())?;
            let id =
                a.id.ok_or_else(|| Failure::Error("delete needs --id".into()))?;
            engine.delete(id)?;
            writeln!(out, "deleted backup {id}")?;
            Ok(())
        }
        BackupCommand::Purge(a) => {
            let engine = BackupEngine::open(&a.dir.backup_dir, os_fs())?;
            let deleted = engine.purge_old(a.keep)?;
            writeln!(out, "deleted {deleted} backups, kept the newest {}", a.keep)?;
            Ok(())
        }
    }
}

fn create(args: &CreateArgs, out: &mut dyn Write) -> CmdResult {
    let db = open(&args.db, Access::ReadOnly)?;
    let engine = BackupEngine::open(&args.dir.backup_dir, os_fs())?;
    let report = engine.create(&db)?;
    db.close()?;
    let m = &report.meta;
    if args.dir.json {
        let v = json!({
            "id": m.id, "sequence": m.sequence, "files": m.files.len(), "bytes": m.size(),
            "tables_copied": report.tables_copied, "tables_shared": report.tables_shared,
            "bytes_copied": report.bytes_copied,
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "backup {} at sequence {}: {} files, {}; copied {} tables and {}, {} tables shared \
             with earlier backups",
            m.id,
            m.sequence,
            m.files.len(),
            size(m.size()),
            report.tables_copied,
            size(report.bytes_copied),
            report.tables_shared
        )?;
    }
    Ok(())
}

fn list(args: &DirArgs, out: &mut dyn Write) -> CmdResult {
    let engine = BackupEngine::open_read_only(&args.backup_dir, os_fs())?;
    let backups = engine.list()?;
    if args.json {
        let v: Vec<_> = backups.iter().map(meta_json).collect();
        writeln!(out, "{}", serde_json::Value::Array(v))?;
        return Ok(());
    }
    writeln!(
        out,
        "{:>6} {:>19} {:>14} {:>7} {:>10}",
        "id", "created (UTC)", "sequence", "files", "size"
    )?;
    for m in &backups {
        let created = std::time::UNIX_EPOCH + std::time::Duration::from_secs(m.created_unix_secs);
        // Seconds are enough: the stamp's microseconds are always zero here.
        let created = sluice::info_log::timestamp(created);
        writeln!(
            out,
            "{:>6} {:>19} {:>14} {:>7} {:>10}",
            m.id,
            created.split('.').next().unwrap_or_default(),
            m.sequence,
            m.files.len(),
            size(m.size())
        )?;
    }
    Ok(())
}

fn meta_json(m: &BackupMeta) -> serde_json::Value {
    json!({
        "id": m.id, "created_unix_secs": m.created_unix_secs, "sequence": m.sequence,
        "files": m.files.len(), "bytes": m.size(),
    })
}

fn verify(args: &IdArgs, out: &mut dyn Write) -> CmdResult {
    let engine = BackupEngine::open_read_only(&args.dir.backup_dir, os_fs())?;
    let ids = match args.id {
        Some(id) => vec![id],
        None => engine.list()?.iter().map(|m| m.id).collect(),
    };
    for id in ids {
        match engine.verify(id) {
            Ok(r) => writeln!(
                out,
                "backup {id}: ok, {} files, {} verified",
                r.files,
                size(r.bytes)
            )?,
            Err(e) if e.is_corruption() => {
                return Err(Failure::Negative(format!(
                    "backup {id}: verify failed: {e}"
                )));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn restore(args: &RestoreArgs, out: &mut dyn Write) -> CmdResult {
    let engine = BackupEngine::open_read_only(&args.backup.dir.backup_dir, os_fs())?;
    let id = match args.backup.id {
        Some(id) => id,
        None => engine
            .list()?
            .last()
            .map(|m| m.id)
            .ok_or_else(|| Failure::Error("the backup directory holds no backup".into()))?,
    };
    let r = engine.restore(id, &args.to)?;
    writeln!(
        out,
        "restored backup {id} into {}: {} files, {}, every CRC32C checked",
        args.to.display(),
        r.files,
        size(r.bytes)
    )?;
    Ok(())
}
