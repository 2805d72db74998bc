//! Blob garbage collection, the host's half (RocksDB's integrated BlobDB GC): which blob files
//! a compaction collects, and the [`BlobCollector`] that writes their live values again.
//!
//! The oldest `gc_age_cutoff` share of the blob files (by file number, which is the order they
//! were written in), of those the ones at least `gc_min_garbage_ratio` garbage, is collected:
//! a compaction whose inputs reference one of them moves the
//! values it keeps out of it ([`sluice_sst::compact::relocate`]). Values that stay live longest
//! are the ones overwrites never free, so moving them out of old files is what lets those files
//! go. When the collected files are at least `gc_force_threshold` garbage, the picker also
//! rewrites, one at a time, the tables that still reference the oldest of them
//! ([`forced_compaction`]), so their space comes back without waiting for the level above.
//!
//! A compaction that collects runs on the host: the blob files are read where they are.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_sst::blob::{BlobFile, BlobFileWriter, BlobRef};
use sluice_sst::compact::{BlobRelocation, RelocationWriter};
use sluice_sst::fs::Storage;

use super::BlobOptions;
use crate::Result;
use crate::compaction::env::JobEnv;
use crate::compaction::in_progress::InProgress;
use crate::compaction::{Compaction, Reason};
use crate::filename::blob_file_name;
use crate::version::Version;
use crate::version::blob_files::BlobFileMetaData;
use crate::version::edit::{FileMetaData, NUM_LEVELS};

/// The blob files garbage collection collects now: those of the oldest `gc_age_cutoff` share
/// of the version's that are at least `gc_min_garbage_ratio` garbage (none when collection is
/// off).
pub(crate) fn collected(version: &Version, options: &BlobOptions) -> BTreeSet<u64> {
    if !options.garbage_collection {
        return BTreeSet::new();
    }
    let files = version.blob_files();
    let count = (files.len() as f64 * options.gc_age_cutoff).floor() as usize;
    files
        .iter()
        .take(count)
        .filter(|(_, state)| state.garbage_ratio() >= options.gc_min_garbage_ratio)
        .map(|(&number, _)| number)
        .collect()
}

/// The blob files a compaction of `inputs` moves values out of: the collected files they
/// reference, and, when its outputs go to `output_dir` (partitioned mode: the range owner's
/// directory), every file they reference in another directory, so that a range's values
/// follow it to a new owner as its tables do. That second move does not depend on
/// `garbage_collection`: it is where the values belong, not a way to reclaim space.
pub(crate) fn relocated_by<'a>(
    version: &Version,
    options: &BlobOptions,
    inputs: impl Iterator<Item = &'a Arc<FileMetaData>>,
    output_dir: Option<u32>,
) -> BTreeSet<u64> {
    let mut referenced = BTreeSet::new();
    for f in inputs {
        referenced.extend(f.blob_refs.iter().map(|(file, _)| file));
    }
    let collected = collected(version, options);
    referenced
        .into_iter()
        .filter(|number| {
            collected.contains(number)
                || output_dir.is_some_and(|dir| is_elsewhere(version, *number, dir))
        })
        .collect()
}

/// True if blob file `number` lies outside table directory `dir`.
pub(crate) fn is_elsewhere(version: &Version, number: u64, dir: u32) -> bool {
    version
        .blob_file(number)
        .is_some_and(|state| state.meta.dir_index != dir)
}

/// True when the collected files are at least `gc_force_threshold` garbage: their remaining
/// live values are moved out by rewriting the tables that reference them.
fn forcing(version: &Version, options: &BlobOptions) -> Option<BTreeSet<u64>> {
    let collected = collected(version, options);
    let (mut total, mut garbage) = (0u64, 0u64);
    for state in collected.iter().filter_map(|n| version.blob_file(*n)) {
        total += state.meta.record_bytes();
        garbage += state.garbage_bytes();
    }
    let ratio = garbage as f64 / total.max(1) as f64;
    (total > 0 && ratio >= options.gc_force_threshold).then_some(collected)
}

