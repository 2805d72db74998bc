//! A write-ahead log from arbitrary bytes, read in every recovery mode, with and without a
//! synced length from the MANIFEST and a newer log after it; every record read is decoded as a
//! write batch. Every failure must be an error, never a panic, and the reader must end.
//!
//! The first byte picks what the reader is told (a synced length, a whole-file sync); the
//! rest is the file. A seed corpus of real logs helps: `sluice bench --sync` writes them.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice::WriteBatch;
use sluice::internals::wal::{LogReader, WalRecoveryMode};

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("000007.log");
        (dir, path)
    });
    path
}

fuzz_target!(|data: &[u8]| {
    let Some((&knobs, log)) = data.split_first() else {
        return;
    };
    let path = scratch();
    std::fs::write(path, log).expect("write scratch file");
    for mode in WalRecoveryMode::ALL {
        let file = sluice::fs::os_fs()
            .open_read(path, sluice::fs::IoMode::Buffered)
            .expect("open scratch file");
        let synced = u64::from(knobs & 0x3f) * 512;
        let mut reader = LogReader::wal(file, path.clone(), mode, 7).synced_through(synced);
        if knobs & 0x40 != 0 {
            reader = reader.whole_file_synced();
        }
        let mut records = 0usize;
        while let Ok(Some(record)) = reader.read_record() {
            records += 1;
            assert!(records <= log.len() / 7 + 1, "more records than the file can hold");
            let offset = reader.last_record_offset();
            if let Ok(batch) = WriteBatch::from_wal_record(record, path, offset) {
                for entry in batch.iter() {
                    if entry.is_err() {
                        break;
                    }
                }
            }
        }
        assert!(reader.valid_len() <= log.len() as u64);
        assert!(reader.dropped_bytes() <= log.len() as u64 + synced);
    }
});
