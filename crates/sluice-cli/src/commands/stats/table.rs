//! The text `sluice stats` prints: the per-level table in the layout of Pebble's metrics
//! table with RocksDB's per-level compaction columns, then one line per subsystem.

use std::io::Write;

use sluice::Metrics;
use sluice::metrics::{JobMetrics, LevelMetrics, StallCounts};
use sluice_bench::report::{pipeline_line, stage_profile_line};

use crate::units::size;

/// The level table's columns: Pebble's (files, size, score, r-amp, in, read, written,
/// moved, w-amp), the level's target size, and RocksDB's compaction columns (`Comp(cnt)`,
/// `Comp(sec)`, `KeyIn`, `KeyDrop`).
const HEADER: &str = "level | files |       size |     target | score | r-amp |         in |       \
                      read |    written |      moved | w-amp | comps | comp sec |    keys in |  \
                      keys drop";

/// The level table, its totals, and one line per subsystem (Pebble's `db.Metrics()` text).
pub fn write_table(m: &Metrics, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "{HEADER}")?;
    let rule: String = HEADER
        .chars()
        .map(|c| if c == '|' { '+' } else { '-' })
        .collect();
    writeln!(out, "{rule}")?;
    for l in &m.levels {
        writeln!(
            out,
            "{:>5} | {:>5} | {:>10} | {:>10} | {:>5.2} | {:>5} | {:>10} | {:>10} | {:>10} | \
             {:>10} | {:>5.2} | {:>5} | {:>8.3} | {:>10} | {:>10}",
            l.level,
            l.files,
            size(l.size_bytes),
            match l.target_bytes {
                0 => "-".to_string(),
                target => size(target),
            },
            l.score,
            l.read_amp,
            size(l.bytes_in),
            size(l.bytes_read),
            size(l.bytes_written),
            size(l.bytes_moved),
            l.write_amp,
            l.compactions,
            l.compaction_seconds,
            l.entries_in,
            l.entries_dropped
        )?;
    }
    let sum = |f: fn(&LevelMetrics) -> u64| m.levels.iter().map(f).sum::<u64>();
    writeln!(
        out,
        "total | {:>5} | {:>10} | {:>10} | {:>5} | {:>5} | {:>10} | {:>10} | {:>10} | {:>10} | \
         {:>5.2} | {:>5} | {:>8.3} | {:>10} | {:>10}",
        m.levels.iter().map(|l| l.files).sum::<usize>(),
        size(m.total_size_bytes()),
        "-",
        "-",
        m.read_amp(),
        size(m.user_bytes_written),
        size(sum(|l| l.bytes_read)),
        size(sum(|l| l.bytes_written)),
        size(sum(|l| l.bytes_moved)),
        m.write_amp(),
        sum(|l| l.compactions),
        m.levels.iter().map(|l| l.compaction_seconds).sum::<f64>(),
        sum(|l| l.entries_in),
        sum(|l| l.entries_dropped)
    )?;
    writeln!(
        out,
        "(in: flushed bytes for L0, bytes compacted in from above otherwise, user bytes in the \
         total; w-amp: written / in; comps and comp sec: the flushes or compactions that wrote \
         into the level{})",
        // Reports of builds before dynamic level sizing have no base level.
        match m.base_level {
            0 => String::new(),
            base => format!("; L0 compacts into L{base}"),
        }
    )?;
    writeln!(
        out,
        "read amplification: {} (L0: {} sublevel(s) over {} file(s)); space amplification: \
         {:.2} (bytes on disk / bytes of the bottom level and live blob values)",
        m.read_amp(),
        m.l0_sublevels,
        m.levels.first().map_or(0, |l| l.files),
        m.space_amp()
    )?;
    writeln!(
        out,
        "compaction debt: {} estimated; {} compaction(s) running, at most {} at once",
        size(m.compaction_debt_bytes),
        m.compactions_running,
        m.compactions_running_peak
    )?;
    writeln!(out)?;
    write_job(out, "flush", &m.flush, "")?;
    write_job(
        out,
        "compaction",
        &m.compaction,
        &format!(
            ", {} trivial moves, {} intra-L0",
            m.trivial_moves, m.intra_l0_compactions
        ),
    )?;
    let c = &m.compaction;
    writeln!(
        out,
        "keys dropped by compactions: {} of {} read (compaction filter removed {}, changed {}; \
         merge operands combined {}; under range tombstones {})",
        c.entries_in.saturating_sub(c.entries_out),
        c.entries_in,
        c.filter_removed,
        c.filter_changed,
        c.merge_absorbed,
        c.range_covered
    )?;
    for (name, job) in [("compaction", &m.compaction), ("flush", &m.flush)] {
        if job.count > 0 {
            writeln!(
                out,
                "stage profile ({name}): {}",
                stage_profile_line(&job.stage_profile)
            )?;
        }
    }
    if !m.compaction.pipeline.is_empty() {
        let modes: Vec<String> = m
            .compaction
            .modes
            .iter()
            .map(|(mode, n)| format!("{mode} {n}"))
            .collect();
        writeln!(
            out,
            "executors: {}; stages: {}",
            modes.join(", "),
            pipeline_line(&m.compaction.pipeline)
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "wal: {} written, {} syncs; user data: {} written",
        size(m.wal_bytes_written),
        m.wal_syncs,
        size(m.user_bytes_written),
    )?;
    let s = &m.stalls;
    let stall = |c: &StallCounts| format!("{} ({:.3} s)", c.count, c.micros as f64 / 1e6);
    writeln!(
        out,
        "write stalls: {:.3} s in all; L0 slowdowns {}, L0 stops {}, memtable limit {}",
        m.write_stall_micros as f64 / 1e6,
        stall(&s.l0_slowdown),
        stall(&s.l0_stop),
        stall(&s.memtable_limit)
    )?;
    let lookups = m.block_cache_hits + m.block_cache_misses;
    writeln!(
        out,
        "memtables: {} ({} immutable); block cache: {}, {} hits, {} misses ({})",
        size(m.memtable_bytes),
        m.immutable_memtables,
        size(m.block_cache_bytes),
        m.block_cache_hits,
        m.block_cache_misses,
        percent(m.block_cache_hits as f64 / lookups.max(1) as f64, lookups)
    )?;
    let (t, b) = (&m.table_cache, &m.bloom);
    writeln!(
        out,
        "table cache: {} open, {} hits, {} misses ({}); bloom filters: {} of {} checks saved \
         a read ({} utility), {} false positives ({} of absent keys)",
        t.open_tables,
        t.hits,
        t.misses,
        percent(t.hit_ratio(), t.hits + t.misses),
        b.useful,
        b.useful + b.passed,
        percent(b.utility(), b.useful + b.passed),
        b.false_positives,
        percent(b.false_positive_rate(), b.useful + b.false_positives)
    )?;
    if let Some(o) = &m.object_store {
        writeln!(
            out,
            "object store: {} requests ({} GET, {} PUT, {} HEAD, {} LIST, {} DELETE, {} COPY), \
             {} down, {} up; object cache: {} hits, {} misses ({})",
            o.requests(),
            o.gets,
            o.puts,
            o.heads,
            o.lists,
            o.deletes,
            o.copies,
            size(o.bytes_downloaded),
            size(o.bytes_uploaded),
            o.cache_hits,
            o.cache_misses,
            percent(o.cache_hit_ratio(), o.cache_hits + o.cache_misses)
        )?;
    }
    writeln!(
        out,
        "last sequence: {}; snapshots: {}",
        m.last_sequence, m.snapshots
    )?;
    writeln!(
        out,
        "recovery: {} WAL records replayed, {} bytes of MANIFEST or WAL not applied",
        m.recovery_wal_records, m.recovery_dropped_bytes
    )?;
    if m.blob.files > 0 {
        writeln!(
            out,
            "blob files: {} of {}; {} live, {} garbage ({:.1}%)",
            m.blob.files,
            size(m.blob.bytes),
            size(m.blob.live_bytes),
            size(m.blob.garbage_bytes),
            m.blob.garbage_ratio() * 100.0
        )?;
    }
    if let Some(p) = &m.partitions {
        write_partitions(p, m, out)?;
    }
    Ok(())
}

