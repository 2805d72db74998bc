//! Compaction offload end to end, with real worker processes on 127.0.0.1 started and
//! killed by the tests: the tree after an offloaded compaction holds exactly what a model says,
//! and a worker that is down, killed, stalled or refused costs a retry on the host, never data.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice::options::{OffloadOptions, Secret, Split};
use sluice::{CompactionMode, Db, Options};

const SECRET: &str = "offload-test-secret-0123456789";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A worker process; killed when dropped.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    /// Starts `sluice-worker` serving `root`, with extra `args`, and waits for its address.
    fn start(root: &Path, secret_file: &Path, args: &[&str]) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-worker"))
            .args(["--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .arg("--secret-file")
            .arg(secret_file)
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
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

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}

fn secret_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join(format!("secret-{}", text.len()));
    std::fs::write(&path, text).unwrap();
    path
}

fn base_options() -> Options {
    Options {
        disable_auto_compactions: true,
        write_buffer_size: 1 << 20,
        target_file_size_base: 1 << 20,
        max_bytes_for_level_base: 4 << 20,
        sub_task_bytes: 64 << 10,
        paranoid_checks: true,
        ..Options::default()
    }
}

fn offload(addrs: Vec<String>, secret: &str) -> OffloadOptions {
    OffloadOptions {
        min_offload_bytes: 0,
        task_timeout: Duration::from_secs(60),
        ..OffloadOptions::new(addrs, Secret::new(secret).unwrap())
    }
}

/// Writes an inverted tree (a compacted L1 under L0 files of overwrites and deletes) into
/// `dir` with a host-only database, closes it, and returns what it holds.
fn inverted(dir: &Path) -> Model {
    let db = Db::open(dir, base_options()).unwrap();
    let mut model = Model::new();
    let mut x = 11u64;
    for round in 0..4 {
        for i in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key{:08}", (x >> 33) % 40_000).into_bytes();
            if i % 13 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{round}-{x:x}-{}", "v".repeat((x % 200) as usize)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
        if round == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    db.close().unwrap();
    model
}

fn contents(db: &Db) -> Model {
    db.scan(None, None).unwrap().map(|e| e.unwrap()).collect()
}

/// Table and temporary files in `dir`.
fn table_files(dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut sst = Vec::new();
    let mut tmp = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".sst") {
            sst.push(name);
        } else if name.ends_with(".dbtmp") {
            tmp.push(name);
        }
    }
    (sst, tmp)
}

/// Opens `dir` with `off`, compacts everything, checks the data against `model` and that no
/// table file is left that the tree does not name; returns the offload metrics.
fn compact_and_check(
    dir: &Path,
    off: OffloadOptions,
    model: &Model,
) -> sluice::compaction::offload::OffloadMetrics {
    let db = Db::open(
        dir,
        Options {
            offload: Some(off),
            ..base_options()
        },
    )
    .unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        &contents(&db),
        model,
        "offloaded compaction changed the data"
    );
    let metrics = db.offload_metrics().unwrap();
    let files: usize = db.metrics().levels.iter().map(|l| l.files).sum();
    let (sst, tmp) = table_files(dir);
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    assert_eq!(sst.len(), files, "table files not in the tree: {sst:?}");
    db.close().unwrap();
    // And it reopens to the same data.
    let db = Db::open(dir, base_options()).unwrap();
    assert_eq!(&contents(&db), model);
    metrics
}

#[test]
fn offloaded_compaction_keeps_every_entry() {
    for (split, mode) in [
        (
            Split::Static { host_share: 0.5 },
            Some(CompactionMode::Sequential),
        ),
        (
            Split::Static { host_share: 0.3 },
            Some(CompactionMode::Pipelined),
        ),
        (Split::Dynamic, None),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let model = inverted(dir.path());
        let secret = secret_file(dir.path(), SECRET);
        let worker = Worker::start(dir.path(), &secret, &[]);
        let off = OffloadOptions {
            split,
            host_mode: mode,
            worker_mode: mode,
            ..offload(vec![worker.addr.clone()], SECRET)
        };
        let m = compact_and_check(dir.path(), off, &model);
        assert!(m.jobs >= 1);
        assert_eq!(m.retries, 0, "{split}: {m:?}");
        assert!(
            m.sides[1].input_bytes > 0,
            "{split}: the worker did no work: {m:?}"
        );
        assert!(m.last_shares.iter().any(|s| s.side == worker.addr));
    }
}

#[test]
fn two_workers_share_with_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    let w1 = Worker::start(dir.path(), &secret, &["--mode", "sequential"]);
    let w2 = Worker::start(dir.path(), &secret, &["--mode", "pipelined"]);
    let off = OffloadOptions {
        split: Split::Static { host_share: 0.2 },
        ..offload(vec![w1.addr.clone(), w2.addr.clone()], SECRET)
    };
    let m = compact_and_check(dir.path(), off, &model);
    assert_eq!(m.retries, 0, "{m:?}");
    assert!(
        m.sides[1].input_bytes > 0 && m.sides[2].input_bytes > 0,
        "{m:?}"
    );
}

#[test]
fn a_worker_down_at_start_costs_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    // A port nobody listens on.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let m = compact_and_check(dir.path(), offload(vec![addr], SECRET), &model);
    assert!(m.retries >= 1, "{m:?}");
    assert!(m.last_shares.iter().any(|s| s.retried));
}

#[test]
fn a_wrong_secret_is_refused_and_the_host_does_the_work() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let m = compact_and_check(
        dir.path(),
        offload(vec![worker.addr.clone()], "not-the-secret-at-all-0000"),
        &model,
    );
    assert!(m.retries >= 1, "{m:?}");
}

#[test]
fn a_stalled_worker_passes_its_deadline_and_the_host_takes_over() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    // A device a thousand times slower than its CPU time: it sits on its reply.
    let worker = Worker::start(dir.path(), &secret, &["--throttle", "1000"]);
    let off = OffloadOptions {
        task_timeout: Duration::from_secs(2),
        ..offload(vec![worker.addr.clone()], SECRET)
    };
    let m = compact_and_check(dir.path(), off, &model);
    assert!(m.retries >= 1, "{m:?}");
}

#[test]
fn a_worker_killed_mid_task_costs_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    let mut worker = Worker::start(dir.path(), &secret, &["--throttle", "1000"]);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(worker.child.id()).unwrap());
    // SIGKILL the worker while it holds the task (its outputs written, its reply not sent).
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    });
    let m = compact_and_check(
        dir.path(),
        offload(vec![worker.addr.clone()], SECRET),
        &model,
    );
    killer.join().unwrap();
    worker.kill();
    assert!(m.retries >= 1, "{m:?}");
}
