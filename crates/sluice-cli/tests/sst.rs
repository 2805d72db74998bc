//! `sluice sst dump --entries` over a key range with values (sst_dump's `--command=scan
//! --from --to`), and `sluice sst recompress` (sst_dump's `--command=recompress`), on tables
//! written by `sluice sst write`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::path::Path;

use common::{ok, sluice, stderr};
use serde_json::Value;

/// A table at `dir/t.sst` of keys `k00..k{n-1}`, each value its key repeated to `value_len`
/// bytes (compressible), plus one binary key `\xff\x00`.
fn table(dir: &Path, n: usize, value_len: usize) -> String {
    let mut lines = String::new();
    for i in 0..n {
        let key = format!("k{i:02}");
        let value: String = key.chars().cycle().take(value_len).collect();
        lines.push_str(&format!("{key}\t{value}\n"));
    }
    lines.push_str("\\xff\\x00\tbinary\n");
    let input = dir.join("lines.txt");
    std::fs::write(&input, lines).unwrap();
    let file = dir.join("t.sst").display().to_string();
    ok(&[
        "sst",
        "write",
        &file,
        "--input",
        &input.display().to_string(),
    ]);
    file
}

/// The user keys of `sst dump --entries` text output.
fn listed_keys(text: &str) -> Vec<String> {
    let entries = text.split_once("entries:\n").unwrap().1;
    entries
        .lines()
        .map(|l| l.trim().split('\'').nth(1).unwrap().to_string())
        .collect()
}

#[test]
fn entries_of_a_key_range_with_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let file = table(dir.path(), 10, 6);
    let all = ok(&["sst", "dump", &file, "--entries"]);
    assert_eq!(listed_keys(&all).len(), 11);
    assert!(all.contains("  'k03' @ 0 value value_len=6\n"), "{all}");

    let text = ok(&[
        "sst",
        "dump",
        &file,
        "--entries",
        "--from",
        "k03",
        "--to",
        "k06",
        "--values",
    ]);
    assert_eq!(listed_keys(&text), ["k03", "k04", "k05"]);
    assert!(
        text.contains("  'k04' @ 0 value value_len=6 value='k04k04'\n"),
        "{text}"
    );
    // Open-ended on either side.
    assert_eq!(
        listed_keys(&ok(&["sst", "dump", &file, "--entries", "--to", "k02"])),
        ["k00", "k01"]
    );
    assert_eq!(
        listed_keys(&ok(&["sst", "dump", &file, "--entries", "--from", "k09"])),
        ["k09", "\\xff\\x00"]
    );

    // --hex: the range is given and the keys and values printed in hexadecimal.
    let hex = ok(&[
        "sst",
        "dump",
        &file,
        "--entries",
        "--hex",
        "--from",
        "ff",
        "--values",
    ]);
    assert_eq!(listed_keys(&hex), ["ff00"]);
    assert!(hex.contains("value='62696e617279'"), "{hex}");
    // ...and so are the summary's keys, in text and in JSON.
    assert!(
        hex.contains("  smallest key: '6b3030' @ 0 value\n"),
        "{hex}"
    );
    assert!(hex.contains("  largest key: 'ff00' @ 0 value\n"), "{hex}");
    let v: Value = serde_json::from_str(&ok(&["sst", "dump", &file, "--hex", "--json"])).unwrap();
    assert_eq!(v["properties"]["largest_key"]["key"], "ff00");
    let v: Value = serde_json::from_str(&ok(&["sst", "dump", &file, "--json"])).unwrap();
    assert_eq!(v["properties"]["largest_key"]["key"], "\\xff\\x00");

    let v: Value = serde_json::from_str(&ok(&[
        "sst",
        "dump",
        &file,
        "--entries",
        "--json",
        "--from",
        "k08",
        "--to",
        "k09",
        "--values",
    ]))
    .unwrap();
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["key"], "k08");
    assert_eq!(entries[0]["value"], "k08k08");

    // A range needs --entries; a bad hex key is a usage error naming the flag.
    assert_eq!(
        sluice(&["sst", "dump", &file, "--from", "k"]).status.code(),
        Some(2)
    );
    let o = sluice(&["sst", "dump", &file, "--entries", "--hex", "--from", "xyz"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--from"), "{}", stderr(&o));
}

#[test]
fn recompress_reports_every_codec_and_leaves_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = table(dir.path(), 100, 2000);
    let before = std::fs::read(&file).unwrap();

    let v: Value = serde_json::from_str(&ok(&["sst", "recompress", &file, "--json"])).unwrap();
    let rows = v["codecs"].as_array().unwrap();
    let codecs: Vec<&str> = rows.iter().map(|r| r["codec"].as_str().unwrap()).collect();
    assert_eq!(codecs, ["none", "snappy", "lz4", "zstd"]);
    let data = |row: &Value| row["data_bytes"].as_u64().unwrap();
    // Repetitive values: every codec stores less than `none`, every block compressed.
    for row in &rows[1..] {
        assert!(data(row) * 4 < data(&rows[0]), "{v}");
        assert_eq!(row["compressed_blocks"], row["data_blocks"], "{v}");
        assert!(row["ratio"].as_f64().unwrap() > 4.0, "{v}");
    }
    assert_eq!(rows[0]["compressed_blocks"], 0);
    assert_eq!(v["entries"], 101);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the table was only read"
    );

    let text = ok(&[
        "sst",
        "recompress",
        &file,
        "--codecs",
        "zstd,none",
        "--block-size",
        "16K",
    ]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("101 entries"), "{text}");
    assert!(lines[1].starts_with("codec  |  data bytes"), "{text}");
    assert!(lines[2].starts_with("zstd "), "{text}");
    assert!(lines[3].starts_with("none "), "{text}");
    // The columns line up under the header's.
    let bars = |line: &str| -> Vec<usize> { line.match_indices('|').map(|(i, _)| i).collect() };
    assert_eq!(bars(lines[2]), bars(lines[1]), "{text}");
    assert_eq!(bars(lines[3]), bars(lines[1]), "{text}");

    let o = sluice(&["sst", "recompress", &file, "--codecs", "brotli"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown compression type"),
        "{}",
        stderr(&o)
    );
}

