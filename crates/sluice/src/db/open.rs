//! Opening a database: locking the directory, recovering the version set from the MANIFEST,
//! replaying WAL files into L0 tables, and starting a fresh WAL and MANIFEST. A read-only open
//! stops after recovery ([`super::recover`]) and keeps the WALs' records in memtables.
//!
//! Crash ordering: replayed WAL data is written to new L0 tables, then one new MANIFEST that
//! lists them and the new WAL number is made current. Only then are the old WALs deleted. A
//! crash anywhere before the CURRENT switch leaves the old MANIFEST and old WALs in charge, and
//! the half-done tables are unreferenced garbage removed on the next open.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::{Condvar, Mutex};
use sluice_sst::cache::BlockCache;
use sluice_sst::fs::{FileLock, FileSystem, LockMode};
use sluice_sst::key::SeqNo;

use super::recover::{
    RecoveryReport, check_tables_exist, raise_next_file_number, replay_wals, wals_to_replay,
};
use super::{DbInner, DbState, WriteCounters, commit::CommitQueue};
use crate::filename::{
    create_dir_all_durably, current_file_name, lock_file_name, log_file_name, manifest_file_name,
    sync_dir,
};
use crate::flush::{flush_pieces, flush_split_keys, write_level0_tables};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::partition::RangeMap;
use crate::partition::placement::{ByRange, Placement, Unpartitioned};
use crate::snapshot::SnapshotList;
use crate::table_cache::TableCache;
use crate::version::edit::{VALUE_FORMAT_TTL, VersionEdit};
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::wal::LogWriter;
use crate::{Error, IoContext, Result};

/// Whether an open may change the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Replays the WALs into tables, starts a new WAL and MANIFEST, deletes orphans.
    ReadWrite,
    /// Writes nothing: the WALs' records are served from memory.
    ReadOnly,
}

