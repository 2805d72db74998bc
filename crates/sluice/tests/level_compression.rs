//! Per-level and bottommost compression: tables are written with their level's compression,
//! and the bottommost compaction's with its own, whoever runs the compaction.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{CompactionOptions, CompressionType, Db, Options};

/// Bytes per level after loading 2,000 highly compressible values and flushing, and, with
/// `compact`, writing them again (a second, overlapping L0 table, so that the compaction
/// merges rather than moves a table down) and compacting everything to the bottom.
fn level_sizes(options: Options, compact: bool) -> Vec<u64> {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options).unwrap();
    for round in 0..1 + u8::from(compact) {
        for i in 0..2000u32 {
            let value = [b'a' + round + (i % 3) as u8; 1000];
            db.put(format!("key{i:05}"), value).unwrap();
        }
        db.flush().unwrap();
    }
    if compact {
        db.compact_range(None, None).unwrap();
    }
    db.metrics().levels.iter().map(|l| l.size_bytes).collect()
}

fn options(per_level: Vec<CompressionType>, bottommost: Option<CompressionType>) -> Options {
    Options {
        compaction: CompactionOptions {
            compression_per_level: per_level,
            bottommost_compression: bottommost,
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

#[test]
fn each_level_is_written_with_its_compression() {
    use CompressionType::{Lz4, None as Plain};
    // 2,000 values of 1,000 bytes: about 2 MB stored plainly, a few percent of that with lz4.
    let plain_l0 = level_sizes(options(vec![Plain, Lz4], None), false)[0];
    let lz4_l0 = level_sizes(options(vec![], None), false)[0];
    assert!(plain_l0 > 1_900_000, "L0 without compression: {plain_l0}");
    assert!(lz4_l0 * 10 < plain_l0, "L0 with the table's lz4: {lz4_l0}");

    // Plain everywhere but at the bottom, which is lz4.
    let sizes = level_sizes(options(vec![Plain], Some(Lz4)), true);
    let (top, bottom) = (sizes[0], sizes.iter().sum::<u64>());
    assert_eq!(top, 0, "everything was compacted down: {sizes:?}");
    assert!(
        bottom * 10 < plain_l0,
        "the bottommost compaction compressed: {sizes:?}"
    );
    // And plain at the bottom when only the levels say so.
    let sizes = level_sizes(options(vec![Plain], None), true);
    assert!(sizes.iter().sum::<u64>() > 1_900_000, "{sizes:?}");
}
