//! Figures for an interval: the difference of two reports of the same open database, as
//! RocksDB's `rocksdb.stats` prints an "Interval" beside each "Cumulative" line.
//!
//! Counters only grow while a database is open, so each is `later - earlier` (saturating,
//! should the two reports come from different opens). Gauges (sizes, file counts, scores,
//! cache usage, jobs running, debt) describe a moment, not an interval: the later report's
//! are kept. So are the figures of the open itself (recovery) and the offload report, whose
//! shares are not additive.

use super::{
    BloomMetrics, JobMetrics, LevelMetrics, Metrics, ModeTotals, PipelineStage, StageSeconds,
    StallCounts, StallMetrics, TableCacheMetrics,
};

fn f(later: f64, earlier: f64) -> f64 {
    (later - earlier).max(0.0)
}

impl Metrics {
    /// What the database did between `earlier` and this report: counters are the
    /// difference (saturating, should the two reports come from different opens); gauges
    /// (sizes, file counts, scores, cache usage, jobs running, debt), the recovery figures and
    /// the offload report are the later report's.
    pub fn since(&self, earlier: &Metrics) -> Metrics {
        let e = earlier;
        let levels = self
            .levels
            .iter()
            .map(|l| match e.levels.iter().find(|p| p.level == l.level) {
                Some(p) => l.since(p),
                None => l.clone(),
            })
            .collect();
        Metrics {
            levels,
            flush: self.flush.since(&e.flush),
            compaction: self.compaction.since(&e.compaction),
            trivial_moves: self.trivial_moves.saturating_sub(e.trivial_moves),
            intra_l0_compactions: self
                .intra_l0_compactions
                .saturating_sub(e.intra_l0_compactions),
            relocations: self.relocations.saturating_sub(e.relocations),
            range_moves: self.range_moves.saturating_sub(e.range_moves),
            range_splits: self.range_splits.saturating_sub(e.range_splits),
            user_bytes_written: self.user_bytes_written.saturating_sub(e.user_bytes_written),
            wal_bytes_written: self.wal_bytes_written.saturating_sub(e.wal_bytes_written),
            wal_syncs: self.wal_syncs.saturating_sub(e.wal_syncs),
            write_slowdowns: self.write_slowdowns.saturating_sub(e.write_slowdowns),
            write_stall_micros: self.write_stall_micros.saturating_sub(e.write_stall_micros),
            stalls: self.stalls.since(&e.stalls),
            block_cache_hits: self.block_cache_hits.saturating_sub(e.block_cache_hits),
            block_cache_misses: self.block_cache_misses.saturating_sub(e.block_cache_misses),
            prefix_filter_skips: self
                .prefix_filter_skips
                .saturating_sub(e.prefix_filter_skips),
            table_cache: TableCacheMetrics {
                open_tables: self.table_cache.open_tables,
                hits: self.table_cache.hits.saturating_sub(e.table_cache.hits),
                misses: self.table_cache.misses.saturating_sub(e.table_cache.misses),
            },
            bloom: BloomMetrics {
                useful: self.bloom.useful.saturating_sub(e.bloom.useful),
                passed: self.bloom.passed.saturating_sub(e.bloom.passed),
                false_positives: self
                    .bloom
                    .false_positives
                    .saturating_sub(e.bloom.false_positives),
            },
            blob: super::BlobMetrics {
                cache_hits: self.blob.cache_hits.saturating_sub(e.blob.cache_hits),
                cache_misses: self.blob.cache_misses.saturating_sub(e.blob.cache_misses),
                ..self.blob
            },
            ..self.clone()
        }
    }
}

impl LevelMetrics {
    /// This level's traffic since `earlier`; its files, size and score now.
    fn since(&self, earlier: &LevelMetrics) -> LevelMetrics {
        let bytes_in = self.bytes_in.saturating_sub(earlier.bytes_in);
        let bytes_written = self.bytes_written.saturating_sub(earlier.bytes_written);
        LevelMetrics {
            bytes_in,
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written,
            bytes_moved: self.bytes_moved.saturating_sub(earlier.bytes_moved),
            compactions: self.compactions.saturating_sub(earlier.compactions),
            compaction_seconds: f(self.compaction_seconds, earlier.compaction_seconds),
            entries_in: self.entries_in.saturating_sub(earlier.entries_in),
            entries_dropped: self.entries_dropped.saturating_sub(earlier.entries_dropped),
            write_amp: match bytes_in {
                0 => 0.0,
                n => bytes_written as f64 / n as f64,
            },
            ..self.clone()
        }
    }
}

impl StallMetrics {
    fn since(&self, earlier: &StallMetrics) -> StallMetrics {
        let d = |a: StallCounts, b: StallCounts| StallCounts {
            count: a.count.saturating_sub(b.count),
            micros: a.micros.saturating_sub(b.micros),
        };
        StallMetrics {
            l0_slowdown: d(self.l0_slowdown, earlier.l0_slowdown),
            l0_stop: d(self.l0_stop, earlier.l0_stop),
            memtable_limit: d(self.memtable_limit, earlier.memtable_limit),
        }
    }
}

