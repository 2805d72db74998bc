//! Test-only: a worker that lies (cargo feature `test-lies`, used by the tests and never by a
//! release build). With `--lie KIND`, the worker misreports every task in one of the ways a
//! buggy or hostile worker could, each with files that look valid and a reply that describes
//! them exactly, so the tests can show the host catches each one and loses nothing.
//!
//! The lie is applied after the task's outputs are published and before the reply is built:
//! files are rewritten (or replaced by links) and the reply's summaries describe the new files.
//! The `*-after-reply` lies answer honestly and change the file a moment later, once the host
//! has (most likely) checked it.

use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use sluice_sst::compact::{CompactionOutput, CompactionSpec};
use sluice_sst::compaction_iter::CompactionIterStats;
use sluice_sst::compaction_iter::drop_log::{
    DropLog, DropLogWriter, DropReason, merged_with_written,
};
use sluice_sst::digest::EntryDigest;
use sluice_sst::fs::Storage;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{ValueKind, make_internal_key, parse_internal_key, user_key};
use sluice_sst::table::{
    Table, TableContentBuilder, TableFileWriter, TableOptions, TableReadOptions, TableSummary,
    encode_block,
};

use crate::error::WorkerError;
use crate::outputs::Published;

/// How the worker lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lie {
    /// Replace the first output by a symbolic link to the first input, and report the input's
    /// size, key range, entries and CRC.
    SymlinkOutput,
    /// The same with a hard link.
    HardlinkOutput,
    /// Leave out every `n`th entry.
    DropEvery(u64),
    /// Leave out every `n`th entry and claim it was a tombstone dropped at the bottom, in the
    /// counts, the digest and the drop log (under the sequence number the log's other drops
    /// of the key cite): everything adds up, which only reading the inputs can catch.
    DropAndForge(u64),
    /// Change the value of every `n`th entry.
    ChangeEvery(u64),
    /// Add an entry for a key no input has, inside the outputs' range.
    InventKey,
    /// Raise the newest entry's sequence number by 2^40.
    RaiseSeq,
    /// Add an entry for a key after every input key (outside an unbounded share's inputs).
    OutsideInputs,
    /// Compact as if the task carried no range tombstones: keep what they cover and report it
    /// as written, so the counts and the digest add up.
    IgnoreRangeTombstones,
    /// Compact as if no snapshot were live (a drop-decision bug): versions only a snapshot
    /// sees are dropped as shadowed, and honestly logged and counted as such.
    IgnoreSnapshots,
    /// Drop the first tombstone written above an older written version of its key (or, with
    /// none, the first tombstone), and log and count it as a tombstone dropped at the bottom:
    /// the counts, the digest and the log's record of it add up.
    DropTombstone,
    /// Write the outputs' entries as they are, with properties that count no blob
    /// references: the entries and the digest add up, and the blob files the references
    /// name would look unreferenced.
    HideBlobRefs,
    /// Answer honestly, then, a moment after the reply, rename another valid table (a copy
    /// of an input) over the first output: what the host checked is no longer what is there.
    SwapAfterReply,
    /// The same with a symbolic link to a copy of the output's own bytes in a directory the
    /// database never reads.
    SymlinkAfterReply,
    /// Properties that claim the first output's smallest key is its second entry's.
    PropertiesRange,
    /// Leave out every `n`th entry but write properties with the honest count and digest.
    PropertiesCount(u64),
    /// Swap the first output's second and third entries: the same entries, out of order.
    Unsorted,
    /// Answer the first task honestly and keep its first output; answer every later task
    /// with that output in place of its own first one, and the first task's statistics.
    Replay,
    /// Invent a key and report a dropped count of -1 (wrapped: 2^64 - 1) beside the honest
    /// ones, with the digest to match: the equation adds up modulo 2^64.
    WrappedCount,
}

impl FromStr for Lie {
    type Err = String;

