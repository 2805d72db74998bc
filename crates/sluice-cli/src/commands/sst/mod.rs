//! `sst dump`: what one table file holds: footer, properties, index summary, and optionally
//! every entry. Reads the file directly; no database is opened.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use sluice_sst::InternalIterator;
use sluice_sst::format::BlockHandle;
use sluice_sst::key::{MAX_SEQ, parse_internal_key, seek_key};
use sluice_sst::properties::{TableProperties, VALUE_SIZE_BUCKETS};
use sluice_sst::table::{Table, TableReadOptions};
use sluice_sst::{Error, Result};

use super::kv::{Encoding, KeyRange};
use crate::escape::{escape, internal_key_json_with, internal_key_with, kind_name, unescape};
use crate::failure::{CmdResult, Failure};
use crate::units::size;

mod recompress;

/// `sluice sst`.
#[derive(Debug, Subcommand)]
pub enum SstCommand {
    /// Print a table's footer, properties and index summary (and, with --entries, every entry).
    Dump(SstDumpArgs),
    /// Write a table for `sluice ingest` from `key<TAB>value` lines in strictly increasing key
    /// order (what `sluice scan` prints, `\xNN` escapes included), read from --input or stdin.
    Write(SstWriteArgs),
    /// Rewrite a table's entries under each codec (in a temporary directory; the file is only
    /// read) and print the sizes and the time to write and read them back, like sst_dump's
    /// `--command=recompress`.
    Recompress(recompress::SstRecompressArgs),
}

/// `sluice sst write`.
#[derive(Debug, Args)]
pub struct SstWriteArgs {
    /// The table file to create.
    pub file: PathBuf,
    /// Read the lines from this file instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
}

/// `sluice sst dump`.
#[derive(Debug, Args)]
pub struct SstDumpArgs {
    /// The table file.
    pub file: PathBuf,
    /// Also list every entry: key, sequence number, kind and value length (sst_dump's
    /// `--command=scan`).
    #[arg(long)]
    pub entries: bool,
    /// With --entries: start at this user key (a seek: the entries before it are not read).
    #[arg(long, value_name = "KEY", requires = "entries")]
    pub from: Option<String>,
    /// With --entries: stop before this user key.
    #[arg(long, value_name = "KEY", requires = "entries")]
    pub to: Option<String>,
    /// With --entries: print each entry's value too.
    #[arg(long, requires = "entries")]
    pub values: bool,
    #[command(flatten)]
    pub encoding: Encoding,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The entries `sst dump --entries` lists: the user keys in `[from, to)`, printed with
/// `encoding`, values included if `values`.
struct EntryFilter {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
    values: bool,
    encoding: Encoding,
}

impl EntryFilter {
    fn of(args: &SstDumpArgs) -> Result<Self, Failure> {
        // The flags are this command's own (they need --entries); their reading is scan's.
        let range = KeyRange {
            from: args.from.clone(),
            to: args.to.clone(),
        };
        let (from, to) = range.bounds(args.encoding)?;
        Ok(EntryFilter {
            from,
            to,
            values: args.values,
            encoding: args.encoding,
        })
    }
}

pub fn run(command: &SstCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        SstCommand::Dump(args) => dump(args, out),
        SstCommand::Write(args) => write(args, out),
        SstCommand::Recompress(args) => recompress::run(args, out),
    }
}

fn write(args: &SstWriteArgs, out: &mut dyn Write) -> CmdResult {
    let input: Box<dyn std::io::BufRead> = match &args.input {
        Some(path) => Box::new(std::io::BufReader::new(std::fs::File::open(path)?)),
        None => Box::new(std::io::stdin().lock()),
    };
    let mut writer = sluice::SstFileWriter::create(&args.file, &Default::default())?;
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let bad = |why: String| Failure::Error(format!("line {}: {why}", n + 1));
        let (key, value) = line
            .split_once('\t')
            .ok_or_else(|| bad("expected `key<TAB>value`".into()))?;
        let (key, value) = (unescape(key).map_err(bad)?, unescape(value).map_err(bad)?);
        writer.put(&key, &value).map_err(|e| bad(e.to_string()))?;
    }
    let file = writer.finish()?;
    writeln!(
        out,
        "wrote {}: {} entries, {}, keys {} to {}",
        file.path.display(),
        file.entries,
        size(file.file_size),
        escape(&file.smallest_key),
        escape(&file.largest_key)
    )?;
    Ok(())
}

fn dump(args: &SstDumpArgs, out: &mut dyn Write) -> CmdResult {
    let filter = EntryFilter::of(args)?;
    let table = Table::open(&args.file, 0, TableReadOptions::default())?;
    if args.json {
        let mut v = summary_json(&table, args.encoding);
        if args.entries {
            v["entries"] = Value::Array(entries_json(&table, &filter)?);
        }
        writeln!(out, "{v}")?;
    } else {
        write_summary(&table, args.encoding, out)?;
        if args.entries {
            writeln!(out, "entries:")?;
            write_entries(&table, &filter, out)?;
        }
    }
    Ok(())
}

