use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::InternalIterator;
use crate::iter::test_util::collect_forward;
use crate::key::{ValueKind, make_internal_key};

fn path() -> Arc<Path> {
    Arc::from(Path::new("test.sst"))
}

fn ikey(user: &[u8], seq: u64) -> Vec<u8> {
    make_internal_key(user, seq, ValueKind::Value)
}

/// Entries with shared prefixes, several versions per user key, empty and large values.
fn sample_entries(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 0..n {
        let user = format!("user{:06}", i / 3).into_bytes();
        let seq = 1000 - (i % 3) as u64;
        let value = match i % 5 {
            0 => Vec::new(),
            1 => vec![b'v'; 300],
            _ => format!("value-{i}").into_bytes(),
        };
        out.push((ikey(&user, seq), value));
    }
    out
}

fn build(entries: &[(Vec<u8>, Vec<u8>)], restart_interval: usize) -> Arc<Block> {
    let mut b = BlockBuilder::new(restart_interval);
    for (k, v) in entries {
        b.add(k, v);
    }
    Arc::new(Block::new(b.finish(0), path(), 4096).unwrap())
}

/// Backward scan, returned in ascending order for comparison with a forward one.
fn collect_backward(it: &mut BlockIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = crate::iter::test_util::collect_backward(it);
    out.reverse();
    out
}

#[test]
fn iterates_forward_and_backward_for_every_restart_interval() {
    let entries = sample_entries(200);
    for interval in [1, 2, 16, 1000] {
        let block = build(&entries, interval);
        let mut it = block.iter();
        assert_eq!(collect_forward(&mut it), entries, "interval {interval}");
        assert_eq!(collect_backward(&mut it), entries, "interval {interval}");
    }
}

#[test]
fn seek_lands_on_first_key_at_or_after_target() {
    let entries = sample_entries(120);
    let block = build(&entries, 16);
    let mut it = block.iter();
    for (i, (k, _)) in entries.iter().enumerate() {
        it.seek(k).unwrap();
        assert_eq!(it.key(), &k[..]);
        // A seek key at a newer snapshot lands on the newest version of this user key.
        let user = crate::key::user_key(k);
        it.seek(&ikey(user, u64::from(u32::MAX))).unwrap();
        let first = entries
            .iter()
            .position(|(e, _)| crate::key::user_key(e) == user)
            .unwrap();
        assert_eq!(it.key(), &entries[first].0[..], "entry {i}");
    }
    // Before everything, after everything, and seeks that reuse the current position.
    it.seek(&ikey(b"a", 0)).unwrap();
    assert_eq!(it.key(), &entries[0].0[..]);
    it.seek(&ikey(b"zzz", 0)).unwrap();
    assert!(!it.valid());
    it.seek(&entries[100].0).unwrap();
    it.seek(&entries[40].0).unwrap();
    assert_eq!(it.key(), &entries[40].0[..]);
    it.seek(&entries[90].0).unwrap();
    assert_eq!(it.key(), &entries[90].0[..]);
}

#[test]
fn prev_and_next_interleave() {
    let entries = sample_entries(50);
    let block = build(&entries, 4);
    let mut it = block.iter();
    it.seek(&entries[20].0).unwrap();
    it.prev().unwrap();
    assert_eq!(it.key(), &entries[19].0[..]);
    it.next().unwrap();
    it.next().unwrap();
    assert_eq!(it.key(), &entries[21].0[..]);
    it.seek_to_first().unwrap();
    it.prev().unwrap();
    assert!(!it.valid());
}

#[test]
fn empty_block_is_valid_and_yields_nothing() {
    let block = build(&[], 16);
    assert!(block.is_empty());
    let mut it = block.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_to_last().unwrap();
    assert!(!it.valid());
    it.seek(&ikey(b"k", 1)).unwrap();
    assert!(!it.valid());
}

#[test]
fn bad_restart_arrays_are_corruption_naming_file_and_offset() {
    let good = build(&sample_entries(40), 4).data().to_vec();
    let n = good.len();
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![1, 0, 0],
        0u32.to_le_bytes().to_vec(),    // zero restarts
        1000u32.to_le_bytes().to_vec(), // more restarts than fit
        [&good[..n - 4], &u32::MAX.to_le_bytes()[..]].concat(),
        {
            let mut b = good.clone();
            let first = n - 4 - 4 * 10; // first restart must be 0
            b[first] = 1;
            b
        },
        {
            let mut b = good.clone();
            let last = n - 8; // last restart points past the entries
            b[last..last + 4].copy_from_slice(&(n as u32).to_le_bytes());
            b
        },
    ];
    for (i, bytes) in cases.into_iter().enumerate() {
        match Block::new(bytes, path(), 777) {
            Err(crate::Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, Path::new("test.sst"));
                assert_eq!(offset, 777);
            }
            other => panic!("case {i}: expected corruption, got {other:?}"),
        }
    }
}

#[test]
fn bad_entries_are_reported_not_panicked() {
    let entries = sample_entries(40);
    let good = build(&entries, 4).data().to_vec();
    let mut saw_error = false;
    for i in 0..good.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            let Ok(block) = Block::new(bad, path(), 1) else {
                continue;
            };
            let block = Arc::new(block);
            let mut it = block.iter();
            let mut steps = 0;
            let r = (|| -> crate::Result<()> {
                it.seek_to_first()?;
                while it.valid() && steps < 1000 {
                    it.next()?;
                    steps += 1;
                }
                it.seek_to_last()?;
                while it.valid() && steps < 2000 {
                    it.prev()?;
                    steps += 1;
                }
                it.seek(&entries[20].0)?;
                Ok(())
            })();
            if let Err(e) = r {
                assert!(e.is_corruption());
                saw_error = true;
            }
        }
    }
    assert!(saw_error, "some flips must be detected");
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), target: Vec<u8>) {
        if let Ok(block) = Block::new(bytes, path(), 0) {
            let block = Arc::new(block);
            let mut it = block.iter();
            let mut n = 0;
            if it.seek_to_first().is_ok() {
                while it.valid() && n < 600 {
                    if it.next().is_err() { break; }
                    n += 1;
                }
            }
            if it.seek_to_last().is_ok() {
                while it.valid() && n < 1200 {
                    if it.prev().is_err() { break; }
                    n += 1;
                }
            }
            let _ = it.seek(&target);
        }
    }

    #[test]
    fn round_trips_arbitrary_sorted_keys(
        keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 0..20), 0..100),
        interval in 1usize..20,
    ) {
        let entries: Vec<_> = keys.iter().enumerate().map(|(i, k)| (ikey(k, 7), vec![i as u8; i % 7])).collect();
        let block = build(&entries, interval);
        let mut it = block.iter();
        prop_assert_eq!(collect_forward(&mut it), entries.clone());
        prop_assert_eq!(collect_backward(&mut it), entries.clone());
        for (k, _) in &entries {
            it.seek(k).unwrap();
            prop_assert_eq!(it.key(), &k[..]);
        }
    }
}
