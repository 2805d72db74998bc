//! `load`: a dump (docs/format/dump.md, written by `dump`) put back into a keyspace, in write
//! batches, refusing what is not a whole dump and naming the line it cannot read.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;

use clap::Args;
use sluice::{WriteBatch, WriteOptions};

use super::{DumpEncoding, END_PREFIX};
use crate::commands::keyspace::KeyspaceArg;
use crate::commands::{Access, OpenArgs, require_database};
use crate::failure::{CmdResult, Failure};

/// `load` writes a batch once it holds this many bytes.
const BATCH_BYTES: usize = 4 << 20;
/// The most `load` reads looking for the header line: a valid one is a few dozen bytes, and
/// a file that is not a dump (one long binary line) is refused without reading it whole.
const HEADER_MAX_BYTES: u64 = 4096;

/// `sluice load`.
#[derive(Debug, Args)]
pub struct LoadArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// Read the dump from FILE instead of stdin (`-`: stdin).
    #[arg(long, value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Require a hexadecimal dump (`dump --hex`), as `ldb load --hex` reads one: a dump whose
    /// header names the escaped encoding is refused. Without it, load reads the encoding its
    /// header names.
    #[arg(long)]
    pub hex: bool,
    /// Create the database if the directory holds none.
    #[arg(long)]
    pub create: bool,
}

