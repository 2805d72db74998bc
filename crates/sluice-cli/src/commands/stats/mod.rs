//! `stats`: the LSM metrics table (Pebble's layout), flush and compaction totals and the stage
//! profile.
//!
//! Level sizes, file counts and scores describe the tree on disk. Traffic counters (in, read,
//! written, moved, jobs, stage times) are kept in memory by the open database, so for the CLI
//! they cover only what happened since it opened the database (typically the flush of a
//! replayed WAL); the counters of the last process that had it open for writing come from the
//! `STATS` file it left at close ("last session").

use std::io::Write;

use clap::Args;
use serde_json::{Value, json};
use sluice::Metrics;
use sluice::metrics::JobMetrics;
use sluice_bench::report::{pipeline_line, stage_profile_line};

use super::keyspace::KeyspaceArg;
use super::{Access, OpenArgs};
use crate::failure::CmdResult;
use crate::units::size;

/// `sluice stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    #[command(flatten)]
    pub keyspace: KeyspaceArg,
    #[command(flatten)]
    pub db: OpenArgs,
    /// Print JSON instead of text.
    #[arg(long, conflicts_with = "prometheus")]
    pub json: bool,
    /// Print the metrics in Prometheus' text format (for a node exporter's textfile
    /// collector).
    #[arg(long)]
    pub prometheus: bool,
}

pub fn run(args: &StatsArgs, out: &mut dyn Write) -> CmdResult {
    let db = args.keyspace.open(&args.db, Access::ReadOnly)?;
    let m = db.metrics()?;
    let last = last_session(&args.db.at.db);
    let keyspace = db.name().to_string();
    let keyspaces = db.db().keyspace_names();
    db.close()?;
    if args.prometheus {
        write!(out, "{}", m.to_prometheus())?;
    } else if args.json {
        let mut v = to_json(&m)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("keyspace".into(), json!(keyspace));
            obj.insert("keyspaces".into(), json!(keyspaces));
            obj.insert("last_session".into(), last.unwrap_or(Value::Null));
        }
        writeln!(out, "{}", serde_json::to_string(&v)?)?;
    } else {
        write_table(&m, out)?;
        if let Some(last) = &last {
            writeln!(out, "{}", last_session_line(last))?;
        }
        if keyspaces.len() > 1 {
            writeln!(
                out,
                "keyspace {keyspace} (the database's keyspaces: {})",
                keyspaces.join(", ")
            )?;
        }
    }
    Ok(())
}

