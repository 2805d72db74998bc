//! Test-only: a worker that lies (cargo feature `test-lies`, used by the tests and never by a
//! release build). With `--lie KIND`, the worker misreports every task in one of the ways a
//! buggy or hostile worker could, each with files that look valid and a reply that describes
//! them exactly, so the tests can show the host catches each one and loses nothing.
//!
//! The lie is applied after the task's outputs are published and before the reply is built:
//! files are rewritten (or replaced by links) and the reply's summaries describe the new files.

use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, OnceLock};

use sluice_sst::compact::CompactionOutput;
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
    /// Leave out every `n`th entry and claim it was dropped (shadowed): the counts and the
    /// digest still add up, which only reading the data can catch.
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
    /// Write the outputs' entries as they are, with properties that count no blob
    /// references: the entries and the digest add up, and the blob files the references
    /// name would look unreferenced.
    HideBlobRefs,
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
            None if s == "hide-blob-refs" => Lie::HideBlobRefs,
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

/// True when the process's lie is to ignore range tombstones: the task runs without them.
pub(crate) fn ignores_range_tombstones() -> bool {
    LIE.get() == Some(&Lie::IgnoreRangeTombstones)
}

/// Applies the process's lie, if any, to a task's published outputs: `out` then describes the
/// files as they are after the lie.
pub(crate) fn apply(
    out: &mut CompactionOutput,
    published: &[Published],
    inputs: &[Vec<Arc<Table>>],
    table: &TableOptions,
) -> Result<(), WorkerError> {
    let Some(&lie) = LIE.get().filter(|&&l| l != Lie::IgnoreRangeTombstones) else {
        return Ok(());
    };
    tracing::warn!(?lie, "lying about this task, as --lie asked");
    let (Some(first), Some(input)) = (published.first(), inputs.iter().flatten().next()) else {
        return Ok(());
    };
    let internal = |e: std::io::Error| WorkerError::Internal(format!("lying: {e}"));
    match lie {
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
            let last = published.len() - 1;
            for (i, (p, f)) in published.iter().zip(out.files.iter_mut()).enumerate() {
                let path = p.root.join(&p.name);
                let entries = read_all(&path)?;
                let changed = transform(lie, entries, &mut seen, i == 0, i == last, &mut forged);
                f.summary = rewrite(&path, &changed, table, lie == Lie::HideBlobRefs)?;
            }
            out.stats.shadowed_dropped += forged.entries;
            out.stats.dropped_digest = out.stats.dropped_digest.wrapping_add(forged.sum);
        }
    }
    Ok(())
}

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn read_all(path: &Path) -> Result<Entries, WorkerError> {
    let table = Table::open(path, 0, TableReadOptions::default())?;
    let mut it = table.iter();
    it.seek_to_first()?;
    let mut entries = Vec::new();
    while it.valid() {
        entries.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(entries)
}

/// The entries of one output after `lie`; `seen` counts entries across outputs, `forged`
/// sums the entries claimed as dropped.
fn transform(
    lie: Lie,
    entries: Entries,
    seen: &mut u64,
    first: bool,
    last: bool,
    forged: &mut EntryDigest,
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
            Lie::DropAndForge(n) if (*seen).is_multiple_of(n) => {
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
            Lie::InventKey if first && !invented && user_key(&k) != first_key.as_slice() => {
                out.push((invented_key(&first_key, b"\x00lie"), b"invented".to_vec()));
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

/// Writes `entries` in place of the table at `path` and returns the new file's summary; with
/// `hide_blob_refs`, its properties count no blob references.
fn rewrite(
    path: &Path,
    entries: &Entries,
    table: &TableOptions,
    hide_blob_refs: bool,
) -> Result<TableSummary, WorkerError> {
    let scratch = path.with_extension("lie");
    let mut content = TableContentBuilder::new(table);
    let mut writer = TableFileWriter::create(&Storage::default(), &scratch, table)?;
    let mut write_sealed = |content: &mut TableContentBuilder| {
        while let Some(sealed) = content.take_sealed() {
            let mut block = encode_block(sealed, table);
            if hide_blob_refs {
                block.meta.blob_refs = Default::default();
            }
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