/// `sluice load`: puts the entries of the dump from --input (or stdin) into the keyspace and
/// prints how many it loaded; what a failed load leaves behind is in docs/format/dump.md.
pub fn load(args: &LoadArgs, out: &mut dyn Write) -> CmdResult {
    // Before any input is read: a missing database is reported at once, not after stdin ends.
    if !args.create {
        require_database(&args.db.at.db)?;
    }
    let mut input: Box<dyn BufRead> = match args.input.as_deref() {
        Some(path) if path.as_os_str() != "-" => Box::new(std::io::BufReader::new(
            std::fs::File::open(path)
                .map_err(|e| Failure::Error(format!("opening {}: {e}", path.display())))?,
        )),
        _ => Box::new(std::io::stdin().lock()),
    };
    // The header is read before the database is opened, so input that is not a dump (or not
    // in the encoding --hex asks for) creates nothing, even with --create.
    let encoding = read_header(&mut *input, args.hex.then_some(DumpEncoding::Hex))?;
    // Opened as `put` opens it (the database exists unless --create, checked above): a load
    // writes user data, and automatic compactions run as they do in an application, so a
    // large load does not leave a deep L0 behind.
    let db = args.keyspace.open(&args.db, Access::Create)?;
    let loaded = load_entries(
        input,
        encoding,
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

/// The error for line `n` of a dump.
fn bad(n: usize, why: String) -> Failure {
    Failure::Error(format!("line {n}: {why}"))
}

/// Reads the header, the first line of `input`, and returns the encoding it names, which must
/// be `expect` if that is given (`load --hex`).
fn read_header(
    input: &mut dyn BufRead,
    expect: Option<DumpEncoding>,
) -> Result<DumpEncoding, Failure> {
    let mut line = String::new();
    match input.take(HEADER_MAX_BYTES).read_line(&mut line) {
        Ok(0) => return Err(Failure::Error("empty input: not a sluice dump".into())),
        Ok(_) => {}
        Err(e) => return Err(bad(1, format!("reading the dump: {e}"))),
    }
    let line = line.strip_suffix('\n').unwrap_or(&line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let encoding = DumpEncoding::of_header(line).map_err(|e| bad(1, e))?;
    match expect {
        Some(want) if want != encoding => Err(bad(
            1,
            format!(
                "the dump's encoding is {}, not the {} that --hex asks for (without --hex, \
                 load reads the encoding the header names)",
                encoding.name(),
                want.name()
            ),
        )),
        _ => Ok(encoding),
    }
}

/// Reads a dump's entries and end line from `input` (the lines after the header, which named
/// `encoding`), adds each entry to a batch with `put`, and hands the batches to `write` at
/// about [`BATCH_BYTES`] each; returns the keys and the key and value bytes loaded. The last
/// batch is written only once the end line has confirmed the count, so a dump cut short loads
/// at most its full batches before the error (a load only puts, so running it again is
/// harmless).
fn load_entries(
    input: Box<dyn BufRead + '_>,
    encoding: DumpEncoding,
    put: impl Fn(&mut WriteBatch, &[u8], &[u8]),
    mut write: impl FnMut(WriteBatch) -> sluice::Result<()>,
) -> Result<(u64, u64), Failure> {
    // Line 1 was the header.
    let mut lines = input.lines().enumerate().map(|(i, line)| (i + 2, line));
    let (mut keys, mut bytes) = (0u64, 0u64);
    let mut batch = WriteBatch::new();
    // The last line whose entry is written: 1 (the header) while none is.
    let mut written_to = 1;
    // Every error says what is already in the database.
    let fail = |n: usize, why: String, written_to: usize| {
        bad(n, format!("{why} ({})", loaded(written_to)))
    };
    for (n, line) in lines.by_ref() {
        let line = line.map_err(|e| fail(n, format!("reading the dump: {e}"), written_to))?;
        let Some((key, value)) = line.split_once('\t') else {
            let count = line
                .strip_prefix(END_PREFIX)
                .and_then(|rest| rest.strip_suffix(" keys"))
                .and_then(|count| count.parse::<u64>().ok())
                .ok_or_else(|| {
                    let why = "expected `key<TAB>value` or the end line";
                    fail(n, why.into(), written_to)
                })?;
            if count != keys {
                let why = format!("the end line counts {count} keys, the dump holds {keys}");
                return Err(fail(n, why, written_to));
            }
            if let Some((n, _)) = lines.find(|(_, l)| l.as_ref().map_or(true, |l| !l.is_empty())) {
                return Err(fail(n, "text after the end line".into(), written_to));
            }
            write(batch).map_err(|e| bad_batch(written_to, n, e))?;
            return Ok((keys, bytes));
        };
        let key = encoding
            .decode(key)
            .map_err(|e| fail(n, format!("key: {e}"), written_to))?;
        let value = encoding
            .decode(value)
            .map_err(|e| fail(n, format!("value: {e}"), written_to))?;
        put(&mut batch, &key, &value);
        keys += 1;
        bytes += (key.len() + value.len()) as u64;
        if batch.approximate_size() >= BATCH_BYTES {
            let full = std::mem::replace(&mut batch, WriteBatch::new());
            write(full).map_err(|e| bad_batch(written_to, n, e))?;
            written_to = n;
        }
    }
    Err(Failure::Error(format!(
        "the dump ends without its `{END_PREFIX}N keys` line: cut short? ({keys} keys read; {})",
        loaded(written_to)
    )))
}

/// What a failed load left in the database, when the entries up to line `written_to` were
/// written (1, the header's line, when none was).
fn loaded(written_to: usize) -> String {
    match written_to {
        0 | 1 => "nothing was loaded".into(),
        2 => "the entry of line 2 was loaded".into(),
        _ => format!("the entries of lines 2 to {written_to} were loaded"),
    }
}

/// The error of writing the batch of the lines after `written_to`, up to `last`.
fn bad_batch(written_to: usize, last: usize, e: sluice::Error) -> Failure {
    Failure::Error(format!(
        "writing the keys of lines {} to {last}: {e} ({})",
        written_to + 1,
        loaded(written_to)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::HEADER_PREFIX;
    use super::*;

    /// A key and its value.
    type Entry = (Vec<u8>, Vec<u8>);

    /// Loads `text` (as `load`, or `load --hex` if `expect` is `Hex`), returning the keys
    /// and values written, batch by batch.
    fn load_as(text: &str, expect: Option<DumpEncoding>) -> Result<Vec<Entry>, String> {
        let mut written = Vec::new();
        let mut input: Box<dyn BufRead> = Box::new(std::io::Cursor::new(text.to_string()));
        let encoding = read_header(&mut *input, expect).map_err(|e| format!("{e:?}"))?;
        load_entries(
            input,
            encoding,
            |b, k, v| b.put(k, v),
            |batch| {
                for entry in batch.iter() {
                    let entry = entry?;
                    written.push((entry.key.to_vec(), entry.value.to_vec()));
                }
                Ok(())
            },
        )
        .map_err(|e| format!("{e:?}"))?;
        Ok(written)
    }

    /// Loads `text` as `load` does without --hex.
    fn load_text(text: &str) -> Result<Vec<Entry>, String> {
        load_as(text, None)
    }

    #[test]
    fn hex_asks_for_a_hex_dump_and_the_header_decides_otherwise() {
        let hex = "# sluice dump v1 encoding=hex
6b	76
# end 1 keys
";
        let escaped = "# sluice dump v1 encoding=escaped
6b	76
# end 1 keys
";
        let want_hex = Some(DumpEncoding::Hex);
        assert_eq!(
            load_as(hex, want_hex).unwrap(),
            [(b"k".to_vec(), b"v".to_vec())]
        );
        let err = load_as(escaped, want_hex).unwrap_err();
        assert!(
            err.contains("line 1: the dump's encoding is escaped"),
            "{err}"
        );
        assert_eq!(
            load_text(escaped).unwrap(),
            [(b"6b".to_vec(), b"76".to_vec())]
        );
    }

    #[test]
    fn crlf_line_ends_load_as_lf() {
        let text = "# sluice dump v1 encoding=hex\r\n6b\t76\r\n# end 1 keys\r\n";
        assert_eq!(load_text(text).unwrap(), [(b"k".to_vec(), b"v".to_vec())]);
    }

    #[test]
    fn a_long_first_line_is_not_read_whole() {
        let text = format!("{}\n", "#".repeat(1 << 20));
        let err = load_text(&text).unwrap_err();
        assert!(err.contains("line 1: not a sluice dump"), "{err}");
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
        let mut text = String::new();
        for i in 0..10 {
            text.push_str(&format!("k{i}\tv\n"));
        }
        let mut batches = 0;
        let input: Box<dyn BufRead> = Box::new(std::io::Cursor::new(text));
        assert!(
            load_entries(
                input,
                DumpEncoding::Escaped,
                |b, k, v| b.put(k, v),
                |_| {
                    batches += 1;
                    Ok(())
                }
            )
            .is_err()
        );
        assert_eq!(batches, 0, "the small last batch waits for the end line");
    }

    #[test]
    fn an_error_after_a_full_batch_says_which_lines_were_loaded() {
        let mut text = String::new();
        let mib = "v".repeat(1 << 20);
        for i in 0..4 {
            text.push_str(&format!("k{i}\t{mib}\n"));
        }
        text.push_str("no tab\n");
        let mut batches = Vec::new();
        let input: Box<dyn BufRead> = Box::new(std::io::Cursor::new(text));
        let err = load_entries(
            input,
            DumpEncoding::Escaped,
            |b, k, v| b.put(k, v),
            |batch| {
                batches.push(batch.count());
                Ok(())
            },
        )
        .unwrap_err();
        assert_eq!(batches, [4], "one batch of four MiB");
        let message = format!("{err:?}");
        assert!(
            message.contains("line 6: expected `key<TAB>value` or the end line (the entries of lines 2 to 5 were loaded)"),
            "{message}"
        );
    }
}
