//! What the engine did during one benchmark: the difference of two [`Metrics`] snapshots.
//!
//! Counters in `Metrics` only grow while a database is open, so every figure here is
//! `after - before` (saturating, should a counter ever be reset).

use std::collections::BTreeMap;

use serde::Serialize;
use sluice::Metrics;
use sluice::compaction::remote::{OffloadMetrics, ShareReport, SideTotals};
use sluice::metrics::{JobMetrics, ModeTotals, ObjectStoreMetrics, PipelineStage, StageSeconds};

/// Compaction work done during a benchmark (trivial moves excluded, as in `Metrics`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CompactionDelta {
    /// Compactions completed.
    pub count: u64,
    /// Bytes read from input tables.
    pub input_bytes: u64,
    /// Bytes written to output tables.
    pub output_bytes: u64,
    /// Wall seconds, summed over compactions.
    pub seconds: f64,
    /// CPU seconds of the threads that ran the compactions (can exceed `seconds` when a
    /// parallel executor keeps several threads busy).
    pub cpu_seconds: f64,
    /// `input_bytes / seconds` in MB/s (10^6 bytes), the documents' compaction bandwidth.
    pub bandwidth_mb_s: f64,
    /// Seconds per step S1..S7, summed over compactions (and over threads in parallel
    /// executors, so the sum may exceed `seconds`).
    pub stage_profile: StageSeconds,
    /// Busy and idle seconds per executor stage (`read`, `compute`, `write`, ...), so the
    /// bottleneck stage shows.
    pub stages: Vec<PipelineStage>,
    /// Compactions per executor mode.
    pub modes: BTreeMap<String, u64>,
    /// Compactions, input bytes and wall seconds per executor mode (modes that ran none
    /// during the benchmark left out), so each executor's bandwidth is measured even when
    /// `--compaction-mode auto` picked several.
    pub mode_totals: BTreeMap<String, ModeTotals>,
    /// With compaction offload: each side's part (host first, then each worker), over the
    /// benchmark.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shares: Option<Vec<ShareReport>>,
    /// With compaction offload: worker shares re-run on the host after a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retries: Option<u64>,
}

/// Flush work done during a benchmark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct FlushDelta {
    /// Memtables flushed.
    pub count: u64,
    /// Bytes written to L0 tables.
    pub output_bytes: u64,
    /// Wall seconds, summed over flushes.
    pub seconds: f64,
    /// CPU seconds of the flush thread, from taking the memtable to installing its table.
    pub cpu_seconds: f64,
}

impl FlushDelta {
    /// The figures of `flushes`, an interval's ([`JobMetrics::since`]).
    fn of(flushes: &JobMetrics) -> Self {
        FlushDelta {
            count: flushes.count,
            output_bytes: flushes.output_bytes,
            seconds: flushes.seconds,
            cpu_seconds: flushes.cpu_seconds,
        }
    }
}

/// Engine figures of one benchmark.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricsDelta {
    /// Key and value bytes the database accepted from writers.
    pub user_bytes: u64,
    /// Bytes written to disk: WAL plus flush and compaction outputs.
    pub disk_bytes_written: u64,
    /// Bytes written to the WAL.
    pub wal_bytes_written: u64,
    /// Table and blob bytes written by flushes and compactions per user (key and value) byte,
    /// the peers' definition (RocksDB's `W-Amp`); `None` when the benchmark wrote no user
    /// data. Below 1 when blocks compress and little is rewritten (fillseq: flushes only, so
    /// about the compression ratio); the WAL is not counted.
    pub write_amp: Option<f64>,
    /// Flushes.
    pub flush: FlushDelta,
    /// Compactions.
    pub compaction: CompactionDelta,
    /// Trivial moves (files moved down a level without rewriting).
    pub trivial_moves: u64,
    /// Writes delayed by the L0 slowdown trigger.
    pub write_slowdowns: u64,
    /// Microseconds writers spent stalled.
    pub write_stall_micros: u64,
    /// Requests to the object store the tables live in, and the bytes they moved (with
    /// `--object-store`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_store: Option<ObjectStoreMetrics>,
}

