//! Flush (the "minor compaction"): writing a frozen memtable to L0 tables. A job like a
//! compaction: it writes files through its [`JobEnv`] and returns a version edit that `db/`
//! installs.

use std::collections::BTreeMap;
use std::time::Instant;

use sluice_sst::compact::subtask::encode_sub_task;
use sluice_sst::compact::{OutputRules, OutputWriter, StepTimes};
use sluice_sst::profile::{StageProfile, Step, thread_cpu_time};
use sluice_sst::table::TableContentBuilder;

use crate::Result;
use crate::blob::BlobSeparator;
use crate::compaction::env::JobEnv;
use crate::compaction::level_targets::LevelTargets;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version::blob_files::BlobFileMetaData;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::version::range_map::{RangeMap, owner_dir_index};
use crate::version::version::smallest_user_key;

/// Where a flush writes: one piece per key range, each to its own directory.
pub(crate) struct FlushPiece<'a> {
    /// User keys `[lower, upper)` of the piece; `None` is unbounded.
    pub lower: Option<&'a [u8]>,
    /// See `lower`.
    pub upper: Option<&'a [u8]>,
    /// The table directory the piece's table goes to.
    pub dir_index: u32,
}

/// The pieces of a flush. Partitioned: one piece per range of `ranges`, into its owner's
/// directory. Otherwise the key space cut at `split_keys` ([`flush_split_keys`]), each piece
/// into the next table directory.
pub(crate) fn flush_pieces<'a>(
    ranges: Option<&'a RangeMap>,
    split_keys: &'a [Vec<u8>],
    table_cache: &TableCache,
) -> Vec<FlushPiece<'a>> {
    match ranges {
        None => {
            let bounds = std::iter::once(None).chain(split_keys.iter().map(|k| Some(&k[..])));
            let ends = split_keys.iter().map(|k| Some(&k[..])).chain([None]);
            bounds
                .zip(ends)
                .map(|(lower, upper)| FlushPiece {
                    lower,
                    upper,
                    dir_index: table_cache.dir_for_new_table(),
                })
                .collect()
        }
        Some(map) => (0..map.len())
            .map(|i| {
                let (start, end) = map.bounds(i);
                FlushPiece {
                    lower: (!start.is_empty()).then_some(start),
                    upper: end,
                    dir_index: owner_dir_index(map.ranges()[i].owner),
                }
            })
            .collect(),
    }
}

/// Where a flush cuts its L0 tables: at the first key of a file of the base level (the one L0
/// compacts into, L1 with static level sizing), at most once per
/// `options.compaction.l0_flush_split_bytes` of it (Pebble's flush split keys). L0 tables then
/// line up with the base level's files, so the L0 compactions of different intervals take
/// disjoint files of both levels and run at the same time ([`crate::compaction::l0_inputs`]),
/// each rewriting only its own part of the base level. Empty when splitting is off or the
/// base level is too small to cut.
pub(crate) fn flush_split_keys(version: &Version, options: &Options) -> Vec<Vec<u8>> {
    let split_bytes = options.compaction.l0_flush_split_bytes;
    let mut keys = Vec::new();
    if split_bytes == 0 {
        return keys;
    }
    let base_level = LevelTargets::new(version, &options.compaction).base_level();
    let mut since_cut = 0u64;
    for f in version.files(base_level) {
        if since_cut >= split_bytes {
            keys.push(smallest_user_key(f).to_vec());
            since_cut = 0;
        }
        since_cut += f.file_size;
    }
    keys
}

/// What [`write_level0_tables`] wrote.
pub(crate) struct Level0Output {
    /// The tables, in key order.
    pub tables: Vec<FileMetaData>,
    /// The blob files the tables' separated values went to (`Options::blob`).
    pub blob_files: Vec<BlobFileMetaData>,
    pub profile: StageProfile,
}

