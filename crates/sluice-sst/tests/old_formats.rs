//! Tables written by older code stay readable.
//!
//! `data/index-restart1-uncompressed.sst` was written by the table writer as of commit
//! eb036ae, whose index block stored every key whole (restart interval 1) and uncompressed;
//! the writer now prefix-compresses and compresses it. Readers never depended on either (the
//! index is decoded by the generic block iterator and the trailer names its compression), and
//! this keeps it so. The entries are regenerated here exactly as that writer was given them.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::Path;
use std::sync::Arc;

use sluice_sst::compression::CompressionType;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

const FIXTURE: &str = "tests/data/index-restart1-uncompressed.sst";

/// The fixture's options and entries: 300 keys, every seventh (from the fourth) a tombstone.
fn fixture_options() -> TableOptions {
    TableOptions {
        block_size: 256,
        compression: CompressionType::Lz4,
        ..TableOptions::default()
    }
}

fn fixture_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..300u64)
        .map(|i| {
            let kind = if i % 7 == 3 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let key = make_internal_key(format!("key{i:05}").as_bytes(), 1000 + i, kind);
            let value = match kind {
                ValueKind::Deletion => Vec::new(),
                _ => format!("value-{i}-{}", i * i).into_bytes(),
            };
            (key, value)
        })
        .collect()
}

fn scan(table: &Arc<Table>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

/// The compression type byte of `table`'s index block (the first byte of its trailer).
fn index_block_type(path: &Path, table: &Table) -> u8 {
    let handle = table.footer().index;
    std::fs::read(path).unwrap()[(handle.offset + handle.size) as usize]
}

#[test]
fn a_table_with_a_whole_key_uncompressed_index_still_reads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let old = Table::open(&path, 1, TableReadOptions::default()).unwrap();
    assert_eq!(
        index_block_type(&path, &old),
        0,
        "the fixture's index is uncompressed"
    );
    assert_eq!(scan(&old), fixture_entries());
    old.verify_all().unwrap();

    // The same entries written now: a smaller, compressed index over the same blocks.
    let dir = tempfile::tempdir().unwrap();
    let new_path = dir.path().join("new.sst");
    let mut builder = TableBuilder::create(&new_path, &fixture_options()).unwrap();
    for (k, v) in fixture_entries() {
        builder.add(&k, &v).unwrap();
    }
    builder.finish().unwrap();
    let new = Table::open(&new_path, 2, TableReadOptions::default()).unwrap();
    assert_eq!(
        index_block_type(&new_path, &new),
        CompressionType::Lz4 as u8
    );
    assert_eq!(scan(&new), scan(&old));
    assert_eq!(new.num_data_blocks(), old.num_data_blocks());
    assert!(new.properties().index_bytes < old.properties().index_bytes);
    for i in 0..old.num_data_blocks() {
        assert_eq!(new.index_entry(i), old.index_entry(i));
    }
    for (k, _) in fixture_entries().iter().step_by(13) {
        let mut a = old.iter();
        let mut b = new.iter();
        a.seek(k).unwrap();
        b.seek(k).unwrap();
        assert_eq!((a.key(), a.value()), (b.key(), b.value()));
    }
}