/// `ratio` as a percentage, or `-` when it was taken over no events (`seen` is 0).
fn percent(ratio: f64, seen: u64) -> String {
    match seen {
        0 => "-".to_string(),
        _ => format!("{:.1}%", ratio * 100.0),
    }
}

/// Partitioned mode: the range map, one row per range, then one per owner.
fn write_partitions(
    p: &sluice::partition::stats::PartitionStats,
    m: &Metrics,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "\nrange | start            | owner |       size | files |    pending | moving"
    )?;
    for (i, r) in p.ranges.iter().enumerate() {
        let moving = if r.forwarded_from.is_empty() {
            String::new()
        } else {
            format!(
                "{} still with owner {:?}",
                size(r.forwarded_bytes),
                r.forwarded_from
            )
        };
        writeln!(
            out,
            "{i:>5} | {:<16} | {:>5} | {:>10} | {:>5} | {:>10} | {moving}",
            r.start.escape_ascii().to_string(),
            r.owner,
            size(r.bytes),
            r.files,
            size(r.pending_compaction_bytes),
        )?;
    }
    for o in &p.owners {
        writeln!(
            out,
            "owner {}: {} ranges, {} in {} tables, {} pending compaction",
            o.owner,
            o.ranges,
            size(o.bytes),
            o.files,
            size(o.pending_compaction_bytes)
        )?;
    }
    writeln!(
        out,
        "skew (largest owner / smallest): {:.2}; ranges moved: {}; ranges split: {}; tables \
         relocated: {}",
        p.skew(),
        m.range_moves,
        m.range_splits,
        m.relocations
    )
}

