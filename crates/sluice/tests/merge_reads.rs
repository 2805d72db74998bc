//! Reads of merge operands while flushes install their tables: a read must never see the
//! operands of a memtable both in the memtable and in the table it became (they would count
//! twice).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use sluice::merge_operator::U64Add;
use sluice::{Db, MemtableOptions, Options};

#[test]
fn a_counter_never_reads_more_than_was_added_across_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        dir.path(),
        Options {
            merge_operator: Some(Arc::new(U64Add)),
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..Default::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    let added = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut reads = 0u64;
                    while !done.load(Ordering::Acquire) {
                        let seen = db
                            .get("counter")
                            .unwrap()
                            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
                        // Loaded after the get: every operand the get saw is counted.
                        let most = added.load(Ordering::Acquire);
                        assert!(seen <= most, "read {seen} with only {most} added");
                        reads += 1;
                    }
                    reads
                })
            })
            .collect();
        for i in 0..20_000u64 {
            // Counted before it is written: `added` bounds what any read can see.
            added.fetch_add(1, Ordering::Release);
            db.merge("counter", 1u64.to_le_bytes()).unwrap();
            // Filler that fills memtables quickly, so flushes come often.
            db.put(format!("pad{}", i % 500), [0u8; 200]).unwrap();
            if i % 2000 == 0 {
                db.flush().unwrap();
            }
        }
        done.store(true, Ordering::Release);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    assert!(reads > 0);
    assert_eq!(
        db.get("counter").unwrap(),
        Some(20_000u64.to_le_bytes().to_vec())
    );
}
