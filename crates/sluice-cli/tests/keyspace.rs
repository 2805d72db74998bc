//! End to end: keyspaces (RocksDB's column families) from the command line. `sluice keyspace
//! list|create|drop`, and `--keyspace NAME` on the key-value commands, `compact` and `stats`,
//! as a user would try them: each keyspace's keys apart from the others', a keyspace that does
//! not exist named in the error, and the engine flags given to every keyspace.

mod common;

use common::{db_arg, file_bytes, ok, sluice, stderr};

use std::path::Path;

use serde_json::Value;

/// Runs and requires status 2 (an error) and nothing on stdout; returns stderr.
fn fails(args: &[&str]) -> String {
    let o = sluice(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: stderr: {}", stderr(&o));
    assert!(o.stdout.is_empty(), "{args:?}");
    stderr(&o)
}

/// `args` followed by `extra`.
fn plus<'a>(extra: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
    [args, extra].concat()
}

#[test]
fn keyspaces_are_created_listed_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    // `create` makes the database too; `default` is always there, listed first.
    ok(&["keyspace", "create", "--db", &db, "users"]);
    ok(&["keyspace", "create", "--db", &db, "logs"]);
    assert_eq!(
        ok(&["keyspace", "list", "--db", &db]),
        "default\nusers\nlogs\n"
    );
    ok(&["put", "--db", &db, "--keyspace", "logs", "k", "v"]);

    // Mistakes are errors that say what is wrong, and change nothing.
    let err = fails(&["keyspace", "create", "--db", &db, "users"]);
    assert!(err.contains("\"users\" already exists"), "{err}");
    let err = fails(&["keyspace", "create", "--db", &db, "default"]);
    assert!(err.contains("\"default\""), "{err}");
    let err = fails(&["keyspace", "drop", "--db", &db, "default"]);
    assert!(err.contains("cannot be dropped"), "{err}");
    let err = fails(&["keyspace", "drop", "--db", &db, "nope"]);
    assert!(
        err.contains("no keyspace \"nope\"") && err.contains("default, users, logs"),
        "{err}"
    );
    let missing = dir.path().join("nothing-here").display().to_string();
    let err = fails(&["keyspace", "list", "--db", &missing]);
    assert!(err.contains("no database in"), "{err}");
    assert!(!Path::new(&missing).exists(), "list created a database");

    // A dropped keyspace is gone with its keys and files; a new one of the same name is empty.
    ok(&["keyspace", "drop", "--db", &db, "logs"]);
    assert_eq!(ok(&["keyspace", "list", "--db", &db]), "default\nusers\n");
    let err = fails(&["get", "--db", &db, "--keyspace", "logs", "k"]);
    assert!(err.contains("no keyspace \"logs\""), "{err}");
    let trees = std::fs::read_dir(Path::new(&db).join("keyspaces"))
        .unwrap()
        .count();
    assert_eq!(trees, 1, "the dropped keyspace's directory is still there");
    ok(&["keyspace", "create", "--db", &db, "logs"]);
    assert_eq!(ok(&["scan", "--db", &db, "--keyspace", "logs"]), "");
    assert!(ok(&["check", "--db", &db]).starts_with("ok:"));
}