/// True if [`forced_compaction`] has a table to rewrite.
pub(crate) fn forced_compaction_due(version: &Version, options: &BlobOptions) -> bool {
    forcing(version, options).is_some_and(|files| referencing(version, &files).next().is_some())
}

/// `(level, table)` of every table referencing one of `files`, deepest level first.
fn referencing<'a>(
    version: &'a Version,
    files: &'a BTreeSet<u64>,
) -> impl Iterator<Item = (usize, &'a Arc<FileMetaData>)> + 'a {
    (0..NUM_LEVELS).rev().flat_map(move |level| {
        version
            .files(level)
            .iter()
            .filter(move |f| f.blob_refs.iter().any(|(b, _)| files.contains(&b)))
            .map(move |f| (level, f))
    })
}

/// The in-place rewrite of one table that references a collected blob file, when the
/// collected files are garbage enough ([`forcing`]) and no other compaction is due. One table
/// at a time, as partitioned mode's relocation does, so outputs never overlap the level's
/// other tables.
pub(crate) fn forced_compaction(
    version: &Arc<Version>,
    options: &BlobOptions,
    running: &InProgress,
) -> Option<Compaction> {
    let files = forcing(version, options)?;
    referencing(version, &files)
        .filter(|(_, f)| !running.is_busy(f.number))
        .map(|(level, f)| Compaction::in_place(version, level, f, Reason::BlobGarbage))
        .find(|c| !running.conflicts(c))
}

/// Reads the live values of the collected blob files and writes them into new ones, next to
/// the file each came from, or in partitioned mode in the compaction's output directory (the
/// range owner's). Writers are pooled: a thread takes one for a sub-task and gives
/// it back, so a compaction writes about one file per thread, not one per sub-task.
pub(crate) struct BlobCollector {
    /// The collected files, open, each with the table directory its values move to.
    sources: BTreeMap<u64, (Arc<BlobFile>, u32)>,
    dirs: Vec<PathBuf>,
    storage: Storage,
    options: BlobOptions,
    /// Numbers reserved for new files, handed out in order.
    numbers: Mutex<std::ops::Range<u64>>,
    idle: Mutex<Vec<(u32, BlobFileWriter)>>,
    /// Files started (finished or not), for cleaning up after a failure.
    started: Mutex<Vec<PathBuf>>,
    finished: Mutex<Vec<BlobFileMetaData>>,
}

impl BlobCollector {
    /// The collector for compaction `c` writing into `output_dir` ([`relocated_by`]), if it
    /// moves any value.
    pub(crate) fn for_compaction(
        c: &Compaction,
        env: &JobEnv<'_>,
        output_dir: Option<u32>,
    ) -> Result<Option<Self>> {
        let options = &env.options.blob;
        let files = relocated_by(&c.version, options, c.all_inputs(), output_dir);
        if files.is_empty() {
            return Ok(None);
        }
        let mut sources = BTreeMap::new();
        let mut moved_bytes = 0u64;
        for number in &files {
            let Some(state) = c.version.blob_file(*number) else {
                continue;
            };
            let file = env.table_cache.blob_file(&state.meta)?;
            sources.insert(*number, (file, output_dir.unwrap_or(state.meta.dir_index)));
        }
        for f in c.all_inputs() {
            moved_bytes += files.iter().map(|&b| f.blob_refs.get(b).bytes).sum::<u64>();
        }
        // Enough for every thread's file and every rollover; the rest is released unused.
        let threads = env.options.compaction.compaction_threads as u64 + 1;
        let count = threads * (1 + sources.len() as u64) + moved_bytes / options.blob_file_size;
        Ok(Some(BlobCollector {
            sources,
            dirs: env.table_cache.dirs().to_vec(),
            storage: env.options.background_storage(),
            options: options.clone(),
            numbers: Mutex::new(env.reserve_numbers(count + 1)),
            idle: Mutex::default(),
            started: Mutex::default(),
            finished: Mutex::default(),
        }))
    }

    /// Finishes every file and returns them all, each synced.
    pub(crate) fn finish(&self) -> Result<Vec<BlobFileMetaData>> {
        for (dir_index, writer) in std::mem::take(&mut *self.idle.lock()) {
            self.finish_one(dir_index, writer)?;
        }
        Ok(std::mem::take(&mut *self.finished.lock()))
    }

    /// Deletes every file started (best effort: a leftover is garbage no version names).
    pub(crate) fn abandon(&self) {
        self.idle.lock().clear();
        for path in std::mem::take(&mut *self.started.lock()) {
            let _ = self.storage.fs.remove(&path);
        }
    }

    fn finish_one(&self, dir_index: u32, writer: BlobFileWriter) -> sluice_sst::Result<()> {
        let meta = writer.finish()?;
        self.finished.lock().push(BlobFileMetaData {
            number: meta.file_number,
            dir_index,
            file_size: meta.file_size,
            records: meta.records,
            value_bytes: meta.value_bytes,
        });
        Ok(())
    }

    fn start(&self, dir_index: u32) -> sluice_sst::Result<BlobFileWriter> {
        let number = {
            let mut numbers = self.numbers.lock();
            numbers.next().ok_or_else(|| {
                sluice_sst::Error::InvalidArgument(
                    "blob garbage collection ran out of reserved file numbers".into(),
                )
            })?
        };
        let dir = self.dirs.get(dir_index as usize).ok_or_else(|| {
            sluice_sst::Error::InvalidArgument(format!("no table directory {dir_index}"))
        })?;
        let path = blob_file_name(dir, number);
        self.started.lock().push(path.clone());
        BlobFileWriter::create(
            &self.storage,
            &path,
            number,
            self.options.blob_compression,
            sluice_sst::compression::DEFAULT_ZSTD_LEVEL,
        )
    }
}

impl std::fmt::Debug for BlobCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobCollector")
            .field("collects", &self.sources.keys().collect::<Vec<_>>())
            .field("finished", &self.finished.lock().len())
            .finish()
    }
}

