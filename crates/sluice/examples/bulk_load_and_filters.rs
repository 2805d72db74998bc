//! Bulk loading and compaction filters: build a table outside the database with
//! `SstFileWriter`, place it into the tree with `Db::ingest` (no write path, no WAL), then let
//! a `CompactionFilter` expire and rewrite values as compaction passes over them.
//!
//! Run it with `cargo run -p sluicedb --example bulk_load_and_filters`. It works in a fresh
//! temporary directory, deleted at the end.

use std::sync::Arc;

use sluice::{
    CompactionFilter, Db, FilterDecision, IngestOptions, Options, SstFileWriter, TableOptions,
};

/// Drops sessions marked `expired`, and upgrades `v1:` values to `v2:`.
#[derive(Debug)]
struct SessionJanitor;

impl CompactionFilter for SessionJanitor {
    fn name(&self) -> &str {
        "session-janitor"
    }

    fn filter(&self, _key: &[u8], value: &[u8]) -> FilterDecision {
        if value == b"expired" {
            FilterDecision::Remove
        } else if let Some(rest) = value.strip_prefix(b"v1:") {
            FilterDecision::Change([&b"v2:"[..], rest].concat())
        } else {
            FilterDecision::Keep
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // 1. A table of 10,000 sessions, written in key order outside any database.
    let file = dir.path().join("sessions.sst");
    let mut writer = SstFileWriter::create(&file, &TableOptions::default())?;
    for i in 0..10_000u32 {
        let value: &[u8] = match i % 10 {
            0 => b"expired",
            1 => b"v1:admin",
            _ => b"v2:user",
        };
        writer.put(format!("session/{i:06}").as_bytes(), value)?;
    }
    let written = writer.finish()?;
    println!(
        "wrote {} entries, {} bytes",
        written.entries, written.file_size
    );

    // 2. Ingest it. Nothing in the database overlaps it, so it moves as it is to the last
    //    level; a file that overlapped existing keys would be rewritten once, newer than them.
    let options = Options {
        compaction_filter: Some(Arc::new(SessionJanitor)),
        ..Options::default()
    };
    let db = Db::open(dir.path().join("db"), options)?;
    let report = db.ingest(&[&file], &IngestOptions::default())?;
    for f in &report.files {
        println!("ingested {} entries into L{}", f.entries, f.level);
    }
    assert_eq!(db.get(b"session/000000")?.as_deref(), Some(&b"expired"[..]));

    // 3. A compaction shows every live value to the filter. `compact_range` rewrites every
    //    file in the range when a filter is set, the last level included.
    db.compact_range(None, None)?;
    assert_eq!(db.get(b"session/000000")?, None);
    assert_eq!(
        db.get(b"session/000001")?.as_deref(),
        Some(&b"v2:admin"[..])
    );
    let m = db.metrics();
    println!(
        "the filter removed {} values and changed {}",
        m.compaction.filter_removed, m.compaction.filter_changed
    );
    assert_eq!(m.compaction.filter_removed, 1000);
    assert_eq!(db.iter().collect::<sluice::Result<Vec<_>>>()?.len(), 9000);
    db.close()?;
    Ok(())
}
