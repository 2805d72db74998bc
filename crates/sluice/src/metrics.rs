//! What the database reports about itself: the per-level table of Pebble's `db.Metrics()`,
//! flush and compaction totals, and the cumulative stage profile.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_sst::profile::{StageProfile, StageTiming, Step};

use crate::version::edit::NUM_LEVELS;

/// Figures for one level.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LevelMetrics {
    /// Level number.
    pub level: usize,
    /// Number of table files.
    pub files: usize,
    /// Bytes of table files.
    pub size_bytes: u64,
    /// Compaction score: L0 files over the trigger, or level bytes over the target.
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
    /// `bytes_written / bytes_in` (0 when nothing arrived).
    pub write_amp: f64,
}

/// Totals of one kind of background job.
#[derive(Clone, Debug, Default, Serialize)]
pub struct JobMetrics {
    /// Jobs completed.
    pub count: u64,
    /// Jobs that failed: their partial outputs were deleted and the tree left as it was.
    pub failed: u64,
    /// Input bytes (memtable bytes for flushes, table bytes for compactions).
    pub input_bytes: u64,
    /// Bytes written to table files.
    pub output_bytes: u64,
    /// Entries read.
    pub entries_in: u64,
    /// Entries written.
    pub entries_out: u64,
    /// Values the compaction filter removed (compactions only).
    pub filter_removed: u64,
    /// Values the compaction filter changed (compactions only).
    pub filter_changed: u64,
    /// Merge operands (and the values under them) combined into another written entry.
    pub merge_absorbed: u64,
    /// Versions dropped because a range tombstone covers them.
    pub range_covered: u64,
    /// Wall seconds, summed over jobs.
    pub seconds: f64,
    /// CPU seconds (user + system) of the threads that ran the jobs, from their thread CPU
    /// clocks. Flushes: the flush thread from taking the memtable until its table is
    /// installed (build, write, fsync, MANIFEST edit). Compactions: every thread the executor
    /// ran the job on, as the executor measured it. A job counts when it completes, so a job
    /// still running when metrics are read is not in this figure yet.
    pub cpu_seconds: f64,
    /// Seconds per step S1..S7, summed over jobs.
    pub stage_profile: StageSeconds,
    /// Busy and idle seconds per executor stage, summed over jobs (compactions only).
    pub pipeline: Vec<PipelineStage>,
    /// Jobs run by each executor mode (compactions only). Kept beside `mode_totals` (whose
    /// `jobs` it always equals) for the consumers that read only the counts.
    pub modes: BTreeMap<String, u64>,
    /// Jobs, input bytes and wall seconds of each executor mode (compactions only), so each
    /// executor's bandwidth is a measurement even when `auto` picked several. Summed over
    /// modes, `input_bytes` and `seconds` equal the job totals above: both are recorded from
    /// the same figures of the same compaction.
    pub mode_totals: BTreeMap<String, ModeTotals>,
}

/// The compactions one executor mode ran.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ModeTotals {
    /// Compactions completed by this executor.
    pub jobs: u64,
    /// Input table bytes of those compactions.
    pub input_bytes: u64,
    /// Wall seconds of those compactions, summed (each compaction's
    /// [`StageProfile::wall_seconds`]).
    pub seconds: f64,
}

impl ModeTotals {
    /// Input bytes per wall second in MB/s (10^6 bytes); 0 when no time was measured.
    pub fn bandwidth_mb_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.input_bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// Busy and idle time of one executor stage, summed over jobs and threads.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PipelineStage {
    /// Stage name (`read`, `compute`, `write`, `data decoder`, ...).
    pub stage: String,
    /// Thread runs of the stage.
    pub threads: u64,
    /// Seconds working.
    pub busy_seconds: f64,
    /// Seconds blocked on a queue.
    pub idle_seconds: f64,
}

impl JobMetrics {
    /// Input bytes per wall second in MB/s.
    pub fn bandwidth_mb_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.input_bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }

    /// Adds one job's profile.
    pub fn record(&mut self, input_bytes: u64, profile: &StageProfile) {
        self.count += 1;
        self.input_bytes += input_bytes;
        self.output_bytes += profile.bytes_written;
        self.entries_in += profile.entries_in;
        self.entries_out += profile.entries_out;
        self.seconds += profile.wall_seconds();
        self.cpu_seconds += profile.cpu_nanos as f64 / 1e9;
        self.stage_profile.add(profile);
    }

    /// Adds one compaction's executor mode and stage timings: the compaction counts under
    /// `mode` in `modes` and, with its `input_bytes` and `profile`'s wall seconds (the figures
    /// [`Self::record`] takes), in `mode_totals`.
    pub fn record_stages(
        &mut self,
        mode: &str,
        input_bytes: u64,
        profile: &StageProfile,
        stages: &[StageTiming],
    ) {
        *self.modes.entry(mode.to_string()).or_insert(0) += 1;
        let totals = self.mode_totals.entry(mode.to_string()).or_default();
        totals.jobs += 1;
        totals.input_bytes += input_bytes;
        totals.seconds += profile.wall_seconds();
        for s in stages {
            let slot = match self.pipeline.iter_mut().position(|p| p.stage == s.stage) {
                Some(i) => &mut self.pipeline[i],
                None => {
                    self.pipeline.push(PipelineStage {
                        stage: s.stage.clone(),
                        ..PipelineStage::default()
                    });
                    let last = self.pipeline.len() - 1;
                    &mut self.pipeline[last]
                }
            };
            slot.threads += u64::from(s.threads);
            slot.busy_seconds += s.busy_nanos as f64 / 1e9;
            slot.idle_seconds += s.idle_nanos as f64 / 1e9;
        }
    }
}

