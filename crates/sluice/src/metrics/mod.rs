//! What the database reports about itself: the per-level table of Pebble's `db.Metrics()`,
//! flush and compaction totals, and the cumulative stage profile.

use serde::{Deserialize, Serialize};

use crate::version::edit::NUM_LEVELS;

mod interval;
mod job;

pub use job::{JobMetrics, ModeTotals, PipelineStage, StageSeconds};

/// Figures for one level.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LevelMetrics {
    /// Level number.
    pub level: usize,
    /// Number of table files.
    pub files: usize,
    /// Bytes of table files.
    pub size_bytes: u64,
    /// The most bytes the level should hold (`LevelTargets`); 0 for L0, which is sized by
    /// its depth, and for the levels above the base level, which hold nothing.
    pub target_bytes: u64,
    /// Compaction score: L0's depth over the trigger, or level bytes over the target; at
    /// least 1 means due (with dynamic level sizing, a due score is scaled up tenfold).
    pub score: f64,
    /// Bytes that arrived in this level: flushed bytes for L0, upper-level input bytes of
    /// compactions into this level otherwise.
    pub bytes_in: u64,
    /// Bytes read by compactions that wrote into this level (both input levels).
    pub bytes_read: u64,
    /// Bytes written into this level by flushes and compactions.
    pub bytes_written: u64,
    /// Bytes moved into this level by trivial moves (no rewrite).
    pub bytes_moved: u64,
    /// Compactions (or flushes, for L0) that wrote into this level.
    pub compactions: u64,
    /// Wall seconds of those compactions (or flushes), summed (RocksDB's `Comp(sec)`).
    pub compaction_seconds: f64,
    /// Entries those compactions (or flushes) read (RocksDB's `KeyIn`).
    pub entries_in: u64,
    /// Entries they did not write: overwritten versions, deletions that reached the bottom,
    /// merged operands, what the compaction filter removed (RocksDB's `KeyDrop`).
    pub entries_dropped: u64,
    /// Tables a point read may have to look at in this level: L0's sublevels, 1 for a
    /// deeper level that holds any table, else 0 (Pebble's `r-amp`).
    pub read_amp: usize,
    /// `bytes_written / bytes_in` (0 when nothing arrived).
    pub write_amp: f64,
}

/// A point-in-time report of the database, returned by [`crate::Db::metrics`].
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Metrics {
    /// One row per level, L0..L6.
    pub levels: Vec<LevelMetrics>,
    /// The level L0 compacts into: L1, or with dynamic level sizing the first level whose
    /// target reaches `max_bytes_for_level_base`.
    pub base_level: usize,
    /// Flush totals.
    pub flush: JobMetrics,
    /// Compaction totals (trivial moves excluded).
    pub compaction: JobMetrics,
    /// Trivial moves performed.
    pub trivial_moves: u64,
    /// Intra-L0 compactions (newest L0 files merged into one while the base level was busy).
    pub intra_l0_compactions: u64,
    /// Partitioned mode: tables rewritten from a former owner into their range's owner.
    pub relocations: u64,
    /// Partitioned mode: ranges moved to another owner (by the balancer or `Db::move_range`).
    pub range_moves: u64,
    /// Partitioned mode: ranges cut in two (by the balancer or `Db::split_range`).
    pub range_splits: u64,
    /// L0's sublevels: the files a read may have to look at in L0 (see
    /// [`crate::version::l0_sublevels`]).
    pub l0_sublevels: usize,
    /// Automatic compactions running now.
    pub compactions_running: usize,
    /// The most automatic compactions that ran at once.
    pub compactions_running_peak: usize,
    /// Key + value bytes accepted from users.
    pub user_bytes_written: u64,
    /// Bytes appended to WAL files.
    pub wal_bytes_written: u64,
    /// WAL syncs performed (group commit makes this lower than synced writes).
    pub wal_syncs: u64,
    /// Writes delayed by the L0 slowdown trigger (`stalls.l0_slowdown.count`).
    pub write_slowdowns: u64,
    /// Microseconds writers spent stalled, slowdowns and stops (`stalls.micros()`).
    pub write_stall_micros: u64,
    /// The stalls of `write_slowdowns` and `write_stall_micros`, by cause.
    pub stalls: StallMetrics,
    /// Estimated bytes compactions must read and write before every level is within its
    /// target (Pebble's `estimated debt`; see `compaction::debt`).
    pub compaction_debt_bytes: u64,
    /// Bytes in the active and immutable memtables.
    pub memtable_bytes: u64,
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Block cache bytes in use.
    pub block_cache_bytes: u64,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Tables [`crate::Db::prefix`] scans did not read because their bloom filter showed
    /// they hold no key with the prefix ([`crate::TableOptions::prefix_extractor`]).
    pub prefix_filter_skips: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// The table cache: open table readers, and how often a read found its table open.
    pub table_cache: TableCacheMetrics,
    /// What the bloom filters of the tables read saved.
    pub bloom: BloomMetrics,
    /// Newest sequence number.
    pub last_sequence: u64,
    /// Live snapshots.
    pub snapshots: usize,
    /// Range tombstones the database keeps: in memtables, and in the version until no file
    /// holds anything they cover.
    pub range_tombstones: usize,
    /// WAL records (write batches) the open replayed.
    pub recovery_wal_records: u64,
    /// Bytes of the MANIFEST and WALs the open did not apply: torn tails of appends never
    /// acknowledged as durable, or what `SkipAnyCorruptedRecords` skipped
    /// ([`crate::RecoveryReport::dropped`] says where and why).
    pub recovery_dropped_bytes: u64,
    /// Files no version referenced that the open deleted.
    pub orphans_deleted_at_open: u64,
    /// Compaction offload to workers, with `Options::offload`.
    pub offload: Option<crate::compaction::remote::OffloadMetrics>,
    /// Partitioned mode: the range map with per-range and per-owner figures.
    pub partitions: Option<crate::partition::stats::PartitionStats>,
    /// Value separation: the blob files of the current version.
    pub blob: BlobMetrics,
    /// Requests to the object store the tables live in, when `Options::fs` keeps them in one
    /// (`sluice_object::ObjectFs`).
    pub object_store: Option<ObjectStoreMetrics>,
}