/// Writes `mem` to L0 tables, one per piece of `pieces` that holds entries, numbered by
/// `new_number` (called only for files actually written), with values of at least
/// `options.blob.min_blob_size` bytes in blob files next to them. Every file is fsynced
/// before this returns; it becomes part of the tree only once a version edit naming it is
/// installed.
pub(crate) fn write_level0_tables(
    mem: &MemTable,
    table_cache: &TableCache,
    pieces: &[FlushPiece<'_>],
    new_number: &mut (dyn FnMut() -> u64 + Send),
    options: &Options,
) -> Result<Level0Output> {
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let times = StepTimes::default();
    let (table, storage) = (
        options.table_for_level(0, 0, false),
        options.background_storage(),
    );
    let mut metas = Vec::new();
    // One blob file (or one series, past `blob_file_size`) per table directory, whatever the
    // pieces: a flush cut at the base level's files would otherwise write a small blob file
    // per piece.
    let mut separators: BTreeMap<u32, BlobSeparator<'_>> = BTreeMap::new();
    let abandon = |separators: BTreeMap<u32, BlobSeparator<'_>>, metas: &[FileMetaData]| {
        separators.into_values().for_each(BlobSeparator::abandon);
        delete_files(table_cache, metas, &[]);
    };
    // Tables and blob files draw from one allocator.
    let new_number = parking_lot::Mutex::new(new_number);
    for piece in pieces {
        let mut new_output = || -> sluice_sst::Result<(u64, std::path::PathBuf)> {
            let number = (new_number.lock())();
            Ok((number, table_cache.table_path(piece.dir_index, number)))
        };
        let blobs = separators.entry(piece.dir_index).or_insert_with(|| {
            BlobSeparator::new(&options.blob, storage.clone(), table_cache, piece.dir_index)
        });
        // A flush is a merge of one sorted input (the memtable) into one file per piece.
        let rules = OutputRules::one_file(&table, &storage);
        let mut writer = OutputWriter::new(rules, &times, &mut new_output);
        let mut builder = TableContentBuilder::new(&table);
        let write_sealed = |builder: &mut TableContentBuilder, writer: &mut OutputWriter<'_>| {
            let sealed: Vec<_> = std::iter::from_fn(|| builder.take_sealed()).collect();
            encode_sub_task(sealed, &table, &times)
                .iter()
                .try_for_each(|block| writer.append(block))
        };
        let written = mem
            .for_each_in(piece.lower, piece.upper, |ikey, value| {
                let mut number = || (new_number.lock())();
                let (ikey, value) = blobs.separate(ikey, value, &mut number)?;
                builder.add(ikey, value);
                write_sealed(&mut builder, &mut writer)
            })
            .and_then(|()| {
                builder.seal_current();
                write_sealed(&mut builder, &mut writer)
            });
        // A piece without entries wrote nothing and took no number.
        let files = match writer.conclude(written) {
            Ok(files) => files,
            Err(e) => {
                abandon(separators, &metas);
                return Err(e.into());
            }
        };
        metas.extend(
            files
                .into_iter()
                .map(|f| FileMetaData::of_new_table(f.number, piece.dir_index, &f.summary)),
        );
    }
    let mut blob_files = Vec::new();
    let mut separators = separators.into_values();
    while let Some(separator) = separators.next() {
        match separator.finish() {
            Ok(files) => blob_files.extend(files),
            Err(e) => {
                separators.for_each(BlobSeparator::abandon);
                delete_files(table_cache, &metas, &blob_files);
                return Err(e.into());
            }
        }
    }
    let mut profile = times.profile();
    // Blob files are written beside the tables: their bytes count as the flush's output.
    profile.bytes_written += blob_files.iter().map(|b| b.file_size).sum::<u64>();
    profile.wall_nanos = start.elapsed().as_nanos() as u64;
    // Everything that was not S5..S7 was building blocks from the memtable: S4.
    let others: u64 = profile.step_nanos.iter().sum();
    profile.step_nanos[Step::Merge as usize] = profile.wall_nanos.saturating_sub(others);
    profile.entries_in = mem.len() as u64;
    profile.entries_out = mem.len() as u64;
    profile.cpu_nanos = thread_cpu_time().saturating_sub(cpu_start).as_nanos() as u64;
    Ok(Level0Output {
        tables: metas,
        blob_files,
        profile,
    })
}

