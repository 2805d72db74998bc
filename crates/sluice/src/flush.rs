//! Flush (the "minor compaction"): writing a frozen memtable to an L0 table.

use std::time::Instant;

use sluice_sst::compact::subtask::encode_sub_task;
use sluice_sst::compact::{CompactionSpec, OutputWriter, StepTimes};
use sluice_sst::profile::{StageProfile, Step, thread_cpu_time};
use sluice_sst::table::TableContentBuilder;

use crate::Result;
use crate::db::DbInner;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::partition::{RangeMap, owner_dir_index};
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version::edit::{FileMetaData, VersionEdit};
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

/// Where a flush cuts its L0 tables: at the first key of an L1 file, at most once per
/// `options.l0_flush_split_bytes` of L1 (Pebble's flush split keys). L0 tables then line up
/// with L1's files, so the L0 -> L1 compactions of different intervals take disjoint files of
/// both levels and run at the same time ([`crate::compaction::l0_inputs`]), each rewriting
/// only its own part of L1. Empty when splitting is off or L1 is too small to cut.
pub(crate) fn flush_split_keys(version: &Version, options: &Options) -> Vec<Vec<u8>> {
    let split_bytes = options.l0_flush_split_bytes;
    let mut keys = Vec::new();
    if split_bytes == 0 {
        return keys;
    }
    let mut since_cut = 0u64;
    for f in version.files(1) {
        if since_cut >= split_bytes {
            keys.push(smallest_user_key(f).to_vec());
            since_cut = 0;
        }
        since_cut += f.file_size;
    }
    keys
}

/// Writes `mem` to L0 tables, one per piece of `pieces` that holds entries, numbered by
/// `new_number` (called only for tables actually written). Returns the tables in key order.
/// Every table is fsynced before this returns; it becomes part of the tree only once a
/// version edit naming it is installed.
pub(crate) fn write_level0_tables(
    mem: &MemTable,
    table_cache: &TableCache,
    pieces: &[FlushPiece<'_>],
    new_number: &mut dyn FnMut() -> u64,
    options: &Options,
) -> Result<(Vec<FileMetaData>, StageProfile)> {
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let times = StepTimes::default();
    // A flush is a compaction of one sorted input (the memtable) into one file per piece.
    let spec = CompactionSpec {
        inputs: Vec::new(),
        snapshots: Vec::new(),
        bottommost: false,
        table: options.table_options(),
        storage: options.background_storage(),
        target_file_size: u64::MAX,
        grandparents: Vec::new(),
        max_grandparent_overlap_bytes: u64::MAX,
        lower: None,
        upper: None,
    };
    let mut metas = Vec::new();
    for piece in pieces {
        let mut new_output = || -> Result<(u64, std::path::PathBuf)> {
            let number = new_number();
            Ok((number, table_cache.table_path(piece.dir_index, number)))
        };
        let mut writer = OutputWriter::new(&spec, &times, &mut new_output);
        let mut builder = TableContentBuilder::new(&spec.table);
        let write_sealed = |builder: &mut TableContentBuilder, writer: &mut OutputWriter<'_>| {
            let sealed: Vec<_> = std::iter::from_fn(|| builder.take_sealed()).collect();
            encode_sub_task(sealed, &spec, &times)
                .iter()
                .try_for_each(|block| writer.append(block))
        };
        let written = mem
            .for_each_in(piece.lower, piece.upper, |ikey, value| {
                builder.add(ikey, value);
                write_sealed(&mut builder, &mut writer)
            })
            .and_then(|()| {
                builder.seal_current();
                write_sealed(&mut builder, &mut writer)
            });
        // A piece without entries wrote nothing and took no number.
        match writer.conclude(written) {
            Ok(files) => metas.extend(
                files
                    .into_iter()
                    .map(|f| file_meta(f.number, piece.dir_index, &f.summary)),
            ),
            Err(e) => {
                delete_tables(table_cache, &metas);
                return Err(e);
            }
        }
    }
    let mut profile = times.profile();
    profile.wall_nanos = start.elapsed().as_nanos() as u64;
    // Everything that was not S5..S7 was building blocks from the memtable: S4.
    let others: u64 = profile.step_nanos.iter().sum();
    profile.step_nanos[Step::Merge as usize] = profile.wall_nanos.saturating_sub(others);
    profile.entries_in = mem.len() as u64;
    profile.entries_out = mem.len() as u64;
    profile.cpu_nanos = thread_cpu_time().saturating_sub(cpu_start).as_nanos() as u64;
    Ok((metas, profile))
}

