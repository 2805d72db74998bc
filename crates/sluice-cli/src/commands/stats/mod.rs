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

use super::keyspace::KeyspaceArg;
use super::{Access, OpenArgs};
use crate::failure::{CmdResult, Failure};

mod table;

use table::write_table;

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
    /// Print the whole table of the last read-write session (from the `STATS` file it wrote
    /// at close: its traffic, and the tree as it was then) instead of this process's. The
    /// default keyspace's, whatever --keyspace says.
    #[arg(long, conflicts_with = "prometheus")]
    pub last_session: bool,
}

pub fn run(args: &StatsArgs, out: &mut dyn Write) -> CmdResult {
    if args.last_session {
        return last_session_table(args, out);
    }
    let db = args.keyspace.open(&args.db, Access::Read)?;
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
        writeln!(
            out,
            "(traffic and job counters above cover this process only, since it opened the \
             database)"
        )?;
        if let Some(last) = &last {
            writeln!(out, "{}", last_session_line(last))?;
            writeln!(
                out,
                "(`sluice stats --last-session` prints its whole table)"
            )?;
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

/// `stats --last-session`: the last session's metrics as the table (or `--json`).
fn last_session_table(args: &StatsArgs, out: &mut dyn Write) -> CmdResult {
    super::require_database(&args.db.at.db)?;
    let Some(last) = last_session(&args.db.at.db) else {
        return Err(Failure::Error(format!(
            "{} has no readable {} file: no read-write session has closed it yet",
            args.db.at.db.display(),
            sluice::STATS_FILE
        )));
    };
    let m: Metrics = serde_json::from_value(last["metrics"].clone())
        .map_err(|e| Failure::Error(format!("{} does not parse: {e}", sluice::STATS_FILE)))?;
    let closed = last["closed_at"].as_str().unwrap_or("?");
    if args.json {
        let mut v = to_json(&m)?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("closed_at".into(), json!(closed));
        }
        writeln!(out, "{}", serde_json::to_string(&v)?)?;
    } else {
        writeln!(out, "last session, closed {closed} UTC:")?;
        write_table(&m, out)?;
    }
    Ok(())
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
        obj.insert("read_amp".into(), json!(m.read_amp()));
        obj.insert("space_amp".into(), json!(m.space_amp()));
        obj.insert("bloom_utility".into(), json!(m.bloom.utility()));
        obj.insert(
            "bloom_false_positive_rate".into(),
            json!(m.bloom.false_positive_rate()),
        );
        obj.insert(
            "table_cache_hit_ratio".into(),
            json!(m.table_cache.hit_ratio()),
        );
    }
    for (name, job) in [("flush", &m.flush), ("compaction", &m.compaction)] {
        if let Some(obj) = v.get_mut(name).and_then(Value::as_object_mut) {
            obj.insert("bandwidth_mb_s".into(), json!(job.bandwidth_mb_s()));
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::table::sample;
    use super::*;

    #[test]
    fn json_adds_derived_figures() {
        let v = to_json(&sample()).unwrap();
        assert_eq!(v["compaction"]["bandwidth_mb_s"], 2.0);
        assert_eq!(v["levels"][1]["files"], 2);
        assert_eq!(v["total_size_bytes"], 3 << 20);
        assert_eq!(v["write_amp"], 0.5);
        assert_eq!(v["read_amp"], 1);
        assert_eq!(v["bloom_utility"], 0.9);
        assert_eq!(v["compaction_debt_bytes"], 5 << 20);
        assert_eq!(v["stalls"]["memtable_limit"]["count"], 3);
        assert_eq!(v["levels"][1]["entries_dropped"], 345);
    }
}
