//! Model test: random operation sequences run against Sluice and against a `BTreeMap`, with
//! snapshots, iterators, flushes, manual compactions and reopens. Any difference fails with
//! the (shrunk) operation sequence. With keyspaces, two more keyspaces get their own writes,
//! reads, flushes and compactions and a model each, and batches span all three. With blobs,
//! most values live in blob files. A secondary instance follows the database through all of
//! it, reopens included, and reads what the models hold at each catch-up.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use proptest::prelude::*;
use sluice::compaction::executor::CompactionMode;
use sluice::{
    BlobOptions, CompactionOptions, Db, Keyspace, KeyspaceOptions, MemtableOptions, Options,
    ReadOptions, TableOptions, TransactionOptions, WriteBatch, WriteOptions,
};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A key and its value.
type Entry = (Vec<u8>, Vec<u8>);

#[derive(Clone, Debug)]
enum Op {
    Put(u16, Vec<u8>),
    Delete(u16),
    /// A merge operand, appended to the value with a `,` by the database's operator.
    Merge(u16, Vec<u8>),
    /// `delete_range(key(a), key(b))` (empty when `a >= b`).
    DeleteRange(u16, u16),
    /// Writes to keyspace `.0 % 3` (0: the default one; the others only in runs with
    /// keyspaces), atomically.
    Batch(Vec<(u8, u16, Write)>),
    /// The writes of a `Batch` through a transaction (pessimistic when `.1`), each read back
    /// in it before the commit. Transactions have no range deletes: those delete the key.
    Transaction(Vec<(u8, u16, Write)>, bool),
    /// Runs with keyspaces: a write to keyspace `1 + .0 % 2`.
    KeyspaceWrite(u8, u16, Write),
    /// Runs with keyspaces: a read of keyspace `1 + .0 % 2`: the key, then a full scan.
    KeyspaceRead(u8, u16),
    /// Runs with keyspaces: flush keyspace `1 + .0 % 2`, or compact it when `.1`.
    KeyspaceFlush(u8, bool),
    Get(u16),
    TakeSnapshot,
    DropSnapshot,
    CheckSnapshot,
    Scan(Option<u16>, Option<u16>),
    ScanReverse,
    /// `Db::range` with bounds (key, inclusive), read from the ends bit `i` of `.2` picks
    /// for step `i` (1 = back), at the newest snapshot when `.3`.
    Range(Option<(u16, bool)>, Option<(u16, bool)>, u32, bool),
    /// Every key sharing `key(.0)`'s first 7 bytes (ten keys).
    Prefix(u16),
    MultiGet(Vec<u16>),
    /// A table from `SstFileWriter` of these puts (`Some`) and deletes, ingested: it reads as
    /// the newest write of its keys (partitioned databases refuse it).
    Ingest(std::collections::BTreeMap<u16, Option<Vec<u8>>>),
    Flush,
    Compact(Option<u16>, Option<u16>),
    /// The secondary instance (opened at the first) catches up and reads every keyspace
    /// whole.
    Follow,
    /// `set_options`: the write buffer at 64 KiB or 128 KiB, automatic compactions off (`.1`)
    /// or on. A reopen takes the options again.
    SetOptions(bool, bool),
    Reopen,
    /// After a reopen: a batch with a write through a keyspace handle of the earlier open
    /// (the default one or `.0`'s) is refused whole, and so is a read at its last snapshot.
    StaleHandle(u8, u16),
    /// Partitioned runs: move range `.0 % ranges` to owner `.1 % owners`.
    MoveRange(u8, u8),
    /// Partitioned runs: split the range holding `key(.0)` at that key (refused if the key
    /// starts its range).
    SplitRange(u16),
}

/// One write of a batch.
#[derive(Clone, Debug)]
enum Write {
    Put(Vec<u8>),
    Delete,
    Merge(Vec<u8>),
    /// Deletes `[key, key(k + .0))`.
    DeleteRange(u16),
}

/// What the database's merge operator makes of `operand` over `old`.
fn append(old: Option<&Vec<u8>>, operand: &[u8]) -> Vec<u8> {
    match old {
        Some(old) => [old.as_slice(), b",", operand].concat(),
        None => operand.to_vec(),
    }
}

fn apply(model: &mut Model, k: u16, write: Write) {
    let k = key(k);
    match write {
        Write::Put(v) => {
            model.insert(k, v);
        }
        Write::Delete => {
            model.remove(&k);
        }
        Write::Merge(operand) => {
            let merged = append(model.get(&k), &operand);
            model.insert(k, merged);
        }
        Write::DeleteRange(span) => {
            let end = key(k_of(&k) + span);
            model.retain(|key, _| !(k.as_slice() <= key.as_slice() && key < &end));
        }
    }
}

