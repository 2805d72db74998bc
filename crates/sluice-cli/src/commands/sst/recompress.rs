//! `sst recompress`: what one table's entries would take under each codec, like sst_dump's
//! `--command=recompress`. The entries are rewritten into scratch tables in a temporary
//! directory (the file named is only read) and each is read back, so a row gives both sides
//! of the trade: bytes stored, and the time to write and to read them.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use sluice_sst::InternalIterator;
use sluice_sst::compression::{CompressionType, DEFAULT_ZSTD_LEVEL};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions, read_raw_block};

use crate::commands::temp_dir;
use crate::failure::CmdResult;
use crate::units::{parse_size, size};

/// `sluice sst recompress`.
#[derive(Debug, Args)]
pub struct SstRecompressArgs {
    /// The table file (only read).
    pub file: PathBuf,
    /// The codecs to try, comma-separated (none,snappy,lz4,zstd); every codec this build
    /// has if not given.
    #[arg(long, value_delimiter = ',', value_parser = str::parse::<CompressionType>)]
    pub codecs: Option<Vec<CompressionType>>,
    /// Uncompressed data block size of the rewritten tables.
    #[arg(long, value_name = "BYTES", default_value = "4K", value_parser = parse_size)]
    pub block_size: u64,
    /// zstd's level.
    #[arg(long, value_name = "LEVEL", default_value_t = DEFAULT_ZSTD_LEVEL)]
    pub zstd_level: i32,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The table's entries under one codec.
#[derive(Debug, Serialize)]
struct CodecRow {
    codec: String,
    /// Bytes of the data blocks as stored (trailers excluded).
    data_bytes: u64,
    /// Uncompressed key and value bytes per stored data byte.
    ratio: f64,
    file_size: u64,
    /// Blocks stored compressed, of all data blocks: a block that does not shrink by an
    /// eighth is stored as is.
    compressed_blocks: u64,
    data_blocks: u64,
    /// Building the table: encoding, compressing, checksumming and writing its blocks.
    write_seconds: f64,
    /// Reading every entry back: reading, checking and decompressing every block.
    read_seconds: f64,
}

pub fn run(args: &SstRecompressArgs, out: &mut dyn Write) -> CmdResult {
    let source = Table::open(&args.file, 0, TableReadOptions::default())?;
    let scratch = temp_dir("sluice-recompress-")?;
    let mut rows = Vec::new();
    let codecs = args.codecs.as_deref().unwrap_or(&CompressionType::ALL);
    for &codec in codecs {
        let options = TableOptions {
            compression: codec,
            zstd_level: args.zstd_level,
            block_size: usize::try_from(args.block_size).unwrap_or(usize::MAX),
            ..TableOptions::default()
        };
        let path = scratch.path().join(format!("{codec}.sst"));
        rows.push(measure(&source, &path, &options)?);
        std::fs::remove_file(&path)?;
    }
    let p = source.properties();
    if args.json {
        let v = serde_json::json!({
            "file": args.file.display().to_string(),
            "entries": p.num_entries,
            "raw_bytes": p.raw_key_bytes + p.raw_value_bytes,
            "original": { "codec": p.compression.name(), "data_bytes": p.data_bytes,
                          "file_size": source.file_size() },
            "codecs": rows,
        });
        writeln!(out, "{v}")?;
        return Ok(());
    }
    writeln!(
        out,
        "{}: {} entries, {} of keys and values; stored with {} in {} of data blocks",
        args.file.display(),
        p.num_entries,
        size(p.raw_key_bytes + p.raw_value_bytes),
        p.compression,
        size(p.data_bytes),
    )?;
    writeln!(
        out,
        "codec  |  data bytes | raw/data |   file size | compressed blocks | write s |  read s"
    )?;
    for r in &rows {
        writeln!(
            out,
            "{:<6} | {:>11} | {:>8.2} | {:>11} | {:>7} of {:>6} | {:>7.3} | {:>7.3}",
            r.codec,
            r.data_bytes,
            r.ratio,
            r.file_size,
            r.compressed_blocks,
            r.data_blocks,
            r.write_seconds,
            r.read_seconds
        )?;
    }
    Ok(())
}

/// Writes `source`'s entries to `path` with `options`, reads them back, and reports.
fn measure(
    source: &Arc<Table>,
    path: &std::path::Path,
    options: &TableOptions,
) -> sluice_sst::Result<CodecRow> {
    let started = Instant::now();
    let mut builder = TableBuilder::create(path, options)?;
    let mut it = source.iter();
    it.seek_to_first()?;
    while it.valid() {
        builder.add(it.key(), it.value())?;
        it.next()?;
    }
    let summary = builder.finish()?;
    let write_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let table = Table::open(path, 1, TableReadOptions::default())?;
    let mut it = table.iter();
    it.seek_to_first()?;
    while it.valid() {
        it.next()?;
    }
    let read_seconds = started.elapsed().as_secs_f64();
    let mut compressed_blocks = 0;
    for (_, handle) in table.index_entries() {
        let raw = read_raw_block(table.file(), path, handle)?;
        if raw.compression() != Some(CompressionType::None) {
            compressed_blocks += 1;
        }
    }
    let p = &summary.properties;
    Ok(CodecRow {
        codec: options.compression.name().to_string(),
        data_bytes: p.data_bytes,
        ratio: match p.data_bytes {
            0 => 0.0,
            d => (p.raw_key_bytes + p.raw_value_bytes) as f64 / d as f64,
        },
        file_size: summary.file_size,
        compressed_blocks,
        data_blocks: p.num_data_blocks,
        write_seconds,
        read_seconds,
    })
}