/// Seconds spent in each of the seven steps.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct StageSeconds {
    /// S1.
    pub read: f64,
    /// S2.
    pub checksum: f64,
    /// S3.
    pub decompress: f64,
    /// S4.
    pub merge: f64,
    /// S5.
    pub compress: f64,
    /// S6.
    pub rechecksum: f64,
    /// S7.
    pub write: f64,
}

impl StageSeconds {
    /// Adds a profile's step times.
    pub fn add(&mut self, p: &StageProfile) {
        self.read += p.step_seconds(Step::Read);
        self.checksum += p.step_seconds(Step::Checksum);
        self.decompress += p.step_seconds(Step::Decompress);
        self.merge += p.step_seconds(Step::Merge);
        self.compress += p.step_seconds(Step::Compress);
        self.rechecksum += p.step_seconds(Step::Rechecksum);
        self.write += p.step_seconds(Step::Write);
    }

    /// `(name, seconds)` for each step in order.
    pub fn entries(&self) -> [(&'static str, f64); 7] {
        [
            ("read", self.read),
            ("checksum", self.checksum),
            ("decompress", self.decompress),
            ("merge", self.merge),
            ("compress", self.compress),
            ("rechecksum", self.rechecksum),
            ("write", self.write),
        ]
    }

    /// Sum over steps.
    pub fn total(&self) -> f64 {
        self.entries().iter().map(|(_, s)| s).sum()
    }
}

/// A point-in-time report of the database, returned by [`crate::Db::metrics`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct Metrics {
    /// One row per level, L0..L6.
    pub levels: Vec<LevelMetrics>,
    /// Flush totals.
    pub flush: JobMetrics,
    /// Compaction totals (trivial moves excluded).
    pub compaction: JobMetrics,
    /// Trivial moves performed.
    pub trivial_moves: u64,
    /// Intra-L0 compactions (newest L0 files merged into one while L1 was busy).
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
    /// Writes delayed by the L0 slowdown trigger.
    pub write_slowdowns: u64,
    /// Microseconds writers spent stalled (slowdowns and stops).
    pub write_stall_micros: u64,
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
}

/// The blob files of the current version ([`crate::BlobOptions`]).
#[derive(Clone, Copy, PartialEq, Debug, Default, Serialize)]
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
}

/// Per-level cumulative counters the database maintains between `metrics()` calls.
#[derive(Clone, Debug, Default)]
pub(crate) struct LevelCounters {
    pub bytes_in: [u64; NUM_LEVELS],
    pub bytes_read: [u64; NUM_LEVELS],
    pub bytes_written: [u64; NUM_LEVELS],
    pub bytes_moved: [u64; NUM_LEVELS],
    pub compactions: [u64; NUM_LEVELS],
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(wall_millis: u64) -> StageProfile {
        StageProfile {
            wall_nanos: wall_millis * 1_000_000,
            ..StageProfile::default()
        }
    }

    fn stage(name: &str, busy_millis: u64) -> StageTiming {
        StageTiming {
            stage: name.into(),
            threads: 1,
            busy_nanos: busy_millis * 1_000_000,
            idle_nanos: 0,
        }
    }

    /// Records one compaction the way the database records an installed one.
    fn compaction(m: &mut JobMetrics, mode: &str, input_bytes: u64, wall_millis: u64) {
        let p = profile(wall_millis);
        m.record(input_bytes, &p);
        m.record_stages(mode, input_bytes, &p, &[stage("read", wall_millis / 2)]);
    }

    #[test]
    fn each_mode_keeps_its_own_bytes_and_seconds() {
        let mut m = JobMetrics::default();
        compaction(&mut m, "pipelined", 40_000_000, 500);
        compaction(&mut m, "sequential", 30_000_000, 1_000);
        compaction(&mut m, "pipelined", 20_000_000, 250);

        let pipelined = &m.mode_totals["pipelined"];
        assert_eq!(
            *pipelined,
            ModeTotals {
                jobs: 2,
                input_bytes: 60_000_000,
                seconds: 0.75,
            }
        );
        assert_eq!(pipelined.bandwidth_mb_s(), 80.0);
        assert_eq!(m.mode_totals["sequential"].bandwidth_mb_s(), 30.0);
        // The blended figure is neither executor's.
        assert!((m.bandwidth_mb_s() - 90.0 / 1.75).abs() < 1e-9);

        // `modes` is unchanged in meaning and agrees with the per-mode job counts.
        let jobs: BTreeMap<String, u64> = m
            .mode_totals
            .iter()
            .map(|(mode, t)| (mode.clone(), t.jobs))
            .collect();
        assert_eq!(m.modes, jobs);
        assert_eq!(m.modes["pipelined"], 2);

        // Summed over modes, the totals are the job totals.
        let bytes: u64 = m.mode_totals.values().map(|t| t.input_bytes).sum();
        let seconds: f64 = m.mode_totals.values().map(|t| t.seconds).sum();
        assert_eq!(bytes, m.input_bytes);
        assert!((seconds - m.seconds).abs() < 1e-12);
        assert_eq!(m.count, 3);

        assert_eq!(m.pipeline.len(), 1);
        assert_eq!(m.pipeline[0].threads, 3);
    }

    #[test]
    fn no_time_means_no_bandwidth() {
        let idle = ModeTotals {
            jobs: 1,
            input_bytes: 1_000,
            seconds: 0.0,
        };
        assert_eq!(idle.bandwidth_mb_s(), 0.0);
        assert_eq!(ModeTotals::default().bandwidth_mb_s(), 0.0);
    }
}
