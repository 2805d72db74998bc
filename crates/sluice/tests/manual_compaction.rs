//! Manual compaction with options: parallel pieces give the same data and shape as the
//! configured executor, progress is reported level by level, and cancellation leaves a
//! consistent tree that a later compaction finishes.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use sluice::{
    CompactOptions, CompactProgress, CompactionOptions, Db, Error, MemtableOptions, Options,
};

fn options() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 1 << 20,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            target_file_size_base: 1 << 20,
            max_bytes_for_level_base: 4 << 20,
            sub_task_bytes: 64 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// An inverted tree: a compacted L1, then L0 files of random overwrites over it.
fn inverted(dir: &Path) -> (Db, Model) {
    let db = Db::open(dir, options()).unwrap();
    let mut model = Model::new();
    let mut x = 7u64;
    for round in 0..4 {
        for _ in 0..30_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key{:08}", (x >> 33) % 50_000).into_bytes();
            let v = format!("{round}-{x:x}-{}", "v".repeat(40)).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        if round == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    (db, model)
}

fn contents(db: &Db) -> Model {
    db.iter().map(|e| e.unwrap()).collect()
}

fn shape(db: &Db) -> Vec<usize> {
    db.metrics().levels.iter().map(|l| l.files).collect()
}

#[test]
fn parallel_and_serial_compactions_agree() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (serial, model) = inverted(a.path());
    let (parallel, _) = inverted(b.path());
    assert!(
        shape(&serial)[0] >= 3,
        "expected an inverted tree: {:?}",
        shape(&serial)
    );
    serial.compact_range(None, None).unwrap();
    let opts = CompactOptions {
        parallel: true,
        ..CompactOptions::default()
    };
    parallel.compact_range_with(None, None, &opts).unwrap();
    assert_eq!(shape(&parallel), shape(&serial));
    assert_eq!(shape(&parallel)[0], 0);
    assert!(contents(&parallel) == model && contents(&serial) == model);
    let modes = parallel.metrics().compaction.modes;
    assert!(modes.contains_key("parallel"), "{modes:?}");
    parallel.check().unwrap();
}

#[test]
fn a_parallel_manual_compaction_runs_on_the_threads_it_asks_for() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (serial, model) = inverted(a.path());
    let (parallel, _) = inverted(b.path());
    serial.compact_range(None, None).unwrap();
    let reports: Arc<Mutex<Vec<CompactProgress>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let opts = CompactOptions {
        parallel: true,
        threads: 3,
        progress: Some(Arc::new(move |p: &CompactProgress| {
            sink.lock().unwrap().push(*p)
        })),
        ..CompactOptions::default()
    };
    parallel.compact_range_with(None, None, &opts).unwrap();
    let reports = reports.lock().unwrap();
    assert!(!reports.is_empty());
    assert!(reports.iter().all(|p| p.pieces_running == 3), "{reports:?}");
    // The compute threads run as `compute`, or `read+compute+write` when each reads its own
    // inputs and writes what is next in order.
    let stages = &parallel.metrics().compaction.pipeline;
    let compute = stages
        .iter()
        .find(|s| s.stage == "compute" || s.stage == "read+compute+write")
        .unwrap_or_else(|| panic!("no compute stage in {stages:?}"));
    assert_eq!(compute.threads % 3, 0, "{compute:?}");
    assert_eq!(shape(&parallel), shape(&serial));
    assert!(contents(&parallel) == model);
}

#[test]
fn progress_is_reported_level_by_level() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = inverted(dir.path());
    let reports: Arc<Mutex<Vec<CompactProgress>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let opts = CompactOptions {
        parallel: true,
        progress: Some(Arc::new(move |p: &CompactProgress| {
            sink.lock().unwrap().push(*p)
        })),
        ..CompactOptions::default()
    };
    db.compact_range_with(None, None, &opts).unwrap();
    let reports = reports.lock().unwrap();
    let last = reports.last().unwrap();
    assert_eq!(last.levels_done, last.levels, "{reports:?}");
    assert_eq!(last.bytes_done, last.bytes_total);
    assert!(last.bytes_total > 0 && last.pieces_running >= 1);
    for r in reports.iter() {
        assert!(r.bytes_done <= r.bytes_total, "{r:?}");
        assert!(r.levels_done <= r.levels, "{r:?}");
    }
    // Within a level, progress never goes back.
    for w in reports.windows(2) {
        if w[0].level == w[1].level && w[0].levels_done == w[1].levels_done {
            assert!(w[0].bytes_done <= w[1].bytes_done, "{w:?}");
        }
    }
    assert!(contents(&db) == model);
}