/// What the database's file system asked of its object store since it was made, and what its
/// local cache of objects saved.
pub use sluice_sst::fs::StoreRequests as ObjectStoreMetrics;

/// How many writes one stall cause held up, and for how long.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StallCounts {
    /// Writes it held up (a write that waits twice counts twice).
    pub count: u64,
    /// Microseconds writers waited.
    pub micros: u64,
}

/// Write stalls by cause (RocksDB's `rocksdb.stats` "Stall" section).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StallMetrics {
    /// L0 reached `l0_slowdown_writes_trigger`: each write delayed by a millisecond.
    pub l0_slowdown: StallCounts,
    /// L0 reached `l0_stop_writes_trigger`: writes stopped until a compaction finished.
    pub l0_stop: StallCounts,
    /// `max_write_buffer_number` memtables were full: writes stopped until a flush finished.
    pub memtable_limit: StallCounts,
}

impl StallMetrics {
    /// Microseconds writers waited, whatever the cause.
    pub fn micros(&self) -> u64 {
        self.l0_slowdown.micros + self.l0_stop.micros + self.memtable_limit.micros
    }
}

/// The table cache ([`crate::Options::max_open_files`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct TableCacheMetrics {
    /// Table readers open now.
    pub open_tables: u64,
    /// Reads that found their table's reader open.
    pub hits: u64,
    /// Reads that had to open the table (footer, index, filter and properties read again).
    pub misses: u64,
}

impl TableCacheMetrics {
    /// Share of lookups that found the reader open (0.0 before any lookup).
    pub fn hit_ratio(&self) -> f64 {
        ratio(self.hits, self.hits + self.misses)
    }
}

/// What the tables' bloom filters saved, over every table the database read
/// ([`sluice_sst::table::BloomStats`] summed).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BloomMetrics {
    /// Lookups a filter answered "absent": a block read saved (RocksDB's `bloom.filter.useful`).
    pub useful: u64,
    /// Lookups a filter let through.
    pub passed: u64,
    /// Lookups a filter let through that found no entry for the key.
    pub false_positives: u64,
}

impl BloomMetrics {
    /// Share of filter checks that saved a block read (Pebble's `Filter utility`).
    pub fn utility(&self) -> f64 {
        ratio(self.useful, self.useful + self.passed)
    }

    /// Share of the lookups of absent keys that a filter let through anyway.
    pub fn false_positive_rate(&self) -> f64 {
        ratio(self.false_positives, self.useful + self.false_positives)
    }
}

/// `part / whole`, 0.0 when `whole` is 0.
fn ratio(part: u64, whole: u64) -> f64 {
    match whole {
        0 => 0.0,
        w => part as f64 / w as f64,
    }
}

/// The blob files of the current version ([`crate::BlobOptions`]).
#[derive(Clone, Copy, PartialEq, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BlobMetrics {
    /// Blob files live tables reference.
    pub files: usize,
    /// Their size in bytes.
    pub bytes: u64,
    /// Record bytes live tables reference.
    pub live_bytes: u64,
    /// Record bytes no live table references: space a garbage collection would free.
    pub garbage_bytes: u64,
    /// Values reads found in the block cache, which holds blob values too.
    pub cache_hits: u64,
    /// Values reads had to read from their blob file.
    pub cache_misses: u64,
}

