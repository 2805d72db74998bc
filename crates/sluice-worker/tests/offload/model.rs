//! The model test with a worker: random puts, deletes, merges, range deletes, snapshots,
//! flushes, compactions and reopens against a `BTreeMap`, every compaction shared between the
//! host and a real worker process, under every executor. A second keyspace, `ks`, shares the
//! worker and the WAL: batches write both. Any difference fails with the (shrunk) operation
//! sequence. `crates/sluice/tests/model.rs` covers the host alone with
//! more operations and settings.

use std::sync::Arc;

use proptest::prelude::*;
use sluice::merge_operator::Append;
use sluice::{Keyspace, KeyspaceOptions, ReadOptions, WriteBatch};

use super::*;

#[derive(Clone, Debug)]
enum Op {
    Put(u16, Vec<u8>),
    Delete(u16),
    Merge(u16, Vec<u8>),
    /// `delete_range(key(.0), key(.0 + .1))`.
    DeleteRange(u16, u16),
    /// A put and a merge of one key in one batch, and a put of it in `ks`.
    Batch(u16, Vec<u8>),
    /// A put (or with `.2`, a merge) in keyspace `ks`.
    KeyspaceWrite(u16, Vec<u8>, bool),
    /// Flushes and compacts `ks`.
    KeyspaceCompact,
    TakeSnapshot,
    CheckSnapshot,
    Flush,
    Compact,
    Reopen,
    Get(u16),
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u16..200;
    let v = || prop::collection::vec(any::<u8>(), 0..24);
    prop_oneof![
        20 => (k.clone(), v()).prop_map(|(k, v)| Op::Put(k, v)),
        5 => k.clone().prop_map(Op::Delete),
        10 => (k.clone(), v()).prop_map(|(k, v)| Op::Merge(k, v)),
        2 => (k.clone(), 0u16..40).prop_map(|(k, n)| Op::DeleteRange(k, n)),
        3 => (k.clone(), v()).prop_map(|(k, v)| Op::Batch(k, v)),
        8 => (k.clone(), v(), any::<bool>()).prop_map(|(k, v, m)| Op::KeyspaceWrite(k, v, m)),
        2 => Just(Op::KeyspaceCompact),
        2 => Just(Op::TakeSnapshot),
        2 => Just(Op::CheckSnapshot),
        3 => Just(Op::Flush),
        3 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        8 => k.prop_map(Op::Get),
    ]
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn merge(model: &mut Model, k: Vec<u8>, operand: &[u8]) {
    let merged = match model.get(&k) {
        Some(old) => [old.as_slice(), b",", operand].concat(),
        None => operand.to_vec(),
    };
    model.insert(k, merged);
}

/// Opens the database, creating keyspace `ks` (with the default keyspace's settings) on the
/// first open.
fn open(dir: &Path, mode: CompactionMode, worker: &Worker) -> (Db, Keyspace) {
    let mut options = Options {
        merge_operator: Some(Arc::new(Append::with_delimiter(b","))),
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            disable_auto_compactions: true,
            target_file_size_base: 64 << 10,
            sub_task_bytes: 8 << 10,
            ..CompactionOptions::default()
        },
        offload: Some(
            OffloadOptions {
                split: Split::Static { host_share: 0.5 },
                ..offload(vec![worker.addr.clone()], SECRET)
            }
            .into(),
        ),
        ..Options::default()
    };
    let ks_options = KeyspaceOptions::of_default(&options);
    options.keyspaces.insert("ks".into(), ks_options);
    options.create_missing_keyspaces = true;
    let db = Db::open(dir, options).unwrap();
    let ks = db.keyspace("ks").expect("created by the open");
    (db, ks)
}

fn scan_keyspace(ks: &Keyspace, snapshot: Option<&sluice::Snapshot>) -> Model {
    let opts = ReadOptions {
        snapshot,
        ..ReadOptions::default()
    };
    ks.range_opt(&opts, ..).map(Result::unwrap).collect()
}

fn scan(db: &Db, snapshot: Option<&sluice::Snapshot>) -> Model {
    let opts = ReadOptions {
        snapshot,
        ..ReadOptions::default()
    };
    db.range_opt(&opts, ..).map(Result::unwrap).collect()
}

