//! A database whose tables live in a real S3-compatible server (`s3s-fs`, Apache-2.0, started
//! here on 127.0.0.1 and stopped when the test ends; `.ci/run` installs it): writes, flushes
//! and compactions upload tables, reads and reopens find them in the bucket, `check` reads
//! every object and refuses one that is gone, and nothing but the WAL, MANIFEST and the other
//! small files is on the host's disk.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectFs, list_objects};
use sluice_sst::fs::os_fs;

const ACCESS_KEY: &str = "sluice-test";
const SECRET_KEY: &str = "sluice-test-secret";
const BUCKET: &str = "tables";

/// The version of `s3s-fs` the tests run (the newest that builds with this toolchain).
const S3S_FS_VERSION: &str = "0.14.1";

/// The `s3s-fs` binary: `$SLUICE_S3S_FS`, else `s3s-fs` on the `PATH` (`.ci/run` installs it
/// there), else one built once into the workspace's `target/s3s` with `cargo install`, so
/// that `cargo test` needs nothing installed by hand. A test of the object store without a
/// server would test nothing, so there is no skipping: failing to get one fails the test.
fn s3s_fs() -> PathBuf {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Ok(bin) = std::env::var("SLUICE_S3S_FS") {
            return PathBuf::from(bin);
        }
        let on_path = Command::new("s3s-fs").arg("--version").output();
        if on_path.is_ok_and(|o| o.status.success()) {
            return PathBuf::from("s3s-fs");
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/s3s");
        let bin = root.join("bin/s3s-fs");
        if !bin.exists() {
            let status = Command::new(env!("CARGO"))
                .args(["install", "s3s-fs", "--version", S3S_FS_VERSION])
                .args(["--features", "binary", "--locked", "--root"])
                .arg(&root)
                .env("CARGO_TARGET_DIR", root.join("build"))
                .status()
                .unwrap();
            assert!(status.success(), "cargo install s3s-fs failed");
        }
        bin
    })
    .clone()
}

/// An `s3s-fs` server over a temporary directory, killed when dropped.
struct S3Server {
    child: Child,
    endpoint: String,
    /// Where the server keeps the bucket's objects, as files.
    data: PathBuf,
    _dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts the server ([`s3s_fs`]) and waits until it accepts connections.
    fn start() -> S3Server {
        let bin = s3s_fs();
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join(BUCKET)).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the S3 server {}: {e}", bin.display()));
        let server = S3Server {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            data,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "the S3 server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        server
    }

    /// The object store of the test bucket, as `object_store` builds it from settings.
    fn store(&self) -> Arc<dyn object_store::ObjectStore> {
        Arc::new(
            object_store::aws::AmazonS3Builder::new()
                .with_endpoint(&self.endpoint)
                .with_region("us-east-1")
                .with_bucket_name(BUCKET)
                .with_access_key_id(ACCESS_KEY)
                .with_secret_access_key(SECRET_KEY)
                .with_allow_http(true)
                .with_virtual_hosted_style_request(false)
                .build()
                .unwrap(),
        )
    }
}

impl Drop for S3Server {
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
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Table files (`.sst`) in `dir` on the local disk.
fn local_tables(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

#[test]
fn a_database_keeps_its_tables_in_the_bucket() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), dir.path(), "db1").unwrap();
    let mut model = BTreeMap::new();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let mut x = 7u64;
    for round in 0..4 {
        for i in 0..6000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = format!("key{:06}", (x >> 40) % 20_000).into_bytes();
            if i % 11 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{round}-{i}-{}", "v".repeat((x % 100) as usize)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let scanned: BTreeMap<_, _> = db.scan(None, None).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.close().unwrap();

    // Tables are objects under the prefix, and on the server's disk; none is local.
    let objects = list_objects(&fs).unwrap();
    assert!(!objects.is_empty());
    assert!(
        objects
            .iter()
            .all(|o| o.starts_with("db1/") && o.ends_with(".sst")),
        "{objects:?}"
    );
    assert!(
        local_tables(dir.path()).is_empty(),
        "{:?}",
        local_tables(dir.path())
    );
    assert!(
        server
            .data
            .join(BUCKET)
            .join("db1")
            .read_dir()
            .unwrap()
            .count()
            > 0
    );

    // Reopened, the data is read back from the bucket; check reads every object.
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let scanned: BTreeMap<_, _> = db.scan(None, None).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    let report = db.check().unwrap();
    assert_eq!(report.files, objects.len());
    assert_eq!(report.file_checksums, objects.len());
    db.close().unwrap();

    // An object deleted behind the database's back: the open or check says which.
    let victim = server.data.join(BUCKET).join(&objects[0]);
    std::fs::remove_file(&victim).unwrap();
    let name = objects[0].rsplit('/').next().unwrap().to_string();
    let failure = match Db::open(dir.path(), options(&fs)) {
        Err(e) => e.to_string(),
        Ok(db) => db.check().map(|_| ()).unwrap_err().to_string(),
    };
    assert!(failure.contains(&name), "{failure}");
}
