//! Tasks and calls the worker refuses or fails, and what they leave behind: nothing.

use std::os::unix::fs::{FileExt, symlink};
use std::time::Duration;

use sluice_rpc::envelope::seal;
use sluice_rpc::proto::{ExecutorMode, HealthRequest, MessageKind, MetricsRequest, Origin};
use tonic::Code;

use crate::harness::{SECRET, Worker, authed, eventually, names, root};
use crate::inputs::{standard, table, task};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_without_the_secret_are_unauthenticated() {
    let (_d, dir) = root();
    let runs = standard(&[&dir]);
    let before = names(&dir);
    let worker = Worker::start(&[&dir], &[]);
    let mut client = worker.client().await;
    let env = seal(
        MessageKind::CompactionTask,
        Origin::Host,
        &task(&runs, ExecutorMode::Sequential, 100, 100),
    );
    let wrong = format!("{SECRET}x");
    for secret in [None, Some(wrong.as_str()), Some("")] {
        let e = client
            .execute(authed(env.clone(), secret))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unauthenticated, "{secret:?}");
    }
    let e = client
        .health(authed(HealthRequest {}, None))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let e = client
        .metrics(authed(MetricsRequest {}, Some("Bearer nope")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert_eq!(names(&dir), before, "a refused call wrote something");
    let m = worker.metrics().await;
    assert_eq!(m.rejected_calls, 5);
    assert_eq!(
        m.tasks_ok + m.tasks_failed,
        0,
        "a refused call reached the service"
    );
    assert!(worker.log().contains("not authenticated"));
    assert!(worker.terminate().success());
}

/// Issue 19: a body that is not an envelope at all, sent with the right secret, was
/// `INTERNAL` (the worker's fault). It is the caller's: `INVALID_ARGUMENT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_body_with_the_right_secret_is_invalid_argument() {
    use sluice_rpc::proto::{Envelope, FileRef};
    let (_d, dir) = root();
    let worker = Worker::start(&[&dir], &[]);
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", worker.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // Field 1 of an envelope is a varint; a file reference's is a string.
    let garbage = FileRef {
        name: "not an envelope".into(),
        ..FileRef::default()
    };
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/sluice.worker.v1.CompactionWorker/Execute",
    );
    let codec = tonic_prost::ProstCodec::<FileRef, Envelope>::default();
    let e = grpc
        .unary(authed(garbage, Some(SECRET)), path, codec)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("Envelope"), "{}", e.message());
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_outside_the_roots_are_refused() {
    let ((_d, dir), (_o, outside)) = (root(), root());
    let runs = standard(&[&dir]);
    // A real table outside the root, reachable through a symlink inside it.
    table(&outside, 9, 0..100, 5, 0);
    symlink(outside.join("000009.sst"), dir.join("000009.sst")).unwrap();
    let before = names(&dir);
    let worker = Worker::start(&[&dir], &[]);
    let cases = [
        ("../x.sst", 1, Code::InvalidArgument),
        ("/etc/passwd", 1, Code::InvalidArgument),
        // A link to a real table, even one inside a root, is never followed.
        ("000009.sst", 9, Code::InvalidArgument),
        ("000042.sst", 42, Code::NotFound),
    ];
    for (name, number, code) in cases {
        let mut t = task(&runs, ExecutorMode::Sequential, 100, 100);
        t.runs[0].files[0].name = name.to_string();
        t.runs[0].files[0].number = number;
        t.runs[0].files[0].size = 0;
        t.runs[0].files[0].smallest.clear();
        t.runs[0].files[0].largest.clear();
        let e = worker.execute(&t).await.unwrap_err();
        assert_eq!(e.code(), code, "{name}: {}", e.message());
        assert!(e.message().contains(name), "{name}: {}", e.message());
    }
    assert_eq!(names(&dir), before);
    assert_eq!(worker.metrics().await.tasks_failed, 4);
    assert!(worker.terminate().success());
}

