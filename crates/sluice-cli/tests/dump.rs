//! `sluice dump` and `sluice load` (RocksDB's `ldb dump` and `ldb load`): a database's keys
//! and values out as text and back, byte for byte, whatever bytes they hold.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::path::Path;

use common::{file_bytes, ok, sluice, stderr};

/// Keys and values no text format can hold as is: every byte value, the separators, the
/// escape character, an empty value.
fn awkward() -> Vec<(Vec<u8>, Vec<u8>)> {
    let every_byte: Vec<u8> = (0..=255).collect();
    vec![
        (
            every_byte.clone(),
            every_byte.iter().rev().copied().collect(),
        ),
        (b"tab\there".to_vec(), b"new\nline".to_vec()),
        (b"back\\slash".to_vec(), b"\\x41".to_vec()),
        (b"# end 3 keys".to_vec(), Vec::new()),
        (b"plain".to_vec(), b"value".to_vec()),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A database at `dir` holding [`awkward`] and `k000..k099`.
fn populated(dir: &Path) -> String {
    let db = dir.display().to_string();
    for (key, value) in awkward() {
        let (key, value) = (hex(&key), hex(&value));
        ok(&["put", "--db", &db, "--hex", &key, &value]);
    }
    let mut dump = String::from("# sluice dump v1 encoding=escaped\n");
    for i in 0..100 {
        dump.push_str(&format!("k{i:03}\tvalue {i}\n"));
    }
    dump.push_str("# end 100 keys\n");
    let file = dir.with_extension("bulk.txt");
    std::fs::write(&file, dump).unwrap();
    let loaded = ok(&["load", "--db", &db, "--input", &file.display().to_string()]);
    assert!(loaded.starts_with("loaded 100 keys"), "{loaded}");
    db
}

#[test]
fn a_dump_loads_into_an_identical_database_in_either_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(&dir.path().join("a"));
    let before = file_bytes(Path::new(&db));
    let text = ok(&["dump", "--db", &db]);
    assert_eq!(
        file_bytes(Path::new(&db)),
        before,
        "dump changed the database"
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "# sluice dump v1 encoding=escaped");
    assert_eq!(lines.last().unwrap(), &"# end 105 keys");
    assert!(text.contains("tab\\x09here\tnew\\x0aline\n"), "{text}");
    assert!(text.contains("back\\x5cslash\t\\x5cx41\n"), "{text}");

    // Into a new database, and out again: the same bytes.
    let file = dir.path().join("dump.txt");
    ok(&["dump", "--db", &db, "--output", &file.display().to_string()]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    let copy = dir.path().join("b").display().to_string();
    let out = ok(&[
        "load",
        "--db",
        &copy,
        "--create",
        "--input",
        &file.display().to_string(),
    ]);
    assert!(out.starts_with("loaded 105 keys"), "{out}");
    assert_eq!(ok(&["dump", "--db", &copy]), text);
    // Every awkward pair reads back exactly.
    for (key, value) in awkward() {
        assert_eq!(
            ok(&["get", "--db", &copy, "--hex", &hex(&key)]).trim_end(),
            hex(&value)
        );
    }

    // Hexadecimal: the header says so, and load needs no flag to read it.
    let hex_file = dir.path().join("dump.hex");
    ok(&[
        "dump",
        "--db",
        &db,
        "--hex",
        "--output",
        &hex_file.display().to_string(),
    ]);
    let hex_text = std::fs::read_to_string(&hex_file).unwrap();
    assert!(hex_text.starts_with("# sluice dump v1 encoding=hex\n"));
    assert!(hex_text.contains(&format!("{}\t{}\n", hex(b"plain"), hex(b"value"))));
    let third = dir.path().join("c").display().to_string();
    ok(&[
        "load",
        "--db",
        &third,
        "--create",
        "--input",
        &hex_file.display().to_string(),
    ]);
    assert_eq!(ok(&["dump", "--db", &third]), text);

    // A key range.
    let range = ok(&["dump", "--db", &db, "--from", "k010", "--to", "k013"]);
    assert_eq!(
        range,
        "# sluice dump v1 encoding=escaped\nk010\tvalue 10\nk011\tvalue 11\nk012\tvalue 12\n\
         # end 3 keys\n"
    );
}

#[test]
fn bad_dumps_and_missing_databases_are_errors_that_say_where() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(&dir.path().join("a"));
    let load = |text: &str| {
        let file = dir.path().join("bad.txt");
        std::fs::write(&file, text).unwrap();
        sluice(&["load", "--db", &db, "--input", &file.display().to_string()])
    };
    for (text, says) in [
        (
            "# sluice dump v1 encoding=escaped\na\tb\nno tab here\n",
            "line 3: expected",
        ),
        (
            "# sluice dump v1 encoding=hex\nabc\t00\n# end 1 keys\n",
            "line 2: key",
        ),
        ("a\tb\n", "line 1: not a sluice dump"),
        ("# sluice dump v1 encoding=escaped\na\tb\n", "cut short"),
        (
            "# sluice dump v1 encoding=escaped\na\tb\n# end 7 keys\n",
            "counts 7 keys",
        ),
    ] {
        let o = load(text);
        assert_eq!(o.status.code(), Some(2), "{text:?}");
        assert!(stderr(&o).contains(says), "{text:?}: {}", stderr(&o));
    }
    // None of the bad dumps wrote its (only, small) batch.
    assert_eq!(
        sluice(&["get", "--db", &db, "a"]).status.code(),
        Some(1),
        "a key of a rejected dump was loaded"
    );

    let missing = dir.path().join("none");
    let m = missing.display().to_string();
    let o = sluice(&["dump", "--db", &m]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no database"), "{}", stderr(&o));
    let file = dir.path().join("empty.txt");
    std::fs::write(&file, "# sluice dump v1 encoding=escaped\n# end 0 keys\n").unwrap();
    let o = sluice(&["load", "--db", &m, "--input", &file.display().to_string()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no database"), "{}", stderr(&o));
    assert!(!missing.exists(), "load without --create made a database");
}

/// Runs `sluice` with `args`, `input` on its stdin; requires status 0 and returns stdout.
fn ok_with_stdin(args: &[&str], input: &[u8]) -> String {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: stderr: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn a_keyspace_goes_through_a_pipe_and_load_hex_wants_a_hex_dump() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("a").display().to_string();
    ok(&["put", "--db", &src, "outside", "the keyspace"]);
    ok(&["keyspace", "create", "--db", &src, "users"]);
    for (key, value) in awkward() {
        let (key, value) = (hex(&key), hex(&value));
        ok(&[
            "put",
            "--db",
            &src,
            "--keyspace",
            "users",
            "--hex",
            &key,
            &value,
        ]);
    }

    // `--output -` is stdout, `--input -` stdin: `sluice dump ... | sluice load ...`.
    let text = ok(&["dump", "--db", &src, "--keyspace", "users", "--output", "-"]);
    assert_eq!(text, ok(&["dump", "--db", &src, "--keyspace", "users"]));
    assert!(text.ends_with("# end 5 keys\n"), "{text}");
    assert!(!text.contains("outside"), "{text}");
    let dst = dir.path().join("b").display().to_string();
    ok(&["keyspace", "create", "--db", &dst, "users"]);
    let loaded = ok_with_stdin(
        &["load", "--db", &dst, "--keyspace", "users", "--input", "-"],
        text.as_bytes(),
    );
    assert!(loaded.starts_with("loaded 5 keys"), "{loaded}");
    assert_eq!(ok(&["dump", "--db", &dst, "--keyspace", "users"]), text);
    assert_eq!(
        ok(&["dump", "--db", &dst]),
        "# sluice dump v1 encoding=escaped\n# end 0 keys\n",
        "the keys went to the keyspace named"
    );

    // ldb's habit, `load --hex`, reads a hex dump from stdin and refuses an escaped one.
    let hex_text = ok(&["dump", "--db", &src, "--keyspace", "users", "--hex"]);
    let third = dir.path().join("c").display().to_string();
    ok_with_stdin(
        &["load", "--db", &third, "--create", "--hex"],
        hex_text.as_bytes(),
    );
    let escaped = dir.path().join("escaped.txt");
    std::fs::write(&escaped, &text).unwrap();
    let o = sluice(&[
        "load",
        "--db",
        &third,
        "--hex",
        "--input",
        &escaped.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("line 1: the dump's encoding is escaped"),
        "{}",
        stderr(&o)
    );

    // Input that is not a dump creates no database, even with --create; nor does a keyspace
    // the new database would not have.
    let fourth = dir.path().join("d");
    let d = fourth.display().to_string();
    let not_a_dump = dir.path().join("not-a-dump.txt");
    std::fs::write(&not_a_dump, "k\tv\n").unwrap();
    let o = sluice(&[
        "load",
        "--db",
        &d,
        "--create",
        "--input",
        &not_a_dump.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("line 1: not a sluice dump"),
        "{}",
        stderr(&o)
    );
    let o = sluice(&[
        "load",
        "--db",
        &d,
        "--create",
        "--keyspace",
        "users",
        "--input",
        &escaped.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no keyspace \"users\""),
        "{}",
        stderr(&o)
    );
    assert!(!fourth.exists(), "a failed load made a database");
}
