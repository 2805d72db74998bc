//! One set of background threads per database, whatever its keyspaces: counted from
//! `/proc/self/task`, so this file holds this one test (the test harness runs the tests of a
//! file as threads of one process).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use common::{key, small};
use sluice::{Db, KeyspaceOptions, WriteBatch, WriteOptions};

/// The names of this process's threads that start with `sluice-`.
fn sluice_thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let comm = task.as_ref().unwrap().path().join("comm");
            let name = std::fs::read_to_string(comm).ok()?;
            name.starts_with("sluice-").then(|| name.trim().to_string())
        })
        .collect()
}

/// How many there are.
fn sluice_threads() -> usize {
    sluice_thread_names().len()
}

/// [`sluice_threads`] once it equals `want`, or after five seconds: a thread names itself
/// when it starts running, a moment after it was spawned, and is gone a moment after it ends.
fn sluice_threads_settled(want: usize) -> usize {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let n = sluice_threads();
        if n == want || std::time::Instant::now() > deadline {
            return n;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_database_with_twenty_keyspaces_runs_as_many_background_threads_as_one_without() {
    let dir = tempfile::tempdir().unwrap();
    let before = sluice_threads();
    let db = Db::open(dir.path(), small()).unwrap();
    // A flush thread, the compaction threads, and the `LOG`'s stats line.
    let stats = usize::from(!small().info_log.stats_dump_period.is_zero());
    let alone = 1 + small().compaction.max_concurrent_compactions + stats;
    assert_eq!(
        sluice_threads_settled(before + alone) - before,
        alone,
        "one flush thread, the compaction threads, the stats thread: {:?}",
        sluice_thread_names()
    );
    let keyspaces: Vec<_> = (0..20)
        .map(|i| {
            let ks = KeyspaceOptions::of_default(&small());
            db.create_keyspace(&format!("ks{i}"), &ks).unwrap()
        })
        .collect();
    assert_eq!(
        sluice_threads_settled(before + alone) - before,
        alone,
        "keyspaces start no threads: {:?}",
        sluice_thread_names()
    );
    // And those threads do every keyspace's work: enough writes to flush and compact each.
    for round in 0..6u32 {
        for i in 0..2000u32 {
            let mut batch = WriteBatch::new();
            for ks in &keyspaces {
                batch.put_in(ks, key(i), format!("{round}-{i}").as_bytes());
            }
            db.write(&WriteOptions::default(), batch).unwrap();
        }
    }
    db.wait_for_background_work().unwrap();
    for ks in &keyspaces {
        let m = ks.metrics().unwrap();
        assert!(m.flush.count > 0, "{}: never flushed", ks.name());
        assert!(m.compaction.count > 0, "{}: never compacted", ks.name());
        assert_eq!(ks.get(key(1999)).unwrap(), Some(b"5-1999".to_vec()));
    }
    assert_eq!(sluice_threads_settled(before + alone) - before, alone);
    db.close().unwrap();
    assert_eq!(
        sluice_threads_settled(before),
        before,
        "close joins them all"
    );
}