fn write_job(
    out: &mut dyn Write,
    name: &str,
    job: &JobMetrics,
    extra: &str,
) -> std::io::Result<()> {
    let failed = if job.failed > 0 {
        format!(", {} failed", job.failed)
    } else {
        String::new()
    };
    writeln!(
        out,
        "{:<11} {:>5} jobs, {} in, {} out, {:.3} s, {:.1} MB/s{extra}{failed}",
        format!("{name}:"),
        job.count,
        size(job.input_bytes),
        size(job.output_bytes),
        job.seconds,
        job.bandwidth_mb_s()
    )
}

#[cfg(test)]
pub(super) fn sample() -> Metrics {
    let mut m = Metrics {
        user_bytes_written: 1000,
        ..Metrics::of_empty_tree()
    };
    m.levels[1].files = 2;
    m.levels[1].size_bytes = 3 << 20;
    m.levels[1].bytes_written = 2000;
    m.compaction.count = 1;
    m.compaction.input_bytes = 4_000_000;
    m.compaction.seconds = 2.0;
    m.compaction.stage_profile.merge = 1.0;
    m.levels[1].compactions = 1;
    m.levels[1].compaction_seconds = 2.0;
    m.levels[1].entries_in = 12_345;
    m.levels[1].entries_dropped = 345;
    m.levels[1].read_amp = 1;
    m.compaction.entries_in = 12_345;
    m.compaction.entries_out = 12_000;
    m.compaction.filter_removed = 45;
    m.compaction_debt_bytes = 5 << 20;
    m.stalls.memtable_limit = sluice::metrics::StallCounts {
        count: 3,
        micros: 250_000,
    };
    m.write_stall_micros = 250_000;
    m.table_cache = sluice::metrics::TableCacheMetrics {
        open_tables: 2,
        hits: 99,
        misses: 1,
    };
    m.bloom = sluice::metrics::BloomMetrics {
        useful: 90,
        passed: 10,
        false_positives: 10,
    };
    m.flush.output_bytes = 500;
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_a_row_per_level_a_total_and_the_profile() {
        let mut buf = Vec::new();
        write_table(&sample(), &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("level | files"));
        assert!(lines[3].starts_with("    1 |     2 |   3.00 MiB"), "{text}");
        assert!(lines[9].starts_with("total |     2 |"), "{text}");
        assert!(text.contains("compaction:     1 jobs"), "{text}");
        assert!(text.contains("2.0 MB/s"), "{text}");
        assert!(text.contains("S4 merge 1.000 s (100.0%)"), "{text}");
        // RocksDB's compaction columns: count, seconds, keys in and dropped.
        assert!(
            lines[3].ends_with("|  0.00 |     1 |    2.000 |      12345 |        345"),
            "{text}"
        );
        assert!(
            text.contains("read amplification: 1 (L0: 0 sublevel(s) over 0 file(s)); space amplification: 1.00"),
            "{text}"
        );
        assert!(
            text.contains("compaction debt: 5.00 MiB estimated"),
            "{text}"
        );
        assert!(
            text.contains(
                "keys dropped by compactions: 345 of 12345 read (compaction filter removed 45"
            ),
            "{text}"
        );
        assert!(text.contains("memtable limit 3 (0.250 s)"), "{text}");
        assert!(
            text.contains("table cache: 2 open, 99 hits, 1 misses (99.0%)"),
            "{text}"
        );
        assert!(
            text.contains("bloom filters: 90 of 100 checks saved a read (90.0% utility), 10 false positives (10.0% of absent keys)"),
            "{text}"
        );
        // Every table line has the same width as the header.
        assert!(
            lines[..10].iter().all(|l| l.len() == lines[0].len()),
            "{text}"
        );
    }

    #[test]
    fn partitioned_databases_show_their_range_map() {
        use sluice::partition::stats::{OwnerStats, PartitionStats, RangeStats};
        let mut m = sample();
        m.range_moves = 1;
        m.partitions = Some(PartitionStats {
            ranges: vec![
                RangeStats {
                    owner: 1,
                    bytes: 2 << 20,
                    files: 3,
                    forwarded_from: vec![0],
                    forwarded_bytes: 1 << 20,
                    ..RangeStats::default()
                },
                RangeStats {
                    start: b"m".to_vec(),
                    bytes: 1 << 20,
                    files: 1,
                    ..RangeStats::default()
                },
            ],
            owners: vec![
                OwnerStats {
                    owner: 0,
                    ranges: 1,
                    bytes: 2 << 20,
                    files: 2,
                    ..OwnerStats::default()
                },
                OwnerStats {
                    owner: 1,
                    ranges: 1,
                    bytes: 1 << 20,
                    files: 2,
                    ..OwnerStats::default()
                },
            ],
        });
        let mut buf = Vec::new();
        write_table(&m, &mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.contains("1.00 MiB still with owner [0]"), "{text}");
        assert!(
            text.contains("    1 | m                |     0 |"),
            "{text}"
        );
        assert!(
            text.contains("owner 1: 1 ranges, 1.00 MiB in 2 tables"),
            "{text}"
        );
        assert!(
            text.contains("skew (largest owner / smallest): 2.00; ranges moved: 1"),
            "{text}"
        );
        assert_eq!(
            super::super::to_json(&m).unwrap()["partitions"]["ranges"][1]["files"],
            1
        );
    }
}
