//! The S3 server the object-store tests run against: `s3s-fs` (Apache-2.0), a real
//! S3-compatible server keeping objects as files, started on 127.0.0.1 (or on a given address
//! of this host, [`S3Server::start_on`]) for one test and killed when it ends.

#![allow(dead_code, reason = "each test binary uses part of the harness")]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const ACCESS_KEY: &str = "sluice-test";
pub const SECRET_KEY: &str = "sluice-test-secret";
pub const BUCKET: &str = "tables";

/// The version of `s3s-fs` the tests run (the newest that builds with this toolchain).
const S3S_FS_VERSION: &str = "0.14.1";

/// The `s3s-fs` binary: `$SLUICE_S3S_FS`, else `s3s-fs` on the `PATH` (`.ci/run` installs it
/// there), else one built once into the workspace's `target/s3s` with `cargo install`, so
/// that `cargo test` needs nothing installed by hand. A test of the object store without a
/// server would test nothing, so there is no skipping: failing to get one fails the test.
pub fn s3s_fs() -> PathBuf {
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
pub struct S3Server {
    /// `None` while stopped.
    child: Option<Child>,
    /// The address of this host it listens on.
    host: String,
    port: u16,
    pub endpoint: String,
    /// Where the server keeps the bucket's objects, as files.
    pub data: PathBuf,
    _dir: tempfile::TempDir,
}

impl S3Server {
    /// Starts the server ([`s3s_fs`]) on 127.0.0.1 and waits until it accepts connections.
    pub fn start() -> S3Server {
        S3Server::start_on("127.0.0.1")
    }

    /// Starts the server listening on `host`, an IPv4 address of this host (such as the host
    /// end of a virtual link, for a peer in another network namespace), and waits until it
    /// accepts connections there.
    pub fn start_on(host: &str) -> S3Server {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir_all(data.join(BUCKET)).unwrap();
        let port = TcpListener::bind((host, 0))
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = S3Server {
            child: None,
            host: host.to_string(),
            port,
            endpoint: format!("http://{host}:{port}"),
            data,
            _dir: dir,
        };
        server.restart();
        server
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills the server (its objects stay on disk): requests fail to connect until
    /// [`S3Server::restart`].
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port over the same objects, and waits until it
    /// accepts connections.
    pub fn restart(&mut self) {
        self.stop();
        let bin = s3s_fs();
        let child = Command::new(&bin)
            .args(["--host", &self.host, "--port", &self.port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(&self.data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start the S3 server {}: {e}", bin.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect((self.host.as_str(), self.port)).is_err() {
            assert!(Instant::now() < deadline, "the S3 server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The object store of the test bucket, as `object_store` builds it from settings.
    pub fn store(&self) -> Arc<dyn object_store::ObjectStore> {
        store_at(&self.endpoint)
    }

    /// The bytes of object `key` of the test bucket, read behind any database's back.
    pub fn get(&self, key: &str) -> Vec<u8> {
        use object_store::ObjectStoreExt;
        let (store, at) = (self.store(), object_store::path::Path::from(key));
        block_on(async move {
            store
                .get(&at)
                .await
                .unwrap()
                .bytes()
                .await
                .unwrap()
                .to_vec()
        })
    }

    /// Whether object `key` of the test bucket exists.
    pub fn exists(&self, key: &str) -> bool {
        use object_store::ObjectStoreExt;
        let (store, at) = (self.store(), object_store::path::Path::from(key));
        match block_on(async move { store.head(&at).await }) {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => panic!("{key}: {e}"),
        }
    }

    /// The names of the objects of the test bucket directly under `prefix`, in order.
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let (store, at) = (self.store(), object_store::path::Path::from(prefix));
        let listed = block_on(async move { store.list_with_delimiter(Some(&at)).await.unwrap() });
        let mut names: Vec<String> = listed
            .objects
            .into_iter()
            .map(|m| m.location.to_string())
            .collect();
        names.sort();
        names
    }

    /// Deletes object `key` of the test bucket, behind any database's back.
    pub fn delete(&self, key: &str) {
        use object_store::ObjectStoreExt;
        let (store, at) = (self.store(), object_store::path::Path::from(key));
        block_on(async move { store.delete(&at).await.unwrap() });
    }

    /// Writes `bytes` as object `key` of the test bucket, behind any database's back.
    pub fn put(&self, key: &str, bytes: Vec<u8>) {
        use object_store::ObjectStoreExt;
        let (store, at) = (self.store(), object_store::path::Path::from(key));
        block_on(async move { store.put(&at, bytes.into()).await.unwrap() });
    }
}

/// Runs `fut` on a runtime of its own (the test's thread has none).
fn block_on<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(fut)
}

/// The test bucket of the server at `endpoint` (for a child process, which gets the endpoint
/// from its parent).
pub fn store_at(endpoint: &str) -> Arc<dyn object_store::ObjectStore> {
    store_retrying(endpoint, object_store::RetryConfig::default())
}

/// The test bucket of the server at `endpoint`, retrying failed requests as `retry` says.
pub fn store_retrying(
    endpoint: &str,
    retry: object_store::RetryConfig,
) -> Arc<dyn object_store::ObjectStore> {
    Arc::new(
        object_store::aws::AmazonS3Builder::new()
            .with_retry(retry)
            .with_endpoint(endpoint)
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

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