impl BlobMetrics {
    /// The blob files of `version`.
    pub(crate) fn of(version: &crate::version::Version) -> Self {
        let mut m = BlobMetrics::default();
        for state in version.blob_files().values() {
            m.files += 1;
            m.bytes += state.meta.file_size;
            m.live_bytes += state.live.bytes;
            m.garbage_bytes += state.garbage_bytes();
        }
        m
    }

    /// Share of the record bytes no live table references (0.0 without blob files).
    pub fn garbage_ratio(&self) -> f64 {
        match self.live_bytes + self.garbage_bytes {
            0 => 0.0,
            total => self.garbage_bytes as f64 / total as f64,
        }
    }
}

impl Metrics {
    /// The report of an empty database: a row of zeros for each level, and zero elsewhere
    /// (`Metrics::default()` has no level rows). A base for reports built by hand, in tests
    /// and tools.
    pub fn of_empty_tree() -> Metrics {
        Metrics {
            levels: (0..NUM_LEVELS)
                .map(|level| LevelMetrics {
                    level,
                    ..LevelMetrics::default()
                })
                .collect(),
            ..Metrics::default()
        }
    }

    /// Bytes written by flushes and compactions.
    pub fn table_bytes_written(&self) -> u64 {
        self.flush.output_bytes + self.compaction.output_bytes
    }

    /// Bytes written to disk in total: WAL plus tables.
    pub fn disk_bytes_written(&self) -> u64 {
        self.wal_bytes_written + self.table_bytes_written()
    }

    /// Write amplification: table bytes written per user byte (the WAL counted separately, as
    /// RocksDB's `W-Amp` does).
    pub fn write_amp(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.table_bytes_written() as f64 / self.user_bytes_written as f64
        }
    }

    /// Total bytes in all levels, and in blob files.
    pub fn total_size_bytes(&self) -> u64 {
        self.levels.iter().map(|l| l.size_bytes).sum::<u64>() + self.blob.bytes
    }

    /// Tables a point read may look at, summed over levels (Pebble's total `r-amp`); the
    /// memtables are not counted.
    pub fn read_amp(&self) -> usize {
        self.levels.iter().map(|l| l.read_amp).sum()
    }

    /// Space amplification: bytes on disk per byte of live data, with the bottom non-empty
    /// level (plus the blob bytes live tables reference) standing in for the live data, the
    /// estimate RocksDB's leveled-compaction documentation uses. Newer versions of bottom
    /// keys in upper levels make it an overestimate by at most their size. 0.0 when empty.
    pub fn space_amp(&self) -> f64 {
        let bottom = self
            .levels
            .iter()
            .rev()
            .find(|l| l.size_bytes > 0)
            .map_or(0, |l| l.size_bytes);
        let live = bottom + self.blob.live_bytes;
        match live {
            0 => 0.0,
            live => self.total_size_bytes() as f64 / live as f64,
        }
    }
}

/// Per-level cumulative counters the database maintains between `metrics()` calls.
#[derive(Clone, Debug, Default)]
pub(crate) struct LevelCounters {
    pub bytes_in: [u64; NUM_LEVELS],
    pub bytes_read: [u64; NUM_LEVELS],
    pub bytes_written: [u64; NUM_LEVELS],
    pub bytes_moved: [u64; NUM_LEVELS],
    pub compactions: [u64; NUM_LEVELS],
    pub seconds: [f64; NUM_LEVELS],
    pub entries_in: [u64; NUM_LEVELS],
    pub entries_dropped: [u64; NUM_LEVELS],
}

impl LevelCounters {
    /// Adds one flush into L0 or compaction into `level`: `input_bytes` arrived from above
    /// (or from the memtable), `read_bytes` were read (both input levels), and `profile` says
    /// what was written and how long it took.
    pub fn record(
        &mut self,
        level: usize,
        input_bytes: u64,
        read_bytes: u64,
        profile: &sluice_sst::profile::StageProfile,
    ) {
        if level >= NUM_LEVELS {
            return; // no version has such a level: nothing to count it in
        }
        let i = level;
        self.bytes_in[i] += input_bytes;
        self.bytes_read[i] += read_bytes;
        self.bytes_written[i] += profile.bytes_written;
        self.compactions[i] += 1;
        self.seconds[i] += profile.wall_seconds();
        self.entries_in[i] += profile.entries_in;
        self.entries_dropped[i] += profile.entries_in.saturating_sub(profile.entries_out);
    }
}
