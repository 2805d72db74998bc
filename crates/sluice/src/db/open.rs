//! Opening a database: locking the directory, recovering the version set from the MANIFEST,
//! replaying WAL files into L0 tables, and starting a fresh WAL and MANIFEST. A read-only open
//! stops after recovery ([`super::recover`]) and keeps the WALs' records in memtables.
//!
//! Crash ordering: replayed WAL data is written to new L0 tables, then one new MANIFEST that
//! lists them and the new WAL number is made current. Only then are the old WALs deleted. A
//! crash anywhere before the CURRENT switch leaves the old MANIFEST and old WALs in charge, and
//! the half-done tables are unreferenced garbage removed on the next open. With keyspaces, each
//! keyspace's tree gets its new MANIFEST first and the database's comes last (see below).

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use parking_lot::{Condvar, Mutex};
use sluice_sst::cache::BlockCache;
use sluice_sst::fs::{FileLock, FileSystem, LockMode};
use sluice_sst::key::SeqNo;

use super::background::WorkSignal;
use super::journal::Journal;
use super::open_id::OpenId;
use super::open_tree::{RecoveringTree, remove_tree};
use super::recover::{
    RecoveryReport, ReplayTarget, check_tables_exist, raise_next_file_number, replay_wals,
    wals_to_replay,
};
use super::registry::TreeParts;
use super::{Tree, TreeState, WriteCounters, commit::CommitQueue};
use crate::batch::DEFAULT_KEYSPACE_ID;
use crate::filename::{
    create_dir_all_durably, current_file_name, lock_file_name, log_file_name, manifest_file_name,
    sync_dir,
};
use crate::keyspace::DEFAULT_KEYSPACE;
use crate::keyspace::options::{KEYSPACES_DIR, keyspace_dir, parse_keyspace_dir};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::partition::RangeMap;
use crate::partition::placement::{ByRange, Placement, Unpartitioned};
use crate::snapshot::SnapshotList;
use crate::table_cache::TableCache;
use crate::version::edit::VALUE_FORMAT_TTL;
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

