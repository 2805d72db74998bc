//! Administrative operations: manual compaction, metrics, and verifying every checksum.

use std::sync::atomic::Ordering;

use super::{Db, Tree};
use crate::Result;
use crate::compaction::manual::CompactOptions;
use crate::compaction::picker::targets_and_scores;
use crate::metrics::{LevelMetrics, Metrics};
use crate::version::edit::NUM_LEVELS;
use crate::version::pin;

/// What [`Db::verify_file_checksums`] read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileChecksumReport {
    /// Tables whose every byte matched the checksum the MANIFEST recorded.
    pub files: usize,
    /// Bytes read.
    pub bytes: u64,
    /// Live tables with no recorded checksum (written by an older build): not read.
    pub unrecorded: usize,
}

/// What [`Db::check`] verified.
#[derive(Clone, Debug, Default)]
pub struct CheckReport {
    /// Table files verified.
    pub files: usize,
    /// Blocks whose checksum was verified.
    pub blocks: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Blob files whose every record was read and verified.
    pub blob_files: usize,
    /// Blob references found in the tables, each checked to land on its record.
    pub blob_references: u64,
    /// Tables whose bytes matched the whole-file checksum the MANIFEST recorded (tables of
    /// older builds have none recorded).
    pub file_checksums: usize,
    /// What opening the database read and checked of the MANIFEST and the WALs, and what it
    /// dropped. Anything dropped means data on disk was not applied: a caller that must know
    /// every byte is accounted for treats a non-empty `recovery.dropped` as a failure, as
    /// `sluice check` does.
    pub recovery: super::RecoveryReport,
}

impl Db {
    /// Changes options of the open database (RocksDB's `SetOptions`): `changes` are
    /// `(name, value)` pairs by RocksDB's names, applied together or not at all (the result
    /// must pass [`crate::Options::validate`]). The options a live database can change are
    /// [`crate::options::MUTABLE_OPTIONS`]: the memtable's size and count, the L0 triggers,
    /// the level sizes, the target file size and `disable_auto_compactions` (and
    /// `l0_compaction_file_threshold`, which must not be below the L0 trigger). Writes, the
    /// compaction picker and each new compaction use them from the call on; the default
    /// keyspace's are written to `OPTIONS`. They last until the database is closed: the next
    /// open takes its options again. Each keyspace has its own
    /// ([`crate::Keyspace::set_options`]).
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// db.set_options(&[("disable_auto_compactions", "true"), ("write_buffer_size", "8388608")])?;
    /// # Ok::<(), sluice::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] naming an option that cannot change or a bad value
    /// (nothing is changed then); [`crate::Error::ReadOnly`] on a read-only open.
    pub fn set_options(&self, changes: &[(&str, &str)]) -> Result<()> {
        self.tree.set_options(changes)?;
        if self.tree.keyspace_id == crate::batch::DEFAULT_KEYSPACE_ID {
            // Under the read lock, so that of two calls the later one's options are written
            // last.
            let live = self.tree.live.read();
            super::records::write_options(&self.tree.dir, &live);
        }
        Ok(())
    }

    /// The options the database runs with now: those it was opened with ([`Db::options`])
    /// and what [`Db::set_options`] changed since.
    pub fn current_options(&self) -> std::sync::Arc<crate::Options> {
        self.tree.live_options()
    }

    /// Compacts every key in `[start, end]` (`None` = unbounded) down the tree, so that the
    /// range ends up in a single level with shadowed versions and deletions removed.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.compact_range_with(start, end, &CompactOptions::default())
    }

    /// [`Db::compact_range`] with options: parallel pieces, progress reports, cancellation
    /// (then [`crate::Error::Cancelled`], with levels already done kept and the tree
    /// consistent).
    pub fn compact_range_with(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        opts: &CompactOptions,
    ) -> Result<()> {
        self.tree.check_writable()?;
        self.tree.compact_range(&self.journal, start, end, opts)
    }

    /// What compaction offloading has done (shares per side, retries, host decisions), or
    /// `None` without `Options::offload`.
    pub fn offload_metrics(&self) -> Option<crate::compaction::remote::OffloadMetrics> {
        self.tree.remote.as_ref().map(|r| r.metrics())
    }

    /// A snapshot of the per-level table, flush and compaction totals, and counters, of the
    /// default keyspace's tree; the WAL's and the block cache's figures are the database's.
    /// Another keyspace's tree reports through [`crate::Keyspace::metrics`].
    pub fn metrics(&self) -> Metrics {
        self.tree.metrics()
    }

    /// Reads every block of every live table, in every keyspace, and verifies its checksum,
    /// the order of its entries and that its properties describe them; compares each table
    /// file with what the MANIFEST pinned (not a symbolic link, its size, identity and
    /// whole-file checksum: `version::pin`), reading it from disk afresh rather than through
    /// readers opened earlier; reads every blob file's records, and checks that every blob
    /// reference lands on the record of its key (`blob::check`). The first failure is
    /// returned as `Error::Corruption` naming the file and offset. The MANIFEST and the WALs
    /// were read and verified when the database was opened; the report carries what that
    /// found ([`CheckReport::recovery`]). To check a database without changing it, open it
    /// with [`Db::open_read_only`].
    pub fn check(&self) -> Result<CheckReport> {
        let mut report = CheckReport {
            recovery: self.recovery_report(),
            ..CheckReport::default()
        };
        for inner in self.journal.all_trees() {
            let version = std::sync::Arc::clone(inner.state.lock().versions.current());
            for f in version.live_files() {
                let table = inner.table_cache.open_uncached(f)?;
                let verified = table.verify_all()?;
                report.files += 1;
                report.blocks += verified.blocks;
                report.bytes += verified.bytes;
                if let Some(bytes) = pin::check_file_checksum(&table, f, verified.file_crc32c)? {
                    report.file_checksums += 1;
                    report.bytes += bytes;
                }
            }
            let blobs = crate::blob::check::check_tree(&inner.table_cache, &version)?;
            report.blob_files += blobs.files;
            report.blob_references += blobs.references;
            report.bytes += blobs.bytes;
        }
        Ok(report)
    }

    /// Reads every byte of every live table, in every keyspace, and compares its CRC32C with
    /// the checksum the MANIFEST recorded when the table was installed (RocksDB's
    /// `VerifyFileChecksums`): `Corruption` naming the first file that differs, or that is a
    /// symbolic link or of another size or identity than recorded. Cheaper than
    /// [`Db::check`], which also decodes every block.
    pub fn verify_file_checksums(&self) -> Result<FileChecksumReport> {
        let mut report = FileChecksumReport::default();
        for inner in self.journal.all_trees() {
            let version = std::sync::Arc::clone(inner.state.lock().versions.current());
            for f in version.live_files() {
                let table = inner.table_cache.open_uncached(f)?;
                match pin::check_file_checksum(&table, f, None)? {
                    Some(bytes) => {
                        report.files += 1;
                        report.bytes += bytes;
                    }
                    None => report.unrecorded += 1,
                }
            }
        }
        Ok(report)
    }
}

