//! End to end: value separation as the `sluice` binary shows it. `blob dump` lists a blob
//! file's records and fails on a damaged one naming the file and offset; `check` counts the
//! blob files and references it verified, and fails on the same damage; `stats` prints the
//! blob files; the `--min-blob-size` flag separates values written with `put`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::path::{Path, PathBuf};

use common::{db_arg, file_bytes, ok, sluice, stderr, stdout};
use serde_json::Value;
use sluice::{BlobOptions, Db, Options};

/// The separation threshold every database here is written with.
const MIN_BLOB: usize = 100;

/// The keys written by [`blob_db`] and their value lengths, in key order: values of at least
/// [`MIN_BLOB`] bytes go to the blob file, the others stay in the table.
const ENTRIES: [(&[u8], usize); 6] = [
    (b"a-large", 300),
    (b"b-small", 10),
    (b"c\tlarge", 150),
    (b"d-large", 1000),
    (b"e-small", MIN_BLOB - 1),
    (b"f-exact", MIN_BLOB),
];

/// The keys of [`ENTRIES`] whose values are separated, as `blob dump` escapes them.
const SEPARATED: [&str; 4] = ["a-large", "c\\x09large", "d-large", "f-exact"];

/// The value of `key`: `len` bytes that start with the key, so a record's value is its own.
fn value(key: &[u8], len: usize) -> Vec<u8> {
    let mut v = key.to_vec();
    v.resize(len, b'.');
    v
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

/// A database holding [`ENTRIES`], written with `min_blob_size` [`MIN_BLOB`] and flushed in
/// one go, so it has exactly one blob file; returns the `--db` argument and that file.
fn blob_db(dir: &Path) -> (String, PathBuf) {
    let db = db_arg(dir);
    let options = Options {
        blob: BlobOptions {
            min_blob_size: MIN_BLOB,
            ..BlobOptions::default()
        },
        ..Options::default()
    };
    let opened = Db::open(&db, options).unwrap();
    for (key, len) in ENTRIES {
        opened.put(key, value(key, len)).unwrap();
    }
    opened.flush().unwrap();
    opened.close().unwrap();
    let blobs = files_with(Path::new(&db), "blob");
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    (db, blobs[0].clone())
}

#[test]
fn blob_dump_lists_the_separated_values_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, blob) = blob_db(dir.path());
    let path = blob.display().to_string();
    let before = file_bytes(dir.path());

    let text = ok(&["blob", "dump", &path]);
    assert!(text.starts_with(&format!("file: {path}\n")), "{text}");
    assert!(text.contains("\n  records: 4\n"), "{text}");
    assert!(
        text.contains("\n  value bytes: 1550 (1.51 KiB)\n"),
        "{text}"
    );
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("value_len=")).collect();
    let keys: Vec<String> = lines
        .iter()
        .map(|l| l.split('\'').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(keys, SEPARATED, "{text}");
    assert!(
        lines[0].starts_with("  offset 16 size 324: 'a-large' value_len=300 stored_len=300"),
        "{text}"
    );
    assert!(!text.contains("value='"), "{text}");

    // --values shows each value's first 64 bytes, and says when there are more.
    let text = ok(&["blob", "dump", &path, "--values"]);
    let exact = text.lines().find(|l| l.contains("'f-exact'")).unwrap();
    let shown = String::from_utf8(value(b"f-exact", 64)).unwrap();
    assert!(exact.ends_with(&format!(" value='{shown}'...")), "{exact}");

    let v: Value =
        serde_json::from_str(&ok(&["blob", "dump", &path, "--json", "--values"])).unwrap();
    let number: u64 = blob.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    assert_eq!(v["file_number"], number);
    assert_eq!(v["file_size"], std::fs::metadata(&blob).unwrap().len());
    assert_eq!(v["footer"]["records"], 4);
    assert_eq!(v["footer"]["value_bytes"], 1550);
    let records = v["records"].as_array().unwrap();
    let keys: Vec<&str> = records.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, SEPARATED);
    assert_eq!(records[1]["value_len"], 150);
    assert_eq!(records[1]["value_truncated"], true);
    // Records follow each other from the header on.
    for pair in records.windows(2) {
        let end = pair[0]["offset"].as_u64().unwrap() + pair[0]["size"].as_u64().unwrap();
        assert_eq!(pair[1]["offset"].as_u64(), Some(end));
    }

    ok(&["check", "--db", &db]);
    ok(&["stats", "--db", &db]);
    assert!(
        before == file_bytes(dir.path()),
        "blob dump, check or stats changed the database"
    );
}