    fn from_str(s: &str) -> Result<Lie, String> {
        let every = |n: &str| n.parse::<u64>().ok().filter(|&n| n > 0);
        Ok(match s.split_once(':') {
            None if s == "symlink-output" => Lie::SymlinkOutput,
            None if s == "hardlink-output" => Lie::HardlinkOutput,
            None if s == "invent-key" => Lie::InventKey,
            None if s == "raise-seq" => Lie::RaiseSeq,
            None if s == "outside-inputs" => Lie::OutsideInputs,
            None if s == "ignore-range-tombstones" => Lie::IgnoreRangeTombstones,
            None if s == "ignore-snapshots" => Lie::IgnoreSnapshots,
            None if s == "drop-tombstone" => Lie::DropTombstone,
            None if s == "hide-blob-refs" => Lie::HideBlobRefs,
            None if s == "swap-after-reply" => Lie::SwapAfterReply,
            None if s == "symlink-after-reply" => Lie::SymlinkAfterReply,
            None if s == "properties-range" => Lie::PropertiesRange,
            None if s == "unsorted" => Lie::Unsorted,
            None if s == "replay" => Lie::Replay,
            None if s == "wrapped-count" => Lie::WrappedCount,
            Some(("properties-count", n)) if every(n).is_some() => {
                Lie::PropertiesCount(every(n).unwrap_or(1))
            }
            Some(("drop-every", n)) if every(n).is_some() => Lie::DropEvery(every(n).unwrap_or(1)),
            Some(("drop-and-forge", n)) if every(n).is_some() => {
                Lie::DropAndForge(every(n).unwrap_or(1))
            }
            Some(("change-every", n)) if every(n).is_some() => {
                Lie::ChangeEvery(every(n).unwrap_or(1))
            }
            _ => return Err(format!("unknown lie {s:?}")),
        })
    }
}

static LIE: OnceLock<Lie> = OnceLock::new();

/// Makes every task of this process lie with `lie`.
pub fn set(lie: Lie) {
    let _ = LIE.set(lie);
}

/// The spec as a worker with a rule lie (one in how it compacts) reads it: without range
/// tombstones, or without snapshots.
pub(crate) fn misread(spec: CompactionSpec) -> CompactionSpec {
    match LIE.get() {
        Some(Lie::IgnoreRangeTombstones) => CompactionSpec {
            range_tombstones: None,
            ..spec
        },
        Some(Lie::IgnoreSnapshots) => CompactionSpec {
            snapshots: Vec::new(),
            ..spec
        },
        _ => spec,
    }
}

