//! Merge operands through offloaded compactions: a worker combines them with the built-in
//! operator of the same name exactly as the host does, and compactions under an operator no
//! worker knows stay on the host.

use std::sync::Arc;

use super::*;
use sluice::merge_operator::{MergeFailure, MergeOperator, U64Add};

/// `u64_add` under another name: what an embedder's own operator looks like to a worker.
#[derive(Debug)]
struct Counter;

impl MergeOperator for Counter {
    fn name(&self) -> &str {
        "my-counter"
    }
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        U64Add.full_merge(key, existing, operands)
    }
    fn partial_merge(&self, key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        U64Add.partial_merge(key, older, newer)
    }
}

fn with(operator: &Arc<dyn MergeOperator>) -> Options {
    Options {
        merge_operator: Some(Arc::clone(operator)),
        ..base_options()
    }
}

/// Counters under a compacted L1: L0 files of increments, puts and deletes on top. Returns
/// what the database reads.
fn counters(dir: &Path, operator: &Arc<dyn MergeOperator>) -> Model {
    let db = Db::open(dir, with(operator)).unwrap();
    let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
    let mut x = 7u64;
    for round in 0..4u64 {
        for i in 0..20_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key{:08}", (x >> 33) % 5_000).into_bytes();
            if i % 17 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else if i % 11 == 0 {
                db.put(&k, round.to_le_bytes()).unwrap();
                model.insert(k, round);
            } else {
                db.merge(&k, (x % 100).to_le_bytes()).unwrap();
                *model.entry(k).or_default() += x % 100;
            }
        }
        db.flush().unwrap();
        if round == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    let read = contents(&db);
    db.close().unwrap();
    let expected: Model = model
        .into_iter()
        .map(|(k, n)| (k, n.to_le_bytes().to_vec()))
        .collect();
    assert_eq!(read, expected, "reads before any offload");
    expected
}

/// Compacts `dir` (opened with `operator`) offloading to `worker`; returns the offload
/// metrics after checking the data.
fn compact(
    dir: &Path,
    operator: &Arc<dyn MergeOperator>,
    worker: &Worker,
    model: &Model,
) -> sluice_offload::OffloadMetrics {
    let db = Db::open(
        dir,
        Options {
            offload: Some(offload(vec![worker.addr.clone()], SECRET).into()),
            ..with(operator)
        },
    )
    .unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(
        &contents(&db),
        model,
        "offloaded compaction changed the data"
    );
    let metrics = db.offload_metrics().unwrap();
    assert!(
        db.metrics().compaction.merge_absorbed > 0,
        "no operands were combined"
    );
    db.check().unwrap();
    db.close().unwrap();
    metrics
}

#[test]
fn a_worker_combines_operands_as_the_host_does() {
    let dir = tempfile::tempdir().unwrap();
    let (host, offloaded) = (dir.path().join("host"), dir.path().join("offloaded"));
    let operator: Arc<dyn MergeOperator> = Arc::new(U64Add);
    let model = counters(&host, &operator);
    std::fs::create_dir(&offloaded).unwrap();
    for e in std::fs::read_dir(&host).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), offloaded.join(e.file_name())).unwrap();
    }
    let db = Db::open(&host, with(&operator)).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), model);
    db.close().unwrap();

    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(&offloaded, &secret, &[]);
    let m = compact(&offloaded, &operator, &worker, &model);
    assert_eq!(m.retries, 0, "{m:?}");
    assert!(m.sides[1].input_bytes > 0, "the worker did no work: {m:?}");
    // The same entries, byte for byte, as the host alone wrote.
    assert!(
        entries(&host) == entries(&offloaded),
        "the offloaded tree holds other entries"
    );
}

#[test]
fn an_operator_the_workers_do_not_know_keeps_its_compactions_on_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let operator: Arc<dyn MergeOperator> = Arc::new(Counter);
    let model = counters(dir.path(), &operator);
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let m = compact(dir.path(), &operator, &worker, &model);
    assert_eq!(m.sides.get(1).map_or(0, |s| s.input_bytes), 0, "{m:?}");
    assert_eq!(m.retries, 0, "{m:?}");
}
