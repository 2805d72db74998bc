//! A whole table file from arbitrary bytes: written to a temporary file, opened, iterated both
//! ways, looked up and verified. Every failure must be an error, never a panic.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_sst::InternalIterator;
use sluice_sst::key::seek_key;
use sluice_sst::table::{Table, TableReadOptions};

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("fuzz.sst");
        (dir, path)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let path = scratch();
    std::fs::write(path, data).expect("write scratch file");
    for verify_checksums in [true, false] {
        let opts = TableReadOptions {
            verify_checksums,
            ..TableReadOptions::default()
        };
        let Ok(table) = Table::open(path, 1, opts) else {
            continue;
        };
        let mut it = table.iter();
        let mut steps = 0usize;
        if it.seek_to_first().is_ok() {
            while it.valid() && steps < 100_000 && it.next().is_ok() {
                steps += 1;
            }
        }
        if it.seek_to_last().is_ok() {
            while it.valid() && steps < 200_000 && it.prev().is_ok() {
                steps += 1;
            }
        }
        let _ = it.seek(&seek_key(b"key", 100));
        let _ = table.get(&seek_key(b"key", 100));
        let _ = table.index_entries();
        let _ = table.verify_all();
    }
});