/// Opens the database in `dir`: its journal, with every keyspace's tree.
pub(super) fn open_journal(dir: &Path, options: Options, access: Access) -> Result<Journal> {
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
    check_merge_operator(&mut versions, &options, (dir, None), !read_only)?;
    raise_next_file_number(fs, &mut versions, &dirs)?;

    let new_range_map = reconcile_partitions(&versions, &options)?;
    if read_only && new_range_map.is_some() {
        return Err(Error::InvalidArgument(
            "partitioning a database needs a read-write open".into(),
        ));
    }
    let block_cache = match &options.block_cache {
        Some(shared) => Some(Arc::clone(shared)),
        None => (options.block_cache_bytes > 0)
            .then(|| Arc::new(BlockCache::new(options.block_cache_bytes))),
    };
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
    let table_cache = Arc::new(TableCache::new(dirs, &options, block_cache.clone()));
    // A torn MANIFEST record may be dropped only if nothing it made obsolete was deleted:
    // these two checks fail if a later, acknowledged edit was acted on.
    let wals = check_tables_exist(&versions, &table_cache, &options)
        .and_then(|()| wals_to_replay(fs, dir, versions.log_number, &versions.wals))
        .map_err(|e| blame_torn_manifest(e, &report))?;
    let mut keyspaces = recover_keyspaces(dir, &options, &versions, &block_cache, read_only)?;
    for tree in &mut keyspaces {
        report.dropped.append(&mut tree.dropped);
    }
    if !read_only {
        delete_dropped_keyspaces(&options, dir, &versions);
    }
    let next_keyspace_id = versions.next_keyspace_id;
    let mut own = RecoveringTree::new(
        DEFAULT_KEYSPACE_ID,
        crate::keyspace::DEFAULT_KEYSPACE,
        dir.to_path_buf(),
        options,
        versions,
        table_cache,
    )
    .with_new_range_map(new_range_map);

    // Every WAL entry goes to its keyspace's tree, unless that tree has it in a table.
    let mut targets = BTreeMap::new();
    targets.insert(
        DEFAULT_KEYSPACE_ID,
        ReplayTarget {
            skip_below: own.versions.default_log_number.max(own.versions.log_number),
            write_buffer_size: own.options.memtable.write_buffer_size,
        },
    );
    for tree in &keyspaces {
        targets.insert(
            tree.id,
            ReplayTarget {
                skip_below: tree.versions.log_number,
                write_buffer_size: tree.options.memtable.write_buffer_size,
            },
        );
    }
    // Sequence numbers are shared: a keyspace's flush may have recorded the highest.
    let first_seq = keyspaces
        .iter()
        .map(|t| t.versions.last_sequence)
        .fold(own.versions.last_sequence, u64::max);
    let options = own.options.clone();
    let (mut last_mems, last_seq) = replay_wals(
        &wals,
        &options,
        first_seq,
        &mut report,
        &targets,
        next_keyspace_id,
        |id, mem| tree_of(&mut own, &mut keyspaces, id)?.take(mem, read_only),
    )?;
    if !read_only {
        for (id, mem) in std::mem::take(&mut last_mems) {
            tree_of(&mut own, &mut keyspaces, id)?.take(mem, false)?;
        }
    }

    if read_only {
        let mut parts_of = |tree: &mut RecoveringTree| Parts {
            mem: last_mems.remove(&tree.id).unwrap_or_else(|| {
                MemTable::for_write_buffer(0, tree.options.memtable.write_buffer_size)
            }),
            imm: std::mem::take(&mut tree.frozen),
            versions: std::mem::replace(&mut tree.versions, VersionSet::new_empty()),
            last_seq,
            wal: None,
            manifest: None,
            report: RecoveryReport::default(),
        };
        let trees = keyspaces
            .iter_mut()
            .map(|tree| {
                let parts = parts_of(tree);
                TreeParts::from_recovery(tree, parts)
            })
            .collect();
        let mut parts = parts_of(&mut own);
        parts.report = report;
        let journal = new_journal(dir, own.options, own.table_cache, lock_file, parts)?;
        journal.attach_trees(trees)?;
        return Ok(journal);
    }

    // Start a new WAL, then give every keyspace a new MANIFEST recording its replayed tables
    // and that its writes continue in that WAL; the database's goes last. A crash before it
    // replays the old WALs again, and each keyspace whose MANIFEST already moved on skips its
    // entries in them.
    let log_number = own.versions.new_file_number();
    let wal = LogWriter::create_wal(&*options.fs, log_file_name(dir, log_number), log_number)?;
    sync_dir(&*options.fs, dir)?;
    let mut trees = Vec::new();
    let mut boundaries = Vec::new();
    for tree in &mut keyspaces {
        let edit = tree.recovery_edit(log_number)?;
        boundaries.push((tree.id, log_number));
        let manifest = tree.install_in_new_manifest(edit, last_seq)?;
        let parts = Parts {
            mem: MemTable::for_write_buffer(log_number, tree.options.memtable.write_buffer_size),
            imm: VecDeque::new(),
            versions: std::mem::replace(&mut tree.versions, VersionSet::new_empty()),
            last_seq,
            wal: None,
            manifest: Some(manifest),
            report: RecoveryReport::default(),
        };
        trees.push(TreeParts::from_recovery(tree, parts));
    }
    let mut edit = own.recovery_edit(log_number)?;
    edit.wals = vec![(log_number, 0)];
    edit.keyspace_log_numbers = boundaries;
    let manifest = own.install_in_new_manifest(edit, last_seq)?;
    // Durable from here: the old WALs are no longer needed.
    let parts = Parts {
        mem: MemTable::for_write_buffer(log_number, options.memtable.write_buffer_size),
        imm: VecDeque::new(),
        versions: own.versions,
        last_seq,
        wal: Some(wal),
        manifest: Some(manifest),
        report,
    };
    let journal = new_journal(dir, own.options, own.table_cache, lock_file, parts)?;
    let deleted = journal.default.delete_obsolete_files();
    if deleted > 0 {
        tracing::info!(
            files = deleted,
            "deleted table and temporary files no version references"
        );
    }
    journal.default.recovery.lock().orphans_deleted = deleted;
    journal.attach_trees(trees)?;
    Ok(journal)
}

