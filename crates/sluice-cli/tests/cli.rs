//! End-to-end tests of the `sluice` binary against temporary databases.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

mod common;

use common::{db_arg, file_bytes, ok, sluice, stderr, stdout};

use std::path::{Path, PathBuf};

use serde_json::Value;

fn tables(db: &str) -> Vec<PathBuf> {
    let mut t: Vec<PathBuf> = std::fs::read_dir(db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    t.sort();
    t
}

/// Key number `n` as `sluice bench` writes it.
fn bench_key(n: u64) -> String {
    format!("{n:016}")
}

/// A database holding keys `bench_key(0..n)`, written in one process and compacted, so that
/// (for small `n`) it is exactly one table.
fn populated(dir: &Path, n: u64) -> String {
    let db = db_arg(dir);
    let n = n.to_string();
    ok(&[
        "bench",
        "--db",
        &db,
        "--num",
        &n,
        "--benchmarks",
        "fillseq,compact",
        "--json",
    ]);
    db
}

#[test]
fn put_get_delete_scan_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "b", "two"]);
    ok(&["put", "--db", &db, "a", "one"]);
    ok(&["put", "--db", &db, "c", "tab\there\\"]);
    ok(&["put", "--db", &db, "d", "four"]);
    assert_eq!(ok(&["get", "--db", &db, "a"]), "one\n");
    assert_eq!(ok(&["get", "--db", &db, "c"]), "tab\\x09here\\x5c\n");
    ok(&["delete", "--db", &db, "b"]);
    assert_eq!(
        ok(&["scan", "--db", &db]),
        "a\tone\nc\ttab\\x09here\\x5c\nd\tfour\n"
    );
    assert_eq!(
        ok(&["scan", "--db", &db, "--from", "b", "--to", "d"]),
        "c\ttab\\x09here\\x5c\n"
    );
    assert_eq!(ok(&["scan", "--db", &db, "--limit", "1"]), "a\tone\n");
    // Survives compaction, reported level by level with the tree before and after.
    let summary: Value =
        serde_json::from_str(&ok(&["compact", "--db", &db, "--parallel", "--json"])).unwrap();
    assert_eq!(summary["parallel"], true);
    assert_eq!(summary["lsm_after"][0]["files"], 0, "{summary}");
    assert!(
        summary["lsm_before"]
            .as_array()
            .is_some_and(|l| l.len() == 7)
    );
    let stages = summary["stages"].as_array().unwrap();
    assert!(
        stages
            .iter()
            .all(|s| s["stage"].is_string() && s["busy_seconds"].is_number()),
        "{summary}"
    );
    assert_eq!(
        ok(&["scan", "--db", &db, "--from", "c"]),
        "c\ttab\\x09here\\x5c\nd\tfour\n"
    );
}

#[test]
fn checkpoint_makes_a_copy_that_scans_identically_and_leaves_the_source_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 2000);
    // A last write that only the WAL holds.
    ok(&["put", "--db", &db, "zz", "last"]);
    let before: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
        .collect();
    let cp = dir.path().join("cp").display().to_string();
    let report: Value =
        serde_json::from_str(&ok(&["checkpoint", "--db", &db, "--to", &cp, "--json"])).unwrap();
    assert_eq!(report["tables_linked"], 1, "{report}");
    assert!(report["wals_copied"].as_u64().unwrap() >= 1, "{report}");
    assert_eq!(ok(&["scan", "--db", &cp]), ok(&["scan", "--db", &db]));
    assert_eq!(ok(&["get", "--db", &cp, "zz"]), "last\n");
    ok(&["check", "--db", &cp]);
    for (path, bytes) in before {
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{}", path.display());
    }
    // A second checkpoint into the same place is refused, naming the directory.
    let o = sluice(&["checkpoint", "--db", &db, "--to", &cp]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not empty"), "{}", stderr(&o));
}

