//! The figures `Db::metrics` reports beyond sizes and bytes: per-level compaction counts,
//! times and dropped entries, read and space amplification, compaction debt, the table
//! cache and the bloom filters, and an interval between two reports.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{CompactionOptions, Db, MemtableOptions, Options};

fn options() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            max_bytes_for_level_base: 256 << 10,
            target_file_size_base: 64 << 10,
            l0_compaction_trigger: 2,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Writes keys `0..n` (even numbers only) with value bytes `round`, then flushes.
fn fill(db: &Db, n: u32, round: u8) {
    for i in (0..n).step_by(2) {
        db.put(format!("key{i:06}").as_bytes(), [round; 100])
            .unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn compactions_debt_and_reads_show_in_the_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    // One version of each key at the bottom, then three more in L0.
    fill(&db, 6000, 0);
    db.compact_range(None, None).unwrap();
    for round in 1..4 {
        fill(&db, 6000, round);
    }
    let before = db.metrics();
    let l0 = &before.levels[0];
    // Three rounds over the same keys: three sublevels to read, and L0 is due for compaction.
    assert_eq!(l0.read_amp, 3);
    assert_eq!(before.read_amp(), 4);
    assert!(before.compaction_debt_bytes >= l0.size_bytes);
    // The flushes wrote into L0: their entries came in and none was dropped.
    assert_eq!(l0.compactions, before.flush.count);
    assert_eq!(l0.entries_in, 4 * 3000);
    assert_eq!(l0.entries_dropped, 0);
    assert!(l0.compaction_seconds > 0.0);
    // Every version of a key is still on disk.
    assert!(before.space_amp() > 3.5, "{}", before.space_amp());

    db.compact_range(None, None).unwrap();
    let after = db.metrics();
    let written: Vec<_> = after.levels.iter().filter(|l| l.compactions > 0).collect();
    let deepest = written.last().unwrap();
    assert!(deepest.level > 0);
    assert!(deepest.compaction_seconds > 0.0);
    // Three of the four versions of each key were dropped on the way down.
    let dropped: u64 = after.levels.iter().map(|l| l.entries_dropped).sum();
    assert_eq!(dropped, 3 * 3000);
    assert_eq!(after.compaction_debt_bytes, 0);
    assert_eq!(after.levels[0].read_amp, 0);
    assert_eq!(after.read_amp(), 1);
    assert!(after.space_amp() < 1.01, "{}", after.space_amp());

    // Odd keys were never written: the filters answer for them without a block read.
    let reads = after.clone();
    for i in (1..6000).step_by(2) {
        assert!(db.get(format!("key{i:06}").as_bytes()).unwrap().is_none());
    }
    for i in (0..6000).step_by(20) {
        assert!(db.get(format!("key{i:06}").as_bytes()).unwrap().is_some());
    }
    let m = db.metrics().since(&reads);
    assert!(m.bloom.useful > 2_900, "{:?}", m.bloom);
    // (key005999 lies past every table: no filter is asked.)
    assert_eq!(m.bloom.useful + m.bloom.passed, 3_299, "{:?}", m.bloom);
    assert!(m.bloom.false_positive_rate() < 0.05, "{:?}", m.bloom);
    assert!(m.bloom.utility() > 0.5);
    let t = m.table_cache;
    assert_eq!(t.hits + t.misses, 3_299, "{t:?}");
    assert!(t.hit_ratio() > 0.99, "{t:?}");
    assert!(m.table_cache.open_tables > 0);
    // The interval holds the reads, not the compaction before them.
    assert_eq!(m.compaction.count, 0);
    assert_eq!(m.user_bytes_written, 0);
    assert_eq!(m.levels[deepest.level].files, deepest.files);
}