/// The number `key` was made from.
fn k_of(key: &[u8]) -> u16 {
    std::str::from_utf8(&key[3..]).unwrap().parse().unwrap()
}

fn key(k: u16) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

fn value_strategy() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => proptest::collection::vec(any::<u8>(), 1000..5000),
        1 => Just(Vec::new()),
    ]
}

fn write_strategy() -> impl Strategy<Value = Write> {
    prop_oneof![
        4 => value_strategy().prop_map(Write::Put),
        1 => Just(Write::Delete),
        2 => proptest::collection::vec(any::<u8>(), 0..8).prop_map(Write::Merge),
        1 => (0u16..40).prop_map(Write::DeleteRange),
    ]
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0u16..300;
    prop_oneof![
        30 => (k.clone(), value_strategy()).prop_map(|(k, v)| Op::Put(k, v)),
        8 => k.clone().prop_map(Op::Delete),
        10 => (k.clone(), proptest::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(k, v)| Op::Merge(k, v)),
        2 => (k.clone(), 0u16..60).prop_map(|(a, span)| Op::DeleteRange(a, a + span)),
        4 => proptest::collection::vec((any::<u8>(), k.clone(), write_strategy()), 1..20)
            .prop_map(Op::Batch),
        2 => (
            proptest::collection::vec((any::<u8>(), k.clone(), write_strategy()), 1..12),
            any::<bool>()
        )
            .prop_map(|(writes, pessimistic)| Op::Transaction(writes, pessimistic)),
        6 => (any::<u8>(), k.clone(), write_strategy())
            .prop_map(|(ks, k, w)| Op::KeyspaceWrite(ks, k, w)),
        3 => (any::<u8>(), k.clone()).prop_map(|(ks, k)| Op::KeyspaceRead(ks, k)),
        1 => (any::<u8>(), any::<bool>()).prop_map(|(ks, c)| Op::KeyspaceFlush(ks, c)),
        10 => k.clone().prop_map(Op::Get),
        2 => Just(Op::TakeSnapshot),
        1 => Just(Op::DropSnapshot),
        2 => Just(Op::CheckSnapshot),
        2 => (proptest::option::of(k.clone()), proptest::option::of(k.clone()))
            .prop_map(|(a, b)| Op::Scan(a, b)),
        1 => Just(Op::ScanReverse),
        3 => (
            proptest::option::of((k.clone(), any::<bool>())),
            proptest::option::of((k.clone(), any::<bool>())),
            any::<u32>(),
            any::<bool>(),
        )
            .prop_map(|(a, b, ends, snap)| Op::Range(a, b, ends, snap)),
        1 => k.clone().prop_map(Op::Prefix),
        2 => proptest::collection::vec(k.clone(), 0..8).prop_map(Op::MultiGet),
        1 => proptest::collection::btree_map(
            k.clone(),
            proptest::option::weighted(0.8, proptest::collection::vec(any::<u8>(), 0..32)),
            1..30,
        )
        .prop_map(Op::Ingest),
        2 => Just(Op::Flush),
        1 => (proptest::option::of(k.clone()), proptest::option::of(k.clone()))
            .prop_map(|(a, b)| Op::Compact(a, b)),
        1 => Just(Op::Follow),
        1 => (any::<bool>(), any::<bool>()).prop_map(|(b, off)| Op::SetOptions(b, off)),
        1 => Just(Op::Reopen),
        1 => (any::<u8>(), k).prop_map(|(ks, k)| Op::StaleHandle(ks, k)),
        2 => (any::<u8>(), any::<u8>()).prop_map(|(r, o)| Op::MoveRange(r, o)),
        1 => (0u16..300).prop_map(Op::SplitRange),
    ]
}

/// Whether the test directory's file system takes direct I/O (tmpfs does not); where it does
/// not, the direct-I/O cases run buffered.
fn direct_io_supported() -> bool {
    static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SUPPORTED.get_or_init(|| {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        sluice::fs::probe_direct_io(&sluice::fs::OsFileSystem, dir.path()).is_ok()
    })
}