#[test]
fn blob_dump_refuses_a_file_not_named_as_a_blob_file() {
    let dir = tempfile::tempdir().unwrap();
    let (db, blob) = blob_db(dir.path());
    let renamed = dir.path().join("values.bin");
    std::fs::copy(&blob, &renamed).unwrap();
    let table = files_with(Path::new(&db), "sst").pop().unwrap();
    for file in [renamed, table] {
        let o = sluice(&["blob", "dump", &file.display().to_string()]);
        assert_eq!(o.status.code(), Some(2));
        let err = stderr(&o);
        assert!(err.starts_with("error: "), "{err}");
        assert!(err.contains("not a blob file name"), "{err}");
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn a_flipped_byte_in_a_blob_value_fails_blob_dump_and_check_naming_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let (db, blob) = blob_db(dir.path());
    let path = blob.display().to_string();
    let v: Value = serde_json::from_str(&ok(&["blob", "dump", &path, "--json"])).unwrap();
    let damaged = &v["records"][1];
    let (offset, size) = (
        damaged["offset"].as_u64().unwrap(),
        damaged["size"].as_u64().unwrap(),
    );
    let mut bytes = std::fs::read(&blob).unwrap();
    // The record's last byte: its value's, stored uncompressed.
    bytes[(offset + size - 1) as usize] ^= 0x01;
    std::fs::write(&blob, &bytes).unwrap();
    let name = blob.file_name().unwrap().to_str().unwrap();
    let at = format!("at offset {offset}");

    let o = sluice(&["blob", "dump", &path]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.starts_with("error: corrupt data in "), "{err}");
    assert!(err.contains(name) && err.contains(&at), "{err}");
    // The records before the damaged one are listed first.
    assert!(stdout(&o).contains("'a-large'"), "{}", stdout(&o));
    assert!(
        !stdout(&o).contains("large' value_len=150"),
        "{}",
        stdout(&o)
    );

    let o = sluice(&["blob", "dump", &path, "--json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(stderr(&o).contains(&at), "{}", stderr(&o));

    let o = sluice(&["check", "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(err.starts_with("check failed: corrupt data in "), "{err}");
    assert!(err.contains(name) && err.contains(&at), "{err}");
    let o = sluice(&["check", "--db", &db, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["corruption"], true);
    assert_eq!(v["offset"], offset);
    assert_eq!(v["file"], path);
}

/// Through the flags alone: `put` with `--min-blob-size` separates the large values (each
/// open flushes what the previous one left in the WAL, and `compact` the rest), and `check`
/// and `stats` count the blob files.
#[test]
fn values_put_with_min_blob_size_are_separated_and_check_and_stats_count_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let min = MIN_BLOB.to_string();
    let large = "x".repeat(300);
    for (key, value) in [("large-1", &large[..]), ("small", "v"), ("large-2", &large)] {
        ok(&["put", "--db", &db, "--min-blob-size", &min, key, value]);
    }
    ok(&["compact", "--db", &db, "--min-blob-size", &min]);
    let blobs = files_with(Path::new(&db), "blob").len();
    assert!(blobs >= 1, "no blob file");
    assert_eq!(ok(&["get", "--db", &db, "large-2"]).trim_end(), large);
    assert_eq!(ok(&["get", "--db", &db, "small"]).trim_end(), "v");

    let text = ok(&["check", "--db", &db]);
    assert!(text.starts_with("ok: "), "{text}");
    assert!(
        text.contains(&format!("; blob: {blobs} files, 2 references; MANIFEST: ")),
        "{text}"
    );
    let v: Value = serde_json::from_str(&ok(&["check", "--db", &db, "--json"])).unwrap();
    assert_eq!(
        (v["blob_files"].as_u64(), v["blob_references"].as_u64()),
        (Some(blobs as u64), Some(2))
    );

    let text = ok(&["stats", "--db", &db]);
    let line = text
        .lines()
        .find(|l| l.starts_with("blob files: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.starts_with(&format!("blob files: {blobs} of ")),
        "{line}"
    );
    assert!(line.contains(" live, 0 B garbage"), "{line}");
    let v: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["blob"]["files"], blobs);
}