#[test]
fn a_cancelled_compaction_leaves_a_consistent_tree() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = inverted(dir.path());
    let before = shape(&db);
    let tables = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "sst")
            })
            .count()
    };
    let files_before = tables(dir.path());

    // Cancelled before it starts: nothing happens.
    let cancel = Arc::new(AtomicBool::new(true));
    let opts = CompactOptions {
        cancel: Some(Arc::clone(&cancel)),
        ..CompactOptions::default()
    };
    assert!(matches!(
        db.compact_range_with(None, None, &opts),
        Err(Error::Cancelled)
    ));
    assert_eq!(shape(&db), before);

    // Cancelled by the first progress report, while the L0 compaction runs.
    cancel.store(false, Ordering::Relaxed);
    let flag = Arc::clone(&cancel);
    let opts = CompactOptions {
        parallel: true,
        progress: Some(Arc::new(move |_: &CompactProgress| {
            flag.store(true, Ordering::Relaxed)
        })),
        cancel: Some(Arc::clone(&cancel)),
        ..CompactOptions::default()
    };
    assert!(matches!(
        db.compact_range_with(None, None, &opts),
        Err(Error::Cancelled)
    ));
    assert_eq!(
        shape(&db),
        before,
        "a cancelled level must not be installed"
    );
    assert_eq!(
        tables(dir.path()),
        files_before,
        "partial outputs left behind"
    );
    assert_eq!(
        db.metrics().compaction.failed,
        0,
        "cancelling is not failing"
    );
    assert!(contents(&db) == model);

    // The same compaction, not cancelled, finishes the job.
    db.compact_range(None, None).unwrap();
    assert_eq!(shape(&db)[0], 0);
    assert!(contents(&db) == model);
    db.check().unwrap();
}

/// Writes `keys` (with `deleted` of them then deleted) and flushes them into one L0 table.
fn l0_table(db: &Db, keys: std::ops::Range<u32>, deleted: std::ops::Range<u32>) {
    for i in keys {
        db.put(format!("key{i:08}").as_bytes(), [b'v'; 64]).unwrap();
    }
    for i in deleted {
        db.delete(format!("key{i:08}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn files_with_nothing_under_them_move_instead_of_being_rewritten() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    // A lone L0 table with nothing below it moves to the base level, the last one while the
    // tree is small: no byte rewritten.
    l0_table(&db, 0..1000, 0..0);
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert_eq!((m.trivial_moves, m.compaction.count), (1, 0));
    assert_eq!(shape(&db), [0, 0, 0, 0, 0, 0, 1]);

    // A second, disjoint table moves beside it; a third overlapping the first is merged
    // with it, and only with it.
    l0_table(&db, 5000..6000, 0..0);
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert_eq!((m.trivial_moves, m.compaction.count), (2, 0));
    assert_eq!(shape(&db), [0, 0, 0, 0, 0, 0, 2]);
    let before = table_files(dir.path());
    l0_table(&db, 500..1500, 0..0);
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert_eq!((m.trivial_moves, m.compaction.count), (2, 1));
    let after = table_files(dir.path());
    assert_eq!(
        after.get(&b"key00005000"[..]),
        before.get(&b"key00005000"[..]),
        "the table of 5000..6000 is the same file: {before:?} -> {after:?}"
    );
    assert_ne!(
        after.get(&b"key00000000"[..]),
        before.get(&b"key00000000"[..])
    );
    assert_eq!(db.iter().map(Result::unwrap).count(), 2500);
    db.check().unwrap();
}

#[test]
fn tombstones_bound_for_the_bottom_are_dropped_not_moved() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    l0_table(&db, 0..1000, 0..0);
    db.compact_range(None, None).unwrap();
    // Deletions of keys that are only in the last level: compacted, they meet the values they
    // delete and both go.
    l0_table(&db, 0..0, 0..500);
    // Deletions of keys no table holds, in a range with nothing under it: a move would keep
    // them at the bottom forever, so they are rewritten, and dropped.
    l0_table(&db, 0..0, 20_000..20_500);
    let before = db.metrics().trivial_moves;
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.metrics().trivial_moves,
        before,
        "no tombstone moved to the bottom"
    );
    assert_eq!(db.iter().map(Result::unwrap).count(), 500);
    let (entries, deletions) = table_entries(dir.path());
    assert_eq!((entries, deletions), (500, 0), "every tombstone dropped");
}

/// The table files of `dir` by their smallest user key.
fn table_files(dir: &Path) -> BTreeMap<Vec<u8>, std::ffi::OsString> {
    let mut files = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            let t = sluice_sst::table::Table::open(&path, 0, Default::default()).unwrap();
            let smallest = sluice_sst::key::user_key(&t.properties().smallest_key).to_vec();
            files.insert(smallest, path.file_name().unwrap().to_owned());
        }
    }
    files
}

/// Entries and tombstones in every table of `dir`.
fn table_entries(dir: &Path) -> (u64, u64) {
    let mut sums = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "sst") {
            let t = sluice_sst::table::Table::open(&path, 0, Default::default()).unwrap();
            sums.0 += t.properties().num_entries;
            sums.1 += t.properties().num_deletions;
        }
    }
    sums
}