/// The tree of keyspace `id` among those being recovered.
fn tree_of<'a>(
    own: &'a mut RecoveringTree,
    keyspaces: &'a mut [RecoveringTree],
    id: u32,
) -> Result<&'a mut RecoveringTree> {
    if id == DEFAULT_KEYSPACE_ID {
        return Ok(own);
    }
    keyspaces
        .iter_mut()
        .find(|t| t.id == id)
        .ok_or_else(|| Error::InvalidArgument(format!("no keyspace of id {id}")))
}

/// Refuses names in [`Options::keyspaces`] that the database's MANIFEST does not have, unless
/// the open creates them ([`Options::create_missing_keyspaces`]): a typo would otherwise open
/// the keyspace meant with the default options.
fn check_keyspace_names(
    dir: &Path,
    options: &Options,
    versions: &VersionSet,
    read_only: bool,
) -> Result<()> {
    let unknown: Vec<&str> = options
        .keyspaces
        .keys()
        .map(String::as_str)
        .filter(|&name| !versions.keyspaces.values().any(|have| have == name))
        .collect();
    if unknown.is_empty() || (options.create_missing_keyspaces && !read_only) {
        return Ok(());
    }
    let have: Vec<&str> = std::iter::once(DEFAULT_KEYSPACE)
        .chain(versions.keyspaces.values().map(String::as_str))
        .collect();
    let how = match read_only {
        true => "a read-only open creates none",
        false => "create them with Db::create_keyspace, or set Options::create_missing_keyspaces",
    };
    Err(Error::InvalidArgument(format!(
        "Options::keyspaces names {unknown:?}, which the database in {} does not have (it has {}); {how}",
        dir.display(),
        have.join(", ")
    )))
}

/// Recovers the tree of every keyspace the database's MANIFEST names.
fn recover_keyspaces(
    dir: &Path,
    options: &Options,
    versions: &VersionSet,
    block_cache: &Option<Arc<BlockCache>>,
    read_only: bool,
) -> Result<Vec<RecoveringTree>> {
    check_keyspace_names(dir, options, versions, read_only)?;
    let mut trees = Vec::new();
    for (&id, name) in &versions.keyspaces {
        let keyspace_options = options.keyspaces.get(name).cloned().unwrap_or_default();
        let tree_options = keyspace_options.tree_options(options, id);
        tree_options.validate().map_err(|e| {
            Error::InvalidArgument(format!("the options of keyspace {name:?}: {e}"))
        })?;
        let recorded = versions.keyspace_log_numbers.get(&id).copied();
        let tree = RecoveringTree::recover_keyspace(
            (id, name),
            keyspace_dir(dir, id),
            tree_options,
            block_cache.clone(),
            (recorded, versions.log_number),
            read_only,
        )?;
        trees.push(tree);
    }
    Ok(trees)
}

