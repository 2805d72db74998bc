//! Tables spread over several data directories (one per storage device) are found again on
//! reopen, and the database directory keeps only the WAL and MANIFEST.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::Path;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};

fn tables_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "sst")
        })
        .count()
}

#[test]
fn tables_go_to_the_data_dirs_and_are_found_after_reopen() {
    let root = tempfile::tempdir().unwrap();
    let (main, d1, d2) = (
        root.path().join("db"),
        root.path().join("d1"),
        root.path().join("d2"),
    );
    let options = || Options {
        data_dirs: vec![d1.clone(), d2.clone()],
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    };
    let db = Db::open(&main, options()).unwrap();
    for i in 0..20_000u32 {
        // Values that do not compress, so the data spans several 64 KiB tables.
        let value: Vec<u8> = (0..50u32)
            .map(|j| ((i * 50 + j).wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        db.put(format!("key{i:08}").as_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    assert!(
        tables_in(&d1) > 0 && tables_in(&d2) > 0,
        "L0 tables spread over both devices"
    );
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
    assert_eq!(tables_in(&main), 0, "no table in the database directory");
    assert!(
        tables_in(&d1) > 0 && tables_in(&d2) > 0,
        "tables spread over both devices"
    );

    let db = Db::open(&main, options()).unwrap();
    db.check().unwrap();
    for i in (0..20_000u32).step_by(997) {
        assert!(db.get(format!("key{i:08}").as_bytes()).unwrap().is_some());
    }
    assert_eq!(db.iter().map(Result::unwrap).count(), 20_000);
}