/// The compaction figures of `after - before` ([`JobMetrics::since`]).
pub fn compaction_delta(before: &JobMetrics, after: &JobMetrics) -> CompactionDelta {
    let d = after.since(before);
    CompactionDelta {
        count: d.count,
        input_bytes: d.input_bytes,
        output_bytes: d.output_bytes,
        seconds: d.seconds,
        cpu_seconds: d.cpu_seconds,
        bandwidth_mb_s: d.bandwidth_mb_s(),
        stage_profile: d.stage_profile,
        stages: d.pipeline,
        modes: d.modes,
        mode_totals: d.mode_totals,
        shares: None,
        retries: None,
    }
}

impl MetricsDelta {
    /// The difference `after - before`.
    pub fn between(before: &Metrics, after: &Metrics) -> Self {
        let user_bytes = after
            .user_bytes_written
            .saturating_sub(before.user_bytes_written);
        let table_bytes = after
            .table_bytes_written()
            .saturating_sub(before.table_bytes_written());
        MetricsDelta {
            user_bytes,
            disk_bytes_written: after
                .disk_bytes_written()
                .saturating_sub(before.disk_bytes_written()),
            wal_bytes_written: after
                .wal_bytes_written
                .saturating_sub(before.wal_bytes_written),
            write_amp: (user_bytes > 0).then(|| table_bytes as f64 / user_bytes as f64),
            flush: FlushDelta::of(&after.flush.since(&before.flush)),
            compaction: CompactionDelta {
                shares: after
                    .offload
                    .as_ref()
                    .map(|a| offload_shares(before.offload.as_ref(), a)),
                retries: after.offload.as_ref().map(|a| {
                    a.retries
                        .saturating_sub(before.offload.as_ref().map_or(0, |b| b.retries))
                }),
                ..compaction_delta(&before.compaction, &after.compaction)
            },
            trivial_moves: after.trivial_moves.saturating_sub(before.trivial_moves),
            write_slowdowns: after.write_slowdowns.saturating_sub(before.write_slowdowns),
            write_stall_micros: after
                .write_stall_micros
                .saturating_sub(before.write_stall_micros),
            object_store: after
                .object_store
                .map(|a| a.since(&before.object_store.unwrap_or_default())),
        }
    }
}

