//! [`Metrics::to_prometheus`]: the metrics in Prometheus' text exposition format (version
//! 0.0.4), for a scrape endpoint an application serves or a node exporter's textfile
//! collector.
//!
//! Every name starts `sluice_`. Running totals since the database was opened in this process
//! are counters (`_total`; byte counts `_bytes_total`, times `_seconds_total`); sizes and
//! counts of the moment are gauges. Per-level figures carry a `level` label, compaction steps
//! a `step` label. Each family is written once, with its `# HELP` and `# TYPE` lines.

use std::fmt::Write as _;

use crate::metrics::Metrics;

/// Writes the text format into a string.
struct Exposition {
    out: String,
}

impl Exposition {
    /// Starts family `name` of `kind` (`counter` or `gauge`): its two header lines. Writing
    /// to a String cannot fail.
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP sluice_{name} {help}");
        let _ = writeln!(self.out, "# TYPE sluice_{name} {kind}");
    }

    /// A family with one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        let _ = writeln!(self.out, "sluice_{name} {value}");
    }

    /// A family with one sample per `(labels, value)`.
    fn labelled(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        samples: impl IntoIterator<Item = (String, f64)>,
    ) {
        self.family(name, kind, help);
        for (labels, value) in samples {
            let _ = writeln!(self.out, "sluice_{name}{{{labels}}} {value}");
        }
    }
}

