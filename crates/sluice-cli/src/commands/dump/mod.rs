//! `dump` and `load`: a keyspace's live keys and values as text, and back (RocksDB's
//! `ldb dump` and `ldb load`). The format is documented byte by byte in docs/format/dump.md:
//!
//! ```text
//! # sluice dump v1 encoding=escaped
//! apple<TAB>red
//! k\x00\x01<TAB>\xff
//! # end 2 keys
//! ```
//!
//! The header names the encoding, so `load` never reads hexadecimal as text or the reverse;
//! the end line carries the count, so a dump cut short is an error rather than a smaller
//! database. This module holds the format and `dump`; `load` is in [`load`].

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use sluice::ReadOptions;

use super::keyspace::KeyspaceArg;
use super::kv::{Encoding, KeyRange};
use super::{Access, OpenArgs};
use crate::escape::{escape, unescape};
use crate::failure::{CmdResult, Failure};
use crate::hex;

mod load;

pub use load::{LoadArgs, load};

/// The first line's text before the encoding.
const HEADER_PREFIX: &str = "# sluice dump v1 encoding=";
/// The last line: `# end N keys`.
const END_PREFIX: &str = "# end ";

/// `sluice dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// Keys and values in hexadecimal instead of text with `\xNN` escapes (the header says
    /// which, so `load` needs no flag); `--from` and `--to` are then hexadecimal too.
    #[arg(long)]
    pub hex: bool,
    #[command(flatten)]
    pub range: KeyRange,
    /// Write the dump to FILE instead of stdout (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// How a dump's keys and values are written: the header's `encoding=` word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DumpEncoding {
    /// `\xNN` escapes for bytes outside printable ASCII and for `\` ([`escape`]).
    Escaped,
    /// Lower-case hexadecimal, two digits a byte ([`hex`]).
    Hex,
}

impl DumpEncoding {
    /// The header's word for the encoding.
    fn name(self) -> &'static str {
        match self {
            DumpEncoding::Escaped => "escaped",
            DumpEncoding::Hex => "hex",
        }
    }

    /// `bytes` as a key or value of a dump line.
    fn encode(self, bytes: &[u8]) -> String {
        match self {
            DumpEncoding::Escaped => escape(bytes),
            DumpEncoding::Hex => hex::encode(bytes),
        }
    }

    /// The bytes a key or value of a dump line stands for.
    fn decode(self, text: &str) -> Result<Vec<u8>, String> {
        match self {
            DumpEncoding::Escaped => unescape(text),
            DumpEncoding::Hex => hex::decode(text),
        }
    }

    /// The encoding a header line names.
    fn of_header(line: &str) -> Result<Self, String> {
        match line.strip_prefix(HEADER_PREFIX) {
            Some("escaped") => Ok(DumpEncoding::Escaped),
            Some("hex") => Ok(DumpEncoding::Hex),
            Some(other) => Err(format!("unknown encoding {other:?} (escaped or hex)")),
            None => Err(format!(
                "not a sluice dump: the first line is not `{HEADER_PREFIX}...`"
            )),
        }
    }
}

/// `sluice dump`: opens the database read-only (not a byte of it changes) and streams the
/// keyspace's entries in [--from, --to) from one iterator, so from one snapshot, to --output or
/// `out`, one line at a time: the dump's size is not held in memory.
pub fn dump(args: &DumpArgs, out: &mut dyn Write) -> CmdResult {
    let bounds = Encoding {
        hex: args.hex,
        key_hex: false,
        value_hex: false,
    };
    let (from, to) = args.range.bounds(bounds)?;
    let encoding = match args.hex {
        true => DumpEncoding::Hex,
        false => DumpEncoding::Escaped,
    };
    let db = args.keyspace.open(&args.db, Access::Read)?;
    let mut file;
    let mut stdout;
    let sink: &mut dyn Write = match args.output.as_deref() {
        Some(path) if path.as_os_str() != "-" => {
            file = BufWriter::new(
                std::fs::File::create(path)
                    .map_err(|e| Failure::Error(format!("creating {}: {e}", path.display())))?,
            );
            &mut file
        }
        _ => {
            stdout = BufWriter::new(out);
            &mut stdout
        }
    };
    writeln!(sink, "{HEADER_PREFIX}{}", encoding.name())?;
    // One iterator reads one snapshot: the dump is of a single point in time.
    let opts = ReadOptions {
        lower_bound: from.as_deref(),
        upper_bound: to.as_deref(),
        ..ReadOptions::default()
    };
    let mut it = db.raw_iter(&opts)?;
    it.seek_to_first()?;
    let mut keys = 0u64;
    while it.valid() {
        let (key, value) = (encoding.encode(it.key()), encoding.encode(it.value()));
        writeln!(sink, "{key}\t{value}")?;
        keys += 1;
        it.next()?;
    }
    writeln!(sink, "{END_PREFIX}{keys} keys")?;
    sink.flush()?;
    drop(it);
    db.close()?;
    Ok(())
}
