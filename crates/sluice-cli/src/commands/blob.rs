//! `blob dump`: what one blob file (`NNNNNN.blob`, the values value separation keeps out of
//! the tables) holds: its size and footer counts, then every record: offset, size, key, value
//! length and, with `--values`, the value's first bytes. Reads the file directly; no database
//! is opened and nothing is written.
//!
//! Unlike `sst dump`, which lists entries only with `--entries`, every run reads every record:
//! reading them is what checks a blob file (each record's checksum, lengths and compression,
//! and that together they add up to the footer's counts), and one line per record is little
//! next to the values it describes. The first damaged record ends the command with status 2
//! and `error: corrupt data in <file> at offset <n>: <why>`; in text, the records before it
//! are printed first.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use sluice::internals::filename::{FileType, parse_file_name};
use sluice_sst::blob::{BlobFile, BlobRecord, RECORD_HEADER_LEN};
use sluice_sst::fs::Storage;

use crate::escape::escape;
use crate::failure::{CmdResult, Failure};
use crate::units::size;

/// Value bytes `--values` shows of each record: enough to recognise a value, while a line
/// stays a line however large the value is (`sluice get` prints a whole one).
const VALUE_PREVIEW_BYTES: usize = 64;

/// `sluice blob`.
#[derive(Debug, Subcommand)]
pub enum BlobCommand {
    /// Print a blob file's size and footer counts, then every record (offset, size, key,
    /// value length; with --values the value's first bytes), checking each as it is read.
    Dump(BlobDumpArgs),
}

/// `sluice blob dump`.
#[derive(Debug, Args)]
pub struct BlobDumpArgs {
    /// The blob file. Its name, `NNNNNN.blob` as in a database directory, gives its number.
    pub file: PathBuf,
    /// Also print each value, escaped, cut after its first 64 bytes (a trailing `...` says
    /// it was).
    #[arg(long)]
    pub values: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: &BlobCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        BlobCommand::Dump(args) => dump(args, out),
    }
}

fn dump(args: &BlobDumpArgs, out: &mut dyn Write) -> CmdResult {
    let number = blob_file_number(&args.file)?;
    let file = BlobFile::open(&Storage::default(), &args.file, number)?;
    if args.json {
        let mut v = summary_json(&file, number);
        v["records"] = Value::Array(records_json(&file, args.values)?);
        writeln!(out, "{v}")?;
    } else {
        write_summary(&file, number, out)?;
        writeln!(out, "records:")?;
        write_records(&file, args.values, out)?;
    }
    Ok(())
}

/// The number in a blob file's name. Any other name is refused: the number is what the
/// tables' references name, so a dump under a made-up one would show references that are not.
fn blob_file_number(path: &Path) -> Result<u64, Failure> {
    let name = path.file_name().and_then(|n| n.to_str());
    match name.and_then(parse_file_name) {
        Some((FileType::Blob, number)) => Ok(number),
        _ => Err(Failure::Error(format!(
            "{}: not a blob file name (blob files are named NNNNNN.blob, their number)",
            path.display()
        ))),
    }
}

/// Bytes of the value as stored: compressed, or the value itself when compressing did not pay.
fn stored_len(r: &BlobRecord) -> u64 {
    r.blob
        .size
        .saturating_sub(RECORD_HEADER_LEN as u64 + r.key.len() as u64)
}

/// The first [`VALUE_PREVIEW_BYTES`] of `value`, escaped, and whether that is not all of it.
fn value_preview(value: &[u8]) -> (String, bool) {
    let shown = &value[..value.len().min(VALUE_PREVIEW_BYTES)];
    (escape(shown), shown.len() < value.len())
}

fn write_summary(f: &BlobFile, number: u64, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "file: {}", f.path().display())?;
    writeln!(out, "file number: {number}")?;
    writeln!(out, "file size: {} bytes ({})", f.size(), size(f.size()))?;
    writeln!(out, "footer:")?;
    writeln!(out, "  records: {}", f.records())?;
    writeln!(
        out,
        "  value bytes: {} ({})",
        f.value_bytes(),
        size(f.value_bytes())
    )?;
    Ok(())
}

