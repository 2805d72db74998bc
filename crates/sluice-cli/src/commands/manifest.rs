//! `manifest dump`: every version edit of the MANIFEST named by `CURRENT`, then the state that
//! replaying them produces: counters, keyspaces, the merge operator, files per level, range
//! tombstones and blob files. Reads the files directly, without opening (or locking)
//! the database, so it also works on a database another process has open.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};
use serde_json::{Value, json};
use sluice::internals::filename::read_current_file;
use sluice::internals::version::Version;
use sluice::internals::version::edit::{FileMetaData, VersionEdit};
use sluice::internals::version::manifest::read_manifest;
use sluice::internals::version::set::VersionSet;
use sluice::options::NUM_LEVELS;
use sluice_sst::range_del::RangeTombstone;

use super::DbArg;
use crate::escape::{escape, internal_key_json};
use crate::failure::CmdResult;
use crate::units::size;

/// `sluice manifest`.
#[derive(Debug, Subcommand)]
pub enum ManifestCommand {
    /// Print every version edit of the current MANIFEST, then the state they build: counters,
    /// merge operator, keyspaces, files per level, range tombstones and blob files.
    Dump(ManifestDumpArgs),
}

/// `sluice manifest dump`. No engine flags: it opens no database.
#[derive(Debug, Args)]
pub struct ManifestDumpArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(command: &ManifestCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        ManifestCommand::Dump(args) => dump(args, out),
    }
}