/// Smallest, largest and mean stored size of the data blocks (trailers excluded).
fn block_sizes(index: &[(Vec<u8>, BlockHandle)]) -> (u64, u64, f64) {
    let sizes = index.iter().map(|(_, h)| h.size);
    let min = sizes.clone().min().unwrap_or(0);
    let max = sizes.clone().max().unwrap_or(0);
    let mean = if index.is_empty() {
        0.0
    } else {
        sizes.sum::<u64>() as f64 / index.len() as f64
    };
    (min, max, mean)
}

/// Uncompressed key and value bytes per stored data byte.
fn compression_ratio(p: &TableProperties) -> f64 {
    if p.data_bytes == 0 {
        0.0
    } else {
        (p.raw_key_bytes + p.raw_value_bytes) as f64 / p.data_bytes as f64
    }
}

/// The size range counted by value-size histogram bucket `i`.
fn bucket_label(i: usize) -> String {
    match i {
        0 => "0 B".to_string(),
        _ if i == VALUE_SIZE_BUCKETS - 1 => format!(">= {}", size(1 << (i - 1))),
        _ => format!("{}..{} B", 1u64 << (i - 1), (1u64 << i) - 1),
    }
}

fn handle_text(h: &BlockHandle) -> String {
    format!("offset {} size {}", h.offset, h.size)
}

/// The text summary; `encoding` writes the user keys in it.
fn write_summary(t: &Table, encoding: Encoding, out: &mut dyn Write) -> std::io::Result<()> {
    let internal_key = |ikey: &[u8]| internal_key_with(ikey, |b| encoding.key(b));
    let p = t.properties();
    let f = t.footer();
    let index = t.index_entries();
    writeln!(out, "file: {}", t.path().display())?;
    writeln!(
        out,
        "file size: {} bytes ({})",
        t.file_size(),
        size(t.file_size())
    )?;
    writeln!(out, "footer:")?;
    writeln!(out, "  format version: {}", f.format_version)?;
    writeln!(out, "  index block: {}", handle_text(&f.index))?;
    match &f.filter {
        Some(h) => writeln!(out, "  filter block: {}", handle_text(h))?,
        None => writeln!(out, "  filter block: none")?,
    }
    writeln!(out, "  properties block: {}", handle_text(&f.properties))?;
    writeln!(out, "properties:")?;
    writeln!(
        out,
        "  entries: {} ({} deletions)",
        p.num_entries, p.num_deletions
    )?;
    writeln!(out, "  data blocks: {}", p.num_data_blocks)?;
    writeln!(out, "  smallest key: {}", internal_key(&p.smallest_key))?;
    writeln!(out, "  largest key: {}", internal_key(&p.largest_key))?;
    writeln!(
        out,
        "  sequence numbers: {}..={}",
        p.smallest_seq, p.largest_seq
    )?;
    writeln!(out, "  raw key bytes: {}", p.raw_key_bytes)?;
    writeln!(out, "  raw value bytes: {}", p.raw_value_bytes)?;
    writeln!(out, "  data bytes: {}", p.data_bytes)?;
    writeln!(out, "  index bytes: {}", p.index_bytes)?;
    writeln!(out, "  filter bytes: {}", p.filter_bytes)?;
    writeln!(
        out,
        "  compression: {} ({:.2}x raw/stored)",
        p.compression,
        compression_ratio(p)
    )?;
    let hex = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| format!("{v:016x}"));
    writeln!(out, "  entry digest: {}", hex(p.entry_digest))?;
    writeln!(
        out,
        "  prefix extractor: {}",
        p.prefix_extractor.as_deref().unwrap_or("none (whole keys)")
    )?;
    writeln!(out, "  task nonce: {}", hex(p.task_nonce))?;
    for (blob, tally) in p.blob_refs.iter() {
        writeln!(
            out,
            "  blob references: #{blob:06}: {} refs, {} bytes",
            tally.refs, tally.bytes
        )?;
    }
    writeln!(out, "  value sizes:")?;
    for (i, &count) in p.value_size_histogram.iter().enumerate() {
        if count > 0 {
            writeln!(out, "    {:>18}: {count}", bucket_label(i))?;
        }
    }
    let (min, max, mean) = block_sizes(&index);
    writeln!(out, "index:")?;
    writeln!(out, "  data blocks: {}", index.len())?;
    writeln!(
        out,
        "  stored block size: min {min}, mean {mean:.0}, max {max} bytes"
    )?;
    if let (Some((first, _)), Some((last, _))) = (index.first(), index.last()) {
        writeln!(out, "  first block ends at: {}", internal_key(first))?;
        writeln!(out, "  last block ends at: {}", internal_key(last))?;
    }
    Ok(())
}

fn handle_json(h: &BlockHandle) -> Value {
    json!({ "offset": h.offset, "size": h.size })
}