impl StageSeconds {
    fn since(&self, e: &StageSeconds) -> StageSeconds {
        StageSeconds {
            read: f(self.read, e.read),
            checksum: f(self.checksum, e.checksum),
            decompress: f(self.decompress, e.decompress),
            merge: f(self.merge, e.merge),
            compress: f(self.compress, e.compress),
            rechecksum: f(self.rechecksum, e.rechecksum),
            write: f(self.write, e.write),
        }
    }
}

impl JobMetrics {
    /// The jobs completed since `earlier`, with their bytes, times and executors; stages and
    /// modes that did no work in the interval are left out.
    pub fn since(&self, e: &JobMetrics) -> JobMetrics {
        let pipeline = self
            .pipeline
            .iter()
            .map(|s| match e.pipeline.iter().find(|p| p.stage == s.stage) {
                Some(p) => PipelineStage {
                    stage: s.stage.clone(),
                    threads: s.threads.saturating_sub(p.threads),
                    busy_seconds: f(s.busy_seconds, p.busy_seconds),
                    idle_seconds: f(s.idle_seconds, p.idle_seconds),
                },
                None => s.clone(),
            })
            .filter(|s| s.threads > 0)
            .collect();
        let mode_totals = self
            .mode_totals
            .iter()
            .map(|(mode, t)| {
                let p = e.mode_totals.get(mode).cloned().unwrap_or_default();
                let totals = ModeTotals {
                    jobs: t.jobs.saturating_sub(p.jobs),
                    input_bytes: t.input_bytes.saturating_sub(p.input_bytes),
                    seconds: f(t.seconds, p.seconds),
                };
                (mode.clone(), totals)
            })
            .filter(|(_, t)| t.jobs > 0)
            .collect::<std::collections::BTreeMap<_, _>>();
        JobMetrics {
            count: self.count.saturating_sub(e.count),
            failed: self.failed.saturating_sub(e.failed),
            input_bytes: self.input_bytes.saturating_sub(e.input_bytes),
            output_bytes: self.output_bytes.saturating_sub(e.output_bytes),
            entries_in: self.entries_in.saturating_sub(e.entries_in),
            entries_out: self.entries_out.saturating_sub(e.entries_out),
            filter_removed: self.filter_removed.saturating_sub(e.filter_removed),
            filter_changed: self.filter_changed.saturating_sub(e.filter_changed),
            merge_absorbed: self.merge_absorbed.saturating_sub(e.merge_absorbed),
            range_covered: self.range_covered.saturating_sub(e.range_covered),
            seconds: f(self.seconds, e.seconds),
            cpu_seconds: f(self.cpu_seconds, e.cpu_seconds),
            stage_profile: self.stage_profile.since(&e.stage_profile),
            pipeline,
            modes: mode_totals
                .iter()
                .map(|(m, t)| (m.clone(), t.jobs))
                .collect(),
            mode_totals,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(writes: u64, compactions: u64, l1_files: usize) -> Metrics {
        let mut m = Metrics {
            user_bytes_written: writes,
            block_cache_bytes: 77,
            ..Metrics::of_empty_tree()
        };
        m.levels[1].files = l1_files;
        m.levels[1].bytes_in = 100 * compactions;
        m.levels[1].bytes_written = 150 * compactions;
        m.levels[1].compactions = compactions;
        for i in 0..compactions {
            let mode = if i % 2 == 0 {
                "pipelined"
            } else {
                "sequential"
            };
            m.compaction.count += 1;
            m.compaction.input_bytes += 100;
            m.compaction.seconds += 0.5;
            *m.compaction.modes.entry(mode.into()).or_default() += 1;
            let t = m.compaction.mode_totals.entry(mode.into()).or_default();
            t.jobs += 1;
            t.input_bytes += 100;
            t.seconds += 0.5;
        }
        m.stalls.l0_stop = StallCounts {
            count: compactions,
            micros: 10 * compactions,
        };
        m
    }

    #[test]
    fn counters_subtract_and_gauges_stay() {
        let (earlier, later) = (report(1_000, 1, 3), report(5_000, 3, 4));
        let d = later.since(&earlier);
        assert_eq!(d.user_bytes_written, 4_000);
        assert_eq!(d.compaction.count, 2);
        assert_eq!(d.compaction.input_bytes, 200);
        assert_eq!(d.compaction.seconds, 1.0);
        assert_eq!(d.levels[1].compactions, 2);
        assert_eq!(d.levels[1].write_amp, 1.5);
        assert_eq!(
            d.stalls.l0_stop,
            StallCounts {
                count: 2,
                micros: 20
            }
        );
        // The interval's executors: one more of each.
        assert_eq!(d.compaction.modes["pipelined"], 1);
        assert_eq!(d.compaction.mode_totals["sequential"].jobs, 1);
        // Gauges are the later report's.
        assert_eq!(d.levels[1].files, 4);
        assert_eq!(d.block_cache_bytes, 77);
        // An interval with no work leaves the executors out.
        let idle = later.since(&later);
        assert!(idle.compaction.modes.is_empty());
        assert_eq!(idle.compaction.count, 0);
    }

    #[test]
    fn reports_of_different_opens_never_go_negative() {
        let d = report(1_000, 1, 3).since(&report(5_000, 3, 4));
        assert_eq!(d.user_bytes_written, 0);
        assert_eq!(d.compaction.seconds, 0.0);
        assert_eq!(d.levels[1].bytes_in, 0);
    }
}