#[test]
fn backups_are_incremental_verified_and_restore_as_a_user_would_try_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 2000);
    let backups = dir.path().join("backups").display().to_string();
    let create = || -> Value {
        let args = [
            "backup",
            "create",
            "--db",
            &db,
            "--backup-dir",
            &backups,
            "--json",
        ];
        serde_json::from_str(&ok(&args)).unwrap()
    };
    let first = create();
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["tables_copied"], 1, "{first}");
    ok(&["put", "--db", &db, "later", "write"]);
    let second = create();
    assert_eq!(second["tables_shared"], 1, "{second}");
    assert_eq!(second["tables_copied"], 0, "{second}");
    let listed: Value =
        serde_json::from_str(&ok(&["backup", "list", "--backup-dir", &backups, "--json"])).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 2, "{listed}");
    // The table gives the creation time as a UTC date, not seconds since 1970.
    let table = ok(&["backup", "list", "--backup-dir", &backups]);
    let line = table.lines().nth(1).unwrap_or_default().to_string();
    assert!(
        table.contains("created (UTC)") && line.contains("/") && line.contains("-"),
        "{table}"
    );
    assert!(ok(&["backup", "verify", "--backup-dir", &backups]).contains("backup 2: ok"));

    let r1 = dir.path().join("r1").display().to_string();
    ok(&[
        "backup",
        "restore",
        "--backup-dir",
        &backups,
        "--id",
        "1",
        "--to",
        &r1,
    ]);
    let r2 = dir.path().join("r2").display().to_string();
    ok(&["backup", "restore", "--backup-dir", &backups, "--to", &r2]);
    assert_eq!(ok(&["get", "--db", &r2, "later"]), "write\n");
    assert_eq!(
        sluice(&["get", "--db", &r1, "later"]).status.code(),
        Some(1)
    );
    let mut without_later = ok(&["scan", "--db", &db]);
    without_later = without_later.replace("later\twrite\n", "");
    assert_eq!(ok(&["scan", "--db", &r1]), without_later);

    // Damage in the shared table: verify exits 1 naming it.
    let shared = std::fs::read_dir(dir.path().join("backups/shared"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut bytes = std::fs::read(&shared).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&shared, bytes).unwrap();
    let o = sluice(&["backup", "verify", "--backup-dir", &backups, "--id", "2"]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let said = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        said.contains("verify failed") && said.contains("shared/"),
        "{said}"
    );

    assert!(
        ok(&["backup", "purge", "--backup-dir", &backups, "--keep", "1"]).contains("deleted 1")
    );
    let listed: Value =
        serde_json::from_str(&ok(&["backup", "list", "--backup-dir", &backups, "--json"])).unwrap();
    assert_eq!(listed[0]["id"], 2, "{listed}");
}

