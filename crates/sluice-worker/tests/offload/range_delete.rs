//! Range tombstones travel with the task: a worker drops what they cover exactly as the host
//! does, byte for byte.

use super::*;

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_worker_drops_what_range_tombstones_cover_as_the_host_does() {
    let dir = tempfile::tempdir().unwrap();
    let (host, offloaded) = (dir.path().join("host"), dir.path().join("offloaded"));
    let mut model = inverted(&host);
    let db = Db::open(&host, base_options()).unwrap();
    for (a, b) in [
        ("key00005000", "key00017000"),
        ("key00030000", "key00031000"),
    ] {
        db.delete_range(a.as_bytes(), b.as_bytes()).unwrap();
        model.retain(|k, _| !(a.as_bytes() <= k.as_slice() && k.as_slice() < b.as_bytes()));
    }
    db.flush().unwrap();
    db.close().unwrap();
    copy_dir(&host, &offloaded);

    let db = Db::open(&host, base_options()).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), model);
    let host_covered = db.metrics().compaction.range_covered;
    assert!(host_covered > 0);
    db.close().unwrap();

    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(&offloaded, &secret, &[]);
    let db = Db::open(
        &offloaded,
        Options {
            offload: Some(offload(vec![worker.addr.clone()], SECRET).into()),
            ..base_options()
        },
    )
    .unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        contents(&db),
        model,
        "offloaded compaction changed the data"
    );
    let m = db.offload_metrics().unwrap();
    assert!(m.sides[1].input_bytes > 0, "the worker did no work: {m:?}");
    assert_eq!(m.retries, 0, "{m:?}");
    assert_eq!(db.metrics().compaction.range_covered, host_covered);
    db.check().unwrap();
    db.close().unwrap();
    assert!(
        entries(&host) == entries(&offloaded),
        "the offloaded tree holds other entries"
    );
}

/// Regression (issue 36, finding 5): the sampled check merges a sampled key by the spec's own
/// rules, range tombstones included, so an honest worker whose outputs rightly lack the keys
/// a tombstone covers is not refused (it was, with "0 versions in its outputs, 1 in the
/// inputs' merge", costing a re-run).
#[test]
fn sampling_an_honest_worker_under_range_tombstones_finds_nothing_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = inverted(dir.path());
    let db = Db::open(dir.path(), base_options()).unwrap();
    // About a third of the keys covered: 400 samples all but surely draw some.
    let (a, b) = ("key00005000", "key00018000");
    db.delete_range(a.as_bytes(), b.as_bytes()).unwrap();
    model.retain(|k, _| !(a.as_bytes() <= k.as_slice() && k.as_slice() < b.as_bytes()));
    db.flush().unwrap();
    db.close().unwrap();
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let off = OffloadOptions {
        split: Split::Static { host_share: 0.0 },
        verify_outputs: sluice_offload::VerifyOutputs::Sample(400),
        ..offload(vec![worker.addr.clone()], SECRET)
    };
    let m = compact_and_check(dir.path(), off, &model);
    assert!(m.sides[1].input_bytes > 0, "the worker did no work: {m:?}");
    assert_eq!((m.retries, m.verify_failures), (0, 0), "{m:?}");
}