pub(super) fn open_inner(dir: &Path, options: Options, access: Access) -> Result<DbInner> {
    options.validate()?;
    let read_only = access == Access::ReadOnly;
    let fs = &*options.fs;
    if !fs.exists(dir).with_path(dir)? {
        if !options.create_if_missing || read_only {
            return Err(Error::InvalidArgument(format!(
                "{} does not exist{}",
                dir.display(),
                if read_only {
                    ""
                } else {
                    " (create_if_missing is false)"
                }
            )));
        }
        // Durably: an acknowledged write must not vanish with the directory that holds it.
        create_dir_all_durably(fs, dir)?;
    }
    let dirs = options.table_dirs(dir);
    for data_dir in &dirs[1..] {
        if data_dir == dir {
            return Err(Error::InvalidArgument(format!(
                "{} is the database directory; a data directory must be another one",
                data_dir.display()
            )));
        }
        if !read_only {
            create_dir_all_durably(fs, data_dir)?;
        }
    }
    let lock_file = lock_directory(fs, dir, access)?;
    let current = current_file_name(dir);
    let exists = fs.exists(&current).with_path(&current)?;
    if exists && options.error_if_exists && !read_only {
        return Err(Error::InvalidArgument(format!(
            "{} already holds a database (error_if_exists is true)",
            dir.display()
        )));
    }
    if !exists && (!options.create_if_missing || read_only) {
        return Err(Error::InvalidArgument(format!(
            "{} holds no database{}",
            dir.display(),
            if read_only {
                ""
            } else {
                " (create_if_missing is false)"
            }
        )));
    }
    let mut report = RecoveryReport::default();
    let mut versions = if exists {
        let (versions, edits, dropped) = VersionSet::recover(fs, dir)?;
        report.manifest = manifest_file_name(dir, versions.manifest_number);
        report.manifest_edits = edits;
        report.dropped = dropped;
        versions
    } else {
        VersionSet::new_empty()
    };
    check_value_format(&mut versions, exists, &options, dir)?;
    raise_next_file_number(fs, &mut versions, &dirs)?;

    let new_range_map = reconcile_partitions(&versions, &options)?;
    if read_only && new_range_map.is_some() {
        return Err(Error::InvalidArgument(
            "partitioning a database needs a read-write open".into(),
        ));
    }
    let block_cache = (options.block_cache_bytes > 0)
        .then(|| Arc::new(BlockCache::new(options.block_cache_bytes)));
    if options.compaction.use_direct_io_for_flush_and_compaction && !read_only {
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
    // A torn MANIFEST record may be dropped only if nothing it made obsolete was deleted:
    // these two checks fail if a later, acknowledged edit was acted on.
    let wals = check_tables_exist(&versions, &table_cache, &options)
        .and_then(|()| wals_to_replay(fs, dir, versions.log_number, &versions.wals))
        .map_err(|e| blame_torn_manifest(e, &report))?;

    let inner = if read_only {
        let mut frozen = VecDeque::new();
        let (mem, last_seq) =
            replay_wals(&wals, &options, versions.last_sequence, &mut report, |m| {
                frozen.push_back(Arc::new(m));
                Ok(())
            })?;
        let parts = Parts {
            mem,
            imm: frozen,
            versions,
            last_seq,
            wal: None,
            manifest: None,
            report,
        };
        new_inner(dir, options, table_cache, lock_file, parts)?
    } else {
        let ranges = new_range_map
            .clone()
            .or_else(|| versions.current().range_map().map(|m| (**m).clone()));
        let split_keys = flush_split_keys(versions.current(), &options);
        let pieces = flush_pieces(ranges.as_ref(), &split_keys, &table_cache);
        let mut new_files = Vec::new();
        let mut range_tombstones = Vec::new();
        let mut to_l0 = |mem: &MemTable, versions: &mut VersionSet| -> Result<()> {
            range_tombstones.extend(mem.range_tombstones());
            if mem.has_entries() {
                let mut new_number = || versions.new_file_number();
                let (metas, _) =
                    write_level0_tables(mem, &table_cache, &pieces, &mut new_number, &options)?;
                new_files.extend(metas);
            }
            Ok(())
        };
        let first_seq = versions.last_sequence;
        let (last_mem, last_seq) = replay_wals(&wals, &options, first_seq, &mut report, |m| {
            to_l0(&m, &mut versions)
        })?;
        to_l0(&last_mem, &mut versions)?;

        // Start a new WAL and a new MANIFEST that records the replayed tables.
        let log_number = versions.new_file_number();
        let wal = LogWriter::create_wal(&*options.fs, log_file_name(dir, log_number), log_number)?;
        sync_dir(&*options.fs, dir)?;
        let manifest_number = versions.new_file_number();
        let mut edit = VersionEdit {
            log_number: Some(log_number),
            range_map: new_range_map,
            wals: vec![(log_number, 0)],
            range_tombstones,
            ..VersionEdit::default()
        };
        // The replayed tables' names must be durable before a MANIFEST names them: the one
        // created below syncs only the database directory, and tables may sit in data or owner
        // directories. If we crash after the MANIFEST switch without this, it names tables a
        // power failure took back, while the WALs they came from are no longer replayed.
        let table_dirs: std::collections::BTreeSet<u32> =
            new_files.iter().map(|f| f.dir_index).collect();
        for index in table_dirs {
            if let Some(d) = table_cache.dirs().get(index as usize) {
                sync_dir(&*options.fs, d)?;
            }
        }
        for f in new_files {
            edit.new_files.push((0, f));
        }
        // Partitioned tables are checked against the range map even without paranoid checks:
        // a table in the wrong directory means the MANIFEST and the options disagree.
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
        let parts = Parts {
            mem: MemTable::for_write_buffer(log_number, options.memtable.write_buffer_size),
            imm: VecDeque::new(),
            versions,
            last_seq,
            wal: Some(wal),
            manifest: Some(manifest),
            report,
        };
        new_inner(dir, options, table_cache, lock_file, parts)?
    };
    if !read_only {
        let deleted = inner.delete_obsolete_files();
        if deleted > 0 {
            tracing::info!(
                files = deleted,
                "deleted table and temporary files no version references"
            );
        }
        inner.recovery.lock().orphans_deleted = deleted;
    }
    Ok(inner)
}

/// A file the recovered state needs is missing. If the MANIFEST's last record was dropped as
/// torn, that is the cause: the record was acknowledged (something it made obsolete was
/// deleted), so the MANIFEST is what is damaged, and the error names it.
fn blame_torn_manifest(err: Error, report: &RecoveryReport) -> Error {
    match (report.dropped.first(), &err) {
        (Some(torn), Error::Corruption { .. }) => Error::corruption(
            &torn.file,
            torn.offset,
            format!(
                "the MANIFEST's last {} bytes do not form a complete record, and the state \
                 before them is not on disk, so the record was acknowledged and is lost: {err}",
                torn.bytes
            ),
        ),
        _ => err,
    }
}

/// What recovery hands to the database handle.
struct Parts {
    mem: MemTable,
    imm: VecDeque<Arc<MemTable>>,
    versions: VersionSet,
    last_seq: SeqNo,
    wal: Option<LogWriter>,
    manifest: Option<ManifestWriter>,
    report: RecoveryReport,
}

fn new_inner(
    dir: &Path,
    options: Options,
    table_cache: Arc<TableCache>,
    lock_file: Option<Box<dyn FileLock>>,
    parts: Parts,
) -> Result<DbInner> {
    // Workers are started only for a database that compacts: not when open read-only.
    let remote = match (&options.offload, parts.wal.is_some()) {
        (Some(offload), true) => Some(offload.start()?),
        _ => None,
    };
    let remote_workers = options
        .offload
        .as_ref()
        .map(|o| o.workers())
        .unwrap_or_default();
    let placement: Box<dyn Placement> = match &options.partitions {
        Some(p) => Box::new(ByRange::new(p.clone())),
        None => Box::new(Unpartitioned),
    };
    Ok(DbInner {
        remote,
        remote_workers,
        placement,
        dir: dir.to_path_buf(),
        state: Mutex::new(DbState {
            mem: Arc::new(parts.mem),
            imm: parts.imm,
            versions: parts.versions,
            bg_error: None,
            closing: false,
            flush_running: false,
            compactions: Default::default(),
            manual_running: false,
            manual_waiting: 0,
            pending_outputs: Default::default(),
            file_deletions_held: 0,
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
        read_only: parts.wal.is_none(),
        wal: Mutex::new(parts.wal),
        manifest: Mutex::new(parts.manifest),
        visible_seq: AtomicU64::new(parts.last_seq),
        snapshots: Arc::new(SnapshotList::default()),
        table_cache,
        counters: WriteCounters::default(),
        obsolete_files_lock: Mutex::new(()),
        range_map_lock: Mutex::new(()),
        recovery: Mutex::new(parts.report),
        options,
        _lock_file: lock_file,
    })
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

/// Locks `dir/LOCK` through `fs`: exclusively for a read-write open, so two processes never
/// write one database; shared for a read-only one, so no writer opens it while it is read. A
/// read-only open of a directory without a LOCK file creates none and takes no lock.
pub(crate) fn lock_directory(
    fs: &dyn FileSystem,
    dir: &Path,
    access: Access,
) -> Result<Option<Box<dyn FileLock>>> {
    let path = lock_file_name(dir);
    let mode = match access {
        Access::ReadWrite => LockMode::Exclusive,
        Access::ReadOnly => LockMode::Shared,
    };
    match fs.lock(&path, mode) {
        Ok(lock) => Ok(Some(lock)),
        Err(e) if access == Access::ReadOnly && e.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(Error::Busy(format!(
            "{} is locked: another process has the database open{}",
            dir.display(),
            match access {
                Access::ReadWrite => "",
                Access::ReadOnly => " for writing",
            }
        ))),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// Settles how values are stored: a new database takes the options' format; an existing one
/// must be opened with the format it was written with, since neither can read the other's
/// values ([`Options::ttl`] appends a write time to each).
fn check_value_format(
    versions: &mut VersionSet,
    exists: bool,
    options: &Options,
    dir: &Path,
) -> Result<()> {
    let wanted = options.ttl.map(|_| VALUE_FORMAT_TTL.to_string());
    if !exists {
        versions.value_format = wanted;
        return Ok(());
    }
    match (versions.value_format.as_deref(), wanted.as_deref()) {
        (None, None) => Ok(()),
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some(VALUE_FORMAT_TTL), None) => Err(Error::InvalidArgument(format!(
            "{} was written with a ttl (its values carry write times): open it with Options::ttl",
            dir.display()
        ))),
        (None, Some(_)) => Err(Error::InvalidArgument(format!(
            "{} was written without a ttl: Options::ttl cannot be added to it",
            dir.display()
        ))),
        (Some(other), None | Some(_)) => Err(Error::InvalidArgument(format!(
            "{} stores values in format {other:?}, which this build does not know",
            dir.display()
        ))),
    }
}