impl Tree {
    /// [`Db::metrics`], for the threads that hold only the shared state.
    pub(crate) fn metrics(&self) -> Metrics {
        let live = self.live_options();
        let st = self.state.lock();
        let v = st.versions.current();
        let c = &st.level_counters;
        let l0_sublevels = crate::version::l0_sublevels::l0_sublevels(v.files(0)).len();
        let stalls = self.counters.stall_metrics();
        let (targets, scores) = targets_and_scores(v, &live, &st.compactions);
        let levels = (0..NUM_LEVELS)
            .map(|level| LevelMetrics {
                level,
                files: v.num_files(level),
                size_bytes: v.level_bytes(level),
                target_bytes: match targets.target(level) {
                    u64::MAX => 0,
                    target => target,
                },
                score: scores[level],
                bytes_in: c.bytes_in[level],
                bytes_read: c.bytes_read[level],
                bytes_written: c.bytes_written[level],
                bytes_moved: c.bytes_moved[level],
                compactions: c.compactions[level],
                compaction_seconds: c.seconds[level],
                entries_in: c.entries_in[level],
                entries_dropped: c.entries_dropped[level],
                read_amp: match level {
                    0 => l0_sublevels,
                    _ => usize::from(v.num_files(level) > 0),
                },
                write_amp: if c.bytes_in[level] > 0 {
                    c.bytes_written[level] as f64 / c.bytes_in[level] as f64
                } else {
                    0.0
                },
            })
            .collect();
        let cache = self.table_cache.block_cache();
        let recovery = self.recovery.lock();
        Metrics {
            recovery_wal_records: recovery.wal_records,
            recovery_dropped_bytes: recovery.dropped_bytes(),
            orphans_deleted_at_open: recovery.orphans_deleted as u64,
            levels,
            base_level: targets.base_level(),
            flush: st.flush_metrics.clone(),
            compaction: st.compaction_metrics.clone(),
            trivial_moves: st.trivial_moves,
            intra_l0_compactions: st.intra_l0_compactions,
            relocations: st.relocations,
            range_moves: st.range_moves,
            range_splits: st.range_splits,
            l0_sublevels,
            compactions_running: st.compactions.len(),
            compactions_running_peak: st.compactions.peak(),
            user_bytes_written: self.counters.user_bytes.load(Ordering::Relaxed),
            wal_bytes_written: self.counters.wal_bytes.load(Ordering::Relaxed),
            wal_syncs: self.counters.wal_syncs.load(Ordering::Relaxed),
            write_slowdowns: stalls.l0_slowdown.count,
            write_stall_micros: stalls.micros(),
            stalls,
            compaction_debt_bytes: crate::compaction::debt::estimated_debt(v, &live),
            memtable_bytes: (st.mem.approximate_bytes()
                + st.imm.iter().map(|m| m.approximate_bytes()).sum::<usize>())
                as u64,
            immutable_memtables: st.imm.len(),
            block_cache_bytes: cache.map_or(0, |c| c.usage_bytes() as u64),
            block_cache_hits: cache.map_or(0, |c| c.hits()),
            prefix_filter_skips: self.counters.prefix_skips.load(Ordering::Relaxed),
            block_cache_misses: cache.map_or(0, |c| c.misses()),
            table_cache: self.table_cache.metrics(),
            bloom: self.table_cache.bloom_metrics(),
            last_sequence: self.latest_seq(),
            snapshots: self.snapshots.sequences().len(),
            range_tombstones: v.range_tombstones().len()
                + std::iter::once(&st.mem)
                    .chain(&st.imm)
                    .map(|m| m.range_tombstones().len())
                    .sum::<usize>(),
            // Lock order: the state lock, then the offloader's (which never takes the state
            // lock while it holds its own).
            offload: self.remote.as_ref().map(|r| r.metrics()),
            partitions: self
                .options
                .partitions
                .as_ref()
                .and_then(|p| crate::partition::stats::partition_stats(v, &live, p.owners.len())),
            blob: crate::metrics::BlobMetrics {
                cache_hits: cache.map_or(0, |c| c.value_hits()),
                cache_misses: cache.map_or(0, |c| c.value_misses()),
                ..crate::metrics::BlobMetrics::of(v)
            },
            object_store: self.options.fs.store_requests(),
        }
    }
}
