//! A worker that shares nothing with the host but the bucket: the host keeps its tables as
//! objects in a real S3 server (`s3s-fs` on 127.0.0.1), and the worker, started with
//! `--object-store` and a `--root` of its own that holds no file of the host's, reads a task's
//! inputs from the bucket and uploads its outputs there. The host verifies what it reads back
//! from the bucket, installs it, and the tree holds exactly what a model says: no table is
//! left in either directory, and no object that the tree does not name.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

#[path = "../../sluice-object/tests/common/mod.rs"]
mod s3;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectCache, ObjectFs, list_objects};
use sluice_offload::{OffloadOptions, Secret, Split};
use sluice_sst::fs::os_fs;

use s3::{ACCESS_KEY, BUCKET, S3Server, SECRET_KEY};

const SECRET: &str = "object-store-secret-0123456789";
/// The prefix of the database's objects, on both sides.
const PREFIX: &str = "db";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A worker process reading and writing the bucket; killed when dropped.
struct Worker {
    child: Child,
    addr: String,
}

impl Worker {
    fn start(server: &S3Server, root: &Path, secret_file: &Path) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice-worker"))
            .args(["--listen", "127.0.0.1:0", "--mode", "sequential", "--root"])
            .arg(root)
            .arg("--secret-file")
            .arg(secret_file)
            .args(["--object-store", &format!("s3://{BUCKET}/{PREFIX}")])
            .arg("--object-cache-dir")
            .arg(root.with_extension("cache"))
            .env("AWS_ENDPOINT", &server.endpoint)
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ALLOW_HTTP", "true")
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
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

fn options(fs: &ObjectFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 512 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            target_file_size_base: 512 << 10,
            sub_task_bytes: 64 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Writes an inverted tree (a compacted L1 under L0 tables of overwrites and deletes) with a
/// host-only database, and returns what it holds.
fn inverted(fs: &ObjectFs, dir: &Path) -> Model {
    let db = Db::open(dir, options(fs)).unwrap();
    let mut model = Model::new();
    let mut x = 5u64;
    for round in 0..4 {
        for i in 0..8000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key{:08}", (x >> 33) % 16_000).into_bytes();
            if i % 13 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{round}-{x:x}-{}", "v".repeat((x % 150) as usize)).into_bytes();
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

fn key(i: u32) -> Vec<u8> {
    format!("key{:08}", i * 7919 % 16_000).into_bytes()
}

/// 200-odd bytes that do not compress away, so the compaction has bytes to share.
fn value(split: &Split, i: u32) -> Vec<u8> {
    let mut x = u64::from(i) + 1;
    let noise: String = (0..12)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            format!("{x:016x}")
        })
        .collect();
    format!("{split}-{i}-{noise}").into_bytes()
}

/// Table files (`.sst`, `.dbtmp`) in a local directory.
fn local_tables(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst") || n.ends_with(".dbtmp"))
        .collect()
}

#[test]
fn a_worker_that_shares_only_the_bucket_compacts_the_host_s_tables() {
    let server = S3Server::start();
    let host = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let secret_file = own.path().join("secret");
    std::fs::write(&secret_file, SECRET).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        let private = std::fs::Permissions::from_mode(0o600);
        std::fs::set_permissions(&secret_file, private).unwrap();
    }
    let worker_root = own.path().join("root");
    std::fs::create_dir(&worker_root).unwrap();
    let cache = ObjectCache::open(&own.path().join("host-cache"), 256 << 20).unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), host.path(), PREFIX)
        .unwrap()
        .with_cache(cache)
        .unwrap();
    let mut model = inverted(&fs, host.path());
    let worker = Worker::start(&server, &worker_root, &secret_file);

    for split in [Split::Static { host_share: 0.0 }, Split::Dynamic] {
        let offload = OffloadOptions {
            min_offload_bytes: 0,
            min_chunk_bytes: 128 << 10,
            split,
            task_timeout: Duration::from_secs(60),
            ..OffloadOptions::new(vec![worker.addr.clone()], Secret::new(SECRET).unwrap())
        };
        let db = Db::open(
            host.path(),
            Options {
                offload: Some(offload.into()),
                ..options(&fs)
            },
        )
        .unwrap();
        // New L0 tables over the whole tree, so that each split has a compaction to share.
        for i in 0..16_000u32 {
            db.put(&key(i), &value(&split, i)).unwrap();
            if i % 4000 == 3999 {
                db.flush().unwrap();
            }
        }
        db.compact_range(None, None).unwrap();
        let m = db.offload_metrics().unwrap();
        assert_eq!(m.retries, 0, "{split}: {m:?}");
        // The static split gives the worker everything; under the dynamic one it keeps a
        // chunk, or runs one the host also ran and finished first (the host then deletes the
        // losing outputs from the bucket, as the object count below checks; the open of the
        // next round would otherwise sweep them).
        let took_part = match split {
            Split::Dynamic => m.sides[1].input_bytes > 0 || m.races_won_by_host > 0,
            _ => m.sides[1].input_bytes > 0,
        };
        assert!(took_part, "{split}: the worker's share: {m:?}");
        for i in 0..16_000u32 {
            model.insert(key(i), value(&split, i));
        }
        let got: Model = db.scan(None, None).unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(
            got, model,
            "{split}: the offloaded compaction changed the data"
        );
        let report = db.check().unwrap();
        assert_eq!(list_objects(&fs).unwrap().len(), report.files, "{split}");
        db.close().unwrap();
    }
    // Every table is an object: neither side wrote one to its own directory.
    assert!(
        local_tables(host.path()).is_empty(),
        "{:?}",
        local_tables(host.path())
    );
    assert!(
        local_tables(&worker_root).is_empty(),
        "{:?}",
        local_tables(&worker_root)
    );
}
