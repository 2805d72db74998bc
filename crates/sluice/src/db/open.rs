//! Opening a database: locking the directory, recovering the version set from the MANIFEST,
//! replaying WAL files into L0 tables, and starting a fresh WAL and MANIFEST.
//!
//! Crash ordering: replayed WAL data is written to new L0 tables, then one new MANIFEST that
//! lists them and the new WAL number is made current. Only then are the old WALs deleted. A
//! crash anywhere before the CURRENT switch leaves the old MANIFEST and old WALs in charge, and
//! the half-done tables are unreferenced garbage removed on the next open.

use std::collections::VecDeque;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::{Condvar, Mutex};
use sluice_sst::cache::BlockCache;
use sluice_sst::key::SeqNo;

use super::{DbInner, DbState, WriteCounters, commit::CommitQueue};
use crate::batch::WriteBatch;
use crate::filename::{
    FileType, current_file_name, lock_file_name, log_file_name, parse_file_name,
};
use crate::flush::{flush_pieces, flush_split_keys, write_level0_tables};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::partition::RangeMap;
use crate::snapshot::SnapshotList;
use crate::table_cache::TableCache;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::wal::{LogReader, LogWriter};
use crate::{Error, IoContext, Result};

pub(super) fn open_inner(dir: &Path, options: Options) -> Result<DbInner> {
    options.validate()?;
    if !dir.exists() {
        if !options.create_if_missing {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist (create_if_missing is false)",
                dir.display()
            )));
        }
        std::fs::create_dir_all(dir).with_path(dir)?;
    }
    let dirs = options.table_dirs(dir);
    for data_dir in &dirs[1..] {
        if data_dir == dir {
            return Err(Error::InvalidArgument(format!(
                "{} is the database directory; a data directory must be another one",
                data_dir.display()
            )));
        }
        std::fs::create_dir_all(data_dir).with_path(data_dir)?;
    }
    let lock_file = lock_directory(dir)?;
    let exists = current_file_name(dir).exists();
    if exists && options.error_if_exists {
        return Err(Error::InvalidArgument(format!(
            "{} already holds a database (error_if_exists is true)",
            dir.display()
        )));
    }
    if !exists && !options.create_if_missing {
        return Err(Error::InvalidArgument(format!(
            "{} holds no database (create_if_missing is false)",
            dir.display()
        )));
    }
    let mut versions = if exists {
        VersionSet::recover(dir)?
    } else {
        VersionSet::new_empty()
    };

    let new_range_map = reconcile_partitions(&versions, &options)?;
    let block_cache = (options.block_cache_bytes > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_bytes)));
    if options.use_direct_io_for_flush_and_compaction {
        for d in &dirs {
            sluice_sst::fs::probe_direct_io(&*options.fs, d).map_err(|e| {
                Error::InvalidArgument(format!(
                    "use_direct_io_for_flush_and_compaction: {} does not take direct I/O: {e}",
                    d.display()
                ))
            })?;
        }
    }
    let table_cache = Arc::new(TableCache::new(dirs, &options, block_cache));
    for f in versions.current().live_files() {
        let path = table_cache.table_path(f.dir_index, f.number);
        if !path.exists() {
            return Err(Error::corruption(
                &path,
                0,
                "table file listed in the MANIFEST is missing",
            ));
        }
    }

    let ranges = new_range_map
        .clone()
        .or_else(|| versions.current().range_map().map(|m| (**m).clone()));
    let (new_files, last_seq) =
        replay_wals(dir, &options, &mut versions, &table_cache, ranges.as_ref())?;

    // Start a new WAL and a new MANIFEST that records the replayed tables.
    let log_number = versions.new_file_number();
    let log_path = log_file_name(dir, log_number);
    let wal = LogWriter::create(&*options.fs, log_path)?;
    let manifest_number = versions.new_file_number();
    let mut edit = VersionEdit {
        log_number: Some(log_number),
        range_map: new_range_map,
        ..VersionEdit::default()
    };
    for f in new_files {
        edit.new_files.push((0, f));
    }
    // Partitioned tables are checked against the range map even without paranoid checks: a
    // table in the wrong directory means the MANIFEST and the options disagree.
    let version = versions.prepare(
        &mut edit,
        last_seq,
        options.paranoid_checks || ranges.is_some(),
    )?;
    versions.install(version, &edit);
    versions.manifest_number = manifest_number;
    let manifest = ManifestWriter::create(
        &*options.fs,
        dir,
        manifest_number,
        &versions.snapshot_edit(),
    )?;
    // Durable from here: the old WALs are no longer needed.

    let offloader = options
        .offload
        .clone()
        .map(crate::compaction::offload::Offloader::new)
        .transpose()?;
    let inner = DbInner {
        offloader,
        dir: dir.to_path_buf(),
        state: Mutex::new(DbState {
            mem: Arc::new(MemTable::new(log_number)),
            imm: VecDeque::new(),
            versions,
            bg_error: None,
            closing: false,
            flush_running: false,
            compactions: Default::default(),
            manual_running: false,
            manual_waiting: 0,
            pending_outputs: Default::default(),
            level_counters: Default::default(),
            flush_metrics: Default::default(),
            compaction_metrics: Default::default(),
            trivial_moves: 0,
            intra_l0_compactions: 0,
            relocations: 0,
            range_moves: 0,
            range_splits: 0,
        }),
        bg_done: Condvar::new(),
        bg_work: Condvar::new(),
        commit: CommitQueue::default(),
        wal: Mutex::new(wal),
        manifest: Mutex::new(manifest),
        visible_seq: AtomicU64::new(last_seq),
        snapshots: Arc::new(SnapshotList::default()),
        table_cache,
        counters: WriteCounters::default(),
        obsolete_files_lock: Mutex::new(()),
        range_map_lock: Mutex::new(()),
        owners_busy: Mutex::new(vec![
            0;
            options
                .partitions
                .as_ref()
                .map_or(0, |p| p.owners.len())
        ]),
        options,
        _lock_file: lock_file,
    };
    inner.delete_obsolete_files();
    Ok(inner)
}