#[test]
fn scan_output_written_as_a_table_ingests_into_another_database() {
    let dir = tempfile::tempdir().unwrap();
    let src = db_arg(dir.path());
    ok(&["put", "--db", &src, "a", "1"]);
    ok(&["put", "--db", &src, "b\tkey", "two\\"]);
    ok(&["put", "--db", &src, "c", "3"]);
    let lines = dir.path().join("lines.tsv");
    std::fs::write(&lines, ok(&["scan", "--db", &src])).unwrap();
    let table = dir.path().join("bulk.sst").display().to_string();
    let wrote = ok(&[
        "sst",
        "write",
        &table,
        "--input",
        &lines.display().to_string(),
    ]);
    assert!(wrote.contains("3 entries"), "{wrote}");

    let dst = dir.path().join("dst").display().to_string();
    ok(&["put", "--db", &dst, "b\tkey", "old"]);
    let report: Value =
        serde_json::from_str(&ok(&["ingest", "--db", &dst, &table, "--json"])).unwrap();
    assert_eq!(report["files"][0]["rewritten"], true, "{report}");
    assert_eq!(ok(&["scan", "--db", &dst]), ok(&["scan", "--db", &src]));
    ok(&["check", "--db", &dst]);

    // Keys out of order are refused with the line number.
    std::fs::write(&lines, "b\t1\na\t2\n").unwrap();
    let bad = dir.path().join("bad.sst").display().to_string();
    let o = sluice(&[
        "sst",
        "write",
        &bad,
        "--input",
        &lines.display().to_string(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 2"), "{}", stderr(&o));
}

#[test]
fn merge_adds_counters_and_appends_with_the_named_operator() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let add = ["--merge-operator", "u64_add"];
    for n in ["5", "37"] {
        ok(&[&["merge", "--db", &db, "hits", n, "--u64"][..], &add].concat());
    }
    // 42 as a little-endian u64.
    let forty_two = "*\\x00\\x00\\x00\\x00\\x00\\x00\\x00\n";
    assert_eq!(
        ok(&[&["get", "--db", &db, "hits"][..], &add].concat()),
        forty_two
    );
    // The database records its operator: later commands use it without being told.
    assert_eq!(ok(&["get", "--db", &db, "hits"]), forty_two);
    ok(&["merge", "--db", &db, "hits", "1", "--u64"]);
    ok(&["compact", "--db", &db]);
    let forty_three = "+\\x00\\x00\\x00\\x00\\x00\\x00\\x00\n";
    assert_eq!(ok(&["get", "--db", &db, "hits"]), forty_three);
    // Another operator would read the operands by another rule: refused, naming both.
    let o = sluice(&["get", "--db", &db, "hits", "--merge-operator", "append"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("written with merge operator \"u64_add\", not \"append\""),
        "{}",
        stderr(&o)
    );
    // Merging into a database without an operator is refused before anything is written.
    let plain = db_arg(&dir.path().join("plain"));
    ok(&["put", "--db", &plain, "k", "v"]);
    let o = sluice(&["merge", "--db", &plain, "hits", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("merge operator"), "{}", stderr(&o));
    let o = sluice(&["merge", "--db", &db, "k", "1", "--merge-operator", "max"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown merge operator"),
        "{}",
        stderr(&o)
    );

    // The flag is for the keyspace a command acts on: a keyspace of its own may have
    // another operator, and trees without one get none recorded.
    ok(&["keyspace", "create", "--db", &db, "plain"]);
    ok(&["put", "--db", &db, "--keyspace", "plain", "k", "v"]);
    let fs = sluice::fs::os_fs();
    let recorded = sluice::Db::list_merge_operators(dir.path().join("db"), &*fs).unwrap();
    assert_eq!(recorded[1], ("plain".to_string(), None), "{recorded:?}");
    let comma = ["--merge-operator", "append(2c)"];
    for part in ["a", "b"] {
        let args = [
            "merge",
            "--db",
            &db,
            "--keyspace",
            "tags",
            "t",
            part,
            "--create-keyspace",
        ];
        ok(&[&args[..], &comma].concat());
    }
    assert_eq!(
        ok(&["get", "--db", &db, "--keyspace", "tags", "t"]),
        "a,b\n"
    );
    assert_eq!(ok(&["get", "--db", &db, "hits"]), forty_three);
    // A tree's recorded custom operator cannot come from the command line's built-ins: the
    // open says which one to give.
    let o = sluice(&["get", "--db", &db, "--keyspace", "plain", "k"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // Lists go to another database.
    let lists = db_arg(&dir.path().join("lists"));
    for part in ["x", "y", "z"] {
        ok(&[&["merge", "--db", &lists, "list", part][..], &comma].concat());
    }
    assert_eq!(ok(&["get", "--db", &lists, "list"]), "x,y,z\n");
    assert_eq!(
        ok(&["scan", "--db", &lists, "--from", "l"]),
        "list\tx,y,z\n"
    );
}

#[test]
fn delete_range_deletes_a_key_range_as_a_user_would_try_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    for k in ["a", "b", "c", "d"] {
        ok(&["put", "--db", &db, k, "v"]);
    }
    ok(&["delete-range", "--db", &db, "--from", "b", "--to", "d"]);
    assert_eq!(ok(&["scan", "--db", &db]), "a\tv\nd\tv\n");
    ok(&["compact", "--db", &db]);
    assert_eq!(ok(&["scan", "--db", &db]), "a\tv\nd\tv\n");
    let o = sluice(&["delete-range", "--db", &db, "--from", "z", "--to", "a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("sorts before"), "{}", stderr(&o));
}

#[test]
fn a_ttl_database_is_opened_with_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "--ttl", "3600", "k", "v"]);
    assert_eq!(ok(&["get", "--db", &db, "--ttl", "60", "k"]), "v\n");
    let o = sluice(&["get", "--db", &db, "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("open it with Options::ttl"),
        "{}",
        stderr(&o)
    );
    let o = sluice(&["put", "--db", &db, "--ttl", "0", "k", "v"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn get_of_a_missing_key_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "a", "1"]);
    ok(&["delete", "--db", &db, "a"]);
    for key in ["a", "never"] {
        let o = sluice(&["get", "--db", &db, key]);
        assert_eq!(o.status.code(), Some(1));
        assert!(o.stdout.is_empty());
        assert!(
            stderr(&o).contains(&format!("not found: {key}")),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn errors_exit_2_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here").display().to_string();
    let o = sluice(&["get", "--db", &missing, "k"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("error: "), "{}", stderr(&o));
    assert!(stderr(&o).contains("no database in"), "{}", stderr(&o));
    assert!(
        !Path::new(&missing).exists(),
        "a read must not create the database"
    );

    let o = sluice(&["bench", "--compression", "foo"]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("foo") && err.contains("lz4"), "{err}");

    let o = sluice(&["bench", "--benchmarks", "fillseq,nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown benchmark \"nosuch\""),
        "{}",
        stderr(&o)
    );

    let o = sluice(&["bench", "--num", "1000", "--key-size", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("key_size"), "{}", stderr(&o));

    let o = sluice(&["sst", "dump", "/dev/null"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).starts_with("error: corrupt"), "{}", stderr(&o));
}

#[test]
fn stats_json_parses_and_describes_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 20);
    let v: Value = serde_json::from_str(&ok(&["stats", "--db", &db, "--json"])).unwrap();
    let levels = v["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 7);
    let files: u64 = levels.iter().map(|l| l["files"].as_u64().unwrap()).sum();
    assert!(files >= 1, "{v}");
    assert!(v["compaction"]["stage_profile"]["merge"].is_number());
    assert!(v["compaction"]["bandwidth_mb_s"].is_number());
    assert!(v["total_size_bytes"].as_u64().unwrap() > 0);

    // Pebble's and RocksDB's figures: read and space amplification, compaction debt, the
    // table cache and the filters, stalls by cause.
    for field in [
        "read_amp",
        "space_amp",
        "compaction_debt_bytes",
        "bloom_utility",
    ] {
        assert!(v[field].is_number(), "{field}: {v}");
    }
    assert!(v["levels"][0]["read_amp"].is_u64(), "{v}");
    assert!(v["stalls"]["l0_stop"]["micros"].is_u64(), "{v}");
    assert!(v["table_cache"]["open_tables"].is_u64(), "{v}");

    let text = ok(&["stats", "--db", &db]);
    assert!(text.starts_with("level | files"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("total |")), "{text}");
    for needle in [
        "| r-amp |",
        "| comps | comp sec |    keys in |  keys drop",
        "read amplification: ",
        "space amplification: ",
        "compaction debt: ",
        "keys dropped by compactions: ",
        "write stalls: ",
        "table cache: ",
        "bloom filters: ",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
}

#[test]
fn check_passes_on_a_good_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 50);
    let out = ok(&["check", "--db", &db]);
    assert_eq!(tables(&db).len(), 1);
    assert!(out.starts_with("ok: 1 files, "), "{out}");
    assert!(
        out.trim_end()
            .ends_with("bytes verified; MANIFEST: 4 edits; WAL: 1 files, 0 records"),
        "{out}"
    );
    let v: Value = serde_json::from_str(&ok(&["check", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["ok"], true);
    assert!(v["blocks"].as_u64().unwrap() >= 2);
}

#[test]
fn check_reports_a_flipped_byte_as_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 50);
    let table = tables(&db).pop().expect("compact leaves a table");
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[20] ^= 0x40; // inside the first data block
    std::fs::write(&table, &bytes).unwrap();

    let o = sluice(&["check", "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "stdout: {}", stdout(&o));
    let err = stderr(&o);
    let first = err.lines().next().unwrap_or_default();
    assert!(first.contains("corrupt"), "{err}");
    assert!(
        first.contains(&table.file_name().unwrap().to_string_lossy().into_owned()),
        "{err}"
    );

    let o = sluice(&["check", "--db", &db, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["corruption"].as_bool()),
        (Some(false), Some(true))
    );
    assert!(v["offset"].is_u64());
}

#[test]
fn check_refuses_a_table_replaced_by_another_valid_table_or_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(&dir.path().join("a"), 50);
    let other = populated(&dir.path().join("b"), 80);
    let table = tables(&db).pop().unwrap();
    let replacement = tables(&other).pop().unwrap();
    let v: Value = serde_json::from_str(&ok(&["check", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["file_checksums"], 1);
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    let refused = |what: &str| {
        let o = sluice(&["check", "--db", &db]);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stdout(&o));
        let err = stderr(&o);
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("corrupt") && first.contains(&name),
            "{what}: {err}"
        );
    };
    let original = std::fs::read(&table).unwrap();
    std::fs::copy(&replacement, &table).unwrap();
    refused("another valid table");
    std::fs::remove_file(&table).unwrap();
    let elsewhere = dir.path().join("elsewhere.sst");
    std::fs::write(&elsewhere, &original).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &table).unwrap();
    refused("a symbolic link to the same bytes");
}

#[test]
fn sst_and_manifest_dumps_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 30);
    let table = tables(&db).pop().unwrap();
    let path = table.display().to_string();

    let text = ok(&["sst", "dump", &path, "--entries"]);
    assert!(text.contains("entries: 30 (0 deletions)"), "{text}");
    assert!(
        text.contains(&format!("smallest key: '{}' @ ", bench_key(0))),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.contains("value_len=")).count(),
        30
    );

    let v: Value =
        serde_json::from_str(&ok(&["sst", "dump", &path, "--entries", "--json"])).unwrap();
    assert_eq!(v["properties"]["num_entries"], 30);
    assert_eq!(v["entries"].as_array().unwrap().len(), 30);
    assert_eq!(v["entries"][29]["key"], bench_key(29));
    assert_eq!(v["footer"]["format_version"], 1);

    let m: Value = serde_json::from_str(&ok(&["manifest", "dump", "--db", &db, "--json"])).unwrap();
    let live: Vec<u64> = m["levels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|l| {
            l["files"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["number"].as_u64().unwrap())
        })
        .collect();
    let number: u64 = table
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(live, vec![number]);
    assert!(!m["edits"].as_array().unwrap().is_empty());
    // What the table is pinned to: the CRC32C of its bytes and its identity.
    let pinned = &m["levels"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|l| l["files"].as_array().unwrap().first().cloned())
        .unwrap();
    let crc = sluice_sst::fs::file_crc32c(&*sluice_sst::fs::os_fs(), &table, None)
        .unwrap()
        .crc32c;
    assert_eq!(pinned["file_checksum"], crc, "{pinned}");
    assert_eq!(pinned["identity"].as_str().unwrap().len(), 16, "{pinned}");
    let text = ok(&["manifest", "dump", "--db", &db]);
    assert!(text.contains("files per level:"), "{text}");
    assert!(text.contains(&format!("#{number:06}")), "{text}");
    assert!(
        text.contains(&format!("crc32c={crc:08x} identity=")),
        "{text}"
    );
}

fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

#[test]
fn bench_json_has_one_object_per_benchmark_with_the_documented_fields() {
    let out = ok(&[
        "bench",
        "--num",
        "2000",
        "--json",
        "--benchmarks",
        "fillrandom,readrandom,compact",
    ]);
    let lines = json_lines(&out);
    let names: Vec<&str> = lines.iter().map(|v| v["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["fillrandom", "readrandom", "compact"]);
    for v in &lines {
        for field in [
            "ops",
            "seconds",
            "ops_per_sec",
            "user_bytes",
            "disk_bytes_written",
            "threads",
        ] {
            assert!(v[field].is_number(), "{field} in {v}");
        }
        for p in ["p50", "p99", "p999", "max"] {
            assert!(v["latency_us"][p].is_number(), "{p} in {v}");
        }
        for f in [
            "count",
            "input_bytes",
            "output_bytes",
            "seconds",
            "bandwidth_mb_s",
        ] {
            assert!(v["compaction"][f].is_number(), "{f} in {v}");
        }
        for s in [
            "read",
            "checksum",
            "decompress",
            "merge",
            "compress",
            "rechecksum",
            "write",
        ] {
            assert!(
                v["compaction"]["stage_profile"][s].is_number(),
                "{s} in {v}"
            );
        }
        assert!(v.get("write_amp").is_some());
        assert_eq!(v["options"]["num"], 2000);
        assert_eq!(v["options"]["compression"], "lz4");
        assert_resource_fields(v);
        assert!(v["per_second"].is_array(), "{v}");
    }
    let per_second: u64 = lines[0]["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 2000);
    assert_eq!(lines[0]["ops"], 2000);
    assert_eq!(lines[0]["user_bytes"], 2000 * 116);
    let found = lines[1]["found"].as_u64().unwrap();
    assert!(found > 0 && found < 2000, "fillrandom leaves gaps: {found}");
    // 2000 keys are one L0 table: compact moves it to the base level (L6 of so small a tree)
    // without rewriting it.
    assert_eq!(lines[2]["trivial_moves"], 1);
    assert_eq!(lines[2]["compaction"]["count"], 0);

    let out = ok(&[
        "bench",
        "--num",
        "2000",
        "--json",
        "--benchmarks",
        "fillseq,readrandom,seekrandom,readseq",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines[1]["found"], 2000);
    assert_eq!(lines[2]["found"], 2000);
    assert_eq!(lines[3]["ops"], 2000);
}

/// The fields every run reports about the process and the tree (issue 5), with their types.
/// Figures read from /proc are null where it is missing, so their type is checked only there.
fn assert_resource_fields(v: &Value) {
    let cpu = &v["cpu"];
    for f in ["flush_seconds", "compaction_seconds"] {
        assert!(cpu[f].is_number(), "cpu.{f} in {v}");
    }
    for f in [
        "user_seconds",
        "system_seconds",
        "total_seconds",
        "foreground_seconds",
    ] {
        assert!(cpu[f].is_number() || cpu[f].is_null(), "cpu.{f} in {v}");
    }
    for f in ["peak_rss_bytes", "io_write_bytes", "io_read_bytes"] {
        assert!(v[f].is_u64() || v[f].is_null(), "{f} in {v}");
    }
    if Path::new("/proc/self/status").exists() {
        assert!(cpu["total_seconds"].is_number(), "{v}");
        assert!(v["peak_rss_bytes"].as_u64().unwrap() > 0, "{v}");
    }
    assert!(v["flush"]["cpu_seconds"].is_number(), "{v}");
    assert!(v["compaction"]["cpu_seconds"].is_number(), "{v}");
    assert!(v["disk_bytes_written"].is_u64(), "{v}");
    let levels = v["lsm"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 7, "{v}");
    for l in levels {
        assert!(l["files"].is_u64() && l["size_bytes"].is_u64(), "{l}");
    }
    assert!(v["lsm"]["total_bytes"].is_u64(), "{v}");
}

#[test]
fn bench_and_ycsb_write_json_and_charts_with_out() {
    let dir = tempfile::tempdir().unwrap();
    let bench_out = dir.path().join("bench");
    let out = ok(&[
        "bench",
        "--num",
        "3000",
        "--benchmarks",
        "fillrandom,compact",
        "--write-buffer-size",
        "64K",
        "--target-file-size",
        "64K",
        "--out",
        bench_out.to_str().unwrap(),
    ]);
    assert!(out.contains("wrote 11 files to"), "{out}");
    assert!(out.contains("\n             cpu "), "{out}");
    let jsonl = std::fs::read_to_string(bench_out.join("bench.jsonl")).unwrap();
    let names: Vec<String> = json_lines(&jsonl)
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["fillrandom", "compact"]);
    for stem in [
        "throughput",
        "latency_cdf",
        "compaction_bandwidth",
        "compaction_executors_local",
        "stage_profile",
    ] {
        let png = std::fs::read(bench_out.join(format!("{stem}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 5_000,
            "{stem}.png"
        );
        let svg = std::fs::read_to_string(bench_out.join(format!("{stem}.svg"))).unwrap();
        assert!(svg.contains("<svg"), "{stem}.svg");
    }

    // With --json, stdout stays one JSON object and the same object goes to ycsb.json.
    let ycsb_out = dir.path().join("ycsb");
    let out = ok(&[
        "ycsb",
        "--records",
        "1000",
        "--operations",
        "1000",
        "--json",
        "--out",
        ycsb_out.to_str().unwrap(),
    ]);
    let printed: Value = serde_json::from_str(&out).unwrap();
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(ycsb_out.join("ycsb.json")).unwrap())
            .unwrap();
    assert_eq!(printed["run"]["ops"], saved["run"]["ops"]);
    for stem in ["throughput", "latency_cdf"] {
        let png = std::fs::read(ycsb_out.join(format!("{stem}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 5_000,
            "{stem}.png"
        );
    }
}

#[test]
fn bench_table_and_database_directory_rules() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let out = ok(&[
        "bench",
        "--num",
        "1000",
        "--benchmarks",
        "fillseq,readrandom",
        "--db",
        &db,
        "--threads",
        "2",
    ]);
    assert!(out.lines().any(|l| l.starts_with("benchmark ")), "{out}");
    assert!(out.lines().any(|l| l.starts_with("fillseq ")), "{out}");
    assert!(out.contains("found 1000 of 1000"), "{out}");
    // The named directory is kept, and not reused without asking.
    let value = ok(&["get", "--db", &db, &bench_key(999)]);
    assert!(value.ends_with('\n') && value.len() >= 101, "{value}");
    let o = sluice(&[
        "bench",
        "--num",
        "1000",
        "--benchmarks",
        "fillseq",
        "--db",
        &db,
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--use-existing-db"), "{}", stderr(&o));
    let out = ok(&[
        "bench",
        "--num",
        "1000",
        "--benchmarks",
        "readrandom",
        "--db",
        &db,
        "--use-existing-db",
        "--json",
    ]);
    assert_eq!(json_lines(&out)[0]["found"], 1000);
}

// `sluice ycsb`.

#[test]
fn workload_a_json_reports_both_phases() {
    let out = ok(&[
        "ycsb",
        "--workload",
        "a",
        "--records",
        "2000",
        "--operations",
        "2000",
        "--json",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["workload"], "a");
    assert_eq!(v["distribution"], "zipfian");
    assert_eq!(v["records"], 2000);
    assert_eq!(v["operations"], 2000);
    assert_eq!(v["load"]["ops"], 2000);
    assert_eq!(v["load"]["operations"][0]["op"], "insert");
    assert_resource_fields(&v["load"]);
    assert_resource_fields(&v["run"]);
    assert_eq!(v["load"]["user_bytes"], 2000 * 116);
    let run = &v["run"];
    assert_eq!(run["ops"], 2000);
    assert_eq!(run["not_found"], 0);
    assert_eq!(run["stopped"], false);
    let per_second: u64 = run["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(per_second, 2000);
    let ops = run["operations"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["op"].as_str().unwrap()).collect();
    assert_eq!(names, ["read", "update"]);
    let counts: u64 = ops.iter().map(|o| o["count"].as_u64().unwrap()).sum();
    assert_eq!(counts, 2000);
    for o in ops {
        // 50/50 within a few percent at 2000 operations.
        let c = o["count"].as_u64().unwrap();
        assert!((900..=1100).contains(&c), "{o}");
        let p = |f: &str| o[f].as_f64().unwrap();
        assert!(p("p50_us") > 0.0 && p("p50_us") <= p("p95_us"), "{o}");
        assert!(
            p("p95_us") <= p("p99_us") && p("p99_us") <= p("p999_us"),
            "{o}"
        );
    }
}

#[test]
fn load_then_run_on_a_named_database_and_table_output() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    // --run alone needs a loaded database.
    let o = sluice(&["ycsb", "--run", "--db", &db, "--records", "500"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no database"));
    let out = ok(&["ycsb", "--load", "--db", &db, "--records", "500", "--json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["load"]["ops"], 500);
    assert!(v["run"].is_null());
    let out = ok(&[
        "ycsb",
        "--run",
        "--db",
        &db,
        "--workload",
        "c",
        "--distribution",
        "uniform",
        "--records",
        "500",
        "--operations",
        "300",
    ]);
    assert!(out.contains("workload c (uniform distribution)"), "{out}");
    assert!(out.contains("p99.9 us"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("read") && l.contains(" 300 ")),
        "{out}"
    );
    assert!(!out.contains("\nload:"), "{out}");
    // Bad names are usage errors.
    let o = sluice(&["ycsb", "--workload", "g"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn ycsb_dump_ops_prints_stream_md_s_line_and_opens_no_database() {
    // STREAM.md 8.4's test vector for workload a: the bytes every peer program prints.
    let out = ok(&[
        "ycsb",
        "--workload",
        "a",
        "--records",
        "1000000",
        "--operations",
        "1000000",
        "--dump-ycsb-ops",
        "5",
    ]);
    assert_eq!(
        out,
        concat!(
            r#"{"workload":"a","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"#,
            r#""load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","#,
            r#""op_counts":{"read":499683,"update":500317,"insert":0,"scan":0,"read-modify-write":0},"#,
            r#""ops_fnv1a64":"404df34d30a68eca","first_ops":["update 49015","update 291577","update 842051","read 342734","read 213555"]}"#,
            "\n"
        )
    );
    // Streams STREAM.md does not specify are refused with the reason.
    let o = sluice(&["ycsb", "--workload", "d", "--dump-ycsb-ops", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("workload d inserts keys"),
        "{}",
        stderr(&o)
    );
    // A dump runs nothing, so it takes no database and writes no files.
    let o = sluice(&["ycsb", "--dump-ycsb-ops", "1", "--db", "x"]);
    assert_eq!(o.status.code(), Some(2));
}

/// A results.json of `benches/peers/run --out`, cut down to what `chart peers` reads.
const PEER_RESULTS: &str = r#"{
 "date": "2026-11-22 06:35 UTC", "machine": {"nproc": 2, "cpu": "AMD EPYC"},
 "num": 20000, "repeat": 1,
 "chart": {
  "engines": [{"id": "sluice", "name": "Sluice"}, {"id": "pebble", "name": "Pebble"},
              {"id": "fjall", "name": "fjall"}],
  "rows": [
   {"label": "fillrandom", "unit": "ops/s", "cells": {
     "sluice": {"median": 100000, "min": 100000, "max": 100000, "runs": 1, "comparable": true},
     "pebble": {"median": 160000, "min": 160000, "max": 160000, "runs": 1, "comparable": true},
     "fjall": {"median": 90000, "min": 90000, "max": 90000, "runs": 1, "comparable": true}}},
   {"label": "compact (parallel)", "unit": "MB/s", "cells": {
     "sluice": {"median": 150, "min": 150, "max": 150, "runs": 1, "comparable": true},
     "pebble": {"median": 65, "min": 65, "max": 65, "runs": 1, "comparable": false},
     "fjall": {"median": 72, "min": 72, "max": 72, "runs": 1, "comparable": true}}}
  ],
  "notes": ["a note under the chart"]
 }
}"#;

#[test]
fn chart_peers_draws_both_charts_from_a_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.json");
    std::fs::write(&results, PEER_RESULTS).unwrap();
    let charts = dir.path().join("charts");
    let out = ok(&[
        "chart",
        "peers",
        "--results",
        results.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
    ]);
    assert!(out.contains("wrote 4 files to"), "{out}");
    for stem in ["peers_ratio", "peers_medians"] {
        let png = std::fs::read(charts.join(format!("{stem}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{stem}.png has {} bytes",
            png.len()
        );
        let svg = std::fs::read_to_string(charts.join(format!("{stem}.svg"))).unwrap();
        assert!(
            svg.contains("<svg") && svg.contains("<text") && svg.contains("fjall"),
            "{stem}.svg"
        );
    }
    // A damaged file is reported with its path and the offset of the damage.
    std::fs::write(&results, &PEER_RESULTS[..200]).unwrap();
    let o = sluice(&[
        "chart",
        "peers",
        "--results",
        results.to_str().unwrap(),
        "--out",
        charts.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("corrupt data in") && stderr(&o).contains("results.json"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn partitioned_databases_open_with_their_owner_directories() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let (a, b) = (
        dir.path().join("owner0").display().to_string(),
        dir.path().join("owner1").display().to_string(),
    );
    let owners = ["--owner-dir", a.as_str(), "--owner-dir", b.as_str()];
    let with_owners = |args: &[&str]| -> Vec<String> {
        args.iter().chain(&owners).map(|s| s.to_string()).collect()
    };
    let ok = |args: Vec<String>| ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    ok(with_owners(&["put", "--db", &db, "k1", "v1"]));
    // Without the owner directories the database cannot be opened, and the error says why.
    let o = sluice(&["get", "--db", &db, "k1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--owner-dir"), "{}", stderr(&o));
    assert_eq!(ok(with_owners(&["get", "--db", &db, "k1"])).trim(), "v1");
    // `get` opens read-only: the value is still only in the WAL.
    assert!(tables(&a).is_empty() && tables(&db).is_empty());
    // A read-write open replays it into owner 0's directory.
    ok(with_owners(&["compact", "--db", &db]));
    assert!(!tables(&a).is_empty());
    assert!(tables(&db).is_empty());
    let text = ok(with_owners(&["stats", "--db", &db]));
    assert!(text.contains("range | start"), "{text}");
    assert!(text.contains("owner 0: 1 ranges"), "{text}");
    let json: Value =
        serde_json::from_str(&ok(with_owners(&["stats", "--db", &db, "--json"]))).unwrap();
    assert_eq!(json["partitions"]["owners"].as_array().unwrap().len(), 2);

    // The range map changed by hand: split the one range at "m", give the upper part to owner 1.
    ok(with_owners(&["put", "--db", &db, "m1", "v2"]));
    let map = ok(with_owners(&["range", "split", "--db", &db, "0", "m"]));
    assert!(map.contains("range 1 ['m' .. end) owner 0"), "{map}");
    let map = ok(with_owners(&["range", "move", "--db", &db, "1", "1"]));
    assert!(map.contains("range 1 ['m' .. end) owner 1"), "{map}");
    assert_eq!(ok(with_owners(&["get", "--db", &db, "m1"])).trim(), "v2");
    // A key that does not lie strictly inside the range, or an owner that does not exist.
    for args in [
        ["range", "split", "--db", &db, "1", "m"],
        ["range", "move", "--db", &db, "0", "5"],
    ] {
        let o = sluice(
            &with_owners(&args)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains("range"), "{}", stderr(&o));
    }
    let text = ok(with_owners(&["stats", "--db", &db]));
    assert!(text.contains("owner 1: 1 ranges"), "{text}");
}

/// Issue 18, finding 4: `get`, `scan`, `stats`, `check` and the dumps replayed the WAL into a
/// table and wrote a MANIFEST. Now none of them changes a byte, with a WAL to replay too.
#[test]
fn read_commands_leave_every_file_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 300);
    ok(&["put", "--db", &db, "in-the-wal", "v"]);
    let table = tables(&db)[0].display().to_string();
    let before = file_bytes(dir.path());
    let reads: [&[&str]; 7] = [
        &["get", "--db", &db, "in-the-wal"],
        &["scan", "--db", &db],
        &["stats", "--db", &db],
        &["stats", "--db", &db, "--json"],
        &["check", "--db", &db],
        &["manifest", "dump", "--db", &db],
        &["sst", "dump", &table],
    ];
    for args in reads {
        ok(args);
        assert!(
            before == file_bytes(dir.path()),
            "{args:?} changed the database"
        );
    }
    assert_eq!(ok(&["get", "--db", &db, "in-the-wal"]).trim(), "v");
}

#[test]
fn check_fails_on_a_damaged_manifest_and_repair_brings_the_database_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 2000);
    ok(&["put", "--db", &db, "in-the-wal", "v"]);
    let manifest = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("MANIFEST-")
        })
        .unwrap();
    let mut bytes = std::fs::read(&manifest).unwrap();
    let last = bytes.len() - 5;
    bytes[last] ^= 0x20;
    std::fs::write(&manifest, &bytes).unwrap();
    let o = sluice(&["check", "--db", &db]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("check failed: corrupt data in") && stderr(&o).contains("MANIFEST"),
        "{}",
        stderr(&o)
    );
    let report = ok(&["repair", "--db", &db]);
    assert!(report.contains("the MANIFEST was unreadable"), "{report}");
    assert!(report.contains("set aside"), "{report}");
    assert!(ok(&["check", "--db", &db]).starts_with("ok: "));
    assert_eq!(ok(&["get", "--db", &db, "in-the-wal"]).trim(), "v");
    assert_eq!(ok(&["scan", "--db", &db]).lines().count(), 2001);
    let v: Value = serde_json::from_str(&ok(&["repair", "--db", &db, "--json"])).unwrap();
    assert_eq!(v["manifest_readable"], true);
    assert_eq!(v["output_entries"], 2001);
}

#[test]
fn repair_lists_the_key_ranges_a_damaged_block_took() {
    let dir = tempfile::tempdir().unwrap();
    let db = populated(dir.path(), 2000);
    let table = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .max()
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&table, &bytes).unwrap();
    let before = dir.path().join("copy");
    std::fs::create_dir_all(&before).unwrap();
    for entry in std::fs::read_dir(&db).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, before.join(path.file_name().unwrap())).unwrap();
    }
    let text = ok(&["repair", "--db", &db]);
    assert!(text.contains("lost range: keys ["), "{text}");
    assert!(
        text.contains("0 keys in lost ranges may read an older value (--drop-older-in-lost-ranges deletes them)"),
        "{text}"
    );
    let listing = std::fs::read_to_string(Path::new(&db).join("lost/LOST-RANGES")).unwrap();
    assert!(listing.contains(&table.display().to_string()), "{listing}");
    let copy = before.display().to_string();
    let v: Value = serde_json::from_str(&ok(&[
        "repair",
        "--db",
        &copy,
        "--json",
        "--drop-older-in-lost-ranges",
    ]))
    .unwrap();
    assert_eq!(v["dropped_older_in_lost_ranges"], true);
    let ranges = v["lost_ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 1, "{v}");
    assert_eq!(
        ranges[0]["keys_at_risk"], 0,
        "every key had one version: {v}"
    );
    assert!(
        v["lost_ranges_file"]
            .as_str()
            .unwrap()
            .ends_with("lost/LOST-RANGES")
    );
}

#[test]
fn check_fails_when_recovery_would_drop_a_torn_wal_tail() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&["put", "--db", &db, "a", "1"]);
    // A torn append after the last record the MANIFEST knows was synced: recovery drops it,
    // and check says so.
    let wal = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&wal).unwrap();
    std::io::Write::write_all(&mut f, &[0x12, 0x34, 0x56, 0x78, 0x20, 0x00, 0x01, b'x']).unwrap();
    drop(f);
    let o = sluice(&["check", "--db", &db]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("dropped: 8 bytes of"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("recovery drops 8 bytes"),
        "{}",
        stderr(&o)
    );
    let v: Value =
        serde_json::from_str(&stdout(&sluice(&["check", "--db", &db, "--json"]))).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["dropped"][0]["bytes"], 8);
    assert_eq!(ok(&["get", "--db", &db, "a"]).trim(), "1");
}
