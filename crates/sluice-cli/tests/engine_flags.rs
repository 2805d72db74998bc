//! End to end: the engine flags every command that opens a database shares. A database whose
//! tables are spread over `--data-dirs` is opened by every later command with the same list,
//! and refused, with a hint, without it.

mod common;

use common::{ok, sluice};

#[test]
fn data_directories_are_given_to_every_command_that_opens_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db").display().to_string();
    let extra = dir.path().join("d1").display().to_string();
    let small = ["--write-buffer-size", "64K", "--target-file-size", "64K"];
    let mut fill = vec!["bench", "--db", &db, "--data-dirs", &extra];
    fill.extend(["--benchmarks", "fillseq", "--num", "20K", "--json"]);
    fill.extend(small);
    ok(&fill);
    let in_extra = std::fs::read_dir(&extra).unwrap().count();
    assert!(in_extra > 0, "no table went to the data directory");

    // Without the list the tables there cannot be found: an error that says what to pass.
    let o = sluice(&["get", "--db", &db, "0000000000000042"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("data"));

    // With it (either spelling) every command opens the database.
    let key = ["0000000000000042"];
    for flag in ["--data-dirs", "--data-dir"] {
        let value = ok(&[&["get", "--db", &db, flag, &extra][..], &key].concat());
        assert!(!value.trim().is_empty());
    }
    ok(&[
        "put",
        "--db",
        &db,
        "--data-dirs",
        &extra,
        "--compression",
        "zstd",
        "k",
        "v",
    ]);
    assert_eq!(ok(&["get", "--db", &db, "--data-dirs", &extra, "k"]), "v\n");
    let scanned = ok(&["scan", "--db", &db, "--data-dirs", &extra, "--limit", "3"]);
    assert_eq!(scanned.lines().count(), 3);
    ok(&["stats", "--db", &db, "--data-dirs", &extra, "--json"]);
    let compacted = ok(&["compact", "--db", &db, "--data-dirs", &extra, "--json"]);
    assert!(compacted.contains("\"lsm_after\""), "{compacted}");
    assert!(ok(&["check", "--db", &db, "--data-dir", &extra]).starts_with("ok:"));
}