fn dump(args: &ManifestDumpArgs, out: &mut dyn Write) -> CmdResult {
    let dir = &args.db.db;
    super::require_database(dir)?;
    let fs = sluice_sst::fs::os_fs();
    let path = dir.join(read_current_file(&*fs, dir)?);
    let contents = read_manifest(&*fs, &path)?;
    let edits = &contents.edits;
    let set = VersionSet::from_manifest(edits, &path)?;
    let version = set.current();
    if args.json {
        let v = json!({
            "manifest": path.display().to_string(),
            "edits": edits.iter().map(edit_json).collect::<Vec<_>>(),
            "state": state_json(&set),
            "levels": (0..NUM_LEVELS).map(|l| level_json(version, l)).collect::<Vec<_>>(),
            "range_tombstones": version.range_tombstones().iter().map(tombstone_json)
                .collect::<Vec<_>>(),
            "blob_files": version.blob_files().values().map(|b| json!({
                "number": b.meta.number,
                "dir_index": b.meta.dir_index,
                "file_size": b.meta.file_size,
                "records": b.meta.records,
                "value_bytes": b.meta.value_bytes,
                "live_refs": b.live.refs,
                "live_bytes": b.live.bytes,
            })).collect::<Vec<_>>(),
            "dropped": contents.dropped.iter().map(|d| json!({
                "offset": d.offset, "bytes": d.bytes, "reason": d.reason,
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
    } else {
        write_text(&path, edits, &set, out)?;
        for d in &contents.dropped {
            writeln!(out)?;
            writeln!(out, "torn last record not applied: {d}")?;
        }
    }
    Ok(())
}

fn write_text(
    path: &Path,
    edits: &[VersionEdit],
    set: &VersionSet,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "manifest: {} ({} edits)", path.display(), edits.len())?;
    for (i, e) in edits.iter().enumerate() {
        writeln!(out)?;
        writeln!(out, "edit {i}:")?;
        // The engine's description of an edit, one line per field.
        for line in e.to_string().lines() {
            writeln!(out, "  {line}")?;
        }
    }
    writeln!(out)?;
    writeln!(out, "state:")?;
    writeln!(
        out,
        "  last_sequence: {}, log_number: {}, next_file_number: {}",
        set.last_sequence, set.log_number, set.next_file_number
    )?;
    let named = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".into());
    writeln!(out, "  merge_operator: {}", named(&set.merge_operator))?;
    writeln!(out, "  value_format: {}", named(&set.value_format))?;
    for (id, name) in &set.keyspaces {
        writeln!(
            out,
            "  keyspace {id}: {} (keyspaces/{id}/)",
            name.escape_default()
        )?;
    }
    let version = set.current();
    writeln!(out)?;
    writeln!(out, "files per level:")?;
    for level in 0..NUM_LEVELS {
        let files = version.files(level);
        writeln!(
            out,
            "L{level}: {} files, {}",
            files.len(),
            size(version.level_bytes(level))
        )?;
        for f in files {
            writeln!(out, "  {f}")?;
        }
    }
    let tombstones = version.range_tombstones();
    writeln!(out)?;
    writeln!(out, "range tombstones: {}", tombstones.len())?;
    for t in tombstones {
        writeln!(
            out,
            "  @{}: [{}, {})",
            t.seq,
            escape(&t.start),
            escape(&t.end)
        )?;
    }
    let blobs = version.blob_files();
    writeln!(out)?;
    writeln!(out, "blob files: {}", blobs.len())?;
    for b in blobs.values() {
        writeln!(
            out,
            "  {} live: {} refs, {}",
            b.meta,
            b.live.refs,
            size(b.live.bytes)
        )?;
    }
    Ok(())
}

fn state_json(set: &VersionSet) -> Value {
    json!({
        "last_sequence": set.last_sequence,
        "log_number": set.log_number,
        "next_file_number": set.next_file_number,
        "merge_operator": set.merge_operator,
        "value_format": set.value_format,
        "keyspaces": set.keyspaces.iter()
            .map(|(id, name)| json!({ "id": id, "name": name }))
            .collect::<Vec<_>>(),
    })
}

fn tombstone_json(t: &RangeTombstone) -> Value {
    json!({ "seq": t.seq, "start": escape(&t.start), "end": escape(&t.end) })
}

fn file_json(f: &FileMetaData) -> Value {
    json!({
        "number": f.number,
        "file_size": f.file_size,
        "smallest": internal_key_json(&f.smallest),
        "largest": internal_key_json(&f.largest),
        "smallest_seq": f.smallest_seq,
        "largest_seq": f.largest_seq,
        "num_entries": f.num_entries,
        "num_deletions": f.num_deletions,
        "raw_value_bytes": f.raw_value_bytes,
        "dir_index": f.dir_index,
        "file_checksum": f.file_checksum,
        "identity": f.identity.map(|i| i.to_string()),
        "blob_refs": f.blob_refs.iter()
            .map(|(blob, t)| json!({ "blob": blob, "refs": t.refs, "bytes": t.bytes }))
            .collect::<Vec<_>>(),
    })
}

fn edit_json(e: &VersionEdit) -> Value {
    json!({
        "comparator": e.comparator,
        "log_number": e.log_number,
        "next_file_number": e.next_file_number,
        "last_sequence": e.last_sequence,
        "compact_pointers": e.compact_pointers.iter()
            .map(|(level, key)| json!({ "level": level, "key": internal_key_json(key) }))
            .collect::<Vec<_>>(),
        "deleted_files": e.deleted_files.iter()
            .map(|(level, number)| json!({ "level": level, "number": number }))
            .collect::<Vec<_>>(),
        "new_files": e.new_files.iter()
            .map(|(level, f)| {
                let mut v = file_json(f);
                v["level"] = json!(level);
                v
            })
            .collect::<Vec<_>>(),
        "wals": e.wals.iter()
            .map(|(number, synced)| json!({ "number": number, "synced_bytes": synced }))
            .collect::<Vec<_>>(),
        "value_format": e.value_format,
        "merge_operator": e.merge_operator,
        "default_log_number": e.default_log_number,
        "next_keyspace_id": e.next_keyspace_id,
        "range_tombstones": e.range_tombstones.iter().map(tombstone_json).collect::<Vec<_>>(),
        "dropped_tombstones": e.dropped_tombstones,
        "keyspaces_created": e.keyspaces_created.iter()
            .map(|(id, name)| json!({ "id": id, "name": name }))
            .collect::<Vec<_>>(),
        "keyspaces_dropped": e.keyspaces_dropped,
        "keyspace_log_numbers": e.keyspace_log_numbers.iter()
            .map(|(id, n)| json!({ "id": id, "log_number": n }))
            .collect::<Vec<_>>(),
        "new_blob_files": e.new_blob_files.iter()
            .map(|b| json!({
                "number": b.number,
                "dir_index": b.dir_index,
                "file_size": b.file_size,
                "records": b.records,
                "value_bytes": b.value_bytes,
            }))
            .collect::<Vec<_>>(),
        "range_map": e.range_map.as_ref().map(|m| m.ranges().iter()
            .map(|r| json!({
                "start": escape(&r.start),
                "owner": r.owner,
                "forwarded_from": r.forwarded_from,
            }))
            .collect::<Vec<_>>()),
    })
}

fn level_json(version: &Version, level: usize) -> Value {
    json!({
        "level": level,
        "size_bytes": version.level_bytes(level),
        "files": version.files(level).iter().map(|f| file_json(f)).collect::<Vec<_>>(),
    })
}