/// The `STATS` file the last read-write session of the database in `dir` left at close: when
/// it closed and its `Metrics` (`None` if there is none or it does not parse).
fn last_session(dir: &std::path::Path) -> Option<Value> {
    let bytes = std::fs::read(dir.join(sluice::STATS_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// One line of the last session's traffic, from its `STATS` record.
fn last_session_line(last: &Value) -> String {
    let m = &last["metrics"];
    let n = |v: &Value| v.as_f64().unwrap_or(0.0);
    format!(
        "last session (closed {} UTC): {:.1} MB from users; {} flush(es) wrote {:.1} MB; {} \
         compaction(s) read {:.1} MB, wrote {:.1} MB; writers stalled {:.3} s",
        last["closed_at"].as_str().unwrap_or("?"),
        n(&m["user_bytes_written"]) / 1e6,
        n(&m["flush"]["count"]),
        n(&m["flush"]["output_bytes"]) / 1e6,
        n(&m["compaction"]["count"]),
        n(&m["compaction"]["input_bytes"]) / 1e6,
        n(&m["compaction"]["output_bytes"]) / 1e6,
        n(&m["write_stall_micros"]) / 1e6
    )
}

/// `Metrics` as JSON plus the derived figures the text shows.
fn to_json(m: &Metrics) -> serde_json::Result<Value> {
    let mut v = serde_json::to_value(m)?;
    if let Some(obj) = v.as_object_mut() {
        obj.insert("total_size_bytes".into(), json!(m.total_size_bytes()));
        obj.insert("table_bytes_written".into(), json!(m.table_bytes_written()));
        obj.insert("disk_bytes_written".into(), json!(m.disk_bytes_written()));
        obj.insert("write_amp".into(), json!(m.write_amp()));
    }
    for (name, job) in [("flush", &m.flush), ("compaction", &m.compaction)] {
        if let Some(obj) = v.get_mut(name).and_then(Value::as_object_mut) {
            obj.insert("bandwidth_mb_s".into(), json!(job.bandwidth_mb_s()));
        }
    }
    Ok(v)
}

fn write_table(m: &Metrics, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(
        out,
        "level | files |       size | score |         in |       read |    written |      moved | w-amp"
    )?;
    writeln!(
        out,
        "------+-------+------------+-------+------------+------------+------------+------------+------"
    )?;
    for l in &m.levels {
        writeln!(
            out,
            "{:>5} | {:>5} | {:>10} | {:>5.2} | {:>10} | {:>10} | {:>10} | {:>10} | {:>5.2}",
            l.level,
            l.files,
            size(l.size_bytes),
            l.score,
            size(l.bytes_in),
            size(l.bytes_read),
            size(l.bytes_written),
            size(l.bytes_moved),
            l.write_amp
        )?;
    }
    let sum = |f: fn(&sluice::metrics::LevelMetrics) -> u64| m.levels.iter().map(f).sum::<u64>();
    writeln!(
        out,
        "total | {:>5} | {:>10} | {:>5} | {:>10} | {:>10} | {:>10} | {:>10} | {:>5.2}",
        m.levels.iter().map(|l| l.files).sum::<usize>(),
        size(m.total_size_bytes()),
        "-",
        size(m.user_bytes_written),
        size(sum(|l| l.bytes_read)),
        size(sum(|l| l.bytes_written)),
        size(sum(|l| l.bytes_moved)),
        m.write_amp()
    )?;
    writeln!(
        out,
        "L0 read amplification: {} sublevel(s) over {} file(s)",
        m.l0_sublevels,
        m.levels.first().map_or(0, |l| l.files)
    )?;
    writeln!(out)?;
    write_job(out, "flush", &m.flush, "")?;
    write_job(
        out,
        "compaction",
        &m.compaction,
        &format!(
            ", {} trivial moves, at most {} at once",
            m.trivial_moves, m.compactions_running_peak
        ),
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
    writeln!(
        out,
        "wal: {} written, {} syncs; user data: {} written; write stalls: {} slowdowns, {:.3} s",
        size(m.wal_bytes_written),
        m.wal_syncs,
        size(m.user_bytes_written),
        m.write_slowdowns,
        m.write_stall_micros as f64 / 1e6
    )?;
    let lookups = m.block_cache_hits + m.block_cache_misses;
    let hit_pct = if lookups > 0 {
        m.block_cache_hits as f64 * 100.0 / lookups as f64
    } else {
        0.0
    };
    writeln!(
        out,
        "memtables: {} ({} immutable); block cache: {}, {} hits, {} misses ({hit_pct:.1}% hits)",
        size(m.memtable_bytes),
        m.immutable_memtables,
        size(m.block_cache_bytes),
        m.block_cache_hits,
        m.block_cache_misses
    )?;
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
    writeln!(
        out,
        "(traffic and job counters above cover this process only, since it opened the \
         database)"
    )
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
mod tests {
    use super::*;
    use sluice::metrics::LevelMetrics;

    fn sample() -> Metrics {
        let mut m = Metrics {
            levels: (0..7)
                .map(|level| LevelMetrics {
                    level,
                    ..LevelMetrics::default()
                })
                .collect(),
            user_bytes_written: 1000,
            ..Metrics::default()
        };
        m.levels[1].files = 2;
        m.levels[1].size_bytes = 3 << 20;
        m.levels[1].bytes_written = 2000;
        m.compaction.count = 1;
        m.compaction.input_bytes = 4_000_000;
        m.compaction.seconds = 2.0;
        m.compaction.stage_profile.merge = 1.0;
        m.flush.output_bytes = 500;
        m
    }

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
        assert_eq!(to_json(&m).unwrap()["partitions"]["ranges"][1]["files"], 1);
    }

    #[test]
    fn json_adds_derived_figures() {
        let v = to_json(&sample()).unwrap();
        assert_eq!(v["compaction"]["bandwidth_mb_s"], 2.0);
        assert_eq!(v["levels"][1]["files"], 2);
        assert_eq!(v["total_size_bytes"], 3 << 20);
        assert_eq!(v["write_amp"], 0.5);
    }
}