impl BlobRelocation for BlobCollector {
    fn relocates(&self, file_number: u64) -> bool {
        self.sources.contains_key(&file_number)
    }

    fn writer(&self) -> Box<dyn RelocationWriter + '_> {
        Box::new(PooledWriter {
            collector: self,
            taken: Vec::new(),
        })
    }
}

/// One thread's writers, taken from the collector's pool and given back when done.
struct PooledWriter<'c> {
    collector: &'c BlobCollector,
    taken: Vec<(u32, BlobFileWriter)>,
}

impl RelocationWriter for PooledWriter<'_> {
    fn relocate(&mut self, key: &[u8], blob: &BlobRef) -> sluice_sst::Result<BlobRef> {
        let c = self.collector;
        let Some((source, dir_index)) = c.sources.get(&blob.file_number) else {
            return Err(sluice_sst::Error::InvalidArgument(format!(
                "blob file {} is not collected",
                blob.file_number
            )));
        };
        let value = source.get(blob, key)?;
        let at = match self.taken.iter().position(|(d, _)| d == dir_index) {
            Some(at) => at,
            None => {
                let pooled = {
                    let mut idle = c.idle.lock();
                    idle.iter()
                        .position(|(d, _)| d == dir_index)
                        .map(|i| idle.swap_remove(i))
                };
                let writer = match pooled {
                    Some((_, writer)) => writer,
                    None => c.start(*dir_index)?,
                };
                self.taken.push((*dir_index, writer));
                self.taken.len() - 1
            }
        };
        let writer = &mut self.taken[at].1;
        let moved = writer.add(key, &value)?;
        if writer.file_size() >= c.options.blob_file_size {
            let (dir, full) = self.taken.swap_remove(at);
            c.finish_one(dir, full)?;
        }
        Ok(moved)
    }

    fn finish(self: Box<Self>) -> sluice_sst::Result<()> {
        self.collector.idle.lock().extend(self.taken);
        Ok(())
    }
}