fn small_options(mode: CompactionMode, direct: bool) -> Options {
    Options {
        block_cache_bytes: 1 << 20,
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 512,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            use_direct_io_for_flush_and_compaction: direct && direct_io_supported(),
            sub_task_bytes: 4 << 10,
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            // Flushes cut at L1 boundaries: L0 compactions by interval.
            l0_flush_split_bytes: 64 << 10,
            max_concurrent_compactions: 3,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Partitioned runs: three owners (directories under the database's), four ranges split at
/// these keys, initially owned 0, 1, 2, 0.
const RANGE_STARTS: [u16; 3] = [75, 150, 225];
const OWNERS: u8 = 3;

fn partitions(dir: &Path) -> sluice::options::PartitionOptions {
    sluice::options::PartitionOptions {
        owners: (0..OWNERS)
            .map(|i| sluice::options::PartitionOwner {
                dir: dir.join(format!("owner{i}")),
                worker: None,
            })
            .collect(),
        boundaries: RANGE_STARTS.iter().map(|&k| key(k)).collect(),
        initial_owners: vec![0, 1, 2, 0],
        // Balance at any size, so that moves and relocations happen all the time.
        balance: Some(sluice::partition::balance::BalanceOptions {
            max_skew: 0.25,
            min_bytes: 0,
        }),
        load_balance: None,
    }
}

/// A compaction filter that rewrites every value it is shown into itself: the model cannot
/// predict when compactions run, so a filter that changes what reads return cannot be checked
/// against it, but this one takes the filter's whole path (the rewrite, its digest
/// accounting, `compact_range` rewriting every file and the last level in place) and must
/// change nothing. `compaction_iter`'s tests check what removing and changing values do.
#[derive(Debug)]
struct RewriteIntoItself;

impl sluice::CompactionFilter for RewriteIntoItself {
    fn name(&self) -> &str {
        "rewrite-into-itself"
    }
    fn filter(&self, _key: &[u8], value: &[u8]) -> sluice::FilterDecision {
        sluice::FilterDecision::Change(value.to_vec())
    }
}

/// How a run's database is configured beyond its compaction mode.
#[derive(Clone, Copy, Debug)]
struct Setup {
    direct: bool,
    partitioned: bool,
    /// With the `RewriteIntoItself` compaction filter.
    filtered: bool,
    /// With 7-byte prefix filters, the length `Op::Prefix` scans.
    prefixed: bool,
    /// With two more keyspaces, `ks1` and `ks2` (without: their ops are skipped and batches
    /// write only the default keyspace).
    keyspaces: bool,
    /// Values of 4 bytes or more in blob files (not with `filtered`, which separation
    /// refuses), in files of 4 KiB, so that runs make many and compactions drop some.
    blobs: bool,
    /// How the levels are sized.
    levels: LevelSizing,
}

/// `level_compaction_dynamic_level_bytes` in a run.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LevelSizing {
    Static,
    Dynamic,
    /// Static until the first reopen, then dynamic: the open moves the levels down.
    TurnedOnAtReopen,
}

/// The names of the runs' extra keyspaces.
const KEYSPACES: [&str; 2] = ["ks1", "ks2"];

fn open(dir: &Path, mode: CompactionMode, setup: Setup) -> Db {
    Db::open(dir, options(dir, mode, setup)).expect("open")
}

/// The options of a run's database in `dir`.
fn options(dir: &Path, mode: CompactionMode, setup: Setup) -> Options {
    let Setup {
        direct,
        partitioned,
        filtered,
        prefixed,
        keyspaces,
        blobs,
        levels,
    } = setup;
    let mut small = small_options(mode, direct);
    small.compaction.level_compaction_dynamic_level_bytes = levels == LevelSizing::Dynamic;
    let mut options = Options {
        table: TableOptions {
            prefix_extractor: prefixed.then_some(sluice::PrefixExtractor::Fixed(7)),
            ..small.table.clone()
        },
        partitions: partitioned.then(|| partitions(dir)),
        compaction_filter: filtered.then(|| {
            std::sync::Arc::new(RewriteIntoItself) as std::sync::Arc<dyn sluice::CompactionFilter>
        }),
        merge_operator: Some(std::sync::Arc::new(
            sluice::merge_operator::Append::with_delimiter(b","),
        )),
        blob: match blobs && !filtered {
            true => BlobOptions {
                min_blob_size: 4,
                blob_file_size: 4096,
                // Collect at every chance, so relocation runs as often as it can.
                gc_min_garbage_ratio: 0.0,
                ..BlobOptions::default()
            },
            false => BlobOptions::default(),
        },
        ..small
    };
    if !keyspaces {
        return options;
    }
    // The second keyspace flushes at another size, so the keyspaces' WALs interleave.
    let mut second = KeyspaceOptions::of_default(&options);
    second.memtable.write_buffer_size = 128 << 10;
    let settings = [KeyspaceOptions::of_default(&options), second];
    for (name, s) in KEYSPACES.iter().zip(settings) {
        options.keyspaces.insert(name.to_string(), s);
    }
    options.create_missing_keyspaces = true;
    options
}

/// The run's extra keyspaces, in `KEYSPACES` order (none without keyspaces).
fn keyspaces_of(db: &Db) -> Vec<Keyspace> {
    KEYSPACES.iter().filter_map(|n| db.keyspace(n)).collect()
}

/// Applies `write` to keyspace `ks`: the default one (0) or `ks1`/`ks2`.
fn write_to(batch: &mut WriteBatch, keyspaces: &[Keyspace], ks: usize, k: u16, write: &Write) {
    let Some(ks) = ks.checked_sub(1).map(|i| &keyspaces[i]) else {
        match write {
            Write::Put(v) => batch.put(key(k), v),
            Write::Delete => batch.delete(key(k)),
            Write::Merge(v) => batch.merge(key(k), v),
            Write::DeleteRange(span) => batch.delete_range(key(k), key(k + span)),
        }
        return;
    };
    match write {
        Write::Put(v) => batch.put_in(ks, key(k), v),
        Write::Delete => batch.delete_in(ks, key(k)),
        Write::Merge(v) => batch.merge_in(ks, key(k), v),
        Write::DeleteRange(span) => batch.delete_range_in(ks, key(k), key(k + span)),
    }
}

/// Every key and value of `ks`, read at `opts`.
fn contents_of(ks: &Keyspace, opts: &ReadOptions<'_>) -> Vec<Entry> {
    ks.range_opt(opts, ..).collect::<Result<_, _>>().unwrap()
}

/// What `Db::range` must yield for the bounds `lo` and `hi` (key, inclusive), taking from
/// the ends `ends` picks (bit `i` set: step `i` takes from the back). Each item is `None`
/// once the ends meet.
fn range_model(
    model: &Model,
    lo: Option<(u16, bool)>,
    hi: Option<(u16, bool)>,
    ends: u32,
) -> Vec<(bool, Option<Entry>)> {
    let mut left: std::collections::VecDeque<_> = model
        .iter()
        .filter(|(k, _)| match lo {
            Some((l, true)) => k.as_slice() >= key(l).as_slice(),
            Some((l, false)) => k.as_slice() > key(l).as_slice(),
            None => true,
        })
        .filter(|(k, _)| match hi {
            Some((h, true)) => k.as_slice() <= key(h).as_slice(),
            Some((h, false)) => k.as_slice() < key(h).as_slice(),
            None => true,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (0..=left.len().min(40))
        .map(|i| {
            let back = (ends >> (i % 32)) & 1 == 1;
            (
                back,
                if back {
                    left.pop_back()
                } else {
                    left.pop_front()
                },
            )
        })
        .collect()
}

fn bound(b: Option<(u16, bool)>) -> std::ops::Bound<Vec<u8>> {
    match b {
        Some((k, true)) => std::ops::Bound::Included(key(k)),
        Some((k, false)) => std::ops::Bound::Excluded(key(k)),
        None => std::ops::Bound::Unbounded,
    }
}

fn scan_model(model: &Model, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<(Vec<u8>, Vec<u8>)> {
    model
        .iter()
        .filter(|(k, _)| lo.is_none_or(|lo| k.as_slice() >= lo))
        .filter(|(k, _)| hi.is_none_or(|hi| k.as_slice() < hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn run(ops: Vec<Op>, mode: CompactionMode, setup: Setup) -> Result<(), TestCaseError> {
    let partitioned = setup.partitioned;
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    // Where external tables are written before they are ingested.
    let scratch = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut db = Some(open(dir.path(), mode, setup));
    let setup = match setup.levels {
        LevelSizing::TurnedOnAtReopen => Setup {
            levels: LevelSizing::Dynamic,
            ..setup
        },
        _ => setup,
    };
    // A secondary instance, from the first `Follow` on, and its scratch directory.
    let mut follower: Option<Db> = None;
    let follower_dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut model = Model::new();
    // The extra keyspaces and their models.
    let mut keyspaces = keyspaces_of(db.as_ref().unwrap());
    let mut ks_models = [Model::new(), Model::new()];
    // (snapshot handle, model at the time, the keyspaces' models at the time)
    let mut snapshots: Vec<(sluice::Snapshot, Model, [Model; 2])> = Vec::new();
    // The keyspace handles (the default one's first) and newest snapshot of the open before
    // the last reopen.
    let mut stale: (Vec<Keyspace>, Option<sluice::Snapshot>) = (Vec::new(), None);
    // Which keyspace an op's `ks` byte names: 0 (default) when the run has no keyspaces.
    let spaces = 1 + keyspaces.len();
    for op in ops {
        let d = db.as_ref().unwrap();
        match op {
            Op::Put(k, v) => {
                d.put(key(k), &v).unwrap();
                model.insert(key(k), v);
            }
            Op::Delete(k) => {
                d.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            Op::Merge(k, operand) => {
                d.merge(key(k), &operand).unwrap();
                apply(&mut model, k, Write::Merge(operand));
            }
            Op::DeleteRange(a, b) => {
                d.delete_range(key(a), key(b)).unwrap();
                apply(&mut model, a, Write::DeleteRange(b - a));
            }
            Op::Batch(entries) => {
                let mut batch = WriteBatch::new();
                for (ks, k, write) in &entries {
                    write_to(&mut batch, &keyspaces, usize::from(*ks) % spaces, *k, write);
                }
                d.write(&WriteOptions::default(), batch).unwrap();
                for (ks, k, write) in entries {
                    match usize::from(ks) % spaces {
                        0 => apply(&mut model, k, write),
                        i => apply(&mut ks_models[i - 1], k, write),
                    }
                }
            }
            Op::Transaction(entries, pessimistic) => {
                let mut txn = d.transaction_with(match pessimistic {
                    true => TransactionOptions::pessimistic(),
                    false => TransactionOptions::default(),
                });
                let (mut after, mut ks_after) = (model.clone(), ks_models.clone());
                for (ks, k, write) in entries {
                    let write = match write {
                        Write::DeleteRange(_) => Write::Delete,
                        write => write,
                    };
                    let i = usize::from(ks) % spaces;
                    let target = i.checked_sub(1).map(|i| &keyspaces[i]);
                    match (&write, target) {
                        (Write::Put(v), None) => txn.put(key(k), v),
                        (Write::Put(v), Some(ks)) => txn.put_in(ks, key(k), v),
                        (Write::Merge(v), None) => txn.merge(key(k), v),
                        (Write::Merge(v), Some(ks)) => txn.merge_in(ks, key(k), v),
                        (_, None) => txn.delete(key(k)),
                        (_, Some(ks)) => txn.delete_in(ks, key(k)),
                    }
                    .unwrap();
                    let expected = match i {
                        0 => &mut after,
                        i => &mut ks_after[i - 1],
                    };
                    apply(expected, k, write);
                    let seen = match target {
                        None => txn.get(key(k)),
                        Some(ks) => txn.get_in(ks, key(k)),
                    };
                    prop_assert_eq!(seen.unwrap(), expected.get(&key(k)).cloned());
                }
                txn.commit().unwrap();
                (model, ks_models) = (after, ks_after);
            }
            Op::KeyspaceWrite(ks, k, write) => {
                if let Some(i) = (spaces > 1).then_some(usize::from(ks) % 2) {
                    let target = &keyspaces[i];
                    match &write {
                        Write::Put(v) => target.put(key(k), v).unwrap(),
                        Write::Delete => target.delete(key(k)).unwrap(),
                        Write::Merge(v) => target.merge(key(k), v).unwrap(),
                        Write::DeleteRange(span) => {
                            target.delete_range(key(k), key(k + span)).unwrap()
                        }
                    }
                    apply(&mut ks_models[i], k, write);
                }
            }
            Op::KeyspaceRead(ks, k) => {
                if let Some(i) = (spaces > 1).then_some(usize::from(ks) % 2) {
                    let target = &keyspaces[i];
                    prop_assert_eq!(
                        target.get(key(k)).unwrap(),
                        ks_models[i].get(&key(k)).cloned()
                    );
                    let all = contents_of(target, &ReadOptions::default());
                    prop_assert_eq!(all, scan_model(&ks_models[i], None, None));
                }
            }
            Op::KeyspaceFlush(ks, compact) => {
                if let Some(i) = (spaces > 1).then_some(usize::from(ks) % 2) {
                    match compact {
                        true => keyspaces[i].compact_range(None, None).unwrap(),
                        false => keyspaces[i].flush().unwrap(),
                    }
                }
            }
            Op::Get(k) => {
                prop_assert_eq!(d.get(key(k)).unwrap(), model.get(&key(k)).cloned());
            }
            Op::TakeSnapshot => {
                snapshots.push((d.snapshot(), model.clone(), ks_models.clone()));
            }
            Op::DropSnapshot => {
                if !snapshots.is_empty() {
                    snapshots.remove(0);
                }
            }
            Op::CheckSnapshot => {
                if let Some((snap, old, old_keyspaces)) = snapshots.last() {
                    let opts = ReadOptions {
                        snapshot: Some(snap),
                        ..ReadOptions::default()
                    };
                    // One snapshot is one point in time in every keyspace.
                    for (ks, old) in keyspaces.iter().zip(old_keyspaces) {
                        prop_assert_eq!(contents_of(ks, &opts), scan_model(old, None, None));
                    }
                    let got: Vec<_> = d
                        .raw_iter(&opts)
                        .unwrap()
                        .entries()
                        .collect::<Result<_, _>>()
                        .unwrap();
                    prop_assert_eq!(&got, &scan_model(old, None, None));
                    // The snapshot's own reads see the same.
                    let own: Vec<_> = snap.iter().collect::<Result<_, _>>().unwrap();
                    prop_assert_eq!(own, got);
                    for k in (0..300).step_by(37) {
                        prop_assert_eq!(
                            d.get_opt(&opts, key(k)).unwrap(),
                            old.get(&key(k)).cloned()
                        );
                        prop_assert_eq!(snap.get(key(k)).unwrap(), old.get(&key(k)).cloned());
                    }
                }
            }
            Op::Scan(a, b) => {
                let (lo, hi) = (a.map(key), b.map(key));
                let got: Vec<_> = d
                    .range((
                        lo.as_deref().map_or(Bound::Unbounded, Bound::Included),
                        hi.as_deref().map_or(Bound::Unbounded, Bound::Excluded),
                    ))
                    .collect::<Result<_, _>>()
                    .unwrap();
                prop_assert_eq!(got, scan_model(&model, lo.as_deref(), hi.as_deref()));
            }
            Op::ScanReverse => {
                let mut it = d.raw_iter(&ReadOptions::default()).unwrap();
                it.seek_to_last().unwrap();
                let mut got = Vec::new();
                while it.valid() {
                    got.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev().unwrap();
                }
                let mut expect = scan_model(&model, None, None);
                expect.reverse();
                prop_assert_eq!(got, expect);
            }
            Op::Range(lo, hi, ends, at_snapshot) => {
                let (snap, expected_model) = match snapshots.last() {
                    Some((snap, old, _)) if at_snapshot => (Some(snap), old),
                    _ => (None, &model),
                };
                let opts = ReadOptions {
                    snapshot: snap,
                    ..ReadOptions::default()
                };
                let mut range = d.range_opt(&opts, (bound(lo), bound(hi)));
                for (back, expected) in range_model(expected_model, lo, hi, ends) {
                    let got = if back {
                        range.next_back()
                    } else {
                        range.next()
                    };
                    prop_assert_eq!(got.transpose().unwrap(), expected);
                }
            }
            Op::Prefix(k) => {
                let prefix = &key(k)[..7];
                let got: Vec<_> = d.prefix(prefix).map(Result::unwrap).collect();
                let expected: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.starts_with(prefix))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                prop_assert_eq!(got, expected);
            }
            Op::Ingest(entries) => {
                let path = scratch.path().join("ingest.sst");
                let mut w = sluice::SstFileWriter::create(&path, &TableOptions::default()).unwrap();
                for (k, v) in &entries {
                    match v {
                        Some(v) => w.put(&key(*k), v).unwrap(),
                        None => w.delete(&key(*k)).unwrap(),
                    }
                }
                w.finish().unwrap();
                let result = d.ingest(&[&path], &sluice::IngestOptions { move_files: true });
                if partitioned {
                    prop_assert!(result.is_err(), "a partitioned database took an ingest");
                    std::fs::remove_file(&path).unwrap();
                } else {
                    result.unwrap();
                    for (k, v) in entries {
                        match v {
                            Some(v) => model.insert(key(k), v),
                            None => model.remove(&key(k)),
                        };
                    }
                }
            }
            Op::MultiGet(keys) => {
                let got = d.multi_get(&ReadOptions::default(), keys.iter().map(|&k| key(k)));
                prop_assert_eq!(got.len(), keys.len());
                for (got, k) in got.into_iter().zip(keys) {
                    prop_assert_eq!(got.unwrap(), model.get(&key(k)).cloned());
                }
            }
            Op::Flush => d.flush().unwrap(),
            Op::Compact(a, b) => {
                let (a, b) = match (a, b) {
                    (Some(a), Some(b)) if a > b => (Some(b), Some(a)),
                    other => other,
                };
                let (lo, hi) = (a.map(key), b.map(key));
                d.compact_range(lo.as_deref(), hi.as_deref()).unwrap();
            }
            Op::Follow => {
                let follower = match &mut follower {
                    Some(follower) => {
                        follower.try_catch_up().unwrap();
                        follower
                    }
                    none => none.insert(
                        Db::open_secondary(
                            dir.path(),
                            follower_dir.path(),
                            options(dir.path(), mode, setup),
                        )
                        .unwrap(),
                    ),
                };
                let all = ReadOptions::default();
                prop_assert_eq!(
                    contents_of(&follower.keyspace("default").unwrap(), &all),
                    scan_model(&model, None, None)
                );
                let names = KEYSPACES.iter().take(keyspaces.len());
                for (name, ks_model) in names.zip(&ks_models) {
                    let ks = follower.keyspace(name).unwrap();
                    prop_assert_eq!(contents_of(&ks, &all), scan_model(ks_model, None, None));
                }
            }
            Op::SetOptions(bigger, off) => {
                let size = if bigger { "131072" } else { "65536" };
                let off = if off { "true" } else { "false" };
                d.set_options(&[
                    ("write_buffer_size", size),
                    ("disable_auto_compactions", off),
                ])
                .unwrap();
                for ks in &keyspaces {
                    ks.set_options(&[("disable_auto_compactions", off)])
                        .unwrap();
                }
            }
            Op::Reopen => {
                let default = d.keyspace("default").unwrap();
                let handles = std::iter::once(default).chain(keyspaces.drain(..));
                stale = (handles.collect(), snapshots.pop().map(|(s, _, _)| s));
                snapshots.clear();
                db.take().unwrap().close().unwrap();
                db = Some(open(dir.path(), mode, setup));
                keyspaces = keyspaces_of(db.as_ref().unwrap());
            }
            Op::StaleHandle(ks, k) => {
                if let Some(old) = stale.0.get(usize::from(ks) % stale.0.len().max(1)) {
                    let mut batch = WriteBatch::new();
                    batch.put(key(k), b"this open's");
                    batch.put_in(old, key(k), b"the last open's");
                    let written = d.write(&WriteOptions::default(), batch);
                    prop_assert!(matches!(written, Err(sluice::Error::InvalidArgument(_))));
                }
                if let Some(snapshot) = &stale.1 {
                    let opts = ReadOptions {
                        snapshot: Some(snapshot),
                        ..ReadOptions::default()
                    };
                    let read = d.get_opt(&opts, key(k));
                    prop_assert!(matches!(read, Err(sluice::Error::InvalidArgument(_))));
                }
            }
            Op::MoveRange(r, o) => {
                if partitioned {
                    let map = d.range_map().unwrap();
                    let range = usize::from(r) % map.len();
                    let to = u32::from(o % OWNERS);
                    let (start, end) = map.bounds(range);
                    // A keyspace's ranges holding keys of the moved range.
                    let overlapping = |map: &sluice::partition::RangeMap| -> Vec<u32> {
                        (0..map.len())
                            .filter(|&i| {
                                let (from, until) = map.bounds(i);
                                end.is_none_or(|end| from < end) && until.is_none_or(|u| u > start)
                            })
                            .map(|i| map.ranges()[i].owner)
                            .collect()
                    };
                    let moves = |ks: &Keyspace| ks.metrics().unwrap().range_moves;
                    // Per keyspace: its move count, and the moves this one should add (one
                    // per range holding keys of it that `to` does not own; cutting a range
                    // at the ends leaves one piece inside).
                    let before: Vec<(u64, u64)> = keyspaces
                        .iter()
                        .map(|ks| {
                            let owners = overlapping(&ks.range_map().unwrap().unwrap());
                            let expected = owners.iter().filter(|&&o| o != to).count();
                            (moves(ks), expected as u64)
                        })
                        .collect();
                    d.move_range(range, to).unwrap();
                    // Every keyspace's keys of the range belong to `to` now, unless the
                    // balancer moved a range of it meanwhile (its move count then differs
                    // from what this move adds), or changed the default keyspace's map
                    // before the move (the range at that index is then another one).
                    let now = d.range_map().unwrap();
                    let moved_as_read = now.bounds(range) == (start, end);
                    for (ks, (count, expected)) in
                        keyspaces.iter().zip(before).filter(|_| moved_as_read)
                    {
                        let owners = overlapping(&ks.range_map().unwrap().unwrap());
                        prop_assert!(
                            owners.iter().all(|&o| o == to) || moves(ks) != count + expected,
                            "keyspace {}: keys {:?}..{:?} owned by {:?}, not {}",
                            ks.name(),
                            start,
                            end,
                            owners,
                            to
                        );
                    }
                } else {
                    prop_assert!(d.move_range(0, 0).is_err());
                }
            }
            Op::SplitRange(k) => {
                let at = key(k);
                if partitioned {
                    let before = d.range_map().unwrap();
                    let range = before.index_of(&at);
                    match d.split_range(range, &at) {
                        Ok(()) => {
                            let maps = keyspaces.iter().map(|ks| ks.range_map().unwrap());
                            for map in std::iter::once(d.range_map()).chain(maps) {
                                let map = map.unwrap();
                                prop_assert_eq!(&map.range_of(&at).start, &at);
                            }
                        }
                        // Refused: `at` already starts a range, or the storage balancer (on
                        // the flush thread) changed the map between reading the index and
                        // the split, so range `range` no longer holds `at`.
                        Err(sluice::Error::InvalidArgument(_)) => {
                            let now = d.range_map().unwrap();
                            prop_assert!(
                                now.range_of(&at).start == at || now != before,
                                "split at {:?} refused with an unchanged map",
                                at
                            );
                        }
                        Err(e) => return Err(TestCaseError::fail(format!("split: {e}"))),
                    }
                } else {
                    prop_assert!(d.split_range(0, &at).is_err());
                }
            }
        }
    }
    let d = db.take().unwrap();
    d.check().unwrap();
    if partitioned {
        // The figures below come from two reads of the current version; no compaction may
        // install between them.
        d.wait_for_background_work().unwrap();
        // Every table is counted with exactly one owner and one range, and a range's bytes
        // outside its owner are exactly those its forwarding entries point to.
        let trees = std::iter::once((d.partition_stats(), d.metrics())).chain(
            keyspaces
                .iter()
                .map(|ks| (ks.partition_stats().unwrap(), ks.metrics().unwrap())),
        );
        for (stats, m) in trees {
            let stats = stats.unwrap();
            // Tables only: blob files are counted apart from ranges and owners.
            let total = m.total_size_bytes() - m.blob.bytes;
            prop_assert_eq!(stats.owners.iter().map(|o| o.bytes).sum::<u64>(), total);
            prop_assert_eq!(stats.ranges.iter().map(|r| r.bytes).sum::<u64>(), total);
            for r in &stats.ranges {
                prop_assert_eq!(r.forwarded_from.is_empty(), r.forwarded_bytes == 0);
            }
        }
    }
    let got: Vec<_> = d.iter().collect::<Result<_, _>>().unwrap();
    prop_assert_eq!(got, scan_model(&model, None, None));
    for (ks, model) in keyspaces.iter().zip(&ks_models) {
        prop_assert_eq!(
            contents_of(ks, &ReadOptions::default()),
            scan_model(model, None, None)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_btreemap(
        ops in proptest::collection::vec(op_strategy(), 1..400),
        mode in proptest::sample::select([CompactionMode::ALL.as_slice(), &[CompactionMode::Auto]].concat()),
        direct_io: bool,
        partitioned: bool,
        filtered: bool,
        prefixed: bool,
        keyspaces: bool,
        blobs: bool,
        levels in proptest::sample::select(vec![
            LevelSizing::Static,
            LevelSizing::Dynamic,
            LevelSizing::TurnedOnAtReopen,
        ]),
    ) {
        run(ops, mode, Setup { direct: direct_io, partitioned, filtered, prefixed, keyspaces, blobs, levels })?;
    }
}

/// Direction changes in the middle of a scan, with tombstones and snapshots around.
#[test]
fn iterator_direction_switches_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let setup = Setup {
        direct: false,
        partitioned: false,
        filtered: false,
        prefixed: false,
        keyspaces: false,
        blobs: false,
        levels: LevelSizing::Static,
    };
    let db = open(dir.path(), CompactionMode::Sequential, setup);
    let mut model = Model::new();
    for i in 0..2000u16 {
        let k = key(i % 500);
        if i % 7 == 0 {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        if i % 600 == 0 {
            db.flush().unwrap();
        }
    }
    let keys: Vec<_> = model.keys().cloned().collect();
    let mut it = db.raw_iter(&ReadOptions::default()).unwrap();
    it.seek(&key(250)).unwrap();
    let mut pos = keys.partition_point(|k| k.as_slice() < key(250).as_slice());
    for step in 0..300 {
        assert_eq!(it.valid(), pos < keys.len());
        if !it.valid() {
            break;
        }
        assert_eq!(it.key(), keys[pos].as_slice());
        assert_eq!(it.value(), model[&keys[pos]].as_slice());
        if step % 3 == 2 && pos > 0 {
            it.prev().unwrap();
            pos -= 1;
        } else {
            it.next().unwrap();
            pos += 1;
        }
    }
}