/// Deletes the directories of keyspaces the MANIFEST does not name (dropped, or created by an
/// open that crashed before recording them), in every table directory. Failures are logged:
/// the files are garbage either way, and the next open tries again.
fn delete_dropped_keyspaces(options: &Options, dir: &Path, versions: &VersionSet) {
    for table_dir in options.table_dirs(dir) {
        let parent = table_dir.join(KEYSPACES_DIR);
        let Ok(names) = options.fs.list_dir(&parent) else {
            continue;
        };
        for name in names {
            let Some(id) = parse_keyspace_dir(&name) else {
                continue;
            };
            if versions.keyspaces.contains_key(&id) {
                continue;
            }
            let path = parent.join(&name);
            match remove_tree(&*options.fs, &path) {
                Ok(()) => tracing::info!(dir = %path.display(), "deleted a dropped keyspace"),
                Err(e) => tracing::warn!(error = %e, "could not delete a dropped keyspace"),
            }
        }
    }
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
pub(crate) struct Parts {
    pub mem: MemTable,
    pub imm: VecDeque<Arc<MemTable>>,
    pub versions: VersionSet,
    pub last_seq: SeqNo,
    pub wal: Option<LogWriter>,
    pub manifest: Option<ManifestWriter>,
    pub report: RecoveryReport,
}

impl Parts {
    /// A tree with nothing in it yet, read-only: what a secondary instance's follower fills.
    pub(crate) fn empty() -> Parts {
        Parts {
            mem: MemTable::for_write_buffer(0, 0),
            imm: VecDeque::new(),
            versions: VersionSet::new_empty(),
            last_seq: 0,
            wal: None,
            manifest: None,
            report: RecoveryReport::default(),
        }
    }
}

/// What a tree shares with its database's journal.
pub(crate) struct TreeLink {
    pub id: u32,
    pub visible_seq: Arc<AtomicU64>,
    pub snapshots: Arc<SnapshotList>,
    pub open_id: OpenId,
    pub bg_work: Arc<super::background::WorkSignal>,
    /// The database's workers: started once, shared by every tree.
    pub remote: Option<Arc<dyn crate::compaction::remote::RemoteExecutors>>,
    pub read_only: bool,
}

/// The journal of the database in `dir`, around its default keyspace's tree (`parts`, whose
/// `wal` is the journal's; `None` when read-only). The keyspaces' trees are attached after.
fn new_journal(
    dir: &Path,
    options: Options,
    table_cache: Arc<TableCache>,
    lock_file: Option<Box<dyn FileLock>>,
    parts: Parts,
) -> Result<Journal> {
    new_journal_of(
        OpenId::new(dir),
        dir,
        options,
        table_cache,
        lock_file,
        parts,
    )
}

/// The journal of a secondary instance of the database in `dir`, which takes no lock; its
/// follower is set by the caller.
pub(super) fn new_secondary_journal(
    dir: &Path,
    options: Options,
    table_cache: Arc<TableCache>,
    parts: Parts,
) -> Result<Journal> {
    new_journal_of(
        OpenId::secondary(dir),
        dir,
        options,
        table_cache,
        None,
        parts,
    )
}

fn new_journal_of(
    open_id: OpenId,
    dir: &Path,
    options: Options,
    table_cache: Arc<TableCache>,
    lock_file: Option<Box<dyn FileLock>>,
    mut parts: Parts,
) -> Result<Journal> {
    let wal = parts.wal.take();
    // Workers are started only for a database that compacts: not when open read-only.
    let remote = match (&options.offload, wal.is_some()) {
        (Some(offload), true) => Some(offload.start()?),
        _ => None,
    };
    let visible_seq = Arc::new(AtomicU64::new(parts.last_seq));
    let snapshots = Arc::new(SnapshotList::default());
    let bg_work = Arc::new(WorkSignal::default());
    let link = TreeLink {
        id: DEFAULT_KEYSPACE_ID,
        visible_seq: Arc::clone(&visible_seq),
        snapshots: Arc::clone(&snapshots),
        open_id: open_id.clone(),
        bg_work: Arc::clone(&bg_work),
        remote,
        read_only: wal.is_none(),
    };
    let default = Arc::new(new_tree(dir, options, table_cache, parts, link)?);
    Ok(Journal {
        default,
        keyspaces: Default::default(),
        keyspace_admin: Mutex::new(()),
        commit: CommitQueue::default(),
        current_wal: AtomicU64::new(wal.as_ref().and_then(|w| w.log_number()).unwrap_or(0)),
        wal: Mutex::new(wal),
        wal_failed: Default::default(),
        visible_seq,
        snapshots,
        open_id,
        bg_work,
        lock_file: Mutex::new(lock_file),
        txn_locks: Default::default(),
        follower: None,
    })
}

/// A keyspace's tree (the default one's too) from what recovery made of it.
pub(crate) fn new_tree(
    dir: &Path,
    options: Options,
    table_cache: Arc<TableCache>,
    parts: Parts,
    link: TreeLink,
) -> Result<Tree> {
    let remote = link.remote;
    let remote_workers = options
        .offload
        .as_ref()
        .map(|o| o.workers())
        .unwrap_or_default();
    let placement: Box<dyn Placement> = match &options.partitions {
        Some(p) => Box::new(ByRange::new(p.clone())),
        None => Box::new(Unpartitioned),
    };
    Ok(Tree {
        remote,
        remote_workers,
        placement,
        dir: dir.to_path_buf(),
        state: Mutex::new(TreeState {
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
        bg_work: link.bg_work,
        read_only: link.read_only,
        manifest: Mutex::new(parts.manifest),
        visible_seq: link.visible_seq,
        snapshots: link.snapshots,
        open_id: link.open_id,
        keyspace_id: link.id,
        dropped: AtomicBool::new(false),
        table_cache,
        counters: WriteCounters::default(),
        events: crate::events::Listeners::new(options.listeners.clone()),
        obsolete_files_lock: Mutex::new(()),
        range_map_lock: Mutex::new(()),
        recovery: Mutex::new(parts.report),
        live: parking_lot::RwLock::new(Arc::new(options.clone())),
        options,
        closed: AtomicBool::new(false),
    })
}

/// Checks `options.partitions` against the recovered MANIFEST. Returns the range map to record
/// when partitioned mode starts on a database that has none yet.
pub(crate) fn reconcile_partitions(
    versions: &VersionSet,
    options: &Options,
) -> Result<Option<RangeMap>> {
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

/// Holds `options.merge_operator` to the operator the tree's operands were written for (the
/// MANIFEST records its name): another one would combine them differently, and without one
/// they cannot be read. A tree without a record takes the options' operator, which `record`
/// (a read-write open, whose new MANIFEST starts with the state) writes down. `keyspace`
/// names a keyspace's tree (`None`: the database's own), for the message.
pub(crate) fn check_merge_operator(
    versions: &mut VersionSet,
    options: &Options,
    (dir, keyspace): (&Path, Option<&str>),
    record: bool,
) -> Result<()> {
    let given = options
        .merge_operator
        .as_ref()
        .map(|m| m.name().to_string());
    let (tree, field) = match keyspace {
        Some(name) => (
            format!("keyspace {name:?} ({})", dir.display()),
            "its KeyspaceOptions::merge_operator",
        ),
        None => (dir.display().to_string(), "Options::merge_operator"),
    };
    match (&versions.merge_operator, given) {
        (Some(written), Some(given)) if *written != given => Err(Error::InvalidArgument(format!(
            "{tree} was written with merge operator {written:?}, not {given:?}: its operands \
             would be combined by another rule"
        ))),
        (Some(written), None) => {
            let how = match sluice_sst::merge_operator::builtin(written) {
                Some(_) => format!("sluice::merge_operator::builtin({written:?})"),
                None => "the application's operator of that name".to_string(),
            };
            Err(Error::InvalidArgument(format!(
                "{tree} was written with merge operator {written:?}: open it with {field} \
                 ({how})"
            )))
        }
        (None, Some(given)) if record => {
            versions.merge_operator = Some(given);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Settles how values are stored: a new database takes the options' format; an existing one
/// must be opened with the format it was written with, since neither can read the other's
/// values ([`Options::ttl`] appends a write time to each).
pub(crate) fn check_value_format(
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
