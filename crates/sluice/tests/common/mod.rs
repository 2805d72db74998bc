//! What the engine's integration tests share: key names, small trees, whole-database reads.

#![allow(dead_code, reason = "each test file uses some of these")]

use std::collections::BTreeMap;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};

/// Key number `i`, zero-padded so that keys sort as numbers.
pub fn key(i: u32) -> Vec<u8> {
    format!("{i:08}").into_bytes()
}

/// Options with the smallest memtables and tables, so that a few thousand keys make several
/// levels and compactions.
pub fn small() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Every key and value of the latest state.
pub fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().map(Result::unwrap).collect()
}
