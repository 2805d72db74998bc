//! End to end: `sluice compact --worker` against a real `sluice worker` process (this binary's
//! `worker` subcommand) on 127.0.0.1, as a user would run them side by side.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

fn sluice(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: stderr: {stderr}");
    String::from_utf8(o.stdout).unwrap()
}

/// A `sluice worker` serving `root`, stopped (SIGKILL) when dropped.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    fn start(root: &Path, secret: &Path, extra: &[&str]) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["worker", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .arg("--secret-file")
            .arg(secret)
            .args(extra)
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("sluice worker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        Worker { child, addr }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With the dynamic split and a worker that sits on every reply, `compact` still finishes: the
/// host runs the worker's chunk itself, keeps its own copy, and says so; nothing is lost.
#[test]
fn compact_with_a_stalled_worker_races_its_chunk_and_keeps_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_arg = db.to_str().unwrap();
    sluice(&[
        "bench",
        "--db",
        db_arg,
        "--benchmarks",
        "fillrandom",
        "--num",
        "200000",
        "--write-buffer-size",
        "1048576",
        "--disable-auto-compactions",
    ]);
    let before = sluice(&["scan", "--db", db_arg]);
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "a-secret-of-more-than-sixteen-chars").unwrap();
    let worker = Worker::start(&db, &secret, &["--throttle", "1000"]);

    let args = [
        "compact",
        "--db",
        db_arg,
        "--worker",
        &worker.addr,
        "--worker-secret-file",
        secret.to_str().unwrap(),
        "--split",
        "dynamic",
        "--offload-min-bytes",
        "0",
    ];
    let json: Value = serde_json::from_str(&sluice(&[&args[..], &["--json"]].concat())).unwrap();
    assert!(json["compactions"].as_u64().unwrap() >= 1, "{json}");
    let races = json["races_won_by_host"].as_u64().unwrap();
    assert!(races >= 1, "{json}");
    assert_eq!(json["races"].as_u64(), Some(races), "{json}");
    assert_eq!(json["retries"].as_u64(), Some(0), "{json}");
    let shares = json["shares"].as_array().unwrap();
    assert_eq!(shares[1]["side"].as_str(), Some(worker.addr.as_str()));
    assert_eq!(shares[1]["input_bytes"].as_u64(), Some(0), "{json}");

    assert_eq!(sluice(&["scan", "--db", db_arg]), before);
    sluice(&["check", "--db", db_arg]);
}
