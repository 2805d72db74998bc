//! A worker that shares nothing with the host but the bucket: the host keeps its tables as
//! objects in a real S3 server (`s3s-fs` on 127.0.0.1), and the worker, started with
//! `--object-store` and a `--root` of its own that holds no file of the host's, reads a task's
//! inputs from the bucket and uploads its outputs there. The host verifies what it reads back
//! from the bucket, installs it, and the tree holds exactly what a model says: no table is
//! left in either directory, and no object that the tree does not name.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod store_worker;

use sluice_object::{ObjectCache, ObjectFs};
use sluice_sst::fs::os_fs;

use store_worker::s3::S3Server;
use store_worker::{PREFIX, Worker, assert_no_local_tables, compact_through, inverted};

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
