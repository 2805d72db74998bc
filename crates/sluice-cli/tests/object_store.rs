//! `--object-store`: the commands that open a database keep its tables as objects (here
//! through `object_store`'s local backend, `file:///dir`; the S3 path is tested against a real
//! server in `sluice-object`), and `check` refuses a database whose object is gone.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::path::Path;

use common::{db_arg, ok, sluice, stderr};

/// Files in `dir` whose names end in `.sst`.
fn tables(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

#[test]
fn commands_keep_tables_in_the_object_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let objects = dir.path().join("bucket");
    let url = format!("file://{}", objects.display());
    let with_store = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        all.extend([
            "--db".into(),
            db.clone(),
            "--object-store".into(),
            url.clone(),
        ]);
        all
    };
    let run = |args: &[&str]| {
        let all = with_store(args);
        ok(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    for i in 0..50 {
        run(&["put", &format!("key{i:03}"), &format!("value{i}")]);
    }
    run(&["delete", "key007"]);
    run(&["compact"]);
    assert_eq!(run(&["get", "key042"]), "value42\n");
    assert_eq!(run(&["scan"]).lines().count(), 49);
    run(&["check"]);
    // The tables are objects; none is in the database directory.
    let stored = tables(&objects);
    assert!(!stored.is_empty());
    assert!(
        tables(Path::new(&db)).is_empty(),
        "{:?}",
        tables(Path::new(&db))
    );

    // Through a cache: the first command downloads each table once, the next reads local
    // copies, and both see the same data.
    let cache = dir.path().join("cache");
    let cached = |args: &[&str]| {
        let mut all = with_store(args);
        all.extend([
            "--object-cache-dir".into(),
            cache.display().to_string(),
            "--object-cache-bytes".into(),
            "64M".into(),
        ]);
        ok(&all.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let plain = run(&["scan"]);
    assert_eq!(cached(&["scan"]), plain);
    let entries = || -> Vec<(std::ffi::OsString, std::time::SystemTime)> {
        let mut all: Vec<_> = std::fs::read_dir(cache.join("objects"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name(), e.metadata().unwrap().modified().unwrap())
            })
            .collect();
        all.sort();
        all
    };
    let downloaded = entries();
    assert_eq!(downloaded.len(), stored.len());
    assert_eq!(cached(&["scan"]), plain);
    // Served from the copies: none was downloaded again.
    assert_eq!(entries(), downloaded);
    cached(&["check"]);
    let stats = cached(&["stats"]);
    assert!(
        stats.contains("object store: ") && stats.contains(" hits, 0 misses"),
        "{stats}"
    );
    // The cache is no substitute for the bucket: the flag needs --object-store.
    let o = sluice(&["get", "--db", &db, "--object-cache-dir", "x", "key042"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));

    // Opened without --object-store, the tables are missing: the open fails naming one.
    let o = sluice(&["get", "--db", &db, "key042"]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains(".sst"), "{}", stderr(&o));

    // An object deleted behind the database's back: check exits 1 naming it.
    std::fs::remove_file(objects.join(&stored[0])).unwrap();
    let all = with_store(&["check"]);
    let o = sluice(&all.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&stored[0]), "{}", stderr(&o));
}

/// A prefix holds one database: a second one, in another directory, is refused before it
/// writes there, and the first keeps its data.
#[test]
fn a_second_database_is_refused_on_a_prefix_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().join("bucket").display());
    let (a, b) = (db_arg(&dir.path().join("a")), db_arg(&dir.path().join("b")));
    let on = |db: &str, args: &[&str]| {
        let store = ["--db", db, "--object-store", url.as_str()];
        sluice(&[args, &store[..]].concat())
    };
    let o = on(&a, &["put", "k", "v"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = on(&a, &["compact"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let bucket = dir.path().join("bucket");
    let stored = tables(&bucket);
    assert!(!stored.is_empty(), "the value is in a table in the bucket");
    let o = on(&b, &["put", "k", "other"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("SLUICE-OWNER") && stderr(&o).contains("another database"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        tables(&bucket),
        stored,
        "the refused database touched no table"
    );
    let o = on(&a, &["get", "k"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "v\n", "{}", stderr(&o));
}

/// `sluice bench` on a temporary database leaves the prefix as it found it: a second run on
/// the same bucket URL is not refused as another database.
#[test]
fn bench_runs_one_after_another_on_one_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    for _ in 0..2 {
        let o = sluice(&[
            "bench",
            "--benchmarks",
            "fillrandom",
            "--num",
            "2000",
            "--object-store",
            &url,
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(tables(&bucket).is_empty(), "{:?}", tables(&bucket));
    }
}
