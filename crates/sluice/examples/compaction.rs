//! Compaction: choosing the executor (`options.compaction.mode`), compacting a key range by
//! hand, in parallel pieces with progress reports, and reading what it did from `metrics()`.
//!
//! Run it with `cargo run --release -p sluicedb --example compaction`. It works in a fresh
//! temporary directory, deleted at the end.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use sluice::{CompactOptions, CompactionMode, Db, Options, WriteBatch, WriteOptions};

const KEYS: u32 = 10_000;

fn options(mode: CompactionMode) -> Options {
    let mut options = Options::default();
    options.memtable.write_buffer_size = 256 << 10; // small, so 1.2 MB of writes make several tables
    options.compaction.mode = mode;
    // Leave every flush in L0 (an "inverted" tree), so the manual compaction below has all
    // the work; without this, background compactions would do it as the data arrives.
    options.compaction.disable_auto_compactions = true;
    options.compaction.l0_slowdown_writes_trigger = 1000;
    options.compaction.l0_stop_writes_trigger = 1000;
    options
}

/// Writes every key once, in a scattered order so that the L0 tables overlap, in batches of
/// 500 (one WAL record and one commit per batch, far cheaper than 500 `put`s).
fn load(db: &Db, round: u64) -> sluice::Result<()> {
    let mut batch = WriteBatch::new();
    let mut state = round;
    for i in 0..KEYS {
        let k = i.wrapping_mul(7919) % KEYS;
        // 96 bytes of pseudo-random hex: values that compress about as real data does.
        let value: String = (0..6)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("{state:016x}")
            })
            .collect();
        batch.put(format!("key{k:08}").as_bytes(), value.as_bytes());
        if batch.count() == 500 {
            db.write(&WriteOptions::default(), std::mem::take(&mut batch))?;
        }
    }
    db.write(&WriteOptions::default(), batch)?;
    db.flush()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;

    // Every executor writes byte-identical tables; they differ in how many threads they use
    // and how they overlap reading, merging and writing. `Auto` picks per compaction from the
    // step times it has measured.
    for mode in [
        CompactionMode::Sequential, // SCP: one thread
        CompactionMode::Pipelined,  // PCP: read, compute and write stages on three threads
        CompactionMode::Parallel,   // C-PPCP: `compaction_threads` compute threads
        CompactionMode::Streaming,  // per-input decoders, a comparator, an encoder, a writer
        CompactionMode::Auto,
    ] {
        let db = Db::open(dir.path().join(mode.name()), options(mode))?;
        load(&db, 1)?;
        let l0_files = db.metrics().levels[0].files;
        db.compact_range(None, None)?; // everything, all the way down
        let m = db.metrics();
        println!(
            "{:>10}: {l0_files} L0 tables -> {:?} ({} compactions, {:.1} MB in, {:.1} MB out, {:.0} MB/s, executors {:?})",
            mode.name(),
            m.levels
                .iter()
                .filter(|l| l.files > 0)
                .map(|l| (l.level, l.files))
                .collect::<Vec<_>>(),
            m.compaction.count,
            m.compaction.input_bytes as f64 / 1e6,
            m.compaction.output_bytes as f64 / 1e6,
            m.compaction.bandwidth_mb_s(),
            m.compaction.modes,
        );
        db.close()?;
    }

    // A manual compaction of a key range (whole tables move: every table overlapping the
    // range is compacted), cut into pieces run on 2 compute threads whatever the configured
    // executor, with progress reports (about every 100 ms and at each level's end). Setting
    // `cancel` to true would stop it with `ErrorKind::Cancelled`, leaving the tree consistent.
    let db = Db::open(
        dir.path().join("manual"),
        options(CompactionMode::Sequential),
    )?;
    load(&db, 1)?;
    load(&db, 2)?;
    let opts = CompactOptions {
        parallel: true,
        threads: 2,
        progress: Some(Arc::new(|p: &sluice::CompactProgress| {
            println!(
                "  L{} -> L{}: level {}/{}, {} of {} bytes, {} pieces running",
                p.level,
                p.output_level,
                p.levels_done,
                p.levels,
                p.bytes_done,
                p.bytes_total,
                p.pieces_running
            );
        })),
        cancel: Some(Arc::new(AtomicBool::new(false))),
    };
    db.compact_range_with(Some(b"key00002500"), Some(b"key00007499"), &opts)?;

    let m = db.metrics();
    println!("level  files  size_bytes  compactions  write_amp");
    for l in m.levels.iter().filter(|l| l.files > 0) {
        println!(
            "L{:<5} {:>5} {:>11} {:>12} {:>10.2}",
            l.level, l.files, l.size_bytes, l.compactions, l.write_amp
        );
    }
    println!(
        "user bytes {}, table bytes written {}, write amplification {:.2}, {} L0 sublevels",
        m.user_bytes_written,
        m.table_bytes_written(),
        m.write_amp(),
        m.l0_sublevels
    );
    db.close()?;
    Ok(())
}