/// Applies the process's lie, if any, to a task's published outputs: `out` then describes the
/// files as they are after the lie.
pub(crate) fn apply(
    out: &mut CompactionOutput,
    published: &[Published],
    inputs: &[Vec<Arc<Table>>],
    table: &TableOptions,
) -> Result<(), WorkerError> {
    let Some(&lie) = LIE
        .get()
        .filter(|&&l| !matches!(l, Lie::IgnoreRangeTombstones | Lie::IgnoreSnapshots))
    else {
        return Ok(());
    };
    tracing::warn!(?lie, "lying about this task, as --lie asked");
    let (Some(first), Some(input)) = (published.first(), inputs.iter().flatten().next()) else {
        return Ok(());
    };
    let internal = |e: std::io::Error| WorkerError::Internal(format!("lying: {e}"));
    let first_path = first.root.join(&first.name);
    match lie {
        Lie::SwapAfterReply | Lie::SymlinkAfterReply => {
            // Prepared now, done once the reply is out (the host checks in the meantime).
            let scratch = if lie == Lie::SwapAfterReply {
                let scratch = first_path.with_extension("swap");
                std::fs::copy(input.path(), &scratch).map_err(internal)?;
                scratch
            } else {
                // Not a table directory: a subdirectory the database never reads.
                let elsewhere = first.root.join("lie-elsewhere");
                std::fs::create_dir_all(&elsewhere).map_err(internal)?;
                let copy = elsewhere.join(&first.name);
                std::fs::copy(&first_path, &copy).map_err(internal)?;
                copy
            };
            std::thread::spawn(move || {
                std::thread::sleep(AFTER_REPLY);
                let swapped = if lie == Lie::SwapAfterReply {
                    std::fs::rename(&scratch, &first_path)
                } else {
                    std::fs::remove_file(&first_path)
                        .and_then(|()| std::os::unix::fs::symlink(&scratch, &first_path))
                };
                tracing::warn!(?lie, path = %first_path.display(), ?swapped, "swapped after the reply");
            });
        }
        Lie::Replay => {
            let mut kept = REPLAYED.lock().unwrap_or_else(|e| e.into_inner());
            match kept.as_ref() {
                None => {
                    let bytes = std::fs::read(&first_path).map_err(internal)?;
                    let summary = out.files.first().map(|f| f.summary.clone());
                    *kept = summary.map(|s| (bytes, s, out.stats));
                }
                Some((bytes, summary, stats)) => {
                    std::fs::write(&first_path, bytes).map_err(internal)?;
                    if let Some(f) = out.files.first_mut() {
                        f.summary = summary.clone();
                    }
                    out.stats = *stats;
                }
            }
        }
        Lie::SymlinkOutput | Lie::HardlinkOutput => {
            let path = first.root.join(&first.name);
            std::fs::remove_file(&path).map_err(internal)?;
            if lie == Lie::SymlinkOutput {
                std::os::unix::fs::symlink(input.path(), &path).map_err(internal)?;
            } else {
                std::fs::hard_link(input.path(), &path).map_err(internal)?;
            }
            let bytes = std::fs::read(input.path()).map_err(internal)?;
            let p = input.properties();
            if let Some(f) = out.files.first_mut() {
                f.summary = TableSummary {
                    file_size: input.file_size(),
                    smallest_key: p.smallest_key.clone(),
                    largest_key: p.largest_key.clone(),
                    properties: p.clone(),
                    file_checksum: crc32c::crc32c(&bytes),
                    identity: input.identity(),
                };
            }
        }
        _ => {
            let mut seen = 0u64;
            let mut forged = EntryDigest::default();
            // Entries left out whose drop the log is to record.
            let mut left_out = Vec::new();
            // The written keys before and after the lie: the drop log places its records
            // among them.
            let (mut written_before, mut written_after) = (Vec::new(), Vec::new());
            let last = published.len() - 1;
            for (i, (p, f)) in published.iter().zip(out.files.iter_mut()).enumerate() {
                let path = p.root.join(&p.name);
                let (entries, nonce) = read_all(&path)?;
                written_before.extend(entries.iter().map(|(k, _)| k.clone()));
                let mut hidden = Hidden::default();
                let changed = transform(lie, entries, &mut seen, i == 0, i == last, &mut hidden);
                let changed = match lie {
                    Lie::DropAndForge(_) => {
                        left_out.append(&mut hidden.keys);
                        changed
                    }
                    Lie::DropTombstone if left_out.is_empty() => {
                        drop_a_tombstone(changed, &mut hidden, &mut left_out)
                    }
                    _ => changed,
                };
                let hidden = hidden.digest;
                let forged_meta = match lie {
                    Lie::PropertiesCount(_) => Forged::Uncounted(hidden),
                    Lie::PropertiesRange if i == 0 => Forged::SmallestIsSecond,
                    Lie::HideBlobRefs => Forged::NoBlobRefs,
                    _ => {
                        forged.merge(hidden);
                        Forged::Nothing
                    }
                };
                written_after.extend(changed.iter().map(|(k, _)| k.clone()));
                f.summary = rewrite(&path, &changed, table, forged_meta, nonce)?;
            }
            if !left_out.is_empty() {
                // The log says what the counts say: each entry left out was a tombstone
                // dropped at the bottom.
                let written = (&written_before[..], &written_after[..]);
                out.drops = with_drops(&out.drops, written, &left_out, lie != Lie::DropTombstone)?;
                out.stats.tombstones_dropped += forged.entries;
                out.stats.dropped_digest = out.stats.dropped_digest.wrapping_add(forged.sum);
                return Ok(());
            }
            if lie == Lie::WrappedCount {
                // The invented entry, subtracted: every honest drop counted as a tombstone's,
                // and -1 (2^64 - 1) shadowed ones, so the counts add up to one fewer modulo 2^64.
                let s = &mut out.stats;
                s.tombstones_dropped += s.shadowed_dropped;
                s.shadowed_dropped = u64::MAX;
                s.dropped_digest = s.dropped_digest.wrapping_sub(forged.sum);
            } else {
                out.stats.shadowed_dropped += forged.entries;
                out.stats.dropped_digest = out.stats.dropped_digest.wrapping_add(forged.sum);
            }
        }
    }
    Ok(())
}

/// How long after preparing the reply the `*-after-reply` lies act.
const AFTER_REPLY: std::time::Duration = std::time::Duration::from_millis(200);