/// `  offset O size S: 'key' value_len=N stored_len=M[ value='...'[...]]`.
fn record_line(r: &BlobRecord, values: bool) -> String {
    let mut line = format!(
        "  offset {} size {}: '{}' value_len={} stored_len={}",
        r.blob.offset,
        r.blob.size,
        escape(&r.key),
        r.value.len(),
        stored_len(r)
    );
    if values {
        let (shown, cut) = value_preview(&r.value);
        line.push_str(&format!(" value='{shown}'{}", if cut { "..." } else { "" }));
    }
    line
}

/// One line per record, each written as soon as it is read, so that a damaged record still
/// shows what came before it.
fn write_records(f: &BlobFile, values: bool, out: &mut dyn Write) -> CmdResult {
    for record in f.records_iter() {
        writeln!(out, "{}", record_line(&record?, values))?;
    }
    Ok(())
}

fn summary_json(f: &BlobFile, number: u64) -> Value {
    json!({
        "file": f.path().display().to_string(),
        "file_number": number,
        "file_size": f.size(),
        "footer": { "records": f.records(), "value_bytes": f.value_bytes() },
    })
}

fn record_json(r: &BlobRecord, values: bool) -> Value {
    let mut v = json!({
        "offset": r.blob.offset,
        "size": r.blob.size,
        "key": escape(&r.key),
        "value_len": r.value.len(),
        "stored_len": stored_len(r),
    });
    if values {
        let (shown, cut) = value_preview(&r.value);
        v["value"] = json!(shown);
        v["value_truncated"] = json!(cut);
    }
    v
}

/// Every record as JSON; the first damaged one is the error.
fn records_json(f: &BlobFile, values: bool) -> sluice_sst::Result<Vec<Value>> {
    f.records_iter()
        .map(|r| r.map(|r| record_json(&r, values)))
        .collect()
}

#[cfg(test)]
mod tests {
    use sluice_sst::blob::BlobRef;

    use super::*;

    fn record(key: &[u8], value: &[u8]) -> BlobRecord {
        BlobRecord {
            blob: BlobRef {
                file_number: 7,
                offset: 16,
                size: (RECORD_HEADER_LEN + key.len() + value.len()) as u64,
            },
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    #[test]
    fn only_blob_file_names_give_a_number() {
        assert_eq!(
            blob_file_number(Path::new("/db/000042.blob")).ok(),
            Some(42)
        );
        for bad in [
            "/db/000042.sst",
            "/db/x.blob",
            "/db/CURRENT",
            "/",
            "000042.blob.bak",
        ] {
            let err = blob_file_number(Path::new(bad)).unwrap_err();
            assert!(
                matches!(err, Failure::Error(m) if m.contains("NNNNNN.blob")),
                "{bad}"
            );
        }
    }

    #[test]
    fn long_values_are_cut_and_say_so() {
        let long = vec![b'v'; VALUE_PREVIEW_BYTES + 1];
        let line = record_line(&record(b"k\t1", &long), true);
        let shown = "v".repeat(VALUE_PREVIEW_BYTES);
        assert_eq!(
            line,
            format!("  offset 16 size 85: 'k\\x091' value_len=65 stored_len=65 value='{shown}'...")
        );
        assert_eq!(value_preview(b"a\\b"), ("a\\x5cb".to_string(), false));
        let v = record_json(&record(b"k", &long), true);
        assert_eq!(
            (v["value_truncated"].as_bool(), v["value_len"].as_u64()),
            (Some(true), Some(65))
        );
        assert!(
            record_json(&record(b"k", b"v"), false)
                .get("value")
                .is_none()
        );
        assert_eq!(
            record_line(&record(b"k", b"v"), false),
            "  offset 16 size 19: 'k' value_len=1 stored_len=1"
        );
    }
}
