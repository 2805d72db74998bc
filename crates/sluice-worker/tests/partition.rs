//! Partitioned mode with real worker processes on 127.0.0.1: each owner's compactions run on
//! its worker and its tables stay in its directory, a moved range is relocated by its new
//! owner's worker, an idle owner's worker takes shares of a backlogged owner's compactions,
//! and a worker SIGKILLed while ranges move and compact costs a retry on the host, never a
//! key.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice::options::{PartitionOptions, PartitionOwner};
use sluice::partition::load::LoadBalanceOptions;
use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_offload::{OffloadOptions, Secret, Split};

const SECRET: &str = "partition-test-secret-0123456789";
const KEYS: u32 = 40_000;

/// A worker process serving `roots` (its owner's directory first); killed when dropped.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    /// `throttle`: how many times slower than this CPU the worker computes (1: not slowed).
    fn start(roots: &[PathBuf], secret_file: &Path, throttle: f64) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice-worker"));
        cmd.args(["--listen", "127.0.0.1:0"]);
        cmd.arg("--throttle").arg(throttle.to_string());
        for r in roots {
            cmd.arg("--root").arg(r);
        }
        let mut child = cmd
            .arg("--secret-file")
            .arg(secret_file)
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
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut x = u64::from(i) << 8 | u64::from(round);
    let mut v = format!("{round}-").into_bytes();
    while v.len() < 120 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.extend_from_slice(format!("{:016x}", x >> 1).as_bytes());
    }
    v
}

/// Two owners, each with a worker serving both owners' directories (its own first), four
/// ranges each.
struct Cluster {
    _root: tempfile::TempDir,
    db_dir: PathBuf,
    dirs: [PathBuf; 2],
    workers: Vec<Worker>,
}

impl Cluster {
    fn start() -> Cluster {
        Cluster::with_throttles([1.0, 1.0])
    }

    /// Workers slowed by `throttles` (owner 0's first).
    fn with_throttles(throttles: [f64; 2]) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let dirs = [root.path().join("owner0"), root.path().join("owner1")];
        for d in &dirs {
            std::fs::create_dir_all(d).unwrap();
        }
        let secret = root.path().join("secret");
        std::fs::write(&secret, SECRET).unwrap();
        // A secret file must be private to its owner.
        let private = std::os::unix::fs::PermissionsExt::from_mode(0o600);
        std::fs::set_permissions(&secret, private).unwrap();
        let workers = vec![
            Worker::start(&[dirs[0].clone(), dirs[1].clone()], &secret, throttles[0]),
            Worker::start(&[dirs[1].clone(), dirs[0].clone()], &secret, throttles[1]),
        ];
        Cluster {
            db_dir: root.path().join("db"),
            _root: root,
            dirs,
            workers,
        }
    }

    fn offload_options(&self) -> OffloadOptions {
        let addrs: Vec<String> = self.workers.iter().map(|w| w.addr.clone()).collect();
        OffloadOptions {
            task_timeout: Duration::from_secs(30),
            ..OffloadOptions::new(addrs, Secret::new(SECRET).unwrap())
        }
    }

    fn options(&self) -> Options {
        let addrs: Vec<String> = self.workers.iter().map(|w| w.addr.clone()).collect();
        Options {
            paranoid_checks: true,
            offload: Some(self.offload_options().into()),
            partitions: Some(PartitionOptions {
                owners: self
                    .dirs
                    .iter()
                    .zip(&addrs)
                    .map(|(dir, addr)| PartitionOwner {
                        dir: dir.clone(),
                        worker: Some(addr.clone()),
                    })
                    .collect(),
                boundaries: (1..8).map(|r| key(r * KEYS / 8)).collect(),
                balance: None,
                load_balance: None,
                ..PartitionOptions::default()
            }),
            memtable: MemtableOptions {
                write_buffer_size: 256 << 10,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                target_file_size_base: 256 << 10,
                max_bytes_for_level_base: 1 << 20,
                sub_task_bytes: 32 << 10,
                ..CompactionOptions::default()
            },
            ..Options::default()
        }
    }
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(|e| e.unwrap()).collect()
}

#[test]
fn owners_compact_on_their_workers_and_moves_relocate_there() {
    let cluster = Cluster::start();
    let db = Db::open(&cluster.db_dir, cluster.options()).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..2 {
        for i in 0..KEYS {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_for_background_work().unwrap();
    let m = db.metrics();
    let offload = m.offload.as_ref().unwrap();
    // Side 0 is the host, sides 1 and 2 the owners' workers: both ran their owners' work and
    // none of it failed over to the host.
    assert!(
        offload.sides[1].shares > 0 && offload.sides[2].shares > 0,
        "{offload:?}"
    );
    assert_eq!(offload.retries, 0);
    let stats = db.partition_stats().unwrap();
    assert!(stats.owners.iter().all(|o| o.bytes > 0), "{stats:?}");
    assert_eq!(contents(&db), model);

    // Range 0 moves from owner 0 to owner 1: owner 1's worker rewrites it into its directory.
    db.move_range(0, 1).unwrap();
    db.wait_for_background_work().unwrap();
    let r = &db.partition_stats().unwrap().ranges[0];
    assert_eq!(r.owner, 1);
    assert!(
        r.forwarded_from.is_empty() && r.forwarded_bytes == 0,
        "{r:?}"
    );
    assert!(db.metrics().relocations > 0);
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

#[test]
fn a_worker_killed_mid_run_costs_retries_not_keys() {
    let mut cluster = Cluster::start();
    let db = Db::open(&cluster.db_dir, cluster.options()).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..KEYS {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
            if round == 1 && i == KEYS / 2 {
                // Owner 1's worker dies while compactions of both owners are under way.
                let _ = cluster.workers[1].child.kill();
                db.move_range(1, 1).unwrap();
            }
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let m = db.metrics();
    assert!(m.offload.as_ref().unwrap().retries > 0, "{:?}", m.offload);
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    db.close().unwrap();
    // Nothing a failed share wrote is left behind in either owner's directory.
    for dir in &cluster.dirs {
        let stray: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".dbtmp"))
            .collect();
        assert!(stray.is_empty(), "{stray:?}");
    }
    let db = Db::open(&cluster.db_dir, cluster.options()).unwrap();
    assert_eq!(contents(&db), model);
}

#[test]
fn an_idle_owner_takes_shares_of_a_backlogged_owners_compactions() {
    // Owner 0's worker is slow and gets every write: its compactions fall behind.
    let cluster = Cluster::with_throttles([8.0, 1.0]);
    let mut options = cluster.options();
    // Helpers' shares follow the bandwidth each worker has shown.
    let offload = OffloadOptions {
        split: Split::Dynamic,
        ..cluster.offload_options()
    };
    options.offload = Some(offload.into());
    if let Some(partitions) = options.partitions.as_mut() {
        partitions.load_balance = Some(LoadBalanceOptions {
            min_compaction_bytes: 64 << 10,
            ..LoadBalanceOptions::default()
        });
    }
    let db = Db::open(&cluster.db_dir, options).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..4 {
        for i in 0..KEYS / 2 {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let offload = db.metrics().offload.unwrap();
    // Owner 1's worker (side 2) did part of owner 0's compactions; the data stayed with
    // owner 0, and nothing failed over to the host.
    assert!(offload.sides[2].shares > 0, "{offload:?}");
    assert_eq!(offload.retries, 0);
    let stats = db.partition_stats().unwrap();
    assert!(
        stats.owners[0].bytes > 0 && stats.owners[1].bytes == 0,
        "{stats:?}"
    );
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}
