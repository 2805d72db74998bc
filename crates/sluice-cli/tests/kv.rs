//! The key-value commands as an operator coming from `ldb` uses them: binary keys and values
//! through `--hex`, a value from a file or standard input, and write commands that refuse a
//! missing database instead of creating one; and `stats --prometheus`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{db_arg, ok, sluice, stderr};

#[test]
fn hex_reaches_binary_keys_and_values_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // A key with a NUL, a newline and a high byte; a value with a tab.
    ok(&["put", "--db", &db, "--hex", "000aff", "0x6109620a"]);
    assert_eq!(ok(&["get", "--db", &db, "--hex", "000AFF"]), "6109620a\n");
    // Without --hex, "000aff" is a text key, and another one.
    let o = sluice(&["get", "--db", &db, "000aff"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    ok(&["put", "--db", &db, "b", "text"]);
    assert_eq!(
        ok(&["scan", "--db", &db, "--hex"]),
        "000aff\t6109620a\n62\t74657874\n"
    );
    assert_eq!(
        ok(&["scan", "--db", &db, "--hex", "--from", "01"]),
        "62\t74657874\n"
    );
    assert_eq!(
        ok(&["scan", "--db", &db]),
        "\\x00\\x0a\\xff\ta\\x09b\\x0a\nb\ttext\n"
    );
    ok(&[
        "delete-range",
        "--db",
        &db,
        "--hex",
        "--from",
        "00",
        "--to",
        "01",
    ]);
    ok(&["delete", "--db", &db, "--hex", "62"]);
    assert_eq!(ok(&["scan", "--db", &db]), "");
    // Not hexadecimal: a usage error naming the argument, and nothing written.
    let o = sluice(&["put", "--db", &db, "--hex", "0g", "00"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("key: \"0g\""), "{}", stderr(&o));
    assert_eq!(ok(&["scan", "--db", &db]), "");
}

#[test]
fn a_value_comes_from_a_file_or_stdin_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // Over Linux's 128 KiB limit for one argument, and every byte value.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7) as u8).collect();
    let file = dir.path().join("value.bin");
    std::fs::write(&file, &big).unwrap();
    ok(&[
        "put",
        "--db",
        &db,
        "k",
        "--value-file",
        file.to_str().unwrap(),
    ]);
    let hex = ok(&["get", "--db", &db, "--hex", "6b"]);
    assert_eq!(hex.trim_end(), sluice_hex(&big));

    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["put", "--db", &db, "s", "--value-file", "-"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"from\nstdin\0")
        .unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(ok(&["get", "--db", &db, "s"]), "from\\x0astdin\\x00\n");

    // A value and --value-file, or neither: usage errors.
    for args in [
        &["put", "--db", &db, "k", "v", "--value-file", "x"][..],
        &["put", "--db", &db, "k"],
    ] {
        assert_eq!(sluice(args).status.code(), Some(2), "{args:?}");
    }
    let o = sluice(&["put", "--db", &db, "k", "--value-file", "/nonexistent/v"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/v"), "{}", stderr(&o));
}

fn sluice_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn only_put_and_merge_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let db = missing.display().to_string();
    for args in [
        &["delete", "--db", &db, "k"][..],
        &["delete-range", "--db", &db, "--from", "a", "--to", "b"],
        &["manifest", "dump", "--db", &db],
        &["stats", "--db", &db],
        &["compact", "--db", &db],
    ] {
        let o = sluice(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(
            stderr(&o).contains(&format!("no database in {db}")),
            "{args:?}: {}",
            stderr(&o)
        );
        assert!(!Path::new(&missing).exists(), "{args:?} created it");
    }
    ok(&["put", "--db", &db, "k", "v"]);
    assert!(missing.join("CURRENT").exists());
}

#[test]
fn stats_prints_prometheus_text() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "k", "v"]);
    let text = ok(&["stats", "--db", &db, "--prometheus"]);
    assert!(text.contains("# TYPE sluice_level_files gauge\n"), "{text}");
    // The replayed WAL's memtable is flushed or held: either way level 0 is named.
    assert!(text.contains("sluice_level_files{level=\"0\"} "), "{text}");
    assert!(
        text.lines()
            .all(|l| l.starts_with('#') || l.starts_with("sluice_"))
    );
    let o = sluice(&["stats", "--db", &db, "--prometheus", "--json"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn stats_on_a_closed_database_shows_its_last_session() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // Each put's open flushes the WAL of the one before: overlapping L0 tables.
    for i in 0..5 {
        ok(&["put", "--db", &db, "k", &format!("v{i}")]);
    }
    ok(&["compact", "--db", &db]);
    let text = ok(&["stats", "--db", &db]);
    let last = text
        .lines()
        .find(|l| l.starts_with("last session (closed "))
        .unwrap_or_else(|| panic!("{text}"));
    // `compact` merged them: its session's figures.
    assert!(last.contains("1 compaction(s)"), "{last}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    assert_eq!(
        v["last_session"]["metrics"]["compaction"]["count"], 1,
        "{v}"
    );
    // Its whole table: the compaction wrote into L6, the base level of a small tree.
    let table = ok(&["stats", "--db", &db, "--last-session"]);
    assert!(table.starts_with("last session, closed 20"), "{table}");
    let l6 = table
        .lines()
        .find(|l| l.starts_with("    6 |"))
        .unwrap_or_else(|| panic!("{table}"));
    let comps = l6.split('|').nth(11).map(str::trim);
    assert_eq!(comps, Some("1"), "one compaction into L6: {l6}");
    assert!(table.contains("L0 compacts into L6"), "{table}");
    assert!(table.contains("compaction:     1 jobs"), "{table}");
    let v: serde_json::Value =
        serde_json::from_str(&ok(&["stats", "--db", &db, "--last-session", "--json"])).unwrap();
    assert_eq!(v["compaction"]["count"], 1, "{v}");
    // A database no read-write session has closed has none.
    let fresh = tempfile::tempdir().unwrap();
    let fresh_db = db_arg(fresh.path());
    ok(&["put", "--db", &fresh_db, "k", "v"]);
    std::fs::remove_file(fresh.path().join("db/STATS")).unwrap();
    let o = sluice(&["stats", "--db", &fresh_db, "--last-session"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no readable STATS file"),
        "{}",
        stderr(&o)
    );
    // The LOG and OPTIONS of those sessions are there too.
    let log = std::fs::read_to_string(dir.path().join("db/LOG")).unwrap();
    assert!(log.contains("compaction: L0 -> L6"), "{log}");
    assert!(dir.path().join("db/OPTIONS").exists());
}

#[test]
fn wal_dump_lists_every_batch_of_a_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // Each command's open moves the WAL before it into a table: the last WAL holds the third
    // write, a binary put at sequence 3.
    ok(&["put", "--db", &db, "a", "1"]);
    ok(&["delete", "--db", &db, "a"]);
    ok(&["put", "--db", &db, "--hex", "00ff", "0a"]);
    let log = std::fs::read_dir(dir.path().join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .max()
        .unwrap();
    let text = ok(&["wal", "dump", log.to_str().unwrap()]);
    assert!(
        text.contains(" seq 3 count 1\n  value \\x00\\xff => \\x0a\n"),
        "{text}"
    );
    assert!(text.contains("\n1 record(s), "), "{text}");
    let json = ok(&["wal", "dump", "--json", "--hex", log.to_str().unwrap()]);
    let record: serde_json::Value = serde_json::from_str(json.lines().next().unwrap()).unwrap();
    assert_eq!(record["entries"][0]["key"], "00ff", "{json}");
    assert_eq!(record["entries"][0]["kind"], "value");
    // Not a WAL file: a clear error.
    let o = sluice(&[
        "wal",
        "dump",
        dir.path().join("db/CURRENT").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("is not a WAL file"), "{}", stderr(&o));
}

/// Beside a process writing the database (this one, holding its lock), the read commands
/// read it as a secondary instance and say so; those that need the writer gone still refuse.
#[test]
fn read_commands_work_beside_a_running_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let writer = sluice::Db::open(dir.path().join("db"), sluice::Options::default()).unwrap();
    writer.put("a", "1").unwrap();
    writer.flush().unwrap();
    writer.put("b", "2").unwrap();
    writer
        .create_keyspace("users", &sluice::KeyspaceOptions::default())
        .unwrap()
        .put("alice", "x")
        .unwrap();
    let note = |o: &std::process::Output| {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(o));
        assert!(
            stderr(o).contains("read as a secondary instance"),
            "{}",
            stderr(o)
        );
        common::stdout(o)
    };
    assert_eq!(note(&sluice(&["get", "--db", &db, "b"])), "2\n");
    assert_eq!(note(&sluice(&["scan", "--db", &db])), "a\t1\nb\t2\n");
    assert_eq!(
        note(&sluice(&["scan", "--db", &db, "--keyspace", "users"])),
        "alice\tx\n"
    );
    assert_eq!(
        note(&sluice(&["keyspace", "list", "--db", &db])),
        "default\nusers\n"
    );
    let stats = note(&sluice(&["stats", "--db", &db, "--json"]));
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert!(stats["levels"].is_array(), "{stats}");
    let dumped = note(&sluice(&["dump", "--db", &db]));
    assert!(dumped.contains('a') && dumped.contains('b'), "{dumped}");
    // The writer moves on; the next command sees it.
    writer.put("c", "3").unwrap();
    assert_eq!(note(&sluice(&["get", "--db", &db, "c"])), "3\n");
    // Checking the files needs them to hold still: still refused, with the reason.
    let o = sluice(&["check", "--db", &db]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("open for writing"), "{}", stderr(&o));
    drop(writer);
}

/// `--key-hex` and `--value-hex` (ldb's `--key_hex`, `--value_hex`) take one side in hex, and
/// `get --raw` prints a value's bytes as they are.
#[test]
fn keys_and_values_are_hex_apart_and_get_prints_raw_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "--value-hex", "name", "00ff0a"]);
    assert_eq!(ok(&["get", "--db", &db, "--value-hex", "name"]), "00ff0a\n");
    assert_eq!(
        ok(&["get", "--db", &db, "--key-hex", "6e616d65"]),
        "\\x00\\xff\\x0a\n"
    );
    let raw = sluice(&["get", "--db", &db, "--raw", "name"]);
    assert_eq!(raw.status.code(), Some(0));
    assert_eq!(raw.stdout, vec![0x00, 0xff, 0x0a], "the bytes, no newline");
    assert_eq!(ok(&["scan", "--db", &db, "--value-hex"]), "name\t00ff0a\n");
    let o = sluice(&["get", "--db", &db, "--raw", "--hex", "6e616d65"]);
    assert_eq!(o.status.code(), Some(2), "--raw and --hex conflict");
    // A command's own flags come before the engine's in its help.
    let help = ok(&["scan", "--help"]);
    let (own, engine) = (
        help.find("--value-hex").unwrap(),
        help.find("Engine options").unwrap(),
    );
    assert!(own < engine, "{help}");
}