/// Checks `options.partitions` against the recovered MANIFEST. Returns the range map to record
/// when partitioned mode starts on a database that has none yet.
fn reconcile_partitions(versions: &VersionSet, options: &Options) -> Result<Option<RangeMap>> {
    let current = versions.current();
    match (&options.partitions, current.range_map()) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(Error::InvalidArgument(
            "the database is partitioned: open it with Options::partitions".into(),
        )),
        (Some(p), Some(map)) => {
            if map.max_owner() as usize >= p.owners.len() {
                return Err(Error::InvalidArgument(format!(
                    "the MANIFEST's range map names owner {}, but partitions has {} owners",
                    map.max_owner(),
                    p.owners.len()
                )));
            }
            Ok(None)
        }
        (Some(p), None) => {
            if current.live_files().next().is_some() {
                return Err(Error::InvalidArgument(
                    "cannot partition a database that already holds tables".into(),
                ));
            }
            p.initial_map()
                .map(Some)
                .map_err(|e| Error::InvalidArgument(format!("partitions: {e}")))
        }
    }
}

/// Takes an exclusive lock on `dir/LOCK` so two processes never open one database.
fn lock_directory(dir: &Path) -> Result<File> {
    let path = lock_file_name(dir);
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_path(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(Error::InvalidArgument(format!(
            "{} is locked: another process has the database open",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(Error::io(&path, e)),
    }
}

/// Replays every WAL at or after the version set's log number, writing what it holds to new L0
/// tables. Returns the tables and the highest sequence number seen.
fn replay_wals(
    dir: &Path,
    options: &Options,
    versions: &mut VersionSet,
    table_cache: &TableCache,
    ranges: Option<&RangeMap>,
) -> Result<(Vec<FileMetaData>, SeqNo)> {
    let mut logs: Vec<u64> = std::fs::read_dir(dir)
        .with_path(dir)?
        .flatten()
        .filter_map(|e| parse_file_name(e.file_name().to_str()?))
        .filter(|&(kind, n)| kind == FileType::Log && n >= versions.log_number)
        .map(|(_, n)| n)
        .collect();
    logs.sort_unstable();
    // Numbers at or above 2^56 are not ours (sequence and file numbers share that bound);
    // refusing them keeps `number + 1` below from overflowing.
    if let Some(&huge) = logs.iter().find(|&&n| n >= sluice_sst::key::MAX_SEQ) {
        return Err(Error::corruption(
            log_file_name(dir, huge),
            0,
            "WAL file number is out of range",
        ));
    }
    // Tables written during replay must not take the number of a WAL still to be replayed.
    if let Some(&newest) = logs.last() {
        versions.next_file_number = versions.next_file_number.max(newest + 1);
    }
    let mut last_seq = versions.last_sequence;
    let split_keys = flush_split_keys(versions.current(), options);
    let pieces = flush_pieces(ranges, &split_keys, table_cache);
    let mut tables = Vec::new();
    let mut mem = MemTable::new(0);
    for (i, &log) in logs.iter().enumerate() {
        let path = log_file_name(dir, log);
        let file = File::open(&path).with_path(&path)?;
        let mut reader = LogReader::new(file, path.clone(), options.wal_recovery_mode);
        reader.stop_at_unwritten_gap(i + 1 == logs.len());
        while let Some(record) = reader.read_record()? {
            let batch = WriteBatch::from_wal_record(record, &path, reader.last_record_offset())?;
            let mut seq = batch.sequence();
            for entry in batch.iter() {
                let entry = entry?;
                mem.add(seq, entry.kind, entry.key, entry.value);
                seq += 1;
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            if mem.approximate_bytes() >= options.write_buffer_size {
                let mut new_number = || versions.new_file_number();
                let (metas, _) =
                    write_level0_tables(&mem, table_cache, &pieces, &mut new_number, options)?;
                tables.extend(metas);
                mem = MemTable::new(0);
            }
        }
        if reader.dropped_bytes() > 0 {
            tracing::warn!(
                wal = %path.display(),
                dropped_bytes = reader.dropped_bytes(),
                "WAL ended in a torn record; recovered up to the last complete one"
            );
        }
    }
    if !mem.is_empty() {
        let mut new_number = || versions.new_file_number();
        let (metas, _) = write_level0_tables(&mem, table_cache, &pieces, &mut new_number, options)?;
        tables.extend(metas);
    }
    Ok((tables, last_seq))
}