/// Each side's offloaded work between two metrics snapshots.
fn offload_shares(before: Option<&OffloadMetrics>, after: &OffloadMetrics) -> Vec<ShareReport> {
    after
        .sides
        .iter()
        .map(|a| {
            let b = before.and_then(|b| b.sides.iter().find(|s| s.side == a.side));
            let mut modes = a.modes.clone();
            for (mode, n) in b.map(|b| &b.modes).into_iter().flatten() {
                if let Some(m) = modes.get_mut(mode) {
                    *m = m.saturating_sub(*n);
                }
            }
            modes.retain(|_, n| *n > 0);
            SideTotals {
                side: a.side.clone(),
                shares: a.shares.saturating_sub(b.map_or(0, |b| b.shares)),
                input_bytes: a.input_bytes.saturating_sub(b.map_or(0, |b| b.input_bytes)),
                seconds: (a.seconds - b.map_or(0.0, |b| b.seconds)).max(0.0),
                cpu_seconds: (a.cpu_seconds - b.map_or(0.0, |b| b.cpu_seconds)).max(0.0),
                check_seconds: (a.check_seconds - b.map_or(0.0, |b| b.check_seconds)).max(0.0),
                drop_log_bytes: a
                    .drop_log_bytes
                    .saturating_sub(b.map_or(0, |b| b.drop_log_bytes)),
                modes,
                retried: a.retried.saturating_sub(b.map_or(0, |b| b.retried)),
            }
            .report()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(
        user: u64,
        wal: u64,
        flush_out: u64,
        comp_in: u64,
        comp_out: u64,
        secs: f64,
    ) -> Metrics {
        let mut m = Metrics {
            user_bytes_written: user,
            wal_bytes_written: wal,
            ..Metrics::default()
        };
        m.flush.count = 1;
        m.flush.output_bytes = flush_out;
        m.compaction.count = 2;
        m.compaction.input_bytes = comp_in;
        m.compaction.output_bytes = comp_out;
        m.compaction.seconds = secs;
        m.compaction.cpu_seconds = secs * 1.5;
        m.flush.cpu_seconds = secs / 4.0;
        m.compaction.stage_profile.merge = secs / 2.0;
        m
    }

    #[test]
    fn deltas_subtract_and_derive_rates() {
        let before = metrics(1_000, 1_100, 500, 0, 0, 0.0);
        let mut after = metrics(3_000, 3_300, 1_500, 4_000_000, 3_000_000, 2.0);
        after.compaction.count = 5;
        let d = MetricsDelta::between(&before, &after);
        assert_eq!(d.user_bytes, 2_000);
        assert_eq!(d.wal_bytes_written, 2_200);
        assert_eq!(d.disk_bytes_written, 2_200 + 1_000 + 3_000_000);
        assert_eq!(d.write_amp, Some((1_000.0 + 3_000_000.0) / 2_000.0));
        assert_eq!(d.compaction.count, 3);
        assert_eq!(d.compaction.input_bytes, 4_000_000);
        assert_eq!(d.compaction.bandwidth_mb_s, 2.0);
        assert_eq!(d.compaction.stage_profile.merge, 1.0);
        assert_eq!(d.compaction.cpu_seconds, 3.0);
        assert_eq!(d.flush.cpu_seconds, 0.5);
        assert_eq!(d.flush.count, 0);
    }

    fn add(m: &mut Metrics, mode: &str, jobs: u64, input_bytes: u64, seconds: f64) {
        *m.compaction.modes.entry(mode.into()).or_insert(0) += jobs;
        let t = m.compaction.mode_totals.entry(mode.into()).or_default();
        t.jobs += jobs;
        t.input_bytes += input_bytes;
        t.seconds += seconds;
    }

    #[test]
    fn each_mode_keeps_its_own_bandwidth() {
        let mut before = metrics(0, 0, 0, 0, 0, 0.0);
        add(&mut before, "pipelined", 2, 10_000_000, 0.5);
        add(&mut before, "sequential", 1, 5_000_000, 1.0);
        let mut after = before.clone();
        add(&mut after, "pipelined", 3, 60_000_000, 0.75);
        add(&mut after, "parallel", 1, 40_000_000, 0.25);
        let d = MetricsDelta::between(&before, &after).compaction;

        // Sequential ran before the benchmark only: left out, in both maps.
        let modes: Vec<&str> = d.mode_totals.keys().map(String::as_str).collect();
        assert_eq!(modes, ["parallel", "pipelined"]);
        assert_eq!(
            d.modes.keys().collect::<Vec<_>>(),
            d.mode_totals.keys().collect::<Vec<_>>()
        );
        assert_eq!(
            d.mode_totals["pipelined"],
            ModeTotals {
                jobs: 3,
                input_bytes: 60_000_000,
                seconds: 0.75,
            }
        );
        assert_eq!(d.modes["pipelined"], 3);
        assert_eq!(d.mode_totals["pipelined"].bandwidth_mb_s(), 80.0);
        assert_eq!(d.mode_totals["parallel"].bandwidth_mb_s(), 160.0);

        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["mode_totals"]["parallel"]["jobs"], 1);
        assert_eq!(json["mode_totals"]["parallel"]["input_bytes"], 40_000_000);
        assert_eq!(json["mode_totals"]["parallel"]["seconds"], 0.25);
    }

    #[test]
    fn a_reset_counter_never_underflows() {
        let mut before = metrics(0, 0, 0, 0, 0, 0.0);
        add(&mut before, "pipelined", 4, 10_000_000, 2.0);
        let mut after = metrics(0, 0, 0, 0, 0, 0.0);
        add(&mut after, "pipelined", 1, 1_000_000, 0.5);
        let d = compaction_delta(&before.compaction, &after.compaction);
        assert!(d.modes.is_empty());
        assert!(d.mode_totals.is_empty());
    }

    #[test]
    fn no_user_writes_means_no_write_amp() {
        let m = metrics(10, 10, 10, 10, 10, 1.0);
        let d = MetricsDelta::between(&m, &m);
        assert_eq!(d.write_amp, None);
        assert_eq!(d.compaction.bandwidth_mb_s, 0.0);
        assert_eq!(d.compaction, CompactionDelta::default());
    }
}