#[test]
fn each_keyspace_holds_its_own_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let users = ["--keyspace", "users"];
    ok(&["keyspace", "create", "--db", &db, "users"]);
    for (k, v) in [("a", "default-a"), ("b", "default-b"), ("c", "default-c")] {
        ok(&["put", "--db", &db, k, v]);
    }
    for (k, v) in [
        ("a", "user-a"),
        ("b", "user-b"),
        ("c", "user-c"),
        ("d", "user-d"),
    ] {
        ok(&plus(&users, &["put", "--db", &db, k, v]));
    }
    assert_eq!(ok(&plus(&users, &["get", "--db", &db, "a"])), "user-a\n");
    assert_eq!(ok(&["get", "--db", &db, "a"]), "default-a\n");
    // `--keyspace default` is the default keyspace, spelt out.
    assert_eq!(
        ok(&["get", "--db", &db, "--keyspace", "default", "a"]),
        "default-a\n"
    );
    // A key only the keyspace has is not found in the default one: exit 1, as for any key.
    assert_eq!(sluice(&["get", "--db", &db, "d"]).status.code(), Some(1));

    // Deletes, range deletes and merges touch only the keyspace they name.
    ok(&plus(&users, &["delete", "--db", &db, "a"]));
    ok(&plus(
        &users,
        &["delete-range", "--db", &db, "--from", "c", "--to", "d"],
    ));
    let add = ["--merge-operator", "u64_add"];
    ok(&[
        &plus(&users, &["merge", "--db", &db, "hits", "5", "--u64"])[..],
        &add,
    ]
    .concat());
    ok(&[
        &plus(&users, &["merge", "--db", &db, "hits", "37", "--u64"])[..],
        &add,
    ]
    .concat());
    let expected_users = "b\tuser-b\nd\tuser-d\nhits\t*\\x00\\x00\\x00\\x00\\x00\\x00\\x00\n";
    let expected_default = "a\tdefault-a\nb\tdefault-b\nc\tdefault-c\n";
    let scan_users = [&plus(&users, &["scan", "--db", &db])[..], &add].concat();
    assert_eq!(ok(&scan_users), expected_users);
    assert_eq!(ok(&["scan", "--db", &db]), expected_default);
    assert_eq!(
        ok(&plus(
            &users,
            &["scan", "--db", &db, "--from", "c", "--to", "e"]
        )),
        "d\tuser-d\n"
    );

    // Compacting the keyspace compacts its tree (into one table), not the default one's.
    let stats = |args: &[&str]| -> Value {
        let json = ok(&[&["stats", "--db", &db, "--json"][..], args].concat());
        serde_json::from_str(&json).unwrap()
    };
    let files = |v: &Value| -> Vec<u64> {
        let levels = v["levels"].as_array().unwrap();
        levels
            .iter()
            .map(|l| l["files"].as_u64().unwrap())
            .collect()
    };
    let default_before = files(&stats(&[]));
    let compact = [&plus(&users, &["compact", "--db", &db, "--json"])[..], &add].concat();
    let summary: Value = serde_json::from_str(&ok(&compact)).unwrap();
    assert_eq!(summary["keyspace"], "users", "{summary}");
    let stats_users = stats(&users);
    assert_eq!(stats_users["keyspace"], "users");
    assert_eq!(
        stats_users["keyspaces"],
        serde_json::json!(["default", "users"])
    );
    assert_eq!(files(&stats_users).iter().sum::<u64>(), 1, "{stats_users}");
    let stats_default = stats(&[]);
    assert_eq!(stats_default["keyspace"], "default");
    assert_eq!(files(&stats_default), default_before, "{stats_default}");
    let text = ok(&plus(&users, &["stats", "--db", &db]));
    assert!(
        text.contains("keyspace users (the database's keyspaces: default, users)"),
        "{text}"
    );
    // After the compaction the operands are one value, readable without the operator.
    assert_eq!(ok(&plus(&users, &["scan", "--db", &db])), expected_users);
    assert_eq!(ok(&["scan", "--db", &db]), expected_default);
    assert!(ok(&["check", "--db", &db]).starts_with("ok:"));
}

#[test]
fn reads_of_a_keyspace_change_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    ok(&[
        "put",
        "--db",
        &db,
        "--keyspace",
        "users",
        "--create-keyspace",
        "k",
        "v",
    ]);
    ok(&["put", "--db", &db, "--keyspace", "users", "in-the-wal", "w"]);
    let before = file_bytes(dir.path());
    let reads: [&[&str]; 5] = [
        &["get", "--db", &db, "--keyspace", "users", "in-the-wal"],
        &["scan", "--db", &db, "--keyspace", "users"],
        &["stats", "--db", &db, "--keyspace", "users", "--json"],
        &["keyspace", "list", "--db", &db],
        &["check", "--db", &db],
    ];
    for args in reads {
        ok(args);
        assert!(
            before == file_bytes(dir.path()),
            "{args:?} changed the database"
        );
    }
    let err = fails(&["get", "--db", &db, "--keyspace", "nope", "k"]);
    assert!(err.contains("no keyspace \"nope\""), "{err}");
    assert!(before == file_bytes(dir.path()), "a failed get changed it");
}

