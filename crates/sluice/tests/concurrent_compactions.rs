//! Several automatic compactions at once: under a write-heavy load that keeps L0 and the base
//! level over their triggers, compactions of disjoint files and ranges run side by side, every
//! edit keeps the tree's invariants (paranoid checks on), and the data equals the model, with
//! levels sized dynamically (L0 compacting into a base level that moves up) and statically.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;

use sluice::{CompactionMode, CompactionOptions, Db, MemtableOptions, Options, TableOptions};

fn options(mode: CompactionMode, dynamic: bool) -> Options {
    Options {
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            level_compaction_dynamic_level_bytes: dynamic,
            max_concurrent_compactions: 4,
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            max_bytes_for_level_multiplier: 4,
            l0_compaction_trigger: 2,
            // Flushes cut at the base level's boundaries: L0 compactions by interval.
            l0_flush_split_bytes: 64 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

#[test]
fn compactions_run_side_by_side_and_keep_the_tree_valid() {
    let runs = [
        (CompactionMode::Sequential, true),
        (CompactionMode::Parallel, false),
    ];
    for (mode, dynamic) in runs {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), options(mode, dynamic)).unwrap();
        let mut model = BTreeMap::new();
        let mut x = 11u64;
        for i in 0..150_000u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = format!("key{:08}", (x >> 33) % 40_000).into_bytes();
            if i % 13 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{i}-{}", "v".repeat((i % 50) as usize)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.wait_for_background_work().unwrap();
        let m = db.metrics();
        eprintln!(
            "{mode}, dynamic {dynamic}: {} compactions ({} intra-L0), at most {} at once, \
             levels {:?}",
            m.compaction.count,
            m.intra_l0_compactions,
            m.compactions_running_peak,
            m.levels.iter().map(|l| l.files).collect::<Vec<_>>()
        );
        assert!(m.compaction.count > 10, "{mode}: too few compactions ran");
        assert_eq!(m.compactions_running, 0);
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|e| e.unwrap()).collect();
        assert!(got == model, "{mode}: database differs from the model");
        db.check().unwrap();
        db.close().unwrap();
        let db = Db::open(dir.path(), options(mode, dynamic)).unwrap();
        let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|e| e.unwrap()).collect();
        assert!(
            got == model,
            "{mode}: differs from the model after reopening"
        );
    }
}
