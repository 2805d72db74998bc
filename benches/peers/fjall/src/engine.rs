//! Opening fjall with settings that mirror Sluice's, and what the reports read back from it.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use fjall::compaction::Leveled;
use fjall::config::{
    BlockSizePolicy, BloomConstructionPolicy, CompressionPolicy, FilterPolicy, FilterPolicyEntry,
    RestartIntervalPolicy,
};
use fjall::{AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions};
use serde::Serialize;

use crate::Config;

/// fjall halts writers while L0 holds this many runs (hard-coded in fjall 3).
pub const FJALL_L0_HALT_RUNS: usize = 30;

/// Sentinel keys below and above every benchmark key (keys are ASCII digits), planted in the
/// last level with --disable-auto-compactions.
pub const SENTINEL_LOW: &str = "/";
pub const SENTINEL_HIGH: &str = ":";

/// The target table size fjall's `major_compact` cuts its outputs at (hard-coded).
pub const MAJOR_COMPACTION_TARGET: u64 = 64_000_000;

/// The files and bytes of one level.
#[derive(Clone, Debug, Serialize)]
pub struct LevelShape {
    pub level: usize,
    pub files: u64,
    pub bytes: u64,
}

/// An open fjall database with one keyspace, and the notes for `settings_differ`.
pub struct Engine {
    pub cfg: Config,
    pub db: Database,
    pub ks: Keyspace,
    /// The compression actually used.
    pub compression: String,
    pub settings_differ: Vec<String>,
}

impl Engine {
    /// Creates the database in `dir` with one keyspace, `bench`.
    pub fn open(c: &Config, dir: &Path) -> Result<Self, String> {
        let mut notes = Vec::new();
        let (compression, ct) = match c.compression.as_str() {
            "none" => ("none", CompressionType::None),
            "lz4" => ("lz4", CompressionType::Lz4),
            other => {
                notes.push(format!(
                    "compression: fjall has only lz4 (and none); using lz4 instead of {other}"
                ));
                ("lz4", CompressionType::Lz4)
            }
        };
        let filters = if c.bloom_bits > 0 {
            FilterPolicy::all(FilterPolicyEntry::Bloom(
                BloomConstructionPolicy::BitsPerKey(c.bloom_bits as f32),
            ))
        } else {
            FilterPolicy::disabled()
        };
        // fjall accepts only its Leveled and Fifo strategies (it panics on others), and Fifo
        // drops data: with auto compactions "off", Leveled merely never reaches its L0 trigger.
        let l0_trigger = if c.disable_auto_compactions {
            u8::MAX
        } else {
            4
        };
        let strategy = Arc::new(
            Leveled::default()
                .with_l0_threshold(l0_trigger)
                .with_table_target_size(c.target_file_size),
        );
        let options = KeyspaceCreateOptions::default()
            .max_memtable_size(c.write_buffer_size)
            .data_block_size_policy(BlockSizePolicy::all(c.block_size))
            .data_block_restart_interval_policy(RestartIntervalPolicy::all(16))
            .data_block_compression_policy(CompressionPolicy::all(ct))
            .filter_policy(filters)
            .compaction_strategy(strategy);
        let db = Database::builder(dir)
            .cache_size(c.cache_size)
            .worker_threads(c.compaction_threads)
            .open()
            .map_err(|e| e.to_string())?;
        let ks = db
            .keyspace("bench", move || options)
            .map_err(|e| e.to_string())?;
        let mut engine = Engine {
            cfg: c.clone(),
            db,
            ks,
            compression: compression.to_string(),
            settings_differ: notes,
        };
        engine.describe_differences();
        if c.disable_auto_compactions {
            engine.plant_sentinels()?;
        }
        Ok(engine)
    }

    fn note(&mut self, s: impl Into<String>) {
        self.settings_differ.push(s.into());
    }