/// Removes tables a failed flush already finished; nothing references them yet. Best effort:
/// a leftover is unreferenced and deleted as obsolete later.
fn delete_tables(table_cache: &TableCache, metas: &[FileMetaData]) {
    for m in metas {
        let _ = table_cache.remove_file(m.dir_index, m.number);
    }
}

/// The MANIFEST's description of a freshly written table.
pub(crate) fn file_meta(
    number: u64,
    dir_index: u32,
    summary: &sluice_sst::table::TableSummary,
) -> FileMetaData {
    let p = &summary.properties;
    FileMetaData {
        number,
        file_size: summary.file_size,
        smallest: summary.smallest_key.clone(),
        largest: summary.largest_key.clone(),
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        raw_value_bytes: p.raw_value_bytes,
        dir_index,
    }
}

impl DbInner {
    /// Writes the oldest frozen memtable to L0 and installs it. Runs on the flush thread.
    ///
    /// The flush's CPU time (`Metrics::flush.cpu_seconds`) is this thread's CPU clock from
    /// here until the edit is installed: building and writing the table, its fsync, and the
    /// MANIFEST append. Deleting obsolete files afterwards is not counted.
    pub(crate) fn flush_oldest_immutable(&self) -> Result<()> {
        let cpu_start = thread_cpu_time();
        // The tables are cut by this version's range map; no split may change its boundaries
        // before they are installed.
        let _map_fixed = self.range_map_lock.lock();
        let (imm, version) = {
            let st = self.state.lock();
            let Some(imm) = st.imm.front().cloned() else {
                return Ok(());
            };
            (imm, std::sync::Arc::clone(st.versions.current()))
        };
        // Numbers handed out, kept in `pending_outputs` until the edit is installed.
        let mut numbers = Vec::new();
        let mut new_number = || {
            let n = self.reserve_number();
            numbers.push(n);
            n
        };
        let split_keys = flush_split_keys(&version, &self.options);
        let ranges = version.range_map().map(|m| &**m);
        let pieces = flush_pieces(ranges, &split_keys, &self.table_cache);
        let outcome = write_level0_tables(
            &imm,
            &self.table_cache,
            &pieces,
            &mut new_number,
            &self.options,
        )
        .and_then(|(metas, profile)| {
            let mut edit = VersionEdit::default();
            for m in &metas {
                edit.new_files.push((0, m.clone()));
            }
            // Once this edit is durable the frozen memtable's WAL is no longer needed:
            // recovery starts from the WAL of the next memtable.
            edit.log_number = Some({
                let st = self.state.lock();
                st.imm
                    .get(1)
                    .map_or(st.mem.log_number(), |m| m.log_number())
            });
            // On failure the tables stay: the edit may have reached the MANIFEST before the
            // error, so only the next open can tell whether they are garbage.
            self.log_and_apply(edit)?;
            Ok((metas, profile))
        });
        let cpu_used = thread_cpu_time().saturating_sub(cpu_start);
        let mut st = self.state.lock();
        for n in &numbers {
            st.pending_outputs.remove(n);
        }
        let (metas, mut profile) = outcome?;
        // Replaces the table writer's own figure, which ends before the install.
        profile.cpu_nanos = cpu_used.as_nanos() as u64;
        st.imm.pop_front();
        st.flush_metrics
            .record(imm.approximate_bytes() as u64, &profile);
        let bytes: u64 = metas.iter().map(|m| m.file_size).sum();
        st.level_counters.bytes_in[0] += imm.approximate_bytes() as u64;
        st.level_counters.bytes_written[0] += bytes;
        st.level_counters.compactions[0] += 1;
        drop(st);
        tracing::debug!(tables = metas.len(), bytes, "flushed memtable to L0");
        self.delete_obsolete_files();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sluice_sst::key::{ValueKind, make_internal_key};

    use super::flush_split_keys;
    use crate::version::Version;
    use crate::version::edit::{FileMetaData, VersionEdit};
    use crate::{Db, Options};

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
                l0_flush_split_bytes: split_bytes,
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
            db.put(format!("key{i:08}").as_bytes(), &[b'v'; 100])
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