/// What [`Lie::Replay`] kept of the first task: its first output's bytes and summary, and
/// the task's statistics.
static REPLAYED: std::sync::Mutex<Option<(Vec<u8>, TableSummary, CompactionIterStats)>> =
    std::sync::Mutex::new(None);

/// What a rewritten table's properties misstate.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Forged {
    Nothing,
    /// They count no blob references.
    NoBlobRefs,
    /// They count these entries too, which the data does not hold.
    Uncounted(EntryDigest),
    /// They name the second entry as the smallest key.
    SmallestIsSecond,
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// The entries of the table at `path`, and the task nonce it carries.
fn read_all(path: &Path) -> Result<(Entries, Option<u64>), WorkerError> {
    let table = Table::open(path, 0, TableReadOptions::default())?;
    let mut it = table.iter();
    it.seek_to_first()?;
    let mut entries = Vec::new();
    while it.valid() {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok((entries, table.properties().task_nonce))
}

/// Entries a lie claims as dropped: their digest and their keys.
#[derive(Default)]
struct Hidden {
    digest: EntryDigest,
    keys: Vec<Vec<u8>>,
}

impl Hidden {
    fn add(&mut self, key: &[u8], value: &[u8]) {
        self.digest.add(key, value);
        self.keys.push(key.to_vec());
    }
}

/// [`Lie::DropTombstone`] on one output's entries: leaves out the first tombstone followed by
/// an older version of its key (or else the first tombstone), into `hidden` and `left_out`.
fn drop_a_tombstone(
    mut entries: Entries,
    hidden: &mut Hidden,
    left_out: &mut Vec<Vec<u8>>,
) -> Entries {
    let is_tombstone =
        |k: &[u8]| parse_internal_key(k).is_some_and(|p| p.kind == ValueKind::Deletion);
    let above_older = entries
        .windows(2)
        .position(|w| is_tombstone(&w[0].0) && user_key(&w[0].0) == user_key(&w[1].0));
    let Some(at) = above_older.or_else(|| entries.iter().position(|(k, _)| is_tombstone(k))) else {
        return entries;
    };
    let (k, v) = entries.remove(at);
    hidden.add(&k, &v);
    left_out.push(k);
    entries
}

/// `log` with each written entry of `left_out` turned into a tombstone dropped at the bottom,
/// in its place in the merged order (`log` was placed among `written.0`; the outputs after
/// the lie hold `written.1`). The tombstone has the entry's sequence number or, when `forge`
/// and the entry was a value zeroed at the bottom, one above every version of the key the
/// log drops after it, which are re-cited to it (a forger covering its tracks: they cited the value).
fn with_drops(
    log: &DropLog,
    written: (&[Vec<u8>], &[Vec<u8>]),
    left_out: &[Vec<u8>],
    forge: bool,
) -> Result<DropLog, WorkerError> {
    let mut merged = merged_with_written(log.as_bytes(), written.0)?;
    for k in left_out {
        let (Some(at), Some(p)) = (
            merged.iter().position(|(key, r)| r.is_none() && key == k),
            parse_internal_key(k),
        ) else {
            continue;
        };
        let of_key = |key: &[u8]| user_key(key) == p.user_key;
        let seq = match forge && p.seq == 0 {
            true => merged[at..]
                .iter()
                .filter(|(key, r)| r.is_some() && of_key(key))
                .filter_map(|(key, _)| parse_internal_key(key).map(|d| d.seq + 1))
                .max()
                .unwrap_or(0),
            false => p.seq,
        };
        if forge {
            for (key, reason) in &mut merged {
                if of_key(key) && *reason == Some(DropReason::Shadowed { by: 0 }) {
                    *reason = Some(DropReason::Shadowed { by: seq });
                }
            }
        }
        let tombstone = make_internal_key(p.user_key, seq, ValueKind::Deletion);
        merged[at] = (tombstone, Some(DropReason::BottomTombstone));
    }
    let kept = merged.iter().filter(|(_, r)| r.is_none()).map(|(k, _)| k);
    if !kept.eq(written.1.iter()) {
        return Err(WorkerError::Internal(
            "lying: the outputs changed other than by the entries left out".into(),
        ));
    }
    let mut writer = DropLogWriter::in_order();
    for (key, reason) in &merged {
        match reason {
            Some(reason) => writer.push(key, *reason),
            None => writer.written(key),
        }
    }
    Ok(writer.take())
}

/// The entries of one output after `lie`; `seen` counts entries across outputs, `forged`
/// holds the entries claimed as dropped.
fn transform(
    lie: Lie,
    entries: Entries,
    seen: &mut u64,
    first: bool,
    last: bool,
    forged: &mut Hidden,
) -> Entries {
    let mut out = Vec::with_capacity(entries.len() + 1);
    let first_key = entries
        .first()
        .map(|(k, _)| user_key(k).to_vec())
        .unwrap_or_default();
    let mut invented = false;
    for (i, (k, v)) in entries.into_iter().enumerate() {
        *seen += 1;
        match lie {
            Lie::DropEvery(n) if (*seen).is_multiple_of(n) => continue,
            Lie::DropAndForge(n) | Lie::PropertiesCount(n) if (*seen).is_multiple_of(n) => {
                forged.add(&k, &v);
                continue;
            }
            Lie::ChangeEvery(n) if (*seen).is_multiple_of(n) => {
                let mut v = v;
                v.push(b'!');
                out.push((k, v));
                continue;
            }
            Lie::RaiseSeq if first && i == 0 => {
                if let Some(p) = parse_internal_key(&k) {
                    let raised = make_internal_key(p.user_key, p.seq + (1 << 40), p.kind);
                    out.push((raised, v));
                    continue;
                }
            }
            Lie::Unsorted if first && i == 2 => {
                let second = out.pop();
                out.push((k, v));
                out.extend(second);
                continue;
            }
            Lie::InventKey | Lie::WrappedCount
                if first && !invented && user_key(&k) != first_key.as_slice() =>
            {
                let key = invented_key(&first_key, b"\x00lie");
                if lie == Lie::WrappedCount {
                    forged.add(&key, b"invented");
                }
                out.push((key, b"invented".to_vec()));
                invented = true;
            }
            _ => {}
        }
        out.push((k, v));
    }
    if lie == Lie::InventKey && first && !invented {
        out.push((invented_key(&first_key, b"\x00lie"), b"invented".to_vec()));
    }
    if lie == Lie::OutsideInputs && last {
        let after = out
            .last()
            .map(|(k, _)| user_key(k).to_vec())
            .unwrap_or_default();
        out.push((invented_key(&after, b"\xff\xfflie"), b"outside".to_vec()));
    }
    out
}

/// A key sorting right after `base`: `base` followed by `suffix`, at sequence number 1.
fn invented_key(base: &[u8], suffix: &[u8]) -> Vec<u8> {
    make_internal_key(&[base, suffix].concat(), 1, ValueKind::Value)
}

/// Writes `entries` in place of the table at `path` (as an output of the task `nonce`) and
/// returns the new file's summary; its properties misstate what `forged` says.
fn rewrite(
    path: &Path,
    entries: &Entries,
    table: &TableOptions,
    forged: Forged,
    nonce: Option<u64>,
) -> Result<TableSummary, WorkerError> {
    let scratch = path.with_extension("lie");
    let mut content = TableContentBuilder::new(table);
    let mut writer = TableFileWriter::create(&Storage::default(), &scratch, table)?;
    if let Some(nonce) = nonce {
        writer.set_task_nonce(nonce);
    }
    let mut first_block = true;
    let mut write_sealed = |content: &mut TableContentBuilder| {
        while let Some(sealed) = content.take_sealed() {
            let mut block = encode_block(sealed, table);
            match forged {
                Forged::NoBlobRefs => block.meta.blob_refs = Default::default(),
                Forged::Uncounted(hidden) if first_block => {
                    block.meta.num_entries += hidden.entries;
                    block.meta.digest_sum = block.meta.digest_sum.wrapping_add(hidden.sum);
                }
                Forged::SmallestIsSecond if first_block => {
                    if let Some((second, _)) = entries.get(1) {
                        block.meta.first_key.clone_from(second);
                    }
                }
                _ => {}
            }
            first_block = false;
            writer.append_data_block(&block)?;
        }
        Ok::<(), sluice_sst::Error>(())
    };
    for (k, v) in entries {
        content.add(k, v);
        write_sealed(&mut content)?;
    }
    content.seal_current();
    write_sealed(&mut content)?;
    let summary = writer.finish()?;
    std::fs::rename(&scratch, path).map_err(|e| WorkerError::Internal(format!("lying: {e}")))?;
    Ok(summary)
}
