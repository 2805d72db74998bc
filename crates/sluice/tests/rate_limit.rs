//! The background write limit: every byte flushes and compactions write to tables passes
//! through the limiter, whichever executor runs, and the limit can change while they run.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{CompactionMode, CompactionOptions, Db, MemtableOptions, Options, RateLimiter};

#[test]
fn every_background_byte_passes_the_limiter() {
    for mode in CompactionMode::ALL {
        let dir = tempfile::tempdir().unwrap();
        // Generous enough not to slow the test much, low enough to make writers wait.
        let limiter = RateLimiter::new(64 << 20);
        let options = Options {
            rate_limiter: Some(limiter.clone()),
            memtable: MemtableOptions {
                write_buffer_size: 256 << 10,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                mode,
                target_file_size_base: 256 << 10,
                max_bytes_for_level_base: 1 << 20,
                l0_compaction_trigger: 2,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let db = Db::open(dir.path(), options).unwrap();
        for i in 0..30_000u32 {
            if i == 10_000 {
                // Changing the rate while background work runs.
                limiter.set_bytes_per_second(256 << 20);
            }
            // Scattered keys, so that tables overlap and compactions merge rather than move.
            let k = i.wrapping_mul(2_654_435_761) % 30_000;
            db.put(format!("key{k:08}").as_bytes(), [b'v'; 60]).unwrap();
        }
        db.compact_range(None, None).unwrap();
        let m = db.metrics();
        assert!(m.compaction.count > 0, "{mode}: no compaction ran");
        assert_eq!(
            limiter.bytes_through(),
            m.table_bytes_written(),
            "{mode}: table bytes written around the limiter"
        );
        assert_eq!(db.get(b"key00012345").unwrap(), Some(vec![b'v'; 60]));
        db.close().unwrap();
    }
}
