//! L0 cut into intervals, as Pebble organises it: flushes cut their tables where the base
//! level's files begin, the pieces of one flush share a sublevel, L0's depth counts sublevels
//! rather than files, and the L0 compactions of different intervals leave the data equal to
//! the model.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;

use sluice::{CompactionOptions, Db, MemtableOptions, Options, TableOptions};

fn key(x: u64) -> Vec<u8> {
    format!("key{:08}", x % 100_000).into_bytes()
}

/// Writes `n` random keys from the generator state `x` into `db` and `model`.
fn write_random(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, x: &mut u64, n: usize) {
    for i in 0..n {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let k = key(*x >> 33);
        // Hex of the generator's state: values that compression cannot shrink to nothing.
        let v = format!(
            "{i}-{:016x}{:016x}{}",
            *x,
            x.rotate_left(17),
            "v".repeat(i % 40)
        )
        .into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
}

fn assert_matches(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|e| e.unwrap()).collect();
    assert!(&got == model, "database differs from the model");
    for (k, v) in model.iter().step_by(97) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}

#[test]
fn flushes_cut_at_l1_boundaries_stack_one_sublevel_each() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 4 << 20,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 4 << 20,
            l0_flush_split_bytes: 128 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut x = 5u64;
    // One flush into an empty tree has nowhere to cut.
    write_random(&db, &mut model, &mut x, 20_000);
    db.flush().unwrap();
    let m = db.metrics();
    assert_eq!((m.levels[0].files, m.l0_sublevels), (1, 1));
    // A second, overlapping flush, so that compact_range merges (a lone L0 table would move
    // down whole) and cuts the base level (L6 while the tree is small) at the target file size.
    write_random(&db, &mut model, &mut x, 5_000);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    let base_files = m.levels[m.base_level].files;
    assert!(
        base_files >= 8,
        "L{} holds {base_files} files",
        m.base_level
    );
    // Now every flush is cut into pieces, about one per 128 KiB of the base level, which
    // share a layer.
    for flush in 1..=3 {
        write_random(&db, &mut model, &mut x, 5_000);
        db.flush().unwrap();
        let m = db.metrics();
        assert_eq!(m.l0_sublevels, flush, "{m:?}");
        assert!(
            m.levels[0].files >= 3 * flush,
            "flush {flush}: {} L0 files",
            m.levels[0].files
        );
    }
    assert_matches(&db, &model);
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_matches(&db, &model);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.metrics().levels[0].files, 0);
    assert_matches(&db, &model);
}

#[test]
fn l0_compactions_by_interval_keep_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            max_concurrent_compactions: 2,
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 1 << 20,
            max_bytes_for_level_multiplier: 4,
            l0_compaction_trigger: 2,
            l0_flush_split_bytes: 128 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut x = 9u64;
    write_random(&db, &mut model, &mut x, 120_000);
    db.wait_for_background_work().unwrap();
    let m = db.metrics();
    eprintln!(
        "{} compactions, at most {} at once, {} L0 files in {} sublevels, levels {:?}",
        m.compaction.count,
        m.compactions_running_peak,
        m.levels[0].files,
        m.l0_sublevels,
        m.levels.iter().map(|l| l.files).collect::<Vec<_>>()
    );
    assert!(m.compaction.count > 10, "too few compactions ran");
    assert!(
        m.l0_sublevels < options.compaction.l0_compaction_trigger,
        "L0 left at or over its trigger"
    );
    assert_matches(&db, &model);
    db.check().unwrap();
    db.close().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    assert_matches(&db, &model);
}