#[test]
fn a_missing_keyspace_is_an_error_naming_it_unless_asked_to_create_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());

    // No database yet: nothing is created only to say that the keyspace is missing.
    let err = fails(&["put", "--db", &db, "--keyspace", "users", "k", "v"]);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("no keyspace \"users\"") && err.contains("--create-keyspace"),
        "{err}"
    );
    assert!(
        !Path::new(&db).exists(),
        "the failed put created a database"
    );

    // A database without it: every command that names it fails, naming it and the keyspaces
    // there are, and writes nothing.
    ok(&["put", "--db", &db, "k", "default-v"]);
    let ks = ["--keyspace", "users"];
    for args in [
        &["put", "--db", &db, "k", "v"][..],
        &["merge", "--db", &db, "k", "v", "--merge-operator", "append"],
        &["delete", "--db", &db, "k"],
        &["delete-range", "--db", &db, "--from", "a", "--to", "z"],
        &["get", "--db", &db, "k"],
        &["scan", "--db", &db],
        &["compact", "--db", &db],
        &["stats", "--db", &db],
    ] {
        let err = fails(&[args, &ks[..]].concat());
        assert!(
            err.contains("no keyspace \"users\"") && err.contains("keyspaces are default"),
            "{args:?}: {err}"
        );
        assert!(err.contains("sluice keyspace create"), "{args:?}: {err}");
    }
    assert_eq!(ok(&["keyspace", "list", "--db", &db]), "default\n");
    assert_eq!(ok(&["scan", "--db", &db]), "k\tdefault-v\n");

    // --create-keyspace creates it (and, in a new directory, the database) on the first write.
    let put = [
        "put",
        "--db",
        &db,
        "--keyspace",
        "users",
        "--create-keyspace",
    ];
    ok(&[&put[..], &["k", "user-v"]].concat());
    ok(&[&put[..], &["k2", "user-v2"]].concat());
    assert_eq!(ok(&["keyspace", "list", "--db", &db]), "default\nusers\n");
    assert_eq!(
        ok(&["scan", "--db", &db, "--keyspace", "users"]),
        "k\tuser-v\nk2\tuser-v2\n"
    );
    assert_eq!(ok(&["scan", "--db", &db]), "k\tdefault-v\n");
    let fresh = dir.path().join("fresh").display().to_string();
    ok(&[
        "merge",
        "--db",
        &fresh,
        "--keyspace",
        "tags",
        "--create-keyspace",
        "--merge-operator",
        "append(2c)",
        "t",
        "x",
    ]);
    assert_eq!(ok(&["keyspace", "list", "--db", &fresh]), "default\ntags\n");
}

/// The engine flags describe every keyspace: a database whose keyspaces were all written with
/// a TTL opens, whichever keyspace a command names, when `--ttl` is given.
#[test]
fn engine_flags_apply_to_every_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let ttl = ["--ttl", "3600"];
    ok(&plus(&ttl, &["put", "--db", &db, "k", "default-v"]));
    ok(&plus(&ttl, &["keyspace", "create", "--db", &db, "a"]));
    ok(&plus(&ttl, &["keyspace", "create", "--db", &db, "b"]));
    ok(&plus(
        &ttl,
        &["put", "--db", &db, "--keyspace", "a", "k", "a-v"],
    ));
    ok(&plus(
        &ttl,
        &["put", "--db", &db, "--keyspace", "b", "k", "b-v"],
    ));
    for (keyspace, value) in [("default", "default-v\n"), ("a", "a-v\n"), ("b", "b-v\n")] {
        let get = ["get", "--db", &db, "--keyspace", keyspace, "k"];
        assert_eq!(ok(&plus(&ttl, &get)), value, "{keyspace}");
        // Without the TTL the keyspace written with one refuses to open.
        let err = fails(&get);
        assert!(err.contains("ttl"), "{keyspace}: {err}");
    }
    assert!(ok(&plus(&ttl, &["check", "--db", &db])).starts_with("ok:"));
}

#[test]
fn a_table_ingests_into_a_keyspace_and_a_checkpoint_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_arg(dir.path());
    let lines = dir.path().join("lines.tsv");
    std::fs::write(&lines, "a\t1\nb\t2\n").unwrap();
    let table = dir.path().join("bulk.sst").display().to_string();
    ok(&[
        "sst",
        "write",
        &table,
        "--input",
        &lines.display().to_string(),
    ]);
    ok(&["keyspace", "create", "--db", &db, "bulk"]);
    ok(&["ingest", "--db", &db, "--keyspace", "bulk", &table]);
    assert_eq!(
        ok(&["scan", "--db", &db, "--keyspace", "bulk"]),
        "a\t1\nb\t2\n"
    );
    assert_eq!(
        ok(&["scan", "--db", &db]),
        "",
        "the default keyspace got nothing"
    );
    let copy = dir.path().join("copy").display().to_string();
    ok(&["checkpoint", "--db", &db, "--to", &copy]);
    assert_eq!(
        ok(&["scan", "--db", &copy, "--keyspace", "bulk"]),
        "a\t1\nb\t2\n"
    );
    ok(&["check", "--db", &copy]);
}
