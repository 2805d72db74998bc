//! Ctrl-C during `sluice bench`: the running benchmark ends early and is reported with what it
//! did, the rest are skipped, the process exits normally and the database stays sound.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

/// Bytes of WAL the database directory holds.
fn wal_bytes(db: &std::path::Path) -> u64 {
    std::fs::read_dir(db).map_or(0, |entries| {
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

#[test]
fn ctrl_c_reports_the_benchmark_so_far_and_skips_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let num = 100_000_000u64; // minutes of work: only Ctrl-C ends it in time
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["bench", "--db", db.to_str().unwrap(), "--json"])
        .args([
            "--benchmarks",
            "fillrandom,readrandom",
            "--num",
            &num.to_string(),
        ])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once writes are under way.
    let deadline = Instant::now() + Duration::from_secs(60);
    while wal_bytes(&db) < 1 << 20 {
        assert!(
            Instant::now() < deadline,
            "the benchmark never started writing"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // A WAL may be preallocated as it is created, before the bench installs its Ctrl-C
    // handler: give it time to be writing for real (the fill runs for minutes).
    std::thread::sleep(Duration::from_millis(500));
    kill(Pid::from_raw(child.id() as i32), Signal::SIGINT).unwrap();
    let status = child.wait().unwrap();
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "{status}: {stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "readrandom must not run: {stdout}");
    let fill = &lines[0];
    assert_eq!(fill["name"], "fillrandom");
    assert_eq!(fill["stopped"], true);
    let ops = fill["ops"].as_u64().unwrap();
    assert!(ops > 0 && ops < num, "ops {ops}");
    assert!(
        stderr.contains("stopped by Ctrl-C after 1 of 2 benchmarks"),
        "{stderr}"
    );
    // Everything acknowledged is there, and every table checks out.
    let check = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["check", "--db", db.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}