/// Removes files a failed flush already finished; nothing references them yet. Best effort:
/// a leftover is unreferenced and deleted as obsolete later.
fn delete_files(table_cache: &TableCache, metas: &[FileMetaData], blobs: &[BlobFileMetaData]) {
    for m in metas {
        let _ = table_cache.remove_file(m.dir_index, m.number);
    }
    for b in blobs {
        let _ = table_cache
            .fs()
            .remove(&table_cache.blob_path(b.dir_index, b.number));
    }
}

/// A frozen memtable written to L0, ready to install.
pub(crate) struct FlushOutcome {
    /// Adds the tables, and moves the log number past the memtable's WAL.
    pub edit: VersionEdit,
    /// The tables written, in key order (none for an empty memtable).
    pub tables: Vec<FileMetaData>,
    pub profile: StageProfile,
}

/// The flush job: writes `imm` to L0 tables cut as `version` says (its range map and L1
/// files), and returns the edit that adds them. Once that edit is durable the memtable's WAL
/// is no longer needed: recovery starts from `next_log_number`, the WAL of the memtable after
/// it.
pub(crate) fn run(
    imm: &MemTable,
    version: &Version,
    next_log_number: u64,
    env: &JobEnv<'_>,
) -> Result<FlushOutcome> {
    let split_keys = flush_split_keys(version, env.options);
    let ranges = version.range_map().map(|m| &**m);
    let pieces = flush_pieces(ranges, &split_keys, env.table_cache);
    let mut new_number = || env.reserve_numbers(1).start;
    let Level0Output {
        tables,
        blob_files,
        profile,
    } = write_level0_tables(imm, env.table_cache, &pieces, &mut new_number, env.options)?;
    let edit = VersionEdit {
        new_files: tables.iter().map(|m| (0, m.clone())).collect(),
        new_blob_files: blob_files,
        log_number: Some(next_log_number),
        // The memtable's range tombstones live in the version from now on.
        range_tombstones: imm.range_tombstones(),
        ..VersionEdit::default()
    };
    Ok(FlushOutcome {
        edit,
        tables,
        profile,
    })
}

#[cfg(test)]
mod tests {
    use sluice_sst::key::{ValueKind, make_internal_key};

    use super::flush_split_keys;
    use crate::version::Version;
    use crate::version::edit::{FileMetaData, VersionEdit};
    use crate::{CompactionOptions, Db, Options};

    #[test]
    fn flushes_cut_where_an_l1_file_begins_once_enough_l1_lies_behind() {
        let l1 = |number: u64, lo: &str, hi: &str| {
            let f = FileMetaData {
                number,
                file_size: 100,
                smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
                largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
                ..FileMetaData::default()
            };
            (1, f)
        };
        let edit = VersionEdit {
            new_files: vec![
                l1(1, "a", "b"),
                l1(2, "c", "d"),
                l1(3, "e", "f"),
                l1(4, "g", "h"),
                l1(5, "i", "j"),
            ],
            ..VersionEdit::default()
        };
        let v = Version::default().apply(&edit).unwrap();
        let keys = |split_bytes| {
            let options = Options {
                compaction: CompactionOptions {
                    l0_flush_split_bytes: split_bytes,
                    ..CompactionOptions::default()
                },
                ..Options::default()
            };
            flush_split_keys(&v, &options)
        };
        assert_eq!(keys(150), vec![b"e".to_vec(), b"i".to_vec()]);
        assert_eq!(keys(100).len(), 4, "a cut at every file");
        assert!(keys(1000).is_empty(), "L1 too small to cut");
        assert!(keys(0).is_empty(), "splitting off");
    }

    #[test]
    fn flushes_report_their_cpu_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..20_000u32 {
            db.put(format!("key{i:08}").as_bytes(), [b'v'; 100])
                .unwrap();
        }
        db.flush().unwrap();
        let flush = db.metrics().flush;
        assert!(flush.count >= 1, "{flush:?}");
        assert!(flush.output_bytes > 0);
        // Building a table of 20,000 entries cannot take zero CPU on a thread clock with
        // nanosecond resolution.
        assert!(flush.cpu_seconds > 0.0, "{flush:?}");
    }
}
