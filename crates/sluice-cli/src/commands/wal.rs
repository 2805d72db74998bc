//! `wal dump`: every write batch of one write-ahead log file (`NNNNNN.log`), as RocksDB's
//! `ldb dump_wal` prints them: each record's offset, first sequence number and entry count,
//! then its entries (kind, keyspace, key, value). Reads the file directly; no database is
//! opened and nothing is written.
//!
//! The log is read as recovery's default mode reads it (`PointInTime`): a torn tail, which
//! a crash leaves after writes that were never synced, ends the dump and is reported after
//! the records; damage in the middle of the log is an error naming the file and offset,
//! status 2, after the records before it are printed.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;
use sluice::WriteBatch;
use sluice::internals::filename::{FileType, parse_file_name};
use sluice::internals::wal::{LogReader, WalRecoveryMode};
use sluice_sst::fs::IoMode;

use super::kv::Encoding;
use crate::escape::kind_name;
use crate::failure::{CmdResult, Failure};

/// `sluice wal`.
#[derive(Debug, Subcommand)]
pub enum WalCommand {
    /// Print every write batch of a WAL file: offset, sequence number, entry count, then each
    /// entry's kind, keyspace, key and value.
    Dump(WalDumpArgs),
}

/// `sluice wal dump`.
#[derive(Debug, Args)]
pub struct WalDumpArgs {
    /// The WAL file (NNNNNN.log).
    pub file: PathBuf,
    #[command(flatten)]
    pub encoding: Encoding,
    /// Print one JSON object per record instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: &WalCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        WalCommand::Dump(args) => dump(args, out),
    }
}

fn dump(args: &WalDumpArgs, out: &mut dyn Write) -> CmdResult {
    let path = &args.file;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let Some((FileType::Log, number)) = parse_file_name(name) else {
        return Err(Failure::Error(format!(
            "{} is not a WAL file (NNNNNN.log)",
            path.display()
        )));
    };
    let fs = sluice_sst::fs::os_fs();
    let file = fs
        .open_read(path, IoMode::Buffered)
        .map_err(|e| Failure::Error(format!("{}: {e}", path.display())))?;
    let mut reader = LogReader::wal(file, path.clone(), WalRecoveryMode::PointInTime, number);
    let mut records = 0u64;
    while let Some(bytes) = reader.read_record()? {
        let offset = reader.last_record_offset();
        let batch = WriteBatch::from_wal_record(bytes, path, offset)?;
        records += 1;
        let entries: Vec<_> = batch.iter().collect::<Result<_, _>>()?;
        if args.json {
            let entries: Vec<_> = entries
                .iter()
                .map(|e| {
                    json!({
                        "kind": kind_name(e.kind),
                        "keyspace": e.keyspace,
                        "key": args.encoding.key(e.key),
                        "value": args.encoding.value(e.value),
                    })
                })
                .collect();
            let record = json!({
                "offset": offset,
                "sequence": batch.sequence(),
                "count": batch.count(),
                "entries": entries,
            });
            writeln!(out, "{record}")?;
            continue;
        }
        writeln!(
            out,
            "@{offset} seq {} count {}",
            batch.sequence(),
            batch.count()
        )?;
        for e in &entries {
            let keyspace = match e.keyspace {
                0 => String::new(),
                id => format!(" [keyspace {id}]"),
            };
            writeln!(
                out,
                "  {}{keyspace} {} => {}",
                kind_name(e.kind),
                args.encoding.key(e.key),
                args.encoding.value(e.value)
            )?;
        }
    }
    if !args.json {
        writeln!(
            out,
            "{records} record(s), {} byte(s) valid{}",
            reader.valid_len(),
            match reader.dropped_bytes() {
                0 => String::new(),
                n => format!("; {n} byte(s) of torn tail not shown"),
            }
        )?;
    }
    Ok(())
}
