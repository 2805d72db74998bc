//! End to end: `sluice compact --worker` against a real `sluice worker` process (this binary's
//! `worker` subcommand) on 127.0.0.1, as a user would run them side by side.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers fail the test on any error"
)]

use std::process::Command;

use serde_json::Value;
use sluice_experiments::workers::{
    WorkerProgram, WorkerSet, WorkerSettings, WorkerSpec, write_secret_file,
};

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
    write_secret_file(&secret).unwrap();
    // The experiment's own launcher: this binary's `worker`, its ready line awaited.
    let program = WorkerProgram::sluice(env!("CARGO_BIN_EXE_sluice"));
    let settings = WorkerSettings {
        program: &program,
        secret_file: &secret,
        throttle: 1000.0,
        log_dir: dir.path(),
        object_store: None,
        mode: "auto",
    };
    let workers = WorkerSet::start(&settings, &WorkerSpec::serving(&db, &[None])).unwrap();
    let addr = workers.addresses().remove(0);

    let args = [
        "compact",
        "--db",
        db_arg,
        "--worker",
        &addr,
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
    assert_eq!(shares[1]["side"].as_str(), Some(addr.as_str()));
    assert_eq!(shares[1]["input_bytes"].as_u64(), Some(0), "{json}");

    assert_eq!(sluice(&["scan", "--db", db_arg]), before);
    sluice(&["check", "--db", db_arg]);
    workers.stop().unwrap();
}
