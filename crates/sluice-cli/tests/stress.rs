//! `sluice stress` end to end, with the real binary: a few seconds each of the kill loop, the
//! damage and fault rounds, offload workers and partitions; and the proof that the checker
//! can fail: a key deleted behind its back is reported.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

use std::path::Path;
use std::process::{Command, Output};

use sluice::{Db, Options};

/// Runs `sluice stress ARGS` with a small key space; returns its output.
fn stress(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("stress")
        .args(["--keys", "4000", "--threads", "3"])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

/// The summary line, after checking the run passed.
fn passed(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = stdout.lines().last().unwrap().to_string();
    assert_eq!(count(&summary, "failures"), 0, "{stdout}");
    assert!(count(&summary, "verified") > 0, "{summary}");
    summary
}

/// [`passed`], for a run that had time to do something.
fn worked(o: &Output) -> String {
    let summary = passed(o);
    assert!(count(&summary, "operations") > 0, "{summary}");
    summary
}

/// The number before ` <what>` in `line` (the first one, e.g. "12 kills").
fn count(line: &str, what: &str) -> u64 {
    let at = line
        .find(&format!(" {what}"))
        .unwrap_or_else(|| panic!("{what} in {line}"));
    line[..at]
        .rsplit([' ', ','])
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn killed_again_and_again_it_loses_nothing() {
    let o = stress(&["--duration", "6", "--kill-every", "0.7", "--seed", "11"]);
    let summary = worked(&o);
    assert!(count(&summary, "kills") >= 3, "{summary}");
}

#[test]
fn every_damage_and_fault_is_reported_or_harmless() {
    let o = stress(&["--duration", "8", "--corrupt", "--seed", "12"]);
    let summary = worked(&o);
    let injected = count(&summary, "damage injected");
    assert!(injected >= 1, "{summary}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    // Every damage is reported: a clean close synced everything, so nothing may go unsaid.
    // The one exception: a MANIFEST cut exactly between records loses only the close's
    // record of the WAL's length, and the data reads back whole (harmless).
    for line in stdout.lines().filter(|l| l.starts_with("damage ")) {
        let harmless_allowed = line.starts_with("damage manifest-truncate:");
        let (injected, reported) = (line_number(line, "injected"), line_number(line, "reported"));
        let harmless = line_number(line, "harmless");
        assert!(
            reported == injected || (harmless_allowed && reported + harmless == injected),
            "{line}"
        );
    }
    assert!(count(&summary, "faults injected") >= 1, "{summary}");
}

/// `N` in `<what> N` (the class lines put the number after the word).
fn line_number(line: &str, what: &str) -> u64 {
    let at = line.find(what).unwrap() + what.len();
    line[at..]
        .trim_start()
        .split([',', ' '])
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn offloaded_compactions_lose_nothing() {
    let o = stress(&["--duration", "4", "--workers", "1", "--seed", "13"]);
    worked(&o);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let line = stdout.lines().find(|l| l.starts_with("offload: ")).unwrap();
    assert!(count(line, "compactions shared") >= 1, "{line}");
}

#[test]
fn partitioned_owners_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let args = [
        "--duration",
        "4",
        "--partitions",
        "2",
        "--kill-every",
        "1.5",
        "--seed",
        "14",
    ];
    worked(&stress(
        &[&args[..], &["--db", db.to_str().unwrap()]].concat(),
    ));
    for owner in ["owner0", "owner1"] {
        let tables = std::fs::read_dir(db.join(owner))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "sst")
            })
            .count();
        assert!(tables > 0, "{owner} holds no table");
    }
}

#[test]
fn a_key_lost_behind_its_back_is_a_failure() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_arg = db.to_str().unwrap();
    worked(&stress(&[
        "--duration",
        "1",
        "--db",
        db_arg,
        "--seed",
        "15",
    ]));
    // The expected state is beside the database, and a later run verifies it first.
    assert!(dir.path().join("db.expected").exists());
    passed(&stress(&["--duration", "0", "--db", db_arg]));

    let lost = delete_first_key(&db);
    let o = stress(&["--duration", "0", "--db", db_arg, "--seed", "16"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAILURE (seed 16"), "{stdout}");
    assert!(stdout.contains(&format!("key {lost}")), "{stdout}");
    assert!(
        stdout.lines().last().unwrap().ends_with(" 1 failures"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("replay with --seed 16"), "{stderr}");
}

/// Deletes the first key the database holds, as a bug that loses a write would; returns its
/// number.
fn delete_first_key(db: &Path) -> u32 {
    let d = Db::open(db, Options::default()).unwrap();
    let (key, _) = d.iter().next().unwrap().unwrap();
    d.delete(&key).unwrap();
    d.close().unwrap();
    std::str::from_utf8(&key[3..]).unwrap().parse().unwrap()
}
