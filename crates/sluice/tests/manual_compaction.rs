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
    db.scan(None, None).unwrap().map(|e| e.unwrap()).collect()
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
    // The compute threads run as `compute`, or `read+compute` when each reads its own inputs.
    let stages = &parallel.metrics().compaction.pipeline;
    let compute = stages
        .iter()
        .find(|s| s.stage.ends_with("compute"))
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
