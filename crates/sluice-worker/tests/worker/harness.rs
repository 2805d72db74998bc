//! Starting and stopping a worker process, and calling it.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use sluice_rpc::envelope::{open, seal};
use sluice_rpc::proto::compaction_worker_client::CompactionWorkerClient;
use sluice_rpc::proto::{
    CompactionTask, HealthRequest, HealthResponse, MessageKind, MetricsRequest, MetricsResponse,
    Origin, TaskResult,
};
use sluice_rpc::{MAX_MESSAGE_BYTES, MAX_RESULT_BYTES};
use tempfile::TempDir;
use tonic::transport::Channel;
use tonic::{Request, Status};

pub const SECRET: &str = "test-secret-0123456789abcdef";

/// A running worker process; killed if still running when dropped.
pub struct Worker {
    child: Child,
    pub addr: SocketAddr,
    /// Holds the secret file and the worker's log (stderr).
    state: TempDir,
}

impl Worker {
    /// Starts `sluice-worker` serving `roots` on a free port of 127.0.0.1, with `extra`
    /// arguments, and waits for its "listening" line.
    pub fn start(roots: &[&Path], extra: &[&str]) -> Worker {
        let state = tempfile::tempdir().unwrap();
        let secret = state.path().join("secret");
        std::fs::write(&secret, format!("{SECRET}\n")).unwrap();
        private(&secret);
        let log = std::fs::File::create(state.path().join("log")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice-worker"));
        cmd.args(["--listen", "127.0.0.1:0", "--secret-file"])
            .arg(&secret)
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log);
        for root in roots {
            cmd.arg("--root").arg(root);
        }
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("sluice worker listening on ")
            .unwrap_or_else(|| {
                let log = std::fs::read_to_string(state.path().join("log")).unwrap_or_default();
                panic!("unexpected first line {line:?}; log:\n{log}")
            })
            .parse()
            .unwrap();
        Worker { child, addr, state }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the worker has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.state.path().join("log")).unwrap()
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(mut self) -> ExitStatus {
        kill(Pid::from_raw(self.child.id() as i32), Signal::SIGTERM).unwrap();
        self.child.wait().unwrap()
    }

    pub async fn client(&self) -> CompactionWorkerClient<Channel> {
        CompactionWorkerClient::connect(format!("http://{}", self.addr))
            .await
            .unwrap()
            .max_decoding_message_size(MAX_RESULT_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }

    /// Sends `task` with the right secret.
    pub async fn execute(&self, task: &CompactionTask) -> Result<TaskResult, Status> {
        let env = seal(MessageKind::CompactionTask, Origin::Host, task);
        let reply = self
            .client()
            .await
            .execute(authed(env, Some(SECRET)))
            .await?;
        let reply = reply.into_inner();
        assert_eq!(reply.origin, Origin::Worker as i32);
        Ok(open(&reply, MessageKind::CompactionResult).unwrap())
    }

    pub async fn health(&self) -> HealthResponse {
        let mut client = self.client().await;
        let r = client.health(authed(HealthRequest {}, Some(SECRET))).await;
        r.unwrap().into_inner()
    }

    pub async fn metrics(&self) -> MetricsResponse {
        let mut client = self.client().await;
        let r = client
            .metrics(authed(MetricsRequest {}, Some(SECRET)))
            .await;
        r.unwrap().into_inner()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `message` carrying `secret` (none if `None`) as the protocol says.
pub fn authed<T>(message: T, secret: Option<&str>) -> Request<T> {
    let mut r = Request::new(message);
    if let Some(s) = secret {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {s}").parse().unwrap());
    }
    r
}

/// The file names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Polls `check` until it holds or `limit` passes; returns whether it held. For effects the
/// worker completes after answering (never to measure how long anything takes).
pub fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    check()
}

/// A fresh root directory.
pub fn root() -> (TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = std::fs::canonicalize(d.path()).unwrap();
    (d, p)
}

/// Makes `path` readable by its owner only, as a secret file must be.
pub fn private(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}
