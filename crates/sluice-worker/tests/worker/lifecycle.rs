//! The process: health, pinning, bad arguments, signals.

use std::process::{Command, Stdio};

use sluice_rpc::PROTOCOL_VERSION;

use crate::harness::{Worker, private, root};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_names_the_worker() {
    let (_d, dir) = root();
    let worker = Worker::start(&[&dir], &["--threads", "3"]);
    let h = worker.health().await;
    assert_eq!(h.version, PROTOCOL_VERSION);
    assert_eq!(h.worker_id, format!("{}/{}", worker.addr, worker.pid()));
    assert_eq!((h.threads, h.tasks_running), (3, 0));
    let m = worker.metrics().await;
    assert_eq!((m.tasks_ok, m.tasks_failed, m.rejected_calls), (0, 0, 0));
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpus_pin_every_thread_and_size_the_default_slots() {
    let (_d, dir) = root();
    let worker = Worker::start(&[&dir], &["--cpus", "0"]);
    // Every thread of the process, the runtime's included, inherited the mask.
    let tasks = std::fs::read_dir(format!("/proc/{}/task", worker.pid())).unwrap();
    let mut threads = 0;
    for t in tasks {
        let status = std::fs::read_to_string(t.unwrap().path().join("status")).unwrap();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(allowed, "0");
        threads += 1;
    }
    assert!(threads > 1, "the runtime's threads were not seen");
    assert_eq!(worker.health().await.threads, 1);
    assert!(worker.terminate().success());
}

#[test]
fn bad_arguments_fail_with_a_message() {
    let (_d, dir) = root();
    let secret = dir.join("secret");
    std::fs::write(&secret, "0123456789abcdef0123").unwrap();
    let shared = dir.join("shared");
    std::fs::write(&shared, "0123456789abcdef0123").unwrap();
    private(&secret);
    let weak = dir.join("weak");
    std::fs::write(&weak, "short").unwrap();
    private(&weak);
    let cases: [(&[&str], &str); 6] = [
        (&["--secret-file", "/nonexistent/secret"], "secret"),
        (&["--secret-file", weak.to_str().unwrap()], "at least"),
        // Issue 19: a world-readable secret file is refused, saying how to fix it.
        (&["--secret-file", shared.to_str().unwrap()], "chmod 600"),
        (
            &[
                "--secret-file",
                secret.to_str().unwrap(),
                "--throttle",
                "0.5",
            ],
            "throttle",
        ),
        (
            &["--secret-file", secret.to_str().unwrap(), "--cpus", "1023"],
            "pin",
        ),
        (
            &["--secret-file", secret.to_str().unwrap(), "--threads", "0"],
            "threads",
        ),
    ];
    for (args, word) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice-worker"))
            .args(["--listen", "127.0.0.1:0", "--root"])
            .arg(&dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty(), "{args:?} printed a listening line");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(word), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_worker_cleanly() {
    let (_d, dir) = root();
    let worker = Worker::start(&[&dir], &[]);
    let addr = worker.addr;
    // A connection is open when the signal comes: it must not keep the worker alive.
    let _client = worker.health().await;
    let status = worker.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "still listening"
    );
}
