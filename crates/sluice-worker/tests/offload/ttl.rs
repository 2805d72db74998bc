//! A TTL's compactions run on workers: the filter travels by name with its cutoff, so the
//! worker removes exactly what the host would have.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::*;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_worker_removes_expired_values_with_the_hosts_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = |o: Options| Options {
        ttl: Some(Duration::from_secs(1)),
        ..o
    };
    let db = Db::open(dir.path(), ttl(base_options())).unwrap();
    for i in 0..40_000u32 {
        db.put(format!("key{i:08}").as_bytes(), [7; 100]).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    for i in (0..40_000u32).step_by(3) {
        db.put(format!("key{i:08}").as_bytes(), [8; 100]).unwrap();
    }
    db.close().unwrap();
    // Every value was written by now: once the clock is past the next second, all expired.
    let written = now();
    while now() <= written + 1 {
        std::thread::sleep(Duration::from_millis(50));
    }

    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let db = Db::open(
        dir.path(),
        Options {
            offload: Some(offload(vec![worker.addr.clone()], SECRET).into()),
            ..ttl(base_options())
        },
    )
    .unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let m = db.offload_metrics().unwrap();
    assert!(m.sides[1].input_bytes > 0, "the worker did no work: {m:?}");
    // At the default level the worker sends its drops (the expired values, the overwritten
    // versions) for the host to audit.
    assert!(m.sides[1].drop_log_bytes > 0, "{m:?}");
    assert_eq!(m.retries, 0, "{m:?}");
    assert!(db.metrics().compaction.filter_removed >= 40_000);
    assert!(contents(&db).is_empty());
    db.check().unwrap();
}
