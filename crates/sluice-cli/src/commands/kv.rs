//! `put`, `merge`, `get`, `delete`, `delete-range` and `scan`, each in one keyspace
//! (`--keyspace`, default `default`).
//!
//! Keys and values are text on the command line and printed escaped (`\xNN` for bytes outside
//! printable ASCII); with `--hex` both ways are hexadecimal (`--key-hex`, `--value-hex`: one
//! of them), which is how binary keys are reached; `get --raw` prints a value's bytes as they
//! are. `put` may create the database (as RocksDB's `ldb put --create_if_missing`
//! would); `delete` and `delete-range` need one to exist.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use sluice::{ReadOptions, WriteOptions};

use super::keyspace::{KeyspaceArg, WriteKeyspaceArg};
use super::{Access, OpenArgs};
use crate::escape::escape;
use crate::failure::{CmdResult, Failure};
use crate::hex;
use crate::units::parse_size;

/// How keys and values are written on the command line and printed.
#[derive(Clone, Copy, Debug, Args)]
pub struct Encoding {
    /// Keys and values are hexadecimal, as given and as printed (an optional `0x` prefix is
    /// accepted): the way to name keys that are not text.
    #[arg(long)]
    pub hex: bool,
    /// Keys only are hexadecimal (ldb's --key_hex).
    #[arg(long, conflicts_with = "hex")]
    pub key_hex: bool,
    /// Values only are hexadecimal (ldb's --value_hex).
    #[arg(long, conflicts_with = "hex")]
    pub value_hex: bool,
}

impl Encoding {
    /// The key `text`, the `what` (for the error) given on the command line, stands for.
    pub fn decode_key(self, what: &str, text: &str) -> Result<Vec<u8>, Failure> {
        decode(self.hex || self.key_hex, what, text)
    }

    /// The value (or operand) `text`, the `what` given on the command line, stands for.
    pub fn decode_value(self, what: &str, text: &str) -> Result<Vec<u8>, Failure> {
        decode(self.hex || self.value_hex, what, text)
    }

    /// How the key `bytes` are printed.
    pub fn key(self, bytes: &[u8]) -> String {
        encode(self.hex || self.key_hex, bytes)
    }

    /// How the value `bytes` are printed.
    pub fn value(self, bytes: &[u8]) -> String {
        encode(self.hex || self.value_hex, bytes)
    }
}

fn decode(hex: bool, what: &str, text: &str) -> Result<Vec<u8>, Failure> {
    match hex {
        true => hex::decode(text).map_err(|e| Failure::Error(format!("{what}: {e}"))),
        false => Ok(text.as_bytes().to_vec()),
    }
}

fn encode(hex: bool, bytes: &[u8]) -> String {
    match hex {
        true => hex::encode(bytes),
        false => escape(bytes),
    }
}

/// `sluice put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub keyspace: WriteKeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub encoding: Encoding,
    /// The key.
    pub key: String,
    /// The value (or --value-file).
    #[arg(required_unless_present = "value_file", conflicts_with = "value_file")]
    pub value: Option<String>,
    /// Take the value from FILE, byte for byte (`-`: standard input), never as hexadecimal:
    /// for values too large for an argument (Linux caps one at 128 KiB) or not text.
    #[arg(long, value_name = "FILE", conflicts_with = "value_hex")]
    pub value_file: Option<PathBuf>,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

impl PutArgs {
    /// The value: the argument, or the file's (stdin's) bytes.
    fn value(&self) -> Result<Vec<u8>, Failure> {
        match (&self.value, &self.value_file) {
            (Some(value), _) => self.encoding.decode_value("value", value),
            (None, Some(path)) if path.as_os_str() == "-" => {
                let mut value = Vec::new();
                std::io::stdin()
                    .read_to_end(&mut value)
                    .map_err(|e| Failure::Error(format!("reading the value from stdin: {e}")))?;
                Ok(value)
            }
            (None, Some(path)) => std::fs::read(path).map_err(|e| {
                Failure::Error(format!("reading the value from {}: {e}", path.display()))
            }),
            (None, None) => Err(Failure::Error("no value given".into())),
        }
    }
}

/// `sluice merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    #[command(flatten)]
    pub keyspace: WriteKeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub encoding: Encoding,
    /// The key.
    pub key: String,
    /// The operand, for the database's `--merge-operator`.
    pub operand: String,
    /// The operand is a decimal number, written as the 8-byte little-endian u64 that `u64_add`
    /// adds.
    #[arg(long, conflicts_with = "value_hex")]
    pub u64: bool,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

/// `sluice delete-range`.
#[derive(Debug, Args)]
pub struct DeleteRangeArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub encoding: Encoding,
    /// First key deleted (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: String,
    /// First key kept after the range (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: String,
    /// Sync the write-ahead log before returning.
    #[arg(long)]
    pub sync: bool,
}

