//! Compaction offload end to end, with real worker processes on 127.0.0.1 started and
//! killed by the tests: the tree after an offloaded compaction holds exactly what a model says,
//! and a worker that is down, killed, stalled or refused costs a retry on the host, never data,
//! under the static split (one share per side, a worker's in pieces) and the dynamic one
//! (self-scheduled chunks).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

use sluice::{CompactionMode, CompactionOptions, Db, MemtableOptions, Options};
use sluice_offload::{OffloadOptions, Secret, SideMode, Split};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::compare_internal;
use sluice_sst::table::{Table, TableReadOptions};

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
        Worker::spawn(root, secret_file, args, false).0
    }

    /// Like [`Worker::start`], but logging each task's start and end to the returned stderr.
    fn start_logged(root: &Path, secret_file: &Path, args: &[&str]) -> (Worker, ChildStderr) {
        let (worker, log) = Worker::spawn(root, secret_file, args, true);
        (worker, log.unwrap())
    }

    fn spawn(
        root: &Path,
        secret_file: &Path,
        args: &[&str],
        logged: bool,
    ) -> (Worker, Option<ChildStderr>) {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-worker"))
            .args(["--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .arg("--secret-file")
            .arg(secret_file)
            .args(args)
            .env("RUST_LOG", if logged { "info" } else { "warn" })
            .stdout(Stdio::piped())
            .stderr(if logged {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .spawn()
            .unwrap();
        let log = child.stderr.take();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("sluice worker listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_string();
        (Worker { child, addr }, log)
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

/// Makes `path` readable by its owner only, as a secret file must be.
fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

fn secret_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join(format!("secret-{}", text.len()));
    std::fs::write(&path, text).unwrap();
    private(&path);
    path
}

fn base_options() -> Options {
    Options {
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 1 << 20,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            target_file_size_base: 1 << 20,
            max_bytes_for_level_base: 4 << 20,
            sub_task_bytes: 64 << 10,
            ..CompactionOptions::default()
        },
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
    db.iter().map(|e| e.unwrap()).collect()
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
) -> sluice_offload::OffloadMetrics {
    compact_checked(dir, Some(off), model).unwrap()
}

/// [`compact_and_check`], offloading only with `off`.
fn compact_checked(
    dir: &Path,
    off: Option<OffloadOptions>,
    model: &Model,
) -> Option<sluice_offload::OffloadMetrics> {
    let db = Db::open(
        dir,
        Options {
            offload: off.map(Into::into),
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
    let metrics = db.offload_metrics();
    let files: usize = db.metrics().levels.iter().map(|l| l.files).sum();
    // A call the host gave up on (a timeout on a loaded machine) may still be writing when the
    // compaction returns; the worker deletes what it wrote once its job sees the cancel. So
    // files outside the tree may linger for a moment, but not for good.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (sst, tmp) = loop {
        let (sst, tmp) = table_files(dir);
        if (tmp.is_empty() && sst.len() == files) || std::time::Instant::now() > deadline {
            break (sst, tmp);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(tmp.is_empty(), "temporary files left: {tmp:?}");
    assert_eq!(sst.len(), files, "table files not in the tree: {sst:?}");
    db.close().unwrap();
    // And it reopens to the same data.
    let db = Db::open(dir, base_options()).unwrap();
    assert_eq!(&contents(&db), model);
    metrics
}

/// Every entry (internal key and value) of every table in `dir`, in internal-key order: what
/// the tree holds, versions and tombstones included, however its files are cut.
fn entries(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (sst, _) = table_files(dir);
    let mut all = Vec::new();
    for name in sst {
        let number = name.trim_end_matches(".sst").parse().unwrap();
        let table = Table::open(&dir.join(&name), number, TableReadOptions::default()).unwrap();
        let mut it = table.iter();
        it.seek_to_first().unwrap();
        while it.valid() {
            all.push((it.key().to_vec(), it.value().to_vec()));
            it.next().unwrap();
        }
    }
    all.sort_by(|a, b| compare_internal(&a.0, &b.0));
    all
}

/// The dynamic split with chunks small enough that a job has many of them.
fn dynamic(addrs: Vec<String>) -> OffloadOptions {
    OffloadOptions {
        split: Split::Dynamic,
        min_chunk_bytes: 256 << 10,
        ..offload(addrs, SECRET)
    }
}

/// Static shares in pieces of `piece_bytes`: small enough that a worker's share of the test
/// tree is several.
fn in_pieces(addrs: Vec<String>, host_share: f64) -> OffloadOptions {
    OffloadOptions {
        split: Split::Static { host_share },
        piece_bytes: 256 << 10,
        ..offload(addrs, SECRET)
    }
}

/// Copies of the inverted tree in `dir`'s subdirectories `names`, and what it holds.
fn inverted_copies(dir: &Path, names: &[&str]) -> (Model, Vec<PathBuf>) {
    let first = dir.join(names[0]);
    let model = inverted(&first);
    let mut copies = vec![first.clone()];
    for name in &names[1..] {
        let copy = dir.join(name);
        std::fs::create_dir(&copy).unwrap();
        for e in std::fs::read_dir(&first).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
        copies.push(copy);
    }
    (model, copies)
}

/// A worker (with extra `args`) logging its tasks to a thread that counts them: joined, the
/// thread returns how many started, killing the worker with SIGKILL as it starts the
/// `kill_at`-th.
fn counted_worker(
    root: &Path,
    secret: &Path,
    args: &[&str],
    kill_at: Option<usize>,
) -> (Worker, std::thread::JoinHandle<usize>) {
    let (worker, log) = Worker::start_logged(root, secret, args);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(worker.child.id()).unwrap());
    let counter = std::thread::spawn(move || {
        let mut started = 0;
        for line in BufReader::new(log).lines() {
            let Ok(line) = line else { break };
            if line.contains("task started") {
                started += 1;
                if Some(started) == kill_at {
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                }
            }
        }
        started
    });
    (worker, counter)
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
            host_mode: mode.map_or(SideMode::Decide, SideMode::Fixed),
            worker_mode: mode.map_or(SideMode::Decide, SideMode::Fixed),
            // Small chunks for the dynamic split; the static one has no use for them.
            ..dynamic(vec![worker.addr.clone()])
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
fn dynamic_chunks_hold_what_a_host_only_compaction_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (model, copies) = inverted_copies(dir.path(), &["host", "offloaded"]);
    let (host, offloaded) = (&copies[0], &copies[1]);
    assert!(compact_checked(host, None, &model).is_none());

    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(offloaded, &secret, &[]);
    let m = compact_and_check(offloaded, dynamic(vec![worker.addr.clone()]), &model);
    assert_eq!(m.retries, 0, "{m:?}");
    assert_every_side_took_part(&m);
    let last: Vec<&str> = m.last_shares.iter().map(|s| s.side.as_str()).collect();
    let kept: Vec<&str> = ["host", worker.addr.as_str()]
        .into_iter()
        .zip(&m.sides)
        .filter(|(_, side)| side.input_bytes > 0)
        .map(|(name, _)| name)
        .collect();
    assert_eq!(last, kept, "one report per side that kept work, host first");
    // Same entries, versions and tombstones as the host alone wrote; only the cuts differ.
    let (want, got) = (entries(host), entries(offloaded));
    assert!(!want.is_empty());
    assert_eq!(want.len(), got.len());
    assert!(want == got, "the offloaded tree holds other entries");
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
fn two_workers_take_dynamic_chunks_with_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    let w1 = Worker::start(dir.path(), &secret, &[]);
    let w2 = Worker::start(dir.path(), &secret, &["--mode", "pipelined"]);
    let m = compact_and_check(
        dir.path(),
        dynamic(vec![w1.addr.clone(), w2.addr.clone()]),
        &model,
    );
    assert_eq!(m.retries, 0, "{m:?}");
    assert_every_side_took_part(&m);
}

/// Every side ran chunks that were kept, unless a race explains it. A worker with no
/// measured speed yet is raced as soon as the host runs out of work, and on these small jobs
/// either copy may finish first: a worker whose copy lost, or a host whose only chunk was a
/// copy that lost, keeps nothing.
fn assert_every_side_took_part(m: &sluice_offload::OffloadMetrics) {
    let idle_workers = m.sides[1..].iter().filter(|s| s.input_bytes == 0).count() as u64;
    assert!(
        idle_workers <= m.races_won_by_host,
        "a worker without kept work, and no race it lost: {m:?}"
    );
    assert!(
        m.sides[0].input_bytes > 0 || m.races > m.races_won_by_host,
        "the host kept no work, and lost no race: {m:?}"
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
    let m = compact_and_check(dir.path(), offload(vec![addr.clone()], SECRET), &model);
    assert!(m.retries >= 1, "{m:?}");
    assert!(m.last_shares.iter().any(|s| s.retried));

    // Dynamic: the first chunk fails and goes back to the queue, unless the host, out of
    // work, raced it first; either way the worker takes no more in that job.
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let m = compact_and_check(dir.path(), dynamic(vec![addr.clone()]), &model);
    assert!(m.retries <= m.jobs, "{m:?}");
    assert!(m.retries + m.races_won_by_host >= m.jobs, "{m:?}");
    assert_eq!(m.sides[1].input_bytes, 0, "{m:?}");
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

/// Compacts an inverted tree with `off(address)` and a worker that sits on every reply (a
/// device a thousand times slower than its CPU time); returns the directory, the still
/// running worker and the offload metrics.
fn with_a_stalled_worker(
    off: impl FnOnce(String) -> OffloadOptions,
) -> (tempfile::TempDir, Worker, sluice_offload::OffloadMetrics) {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &["--throttle", "1000"]);
    let m = compact_and_check(dir.path(), off(worker.addr.clone()), &model);
    (dir, worker, m)
}

#[test]
fn a_stalled_worker_passes_its_deadline_and_the_host_takes_over() {
    let (_dir, _worker, m) = with_a_stalled_worker(|addr| OffloadOptions {
        task_timeout: Duration::from_secs(2),
        ..offload(vec![addr], SECRET)
    });
    assert!(m.retries >= 1, "{m:?}");
    // What `sluice compact --json` shows of the side: its share failed and was re-run.
    let worker = m.sides[1].report();
    assert!(worker.retried, "{worker:?}");
    assert!(!m.sides[0].report().retried, "the host never failed: {m:?}");
}

#[test]
fn under_the_dynamic_split_the_host_races_a_stalled_worker_and_keeps_its_own_copy() {
    // With a deadline far beyond the test, the host, out of other work, runs the worker's
    // chunk itself, keeps its copy and abandons the call. Nothing counts as a failure, and
    // the worker deletes what it wrote when the call goes away.
    let (dir, _worker, m) = with_a_stalled_worker(|addr| OffloadOptions {
        task_timeout: Duration::from_secs(3600),
        ..dynamic(vec![addr])
    });
    assert!(m.jobs >= 1, "{m:?}");
    assert_eq!(m.races_won_by_host, m.jobs, "{m:?}");
    assert_eq!(m.races, m.jobs, "{m:?}");
    assert_eq!(m.retries, 0, "{m:?}");
    assert_eq!(m.sides[1].input_bytes, 0, "{m:?}");
    // The worker notices the abandoned calls and removes their files.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !table_files(dir.path()).1.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(table_files(dir.path()).1.is_empty(), "temporary files left");
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

#[test]
fn a_worker_killed_mid_job_under_the_dynamic_split_loses_nothing() {
    // How many chunks the worker gets depends on how fast each side runs on a loaded machine:
    // a run in which the host took every chunk but one tests nothing, and is tried again.
    for _attempt in 0..5 {
        if worker_killed_at_its_second_chunk() {
            return;
        }
    }
    panic!("the worker never started a second chunk in five jobs");
}

/// One job of [`a_worker_killed_mid_job_under_the_dynamic_split_loses_nothing`]: false if the
/// worker never started a second chunk (then nothing was killed).
fn worker_killed_at_its_second_chunk() -> bool {
    let dir = tempfile::tempdir().unwrap();
    let model = inverted(dir.path());
    let secret = secret_file(dir.path(), SECRET);
    // SIGKILL the worker as it starts its second chunk: the host sent that one only after
    // the first one's answer, whose files are then checked and kept, while the second dies
    // with the worker (partial outputs on disk) and goes back to the queue.
    let (mut worker, killer) = counted_worker(dir.path(), &secret, &[], Some(2));
    let m = compact_and_check(dir.path(), dynamic(vec![worker.addr.clone()]), &model);
    worker.kill();
    if killer.join().unwrap() < 2 {
        return false;
    }
    assert!(m.retries >= 1, "{m:?}");
    assert!(
        m.sides[1].input_bytes > 0,
        "the chunk done before the kill is kept: {m:?}"
    );
    true
}

#[test]
fn a_static_share_goes_out_in_pieces_and_holds_what_the_host_alone_writes() {
    for host_share in [0.0, 0.5] {
        let dir = tempfile::tempdir().unwrap();
        let (model, copies) = inverted_copies(dir.path(), &["host", "offloaded"]);
        let (host, offloaded) = (&copies[0], &copies[1]);
        assert!(compact_checked(host, None, &model).is_none());
        let secret = secret_file(dir.path(), SECRET);
        let (mut worker, tasks) = counted_worker(offloaded, &secret, &[], None);
        let m = compact_and_check(
            offloaded,
            in_pieces(vec![worker.addr.clone()], host_share),
            &model,
        );
        worker.kill();
        // Each piece is a task of its own, answered and checked by itself; the side's
        // figures are one report.
        assert!(tasks.join().unwrap() >= 3, "{host_share}: {m:?}");
        assert_eq!(m.retries, 0, "{host_share}: {m:?}");
        let reported: Vec<&str> = m.last_shares.iter().map(|s| s.side.as_str()).collect();
        match host_share > 0.0 {
            true => assert_eq!(reported, ["host", worker.addr.as_str()]),
            false => assert_eq!(reported, [worker.addr.as_str()]),
        }
        // Same entries, versions and tombstones as the host alone wrote; only the cuts differ.
        let (want, got) = (entries(host), entries(offloaded));
        assert!(!want.is_empty());
        assert!(
            want == got,
            "{host_share}: the offloaded tree holds other entries"
        );
    }
}

#[test]
fn a_worker_killed_at_its_second_piece_costs_the_pieces_from_there_on() {
    let dir = tempfile::tempdir().unwrap();
    let (model, copies) = inverted_copies(dir.path(), &["counted", "killed"]);
    let secret = secret_file(dir.path(), SECRET);
    // How many pieces the job has: the same tree, compacted with a worker that lives.
    let (mut worker, tasks) = counted_worker(&copies[0], &secret, &[], None);
    compact_and_check(
        &copies[0],
        in_pieces(vec![worker.addr.clone()], 0.0),
        &model,
    );
    worker.kill();
    let pieces = tasks.join().unwrap() as u64;
    assert!(pieces >= 3, "{pieces} pieces");
    // SIGKILL the worker as it starts its second piece: the first one's answer is checked
    // and kept; the second dies with the worker (partial outputs on disk), and the pieces
    // after it are never sent (each would wait out its timeout). All of those run on the host.
    // Throttled, each piece takes 20 times its CPU time, so the kill lands inside the second.
    let (mut worker, tasks) = counted_worker(&copies[1], &secret, &["--throttle", "20"], Some(2));
    let m = compact_and_check(
        &copies[1],
        in_pieces(vec![worker.addr.clone()], 0.0),
        &model,
    );
    worker.kill();
    assert_eq!(
        tasks.join().unwrap(),
        2,
        "a piece after the kill was sent: {m:?}"
    );
    assert_eq!(m.retries, pieces - 1, "{m:?}");
    assert_eq!(m.verify_failures, 0, "{m:?}");
    assert!(m.last_shares.iter().all(|s| s.retried), "{m:?}");
}

#[cfg(feature = "test-lies")]
#[path = "offload/lies.rs"]
mod lies;

#[path = "offload/merges.rs"]
mod merges;

#[path = "offload/ttl.rs"]
mod ttl;

#[path = "offload/range_delete.rs"]
mod range_delete;

#[path = "offload/model.rs"]
mod model;
