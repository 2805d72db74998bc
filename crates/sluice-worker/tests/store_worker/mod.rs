//! What the tests of a worker that shares only the bucket with the host have in common
//! (`object_store.rs`, `netns.rs`): the worker process, an inverted tree written by the host
//! alone, and the offloaded compactions checked against a model.

#![allow(dead_code, reason = "each test binary uses part of the harness")]

#[path = "../../../sluice-object/tests/common/mod.rs"]
pub mod s3;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectFs, list_objects};
use sluice_offload::{OffloadOptions, Secret, Split};

use s3::{ACCESS_KEY, BUCKET, SECRET_KEY};

pub const SECRET: &str = "object-store-secret-0123456789";
/// The prefix of the database's objects, on both sides.
pub const PREFIX: &str = "db";

pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A worker process reading and writing the bucket; killed when dropped.
pub struct Worker {
    child: Child,
    pub addr: String,
}

impl Worker {
    /// Starts the worker binary on 127.0.0.1, reaching the server at `endpoint`.
    pub fn start(endpoint: &str, root: &Path, secret_file: &Path) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice-worker"));
        cmd.args(Worker::args("127.0.0.1:0", root, secret_file));
        Worker::spawn(cmd, endpoint)
    }

    /// The worker's arguments: listen on `listen`, keep `root` (and the object cache beside
    /// it) as its own directory, and read and write the bucket under [`PREFIX`].
    pub fn args(listen: &str, root: &Path, secret_file: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = ["--listen", listen, "--mode", "sequential", "--root"]
            .map(OsString::from)
            .into();
        args.push(root.into());
        args.push("--secret-file".into());
        args.push(secret_file.into());
        args.push("--object-store".into());
        args.push(format!("s3://{BUCKET}/{PREFIX}").into());
        args.push("--object-cache-dir".into());
        args.push(root.with_extension("cache").into());
        args
    }

    /// Runs `cmd`, which must end up as the worker (an `exec` chain, so that the child's pid
    /// is the worker's), with the bucket's settings for the server at `endpoint`, and waits
    /// for the line that names its address.
    pub fn spawn(mut cmd: Command, endpoint: &str) -> Worker {
        let mut child = cmd
            .env("AWS_ENDPOINT", endpoint)
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
        let Some(addr) = line.trim().strip_prefix("sluice worker listening on ") else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the worker did not start: first line {line:?}");
        };
        let addr = addr.to_string();
        Worker { child, addr }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the shared secret to `path`, readable by its owner only (the worker refuses
/// anything else).
pub fn write_secret(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, SECRET).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

pub fn options(fs: &ObjectFs) -> Options {
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
pub fn inverted(fs: &ObjectFs, dir: &Path) -> Model {
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

/// Opens the database at `dir` (holding `model`) with the worker at `worker` and, under the
/// static split (everything to the worker) and then the dynamic one, writes new L0 tables over
/// the whole tree and compacts it all. After each, the worker took part, the tree holds what
/// the model says, `check` passes, and the bucket holds exactly the live tables.
pub fn compact_through(fs: &ObjectFs, dir: &Path, worker: &str, mut model: Model) {
    for split in [Split::Static { host_share: 0.0 }, Split::Dynamic] {
        let offload = OffloadOptions {
            min_offload_bytes: 0,
            min_chunk_bytes: 128 << 10,
            split,
            task_timeout: Duration::from_secs(60),
            ..OffloadOptions::new(vec![worker.to_string()], Secret::new(SECRET).unwrap())
        };
        let db = Db::open(
            dir,
            Options {
                offload: Some(offload.into()),
                ..options(fs)
            },
        )
        .unwrap();
        // New L0 tables over the whole tree, so that each split has a compaction to share.
        for i in 0..16_000u32 {
            db.put(key(i), value(&split, i)).unwrap();
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
        let got: Model = db.iter().map(|e| e.unwrap()).collect();
        assert_eq!(
            got, model,
            "{split}: the offloaded compaction changed the data"
        );
        let report = db.check().unwrap();
        assert_eq!(list_objects(fs).unwrap().len(), report.files, "{split}");
        db.close().unwrap();
    }
}

/// Table files (`.sst`, `.dbtmp`) in a local directory.
pub fn local_tables(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst") || n.ends_with(".dbtmp"))
        .collect()
}

/// Neither side wrote a table to its own directory: every table is an object.
pub fn assert_no_local_tables(host: &Path, worker_root: &Path) {
    assert!(local_tables(host).is_empty(), "{:?}", local_tables(host));
    assert!(
        local_tables(worker_root).is_empty(),
        "{:?}",
        local_tables(worker_root)
    );
}