/// `sst dump` shows every property (the entry digest, prefix extractor, blob references), and
/// `manifest dump` the state the edits build: keyspaces, merge operator, range tombstones and
/// blob files, besides the files per level.
#[test]
fn dumps_show_properties_keyspaces_tombstones_and_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = common::db_arg(dir.path());
    let blobs = ["--min-blob-size", "8", "--merge-operator", "u64_add"];
    for (k, v) in [
        ("a", "a value long enough"),
        ("b", "another long value"),
        ("c", "v"),
    ] {
        ok(&[&["put", "--db", &db, k, v][..], &blobs].concat());
    }
    ok(&["compact", "--db", &db]);
    // Replayed into the version by the next open (a compaction would drop it: nothing it
    // covers is older than it below).
    ok(&["delete-range", "--db", &db, "--from", "b", "--to", "c"]);
    ok(&["keyspace", "create", "--db", &db, "users"]);

    let text = ok(&["manifest", "dump", "--db", &db]);
    for want in [
        "merge_operator: u64_add",
        "keyspace 1: users (keyspaces/1/)",
        "range tombstones: 1",
        "  @",
        "blob files: 2",
        "live: 1 refs",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    let m: Value = serde_json::from_str(&ok(&["manifest", "dump", "--db", &db, "--json"])).unwrap();
    assert_eq!(m["state"]["merge_operator"], "u64_add");
    assert_eq!(m["state"]["keyspaces"][0]["name"], "users");
    assert_eq!(m["range_tombstones"].as_array().unwrap().len(), 1);
    assert_eq!(m["blob_files"][0]["live_refs"], 1);

    // A table whose values are in a blob file.
    let table = m["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| l["files"].as_array().unwrap().clone())
        .find(|f| !f["blob_refs"].as_array().unwrap().is_empty())
        .unwrap();
    let path = dir
        .path()
        .join("db")
        .join(format!("{:06}.sst", table["number"].as_u64().unwrap()));
    let path = path.display().to_string();
    let text = ok(&["sst", "dump", &path]);
    assert!(text.contains("entry digest: "), "{text}");
    assert!(!text.contains("entry digest: none"), "{text}");
    assert!(text.contains("blob references: #"), "{text}");
    let v: Value = serde_json::from_str(&ok(&["sst", "dump", &path, "--json"])).unwrap();
    assert_eq!(v["properties"]["entry_digest"].as_str().unwrap().len(), 16);
    assert_eq!(v["properties"]["blob_refs"][0]["refs"], 1);
}
