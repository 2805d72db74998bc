//! What the end-to-end tests share: running the `sluice` binary, and the experiments.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]
#![allow(dead_code, reason = "each test file uses some of these")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `sluice` binary with `args` (without `RUST_LOG`, so its output is only its own).
pub fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run sluice")
}

/// What a run printed on stdout.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// What a run printed on stderr.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs and requires status 0; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = sluice(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: stderr: {}", stderr(&o));
    stdout(&o)
}

/// Every file under `dir` (in every directory below it) and its bytes.
pub fn file_bytes(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut all = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            all.extend(file_bytes(&path));
        } else {
            all.insert(path.clone(), std::fs::read(&path).unwrap());
        }
    }
    all
}

/// `dir/db`, as the `--db` argument.
pub fn db_arg(dir: &Path) -> String {
    dir.join("db").display().to_string()
}

use serde_json::Value;

/// One run of an experiment (`sluice experiment <name>`, or its older spelling `sluice bench
/// --experiment <name>`) with a small size (`--num 64K`), `--json` and `--out <dir>`, which
/// must succeed.
pub struct ExperimentRun {
    /// The `--out` directory (removed when this is dropped).
    pub out: tempfile::TempDir,
    /// The `TMPDIR` the experiment ran with, under `out`: its databases and its workers'
    /// roots, so the workers can be told apart from any other process.
    pub scratch: PathBuf,
    /// What it printed.
    pub report: Value,
}

/// Runs experiment `name`, as the subcommand `command` (ending with the name) asks, with a small
/// data set (the flags `size`, such as `--num 64K`), as [`ExperimentRun`] describes.
pub fn run_experiment(command: &[&str], size: &[&str], name: &str) -> ExperimentRun {
    let out = tempfile::tempdir().unwrap();
    let scratch = out.path().join("tmp");
    std::fs::create_dir(&scratch).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(command)
        .args(size)
        .arg("--json")
        .arg("--out")
        .arg(out.path())
        .env("TMPDIR", &scratch)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "stderr: {stderr}");
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["experiment"], name);
    ExperimentRun {
        out,
        scratch,
        report,
    }
}

/// Asserts the experiment left `scratch` (the `TMPDIR` it was given) empty and no process
/// whose command line names it (its workers) running.
pub fn assert_cleaned_up(scratch: &Path) {
    let ps = Command::new("pgrep")
        .arg("-f")
        .arg(scratch.as_os_str())
        .output()
        .unwrap();
    assert_eq!(std::fs::read_dir(scratch).unwrap().count(), 0);
    assert!(
        ps.stdout.is_empty(),
        "workers left running: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

/// Asserts `dir` holds `<stem>.png` and `<stem>.svg` for every stem.
pub fn assert_charts(dir: &Path, stems: &[&str]) {
    for stem in stems {
        for ext in ["png", "svg"] {
            assert!(dir.join(format!("{stem}.{ext}")).exists(), "{stem}.{ext}");
        }
    }
}