fn run(ops: Vec<Op>, mode: CompactionMode) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let mut db = Some(open(dir.path(), mode, &worker));
    let mut model = Model::new();
    let mut ks_model = Model::new();
    let mut snapshots: Vec<(sluice::Snapshot, Model, Model)> = Vec::new();
    for op in ops {
        let (d, ks) = db.as_ref().unwrap();
        match op {
            Op::Put(k, v) => {
                d.put(key(k), &v).unwrap();
                model.insert(key(k), v);
            }
            Op::Delete(k) => {
                d.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            Op::Merge(k, v) => {
                d.merge(key(k), &v).unwrap();
                merge(&mut model, key(k), &v);
            }
            Op::DeleteRange(k, n) => {
                let (a, b) = (key(k), key(k + n));
                d.delete_range(&a, &b).unwrap();
                model.retain(|k, _| !(&a <= k && k < &b));
            }
            Op::Batch(k, v) => {
                let mut batch = WriteBatch::new();
                batch.put(key(k), b"base");
                batch.merge(key(k), &v);
                batch.put_in(ks, key(k), &v);
                d.write(&Default::default(), batch).unwrap();
                model.insert(key(k), b"base".to_vec());
                merge(&mut model, key(k), &v);
                ks_model.insert(key(k), v);
            }
            Op::KeyspaceWrite(k, v, true) => {
                ks.merge(key(k), &v).unwrap();
                merge(&mut ks_model, key(k), &v);
            }
            Op::KeyspaceWrite(k, v, false) => {
                ks.put(key(k), &v).unwrap();
                ks_model.insert(key(k), v);
            }
            Op::KeyspaceCompact => {
                ks.flush().unwrap();
                ks.compact_range(None, None).unwrap();
            }
            Op::TakeSnapshot => snapshots.push((d.snapshot(), model.clone(), ks_model.clone())),
            Op::CheckSnapshot => {
                if let Some((snap, old, old_ks)) = snapshots.last() {
                    prop_assert_eq!(&scan(d, Some(snap)), old);
                    prop_assert_eq!(&scan_keyspace(ks, Some(snap)), old_ks);
                }
            }
            Op::Flush => d.flush().unwrap(),
            Op::Compact => d.compact_range(None, None).unwrap(),
            Op::Reopen => {
                snapshots.clear();
                honest_worker_never_refused(d)?;
                let (d, ks) = db.take().unwrap();
                drop(ks);
                d.close().unwrap();
                db = Some(open(dir.path(), mode, &worker));
            }
            Op::Get(k) => prop_assert_eq!(d.get(key(k)).unwrap(), model.get(&key(k)).cloned()),
        }
    }
    let (d, ks) = db.take().unwrap();
    honest_worker_never_refused(&d)?;
    prop_assert_eq!(scan(&d, None), model);
    prop_assert_eq!(scan_keyspace(&ks, None), ks_model);
    d.check().unwrap();
    Ok(())
}

/// The worker is honest: no share of it may fail verification (the drop audit included) or
/// need a retry, whatever snapshots, tombstones, operands and keyspaces the compactions met.
fn honest_worker_never_refused(db: &Db) -> Result<(), TestCaseError> {
    let m = db.offload_metrics().unwrap();
    prop_assert_eq!((m.retries, m.verify_failures), (0, 0), "{:?}", m);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn engine_with_a_worker_matches_btreemap(
        ops in prop::collection::vec(op_strategy(), 1..300),
        mode in prop::sample::select(CompactionMode::ALL.to_vec()),
    ) {
        run(ops, mode)?;
    }
}

/// The worker takes part: a compaction of enough data gives it its share.
#[test]
fn the_worker_takes_its_share_of_the_model_runs_compactions() {
    let ops: Vec<Op> = (0..3000u16)
        .map(|i| Op::Put(i % 200, vec![i as u8; 20]))
        .chain([Op::Flush, Op::Compact])
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let secret = secret_file(dir.path(), SECRET);
    let worker = Worker::start(dir.path(), &secret, &[]);
    let (db, ks) = open(dir.path(), CompactionMode::Sequential, &worker);
    for op in ops {
        match op {
            Op::Put(k, v) => db.put(key(k), &v).unwrap(),
            Op::Flush => db.flush().unwrap(),
            Op::Compact => db.compact_range(None, None).unwrap(),
            _ => unreachable!(),
        }
    }
    let m = db.offload_metrics().unwrap();
    assert!(m.sides[1].input_bytes > 0, "{m:?}");
    // A keyspace's compactions go to the same worker, reading its own directory.
    let before = m.sides[1].input_bytes;
    for i in 0..3000u16 {
        ks.put(key(i % 200), [i as u8; 20]).unwrap();
    }
    ks.flush().unwrap();
    ks.compact_range(None, None).unwrap();
    let m = db.offload_metrics().unwrap();
    assert!(m.sides[1].input_bytes > before, "{m:?}");
    assert_eq!(scan_keyspace(&ks, None).len(), 200);
}