/// The JSON summary; `encoding` writes the user keys in it.
fn summary_json(t: &Table, encoding: Encoding) -> Value {
    let internal_key_json = |ikey: &[u8]| internal_key_json_with(ikey, |b| encoding.key(b));
    let p = t.properties();
    let f = t.footer();
    let index = t.index_entries();
    let (min, max, mean) = block_sizes(&index);
    let histogram: Vec<Value> = p
        .value_size_histogram
        .iter()
        .enumerate()
        .filter(|&(_, &count)| count > 0)
        .map(|(i, &count)| json!({ "bucket": i, "range": bucket_label(i), "count": count }))
        .collect();
    json!({
        "file": t.path().display().to_string(),
        "file_size": t.file_size(),
        "footer": {
            "format_version": f.format_version,
            "index": handle_json(&f.index),
            "filter": f.filter.as_ref().map(handle_json),
            "properties": handle_json(&f.properties),
        },
        "properties": {
            "num_entries": p.num_entries,
            "num_deletions": p.num_deletions,
            "num_data_blocks": p.num_data_blocks,
            "raw_key_bytes": p.raw_key_bytes,
            "raw_value_bytes": p.raw_value_bytes,
            "data_bytes": p.data_bytes,
            "index_bytes": p.index_bytes,
            "filter_bytes": p.filter_bytes,
            "smallest_key": internal_key_json(&p.smallest_key),
            "largest_key": internal_key_json(&p.largest_key),
            "smallest_seq": p.smallest_seq,
            "largest_seq": p.largest_seq,
            "compression": p.compression.name(),
            "compression_ratio": compression_ratio(p),
            "entry_digest": p.entry_digest.map(|d| format!("{d:016x}")),
            "prefix_extractor": p.prefix_extractor,
            "task_nonce": p.task_nonce.map(|n| format!("{n:016x}")),
            "blob_refs": p.blob_refs.iter()
                .map(|(blob, t)| json!({ "blob": blob, "refs": t.refs, "bytes": t.bytes }))
                .collect::<Vec<_>>(),
            "value_size_histogram": histogram,
        },
        "index": {
            "data_blocks": index.len(),
            "min_block_bytes": min,
            "max_block_bytes": max,
            "mean_block_bytes": mean,
        },
    })
}

/// Calls `visit(user_key, seq, kind, value)` for every entry `filter` keeps, in order: it
/// seeks to `filter.from` and stops at `filter.to`.
fn for_each_entry(
    t: &Arc<Table>,
    filter: &EntryFilter,
    mut visit: impl FnMut(&[u8], u64, &'static str, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut it = t.iter();
    match &filter.from {
        Some(from) => it.seek(&seek_key(from, MAX_SEQ))?,
        None => it.seek_to_first()?,
    }
    while it.valid() {
        let ikey = it.key();
        let k = parse_internal_key(ikey).ok_or_else(|| {
            Error::corruption(
                t.path(),
                0,
                format!("entry key '{}' is not an internal key", escape(ikey)),
            )
        })?;
        if filter.to.as_deref().is_some_and(|to| k.user_key >= to) {
            break;
        }
        visit(k.user_key, k.seq, kind_name(k.kind), it.value())?;
        it.next()?;
    }
    Ok(())
}

fn write_entries(t: &Arc<Table>, filter: &EntryFilter, out: &mut dyn Write) -> CmdResult {
    // An output error stops the walk; it is kept aside so it is reported as what it is (a
    // closed pipe is a quiet success) rather than as a table error.
    let mut write_error = None;
    let walked = for_each_entry(t, filter, |key, seq, kind, value| {
        let key = filter.encoding.key(key);
        let written = match filter.values {
            true => writeln!(
                out,
                "  '{key}' @ {seq} {kind} value_len={} value='{}'",
                value.len(),
                filter.encoding.value(value)
            ),
            false => writeln!(out, "  '{key}' @ {seq} {kind} value_len={}", value.len()),
        };
        written.map_err(|e| {
            write_error = Some(e);
            Error::Cancelled
        })
    });
    if let Some(e) = write_error {
        return Err(e.into());
    }
    Ok(walked?)
}

fn entries_json(t: &Arc<Table>, filter: &EntryFilter) -> Result<Vec<Value>> {
    let mut entries = Vec::new();
    for_each_entry(t, filter, |key, seq, kind, value| {
        let mut entry = json!({
            "key": filter.encoding.key(key),
            "seq": seq,
            "kind": kind,
            "value_len": value.len(),
        });
        if filter.values {
            entry["value"] = json!(filter.encoding.value(value));
        }
        entries.push(entry);
        Ok(())
    })?;
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_labels_cover_the_histogram() {
        assert_eq!(bucket_label(0), "0 B");
        assert_eq!(bucket_label(1), "1..1 B");
        assert_eq!(bucket_label(7), "64..127 B");
        assert_eq!(bucket_label(VALUE_SIZE_BUCKETS - 1), ">= 4.00 MiB");
    }

    #[test]
    fn block_sizes_of_an_empty_index_are_zero() {
        assert_eq!(block_sizes(&[]), (0, 0, 0.0));
        let idx = vec![
            (vec![], BlockHandle::new(0, 100)),
            (vec![], BlockHandle::new(105, 300)),
        ];
        assert_eq!(block_sizes(&idx), (100, 300, 200.0));
    }
}