/// `sluice delete`, and the key of `sluice get`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub encoding: Encoding,
    /// The key.
    pub key: String,
}

/// `sluice get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub key: KeyArgs,
    /// Print the value's bytes as they are, without escaping or a newline (to redirect a
    /// binary value into a file).
    #[arg(long, conflicts_with_all = ["hex", "value_hex"])]
    pub raw: bool,
}

/// A range's lower and upper bound as bytes; `None` is unbounded.
pub type Bounds = (Option<Vec<u8>>, Option<Vec<u8>>);

/// `--from` and `--to`: the keys `[from, to)` a command reads.
#[derive(Debug, Args)]
pub struct KeyRange {
    /// First key (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
}

impl KeyRange {
    /// The bounds as bytes, the flags' text read under `encoding`.
    pub fn bounds(&self, encoding: Encoding) -> Result<Bounds, Failure> {
        let bound = |what, text: &Option<String>| {
            text.as_deref()
                .map(|t| encoding.decode_key(what, t))
                .transpose()
        };
        Ok((bound("--from", &self.from)?, bound("--to", &self.to)?))
    }
}

/// `sluice scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    #[command(flatten)]
    pub encoding: Encoding,
    #[command(flatten)]
    pub range: KeyRange,
    /// Print at most N entries.
    #[arg(long, value_name = "N", value_parser = parse_size)]
    pub limit: Option<u64>,
}

pub fn put(args: &PutArgs, _out: &mut dyn Write) -> CmdResult {
    let key = args.encoding.decode_key("key", &args.key)?;
    let value = args.value()?;
    let db = args.keyspace.open(&args.db)?;
    let opts = WriteOptions { sync: args.sync };
    db.put_opt(&opts, &key, &value)?;
    db.close()?;
    Ok(())
}

pub fn merge(args: &MergeArgs, _out: &mut dyn Write) -> CmdResult {
    let operand = if args.u64 {
        let n: u64 = args.operand.parse().map_err(|_| {
            Failure::Error(format!(
                "--u64: {:?} is not a non-negative decimal number",
                args.operand
            ))
        })?;
        n.to_le_bytes().to_vec()
    } else {
        args.encoding.decode_value("operand", &args.operand)?
    };
    let key = args.encoding.decode_key("key", &args.key)?;
    let db = args.keyspace.open(&args.db)?;
    let opts = WriteOptions { sync: args.sync };
    db.merge_opt(&opts, &key, &operand)?;
    db.close()?;
    Ok(())
}

pub fn delete_range(args: &DeleteRangeArgs, _out: &mut dyn Write) -> CmdResult {
    let from = args.encoding.decode_key("--from", &args.from)?;
    let to = args.encoding.decode_key("--to", &args.to)?;
    let db = args.keyspace.open(&args.db, Access::Existing)?;
    let opts = WriteOptions { sync: args.sync };
    db.delete_range_opt(&opts, &from, &to)?;
    db.close()?;
    Ok(())
}

pub fn get(args: &GetArgs, out: &mut dyn Write) -> CmdResult {
    let args_key = &args.key;
    let key = args_key.encoding.decode_key("key", &args_key.key)?;
    let db = args_key.keyspace.open(&args_key.db, Access::Read)?;
    let value = db.get(&key)?;
    db.close()?;
    match value {
        Some(v) if args.raw => Ok(out.write_all(&v)?),
        Some(v) => Ok(writeln!(out, "{}", args_key.encoding.value(&v))?),
        None => Err(Failure::Negative(format!(
            "not found: {}",
            args_key.encoding.key(&key)
        ))),
    }
}

pub fn delete(args: &KeyArgs, _out: &mut dyn Write) -> CmdResult {
    let key = args.encoding.decode_key("key", &args.key)?;
    let db = args.keyspace.open(&args.db, Access::Existing)?;
    db.delete_opt(&WriteOptions::default(), &key)?;
    db.close()?;
    Ok(())
}

pub fn scan(args: &ScanArgs, out: &mut dyn Write) -> CmdResult {
    let (from, to) = args.range.bounds(args.encoding)?;
    let db = args.keyspace.open(&args.db, Access::Read)?;
    let opts = ReadOptions {
        lower_bound: from.as_deref(),
        upper_bound: to.as_deref(),
        ..ReadOptions::default()
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut it = db.raw_iter(&opts)?;
    it.seek_to_first()?;
    let mut printed = 0u64;
    while it.valid() && printed < limit {
        let (key, value) = (args.encoding.key(it.key()), args.encoding.value(it.value()));
        writeln!(out, "{key}\t{value}")?;
        printed += 1;
        it.next()?;
    }
    drop(it);
    db.close()?;
    Ok(())
}