/// Issue 19, finding 3: a link planted at an output's temporary name was written through,
/// to a file outside the root. Outputs are created exclusively: the task fails instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_planted_at_an_output_name_is_never_written_through() {
    let ((_d, dir), (_o, outside)) = (root(), root());
    let runs = standard(&[&dir]);
    let victim = outside.join("victim");
    std::fs::write(&victim, b"not the worker's to write").unwrap();
    symlink(&victim, dir.join("000100.dbtmp")).unwrap();
    let before = names(&dir);
    let worker = Worker::start(&[&dir], &[]);
    for mode in [ExecutorMode::Sequential, ExecutorMode::Pipelined] {
        let e = worker
            .execute(&task(&runs, mode, 100, 100))
            .await
            .unwrap_err();
        assert!(e.message().contains("000100.dbtmp"), "{}", e.message());
        assert_eq!(
            std::fs::read(&victim).unwrap(),
            b"not the worker's to write"
        );
        // The failed task cleans up under its reserved numbers: the planted link may go,
        // nothing else does and nothing is added.
        let after = names(&dir);
        assert!(
            after.iter().all(|n| before.contains(n)),
            "{mode:?}: {after:?}"
        );
        assert_eq!(after.len(), before.len() - 1, "{mode:?}: {after:?}");
        symlink(&victim, dir.join("000100.dbtmp")).unwrap();
    }
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_input_is_data_loss_and_leaves_no_output() {
    let (_d, dir) = root();
    let runs = standard(&[&dir]);
    // Flip a byte in the last data block of the last input: earlier outputs get written
    // before the executor reaches it.
    let victim = runs[2][1].clone();
    let (_, handle) = victim.index_entries().pop().unwrap();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(victim.path())
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, handle.offset + 3).unwrap();
    file.write_all_at(&[byte[0] ^ 0x5a], handle.offset + 3)
        .unwrap();
    drop(file);
    let before = names(&dir);
    let worker = Worker::start(&[&dir], &[]);
    for mode in [ExecutorMode::Sequential, ExecutorMode::Parallel] {
        let e = worker
            .execute(&task(&runs, mode, 100, 1000))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::DataLoss, "{}", e.message());
        assert!(e.message().contains("000004.sst"), "{}", e.message());
        assert!(e.message().contains("offset"), "{}", e.message());
        assert_eq!(names(&dir), before, "{mode:?} left outputs behind");
    }
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_out_of_output_numbers_fails_and_leaves_no_output() {
    let ((_a, a), (_b, b)) = (root(), root());
    let runs = standard(&[&a]);
    let before = names(&a);
    let worker = Worker::start(&[&a, &b], &[]);
    for mode in [ExecutorMode::Sequential, ExecutorMode::Streaming] {
        let e = worker
            .execute(&task(&runs, mode, 100, 2))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{}", e.message());
        assert!(e.message().contains("output numbers"), "{}", e.message());
        assert_eq!(names(&a), before);
        assert!(names(&b).is_empty(), "{:?}", names(&b));
    }
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_goes_away_leaves_no_output() {
    let (_d, dir) = root();
    let runs = standard(&[&dir]);
    let before = names(&dir);
    // Throttled 1000 times: the answer comes long after the host has given up, whether the
    // job is still running (it is cancelled) or done (its published outputs are deleted).
    let worker = Worker::start(&[&dir], &["--throttle", "1000"]);
    let sent = task(&runs, ExecutorMode::Sequential, 100, 1000);
    let gave_up = tokio::time::timeout(Duration::from_millis(300), worker.execute(&sent)).await;
    assert!(
        gave_up.is_err(),
        "the throttled worker answered: {gave_up:?}"
    );
    assert!(
        eventually(Duration::from_secs(30), || names(&dir) == before),
        "outputs left: {:?}",
        names(&dir)
    );
    let m = worker.metrics().await;
    assert_eq!((m.tasks_ok, m.tasks_failed), (0, 1));
    assert!(worker.log().contains("host went away"), "{}", worker.log());
    assert_eq!(worker.health().await.tasks_running, 0);
    assert!(worker.terminate().success());
}
