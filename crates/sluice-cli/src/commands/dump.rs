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
//! database.

use std::io::{BufRead, BufWriter, Write};
use std::path::PathBuf;

use clap::Args;
use sluice::{ReadOptions, WriteBatch, WriteOptions};

use super::keyspace::KeyspaceArg;
use super::kv::Encoding;
use super::{Access, OpenArgs};
use crate::escape::{escape, unescape};
use crate::failure::{CmdResult, Failure};
use crate::hex;

/// The first line's text before the encoding.
const HEADER_PREFIX: &str = "# sluice dump v1 encoding=";
/// The last line: `# end N keys`.
const END_PREFIX: &str = "# end ";
/// `load` writes a batch once it holds this many bytes.
const BATCH_BYTES: usize = 4 << 20;

/// `sluice dump`.
#[derive(Debug, Args)]
pub struct DumpArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// Keys and values in hexadecimal instead of text with `\xNN` escapes (the header says
    /// which, so `load` needs no flag).
    #[command(flatten)]
    pub encoding: Encoding,
    /// First key dumped (inclusive).
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// Stop before this key (exclusive).
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Write the dump to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `sluice load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// Read the dump from FILE instead of stdin.
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Create the database if the directory holds none.
    #[arg(long)]
    pub create: bool,
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
    fn name(self) -> &'static str {
        match self {
            DumpEncoding::Escaped => "escaped",
            DumpEncoding::Hex => "hex",
        }
    }

    fn encode(self, bytes: &[u8]) -> String {
        match self {
            DumpEncoding::Escaped => escape(bytes),
            DumpEncoding::Hex => hex::encode(bytes),
        }
    }

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

pub fn dump(args: &DumpArgs, out: &mut dyn Write) -> CmdResult {
    let bound = |what, text: &Option<String>| {
        text.as_deref()
            .map(|t| args.encoding.decode(what, t))
            .transpose()
    };
    let (from, to) = (bound("--from", &args.from)?, bound("--to", &args.to)?);
    let encoding = match args.encoding.hex {
        true => DumpEncoding::Hex,
        false => DumpEncoding::Escaped,
    };
    let db = args.keyspace.open(&args.db, Access::ReadOnly)?;
    let mut file;
    let mut stdout;
    let sink: &mut dyn Write = match &args.output {
        Some(path) => {
            file = BufWriter::new(
                std::fs::File::create(path)
                    .map_err(|e| Failure::Error(format!("creating {}: {e}", path.display())))?,
            );
            &mut file
        }
        None => {
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
    let mut it = db.iter(&opts)?;
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

pub fn load(args: &LoadArgs, out: &mut dyn Write) -> CmdResult {
    let input: Box<dyn BufRead> = match &args.input {
        Some(path) => Box::new(std::io::BufReader::new(
            std::fs::File::open(path)
                .map_err(|e| Failure::Error(format!("opening {}: {e}", path.display())))?,
        )),
        None => Box::new(std::io::stdin().lock()),
    };
    let access = match args.create {
        true => Access::Create,
        false => Access::Existing,
    };
    let db = args.keyspace.open(&args.db, access)?;
    let loaded = load_lines(
        input,
        |batch, key, value| batch.put_in(&db, key, value),
        |batch| db.db().write(&WriteOptions::default(), batch),
    );
    // Closing syncs the WAL: what was loaded is durable once the command returns.
    db.close()?;
    let (keys, bytes) = loaded?;
    writeln!(
        out,
        "loaded {keys} keys ({:.1} MB of keys and values) into {}",
        bytes as f64 / 1e6,
        args.db.at.db.display()
    )?;
    Ok(())
}

/// Reads a dump from `input`, adds each entry to a batch with `put`, and hands the batches to
/// `write` at about [`BATCH_BYTES`] each; returns the keys and the key and value bytes
/// loaded. The last batch is
/// written only once the end line has confirmed the count, so a dump cut short loads at most
/// its full batches before the error (a load only puts, so running it again is harmless).
fn load_lines(
    input: Box<dyn BufRead + '_>,
    put: impl Fn(&mut WriteBatch, &[u8], &[u8]),
    mut write: impl FnMut(WriteBatch) -> sluice::Result<()>,
) -> Result<(u64, u64), Failure> {
    let mut lines = input.lines().enumerate().map(|(i, line)| (i + 1, line));
    let bad = |n: usize, why: String| Failure::Error(format!("line {n}: {why}"));
    let encoding = match lines.next() {
        Some((n, line)) => {
            let line = line.map_err(|e| bad(n, format!("reading the dump: {e}")))?;
            DumpEncoding::of_header(&line).map_err(|e| bad(n, e))?
        }
        None => return Err(Failure::Error("empty input: not a sluice dump".into())),
    };
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut batch = WriteBatch::new();
    let mut batch_first_line = 2;
    for (n, line) in lines.by_ref() {
        let line = line.map_err(|e| bad(n, format!("reading the dump: {e}")))?;
        let Some((key, value)) = line.split_once('\t') else {
            let count = line
                .strip_prefix(END_PREFIX)
                .and_then(|rest| rest.strip_suffix(" keys"))
                .and_then(|count| count.parse::<u64>().ok())
                .ok_or_else(|| bad(n, "expected `key<TAB>value` or the end line".into()))?;
            if count != keys {
                return Err(bad(
                    n,
                    format!("the end line counts {count} keys, the dump holds {keys}"),
                ));
            }
            if let Some((n, _)) = lines.find(|(_, l)| l.as_ref().map_or(true, |l| !l.is_empty())) {
                return Err(bad(n, "text after the end line".into()));
            }
            write(batch).map_err(|e| bad_batch(batch_first_line, n, e))?;
            return Ok((keys, bytes));
        };
        let key = encoding
            .decode(key)
            .map_err(|e| bad(n, format!("key: {e}")))?;
        let value = encoding
            .decode(value)
            .map_err(|e| bad(n, format!("value: {e}")))?;
        put(&mut batch, &key, &value);
        keys += 1;
        bytes += (key.len() + value.len()) as u64;
        if batch.approximate_size() >= BATCH_BYTES {
            let full = std::mem::replace(&mut batch, WriteBatch::new());
            write(full).map_err(|e| bad_batch(batch_first_line, n, e))?;
            batch_first_line = n + 1;
        }
    }
    Err(Failure::Error(format!(
        "the dump ends without its `{END_PREFIX}N keys` line: cut short? ({} keys read; the \
         lines before {batch_first_line} were loaded)",
        keys
    )))
}

/// The error of writing the batch of lines `first..=last`.
fn bad_batch(first: usize, last: usize, e: sluice::Error) -> Failure {
    Failure::Error(format!(
        "writing the keys of lines {first} to {last}: {e} (the lines before {first} were \
         loaded)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key and its value.
    type Entry = (Vec<u8>, Vec<u8>);

    /// Loads `text`, returning the keys and values written, batch by batch.
    fn load_text(text: &str) -> Result<Vec<Entry>, String> {
        let mut written = Vec::new();
        let input: Box<dyn BufRead> = Box::new(std::io::Cursor::new(text.to_string()));
        load_lines(input, WriteBatch::put, |batch| {
            for entry in batch.iter() {
                let entry = entry?;
                written.push((entry.key.to_vec(), entry.value.to_vec()));
            }
            Ok(())
        })
        .map_err(|e| format!("{e:?}"))?;
        Ok(written)
    }

    #[test]
    fn both_encodings_load_what_they_name() {
        let escaped = "# sluice dump v1 encoding=escaped\na\\x09b\tv\\x5c\n# end 1 keys\n";
        assert_eq!(
            load_text(escaped).unwrap(),
            [(b"a\tb".to_vec(), b"v\\".to_vec())]
        );
        let hex = "# sluice dump v1 encoding=hex\n00ff\t\n# end 1 keys\n";
        assert_eq!(load_text(hex).unwrap(), [(vec![0, 0xff], vec![])]);
    }

    #[test]
    fn what_is_not_a_whole_dump_is_an_error_naming_the_line() {
        for (text, says) in [
            ("", "empty input"),
            ("a\tb\n", "line 1: not a sluice dump"),
            ("# sluice dump v1 encoding=base64\n", "unknown encoding"),
            (
                "# sluice dump v1 encoding=hex\nzz\t00\n# end 1 keys\n",
                "line 2: key",
            ),
            (
                "# sluice dump v1 encoding=escaped\na\tb\\q\n",
                "line 2: value: bad escape",
            ),
            (
                "# sluice dump v1 encoding=escaped\na b\n",
                "line 2: expected",
            ),
            (
                "# sluice dump v1 encoding=escaped\na\tb\n",
                "without its `# end",
            ),
            (
                "# sluice dump v1 encoding=escaped\na\tb\n# end 2 keys\n",
                "counts 2 keys",
            ),
            (
                "# sluice dump v1 encoding=escaped\n# end 0 keys\nx\ty\n",
                "line 3: text after",
            ),
        ] {
            let err = load_text(text).unwrap_err();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    proptest::proptest! {
        /// Any keys and values, in either encoding, load back as they were dumped.
        #[test]
        fn any_bytes_survive_the_text(
            entries in proptest::collection::btree_map(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
                proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
                0..16,
            ),
            hex in proptest::prelude::any::<bool>(),
        ) {
            let encoding = if hex { DumpEncoding::Hex } else { DumpEncoding::Escaped };
            let mut text = format!("{HEADER_PREFIX}{}\n", encoding.name());
            for (key, value) in &entries {
                text.push_str(&format!("{}\t{}\n", encoding.encode(key), encoding.encode(value)));
            }
            text.push_str(&format!("{END_PREFIX}{} keys\n", entries.len()));
            let loaded = load_text(&text).map_err(proptest::test_runner::TestCaseError::fail)?;
            proptest::prop_assert_eq!(loaded, entries.into_iter().collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_dump_cut_short_writes_nothing_past_its_full_batches() {
        let mut text = String::from("# sluice dump v1 encoding=escaped\n");
        for i in 0..10 {
            text.push_str(&format!("k{i}\tv\n"));
        }
        let mut batches = 0;
        let input: Box<dyn BufRead> = Box::new(std::io::Cursor::new(text));
        assert!(
            load_lines(input, WriteBatch::put, |_| {
                batches += 1;
                Ok(())
            })
            .is_err()
        );
        assert_eq!(batches, 0, "the small last batch waits for the end line");
    }
}