impl Metrics {
    /// The metrics in Prometheus' text format; see [`crate::prometheus`].
    pub fn to_prometheus(&self) -> String {
        let mut e = Exposition { out: String::new() };
        let c = "counter";
        let g = "gauge";
        let levels = |f: fn(&crate::metrics::LevelMetrics) -> f64| {
            self.levels
                .iter()
                .map(move |l| (format!("level=\"{}\"", l.level), f(l)))
                .collect::<Vec<_>>()
        };
        e.labelled(
            "level_files",
            g,
            "Tables per level.",
            levels(|l| l.files as f64),
        );
        e.labelled(
            "level_bytes",
            g,
            "Table bytes per level.",
            levels(|l| l.size_bytes as f64),
        );
        e.labelled(
            "level_target_bytes",
            g,
            "Most bytes each level should hold (0: L0, and levels above the base level).",
            levels(|l| l.target_bytes as f64),
        );
        e.labelled(
            "level_score",
            g,
            "Compaction score per level (at least 1: due).",
            levels(|l| l.score),
        );
        e.labelled(
            "level_compactions_total",
            c,
            "Flushes (L0) and compactions into each level.",
            levels(|l| l.compactions as f64),
        );
        e.labelled(
            "level_written_bytes_total",
            c,
            "Bytes written into each level.",
            levels(|l| l.bytes_written as f64),
        );
        e.labelled(
            "level_compaction_seconds_total",
            c,
            "Wall seconds of the flushes (L0) and compactions into each level.",
            levels(|l| l.compaction_seconds),
        );
        e.labelled(
            "level_entries_dropped_total",
            c,
            "Entries the flushes and compactions into each level read and did not write.",
            levels(|l| l.entries_dropped as f64),
        );
        e.labelled(
            "level_read_amp",
            g,
            "Tables a point read may look at in each level.",
            levels(|l| l.read_amp as f64),
        );
        let s = &self.stalls;
        let by_cause = |f: fn(crate::metrics::StallCounts) -> f64| {
            [
                ("l0_slowdown", s.l0_slowdown),
                ("l0_stop", s.l0_stop),
                ("memtable_limit", s.memtable_limit),
            ]
            .map(|(cause, counts)| (format!("cause=\"{cause}\""), f(counts)))
        };
        e.labelled(
            "write_stalls_total",
            c,
            "Writes held up, by stall cause.",
            by_cause(|c| c.count as f64),
        );
        e.labelled(
            "write_stall_cause_seconds_total",
            c,
            "Seconds writers waited, by stall cause.",
            by_cause(|c| c.micros as f64 / 1e6),
        );
        for (job, jobs, m) in [
            ("flush", "flushes", &self.flush),
            ("compaction", "compactions", &self.compaction),
        ] {
            e.single(
                &format!("{jobs}_total"),
                c,
                &format!("Completed {job} jobs."),
                m.count as f64,
            );
            e.single(
                &format!("{job}_failures_total"),
                c,
                &format!("Failed {job} jobs."),
                m.failed as f64,
            );
            e.single(
                &format!("{job}_read_bytes_total"),
                c,
                &format!("Input bytes of {job} jobs."),
                m.input_bytes as f64,
            );
            e.single(
                &format!("{job}_written_bytes_total"),
                c,
                &format!("Bytes {job} jobs wrote."),
                m.output_bytes as f64,
            );
            e.single(
                &format!("{job}_seconds_total"),
                c,
                &format!("Wall seconds of {job} jobs."),
                m.seconds,
            );
        }
        e.labelled(
            "compaction_step_seconds_total",
            c,
            "Seconds compactions spent in each of the seven steps.",
            self.compaction
                .stage_profile
                .entries()
                .into_iter()
                .map(|(step, s)| (format!("step=\"{step}\""), s)),
        );
        let singles: [(&str, &str, &str, f64); 23] = [
            (
                "compaction_debt_bytes",
                g,
                "Estimated bytes compactions must rewrite to bring every level within its target.",
                self.compaction_debt_bytes as f64,
            ),
            (
                "table_cache_open_tables",
                g,
                "Table readers open.",
                self.table_cache.open_tables as f64,
            ),
            (
                "table_cache_hits_total",
                c,
                "Table lookups that found the reader open.",
                self.table_cache.hits as f64,
            ),
            (
                "table_cache_misses_total",
                c,
                "Table lookups that opened the table.",
                self.table_cache.misses as f64,
            ),
            (
                "bloom_useful_total",
                c,
                "Filter checks that saved a block read.",
                self.bloom.useful as f64,
            ),
            (
                "bloom_passed_total",
                c,
                "Filter checks that let the lookup through.",
                self.bloom.passed as f64,
            ),
            (
                "bloom_false_positives_total",
                c,
                "Lookups a filter let through that found no entry.",
                self.bloom.false_positives as f64,
            ),
            (
                "space_amplification",
                g,
                "Bytes on disk per byte of the bottom level and live blob values.",
                self.space_amp(),
            ),
            (
                "trivial_moves_total",
                c,
                "Tables moved down a level unchanged.",
                self.trivial_moves as f64,
            ),
            (
                "user_written_bytes_total",
                c,
                "Key and value bytes accepted from users.",
                self.user_bytes_written as f64,
            ),
            (
                "wal_written_bytes_total",
                c,
                "Bytes appended to write-ahead logs.",
                self.wal_bytes_written as f64,
            ),
            (
                "wal_syncs_total",
                c,
                "Write-ahead log syncs.",
                self.wal_syncs as f64,
            ),
            (
                "write_slowdowns_total",
                c,
                "Writes delayed by the L0 slowdown trigger.",
                self.write_slowdowns as f64,
            ),
            (
                "write_stall_seconds_total",
                c,
                "Seconds writers spent stalled.",
                self.write_stall_micros as f64 / 1e6,
            ),
            (
                "block_cache_hits_total",
                c,
                "Block cache lookups that hit.",
                self.block_cache_hits as f64,
            ),
            (
                "block_cache_misses_total",
                c,
                "Block cache lookups that missed.",
                self.block_cache_misses as f64,
            ),
            (
                "block_cache_bytes",
                g,
                "Bytes the block cache holds.",
                self.block_cache_bytes as f64,
            ),
            (
                "memtable_bytes",
                g,
                "Bytes in the active and immutable memtables.",
                self.memtable_bytes as f64,
            ),
            (
                "immutable_memtables",
                g,
                "Memtables waiting for flush.",
                self.immutable_memtables as f64,
            ),
            (
                "compactions_running",
                g,
                "Automatic compactions running.",
                self.compactions_running as f64,
            ),
            (
                "l0_sublevels",
                g,
                "L0 sublevels a read may look at.",
                self.l0_sublevels as f64,
            ),
            (
                "base_level",
                g,
                "The level L0 compacts into.",
                self.base_level as f64,
            ),
            ("snapshots", g, "Live snapshots.", self.snapshots as f64),
        ];
        for (name, kind, help, value) in singles {
            e.single(name, kind, help, value);
        }
        let b = &self.blob;
        e.single(
            "blob_files",
            g,
            "Blob files of the current version.",
            b.files as f64,
        );
        e.single(
            "blob_bytes",
            g,
            "Bytes of those blob files.",
            b.bytes as f64,
        );
        e.single(
            "blob_live_bytes",
            g,
            "Blob record bytes live tables reference.",
            b.live_bytes as f64,
        );
        e.single(
            "blob_garbage_bytes",
            g,
            "Blob record bytes no live table references.",
            b.garbage_bytes as f64,
        );
        if let Some(o) = &self.object_store {
            let ops = [
                ("get", o.gets),
                ("put", o.puts),
                ("head", o.heads),
                ("list", o.lists),
                ("delete", o.deletes),
                ("copy", o.copies),
            ];
            e.labelled(
                "object_store_requests_total",
                c,
                "Requests to the object store the tables live in, by kind.",
                ops.map(|(op, n)| (format!("op=\"{op}\""), n as f64)),
            );
            e.labelled(
                "object_store_bytes_total",
                c,
                "Bytes moved to and from the object store.",
                [
                    ("direction=\"down\"".to_string(), o.bytes_downloaded as f64),
                    ("direction=\"up\"".to_string(), o.bytes_uploaded as f64),
                ],
            );
            e.labelled(
                "object_cache_opens_total",
                c,
                "Object opens the local object cache served (hit) or not (miss).",
                [
                    ("result=\"hit\"".to_string(), o.cache_hits as f64),
                    ("result=\"miss\"".to_string(), o.cache_misses as f64),
                ],
            );
        }
        e.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_type_and_well_formed_samples() {
        let mut m = Metrics {
            levels: (0..7)
                .map(|level| crate::metrics::LevelMetrics {
                    level,
                    files: level,
                    ..Default::default()
                })
                .collect(),
            wal_syncs: 3,
            write_stall_micros: 1_500_000,
            compaction_debt_bytes: 4096,
            object_store: Some(crate::metrics::ObjectStoreMetrics {
                gets: 5,
                cache_hits: 2,
                ..Default::default()
            }),
            ..Metrics::default()
        };
        m.stalls.l0_stop.count = 2;
        let text = m.to_prometheus();
        let mut families = std::collections::BTreeSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge"].contains(&kind), "{line}");
                assert!(families.insert(name.to_string()), "{name} twice");
                if kind == "counter" {
                    assert!(name.ends_with("_total"), "{name}");
                }
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            // name{labels} value, the name one of the families declared.
            let (series, value) = line.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap();
            assert!(families.contains(name), "{line}");
            value.parse::<f64>().unwrap();
        }
        assert!(
            text.contains("sluice_level_files{level=\"6\"} 6\n"),
            "{text}"
        );
        assert!(text.contains("sluice_wal_syncs_total 3\n"));
        assert!(text.contains("sluice_object_store_requests_total{op=\"get\"} 5\n"));
        assert!(text.contains("sluice_object_cache_opens_total{result=\"hit\"} 2\n"));
        assert!(text.contains("sluice_compaction_debt_bytes 4096\n"));
        assert!(text.contains("sluice_write_stalls_total{cause=\"l0_stop\"} 2\n"));
        assert!(text.contains("sluice_write_stall_seconds_total 1.5\n"));
        assert!(text.contains("sluice_compaction_step_seconds_total{step=\"merge\"} 0\n"));
        assert!(families.contains("sluice_flushes_total"));
        assert!(families.contains("sluice_compactions_total"));
    }
}
