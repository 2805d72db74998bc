//! A worker that shares nothing with the host but the bucket: the host keeps its tables as
//! objects in a real S3 server (`s3s-fs` on 127.0.0.1), and the worker, started with
//! `--object-store` and a `--root` of its own that holds no file of the host's, reads a task's
//! inputs from the bucket and uploads its outputs there. The host verifies what it reads back
//! from the bucket, installs it, and the tree holds exactly what a model says: no table is
//! left in either directory, and no object that the tree does not name.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod store_worker;

use sluice_object::{ObjectCache, ObjectFs, list_objects};
use sluice_sst::fs::os_fs;

use store_worker::s3::S3Server;
use store_worker::{PREFIX, SECRET, Worker, assert_no_local_tables, compact_through, inverted};

#[test]
fn a_worker_that_shares_only_the_bucket_compacts_the_host_s_tables() {
    let server = S3Server::start();
    let host = tempfile::tempdir().unwrap();
    let own = tempfile::tempdir().unwrap();
    let secret_file = own.path().join("secret");
    store_worker::write_secret(&secret_file);
    let worker_root = own.path().join("root");
    std::fs::create_dir(&worker_root).unwrap();
    let cache = ObjectCache::open(&own.path().join("host-cache"), 256 << 20).unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), host.path(), PREFIX)
        .unwrap()
        .with_cache(cache)
        .unwrap();
    let model = inverted(&fs, host.path());
    let worker = Worker::start(&server.endpoint, &worker_root, &secret_file);
    compact_through(&fs, host.path(), &worker.addr, model);
    assert_no_local_tables(host.path(), &worker_root);
}

/// A copy of the host's database opened on the same prefix fences the host, and the host's
/// worker with it: the task carries the host's epoch, so the worker's uploads into the bucket
/// are refused as the host's own are. The compaction fails "fenced", nothing new lands in the
/// bucket (a fenced host could not even delete what its worker left there), and the copy
/// reads everything.
#[test]
fn a_fenced_host_s_worker_writes_nothing_into_the_bucket() {
    use std::time::Duration;

    use sluice::{Db, Options};
    use sluice_offload::{OffloadOptions, Secret, Split};

    let server = S3Server::start();
    let dirs = tempfile::tempdir().unwrap();
    let (host, copy) = (dirs.path().join("host"), dirs.path().join("copy"));
    std::fs::create_dir(&host).unwrap();
    let own = tempfile::tempdir().unwrap();
    let secret_file = own.path().join("secret");
    store_worker::write_secret(&secret_file);
    let worker_root = own.path().join("root");
    std::fs::create_dir(&worker_root).unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), &host, PREFIX).unwrap();
    let model = inverted(&fs, &host);
    let worker = Worker::start(&server.endpoint, &worker_root, &secret_file);
    let offload = OffloadOptions {
        min_offload_bytes: 0,
        split: Split::Static { host_share: 0.0 },
        task_timeout: Duration::from_secs(60),
        ..OffloadOptions::new(vec![worker.addr.clone()], Secret::new(SECRET).unwrap())
    };
    let db = Db::open(
        &host,
        Options {
            offload: Some(offload.into()),
            ..store_worker::options(&fs)
        },
    )
    .unwrap();

    // The copy takes the prefix: its open takes the next epoch.
    std::fs::create_dir(&copy).unwrap();
    for entry in std::fs::read_dir(&host).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let copy_fs = ObjectFs::new(os_fs(), server.store(), &copy, PREFIX).unwrap();
    Db::open(&copy, store_worker::options(&copy_fs))
        .unwrap()
        .close()
        .unwrap();
    let objects = list_objects(&copy_fs).unwrap();

    let refused = db.compact_range(None, None).unwrap_err().to_string();
    assert!(refused.contains("fenced"), "{refused}");
    let m = db.offload_metrics().unwrap();
    assert!(m.retries > 0, "the worker's share failed first: {m:?}");
    drop(db);
    assert_eq!(list_objects(&copy_fs).unwrap(), objects);
    assert_no_local_tables(&host, &worker_root);

    let db = Db::open(&copy, store_worker::options(&copy_fs)).unwrap();
    let got: store_worker::Model = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(got, model);
    db.check().unwrap();
    db.close().unwrap();
}
