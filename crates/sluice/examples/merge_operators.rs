//! Merge operators: counters and lists updated without reading them first. `Db::merge` writes
//! an operand; reads and compactions combine the operands with the key's value using
//! `Options::merge_operator`. This shows the built-in `u64_add` and a custom operator that
//! keeps the largest value seen.
//!
//! Run it with `cargo run -p sluicedb --example merge_operators`. It works in a fresh temporary
//! directory, deleted at the end.

use std::sync::Arc;

use sluice::merge_operator::{MergeFailure, MergeOperator, U64Add};
use sluice::{Db, Options, WriteBatch, WriteOptions};

/// Keeps the largest byte string it has seen: associative, so it also combines operands
/// without the value under them (`partial_merge`), which lets compactions shrink a run of
/// operands even before they reach the key's value.
#[derive(Debug)]
struct Max;

impl MergeOperator for Max {
    fn name(&self) -> &str {
        "max"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        Ok(existing
            .into_iter()
            .chain(operands.iter().copied())
            .max()
            .unwrap_or_default()
            .to_vec())
    }
    fn partial_merge(&self, _key: &[u8], older: &[u8], newer: &[u8]) -> Option<Vec<u8>> {
        Some(older.max(newer).to_vec())
    }
}

fn count(value: Option<Vec<u8>>) -> Result<u64, Box<dyn std::error::Error>> {
    let bytes = value.ok_or("no counter")?;
    Ok(u64::from_le_bytes(bytes.as_slice().try_into()?))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // Counters: each operand is a little-endian u64 to add.
    let counters = Db::open(
        dir.path().join("counters"),
        Options {
            merge_operator: Some(Arc::new(U64Add)),
            ..Options::default()
        },
    )?;
    for page in ["home", "about", "home", "home"] {
        counters.merge(page.as_bytes(), 1u64.to_le_bytes())?;
    }
    // A put sets the base; later operands add to it. A batch may mix both.
    let mut batch = WriteBatch::new();
    batch.put(b"about", 100u64.to_le_bytes());
    batch.merge(b"about", 5u64.to_le_bytes());
    counters.write(&WriteOptions::default(), batch)?;
    println!(
        "home: {}, about: {}",
        count(counters.get(b"home")?)?,
        count(counters.get(b"about")?)?
    );
    assert_eq!(count(counters.get(b"home")?)?, 3);
    assert_eq!(count(counters.get(b"about")?)?, 105);

    // Operands survive flushes, compactions and reopening; compactions that rewrite them
    // fold them into plain values.
    counters.compact_range(None, None)?;
    assert_eq!(count(counters.get(b"home")?)?, 3);
    counters.close()?;

    // A custom operator. Compaction workers only run built-in operators, so compactions
    // under this one stay on this host.
    let high_scores = Db::open(
        dir.path().join("high-scores"),
        Options {
            merge_operator: Some(Arc::new(Max)),
            ..Options::default()
        },
    )?;
    for score in ["0310", "0950", "0420"] {
        high_scores.merge(b"alice", score.as_bytes())?;
    }
    let best = high_scores.get(b"alice")?;
    println!(
        "alice's best: {}",
        String::from_utf8_lossy(best.as_deref().unwrap_or_default())
    );
    assert_eq!(best.as_deref(), Some(&b"0950"[..]));

    // Iterators resolve operands too, in both directions.
    high_scores.merge(b"bob", b"0100")?;
    let newest_first: Vec<_> = high_scores.range(..).rev().collect::<Result<_, _>>()?;
    assert_eq!(newest_first[0], (b"bob".to_vec(), b"0100".to_vec()));
    high_scores.close()?;

    // Without an operator, `merge` is refused: nothing could read the operand back.
    let plain = Db::open(dir.path().join("plain"), Options::default())?;
    assert!(plain.merge(b"k", b"v").is_err());
    plain.close()?;
    Ok(())
}