    /// Lists, in plain words, the settings that differ from Sluice's.
    fn describe_differences(&mut self) {
        let c = self.cfg.clone();
        if c.disable_auto_compactions {
            self.note(format!(
                "disable-auto-compactions: fjall has no such switch (and accepts only its own \
                 Leveled and Fifo strategies); the closest thing is Leveled with its L0 trigger \
                 at 255 tables, and two sentinel keys {SENTINEL_LOW:?} and {SENTINEL_HIGH:?} \
                 (outside the digit keys; empty values) flushed into L6 at open so that fjall's \
                 trivial move of a lone L0 run into the empty last level cannot take the first \
                 flush out of L0; the compact benchmark's input includes their tiny table"
            ));
            self.note(format!(
                "L0 stalls: fjall's write stall cannot be turned off: from 20 L0 runs on every \
                 write spins (longer per extra run), and at {FJALL_L0_HALT_RUNS} runs writes \
                 halt until compaction, which would be forever here, so a fill stops with an \
                 error at 28 runs (Sluice turns its L0 stalls off with auto compactions)"
            ));
        } else {
            self.note(
                "compaction: fjall's Leveled strategy (L0 trigger 4 tables, level ratio 10, \
                 L1 = 4 x target file size); it moves a lone disjoint L0 run down without \
                 rewriting, and stalls writes from 20 L0 runs, halting them at 30 (Sluice: \
                 slowdown at 20 L0 files, stop at 36)",
            );
        }
        self.note(
            "memtables: fjall rotates a memtable once it passes --write-buffer-size and lets up \
             to 4 sealed memtables queue before halting writers (Sluice: 2 memtables in all)",
        );
        if c.ycsb.is_some() {
            self.note(
                "the YCSB load waits until fjall has no queued flush, sealed memtable or running \
                 compaction, as Sluice waits for its background work",
            );
        }
        if c.ycsb.is_none() {
            self.note(format!(
                "compact: fjall's major_compact (a hidden but public API) merges every table into \
             the last level (L6) in one single-threaded job, cutting outputs at \
             {MAJOR_COMPACTION_TARGET} bytes whatever --target-file-size says; \
             --parallel-compact has no effect; Sluice compacts L0 into its base level (L6 here)"
            ));
            self.note(
                "compact timing: the memtable is flushed before the timer starts (reported as \
             compaction.flush_seconds); Sluice's compact seconds include flushing its memtable",
            );
        }
        self.note(format!(
            "threads: fjall runs flushes and compactions on one pool of {} worker threads \
             (--compaction-threads); Sluice flushes on its own thread",
            c.compaction_threads
        ));
        self.note(
            "blocks: fjall pins L0/L1 index blocks and L0 filter blocks in memory and partitions \
             index and filter blocks from L3 down (fjall defaults); index blocks are not \
             compressed",
        );
        self.note(
            "wal: fjall's journal is written to the OS on every write (PersistMode::Buffer, no \
             fsync), but fsynced once per flush",
        );
    }

    /// Writes the two sentinel keys, flushes them and waits until fjall has moved their table
    /// into the last level, so that the benchmark's own flushes all stay in L0.
    fn plant_sentinels(&self) -> Result<(), String> {
        let err = |e: fjall::Error| e.to_string();
        self.ks.insert(SENTINEL_LOW.as_bytes(), b"").map_err(err)?;
        self.ks.insert(SENTINEL_HIGH.as_bytes(), b"").map_err(err)?;
        self.ks.rotate_memtable_and_wait().map_err(err)?;
        for _ in 0..1000 {
            let shape = self.shape();
            if shape.first().is_some_and(|l0| l0.files == 0) && total_bytes(&shape) > 0 {
                self.wait_idle();
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err("fjall did not move the sentinel table out of L0 within 5 s".into())
    }

    /// The current LSM: every level, files and bytes.
    pub fn shape(&self) -> Vec<LevelShape> {
        let version = self.ks.tree.current_version();
        version
            .iter_levels()
            .enumerate()
            .map(|(level, l)| LevelShape {
                level,
                files: l.table_count() as u64,
                bytes: l.size(),
            })
            .collect()
    }

    /// L0 runs plus sealed memtables (each becomes an L0 run when flushed).
    pub fn l0_runs_ahead(&self) -> usize {
        self.ks.tree.l0_run_count() + self.ks.sealed_memtable_count()
    }

    /// Returns once no flush or compaction runs or waits, two checks 1 ms apart: a fill is
    /// not over until the background work it caused is, as in Sluice.
    pub fn wait_idle(&self) {
        let mut quiet = 0;
        while quiet < 2 {
            let busy = self.db.outstanding_flushes() > 0
                || self.db.active_compactions() > 0
                || self.ks.sealed_memtable_count() > 0;
            if busy {
                quiet = 0;
                std::thread::sleep(Duration::from_millis(5));
            } else {
                quiet += 1;
                if quiet < 2 {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
}

/// Sums the bytes of a shape.
pub fn total_bytes(shape: &[LevelShape]) -> u64 {
    shape.iter().map(|l| l.bytes).sum()
}
