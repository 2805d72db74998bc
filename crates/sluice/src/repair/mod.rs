//! Repair: rebuilding a database from the files that can still be read, when its MANIFEST is
//! damaged or lost, or a table or WAL is (RocksDB's and LevelDB's `RepairDB`).
//!
//! Each tree (the database's own, and each keyspace's, `tree.rs`) goes through the steps
//! below on its own, except that the WALs are read once, each entry given to its tree, and
//! the keyspaces' new MANIFESTs are made current before the database's, which names them.
//!
//! 1. The MANIFEST is read if it can be. Its live tables, and tables numbered at or above its
//!    next file number (outputs of edits it lost), are used; other tables are obsolete (inputs
//!    of compactions that finished) and are set aside in `lost/`, unused: merging them could
//!    bring back versions a dropped tombstone had deleted. Without a readable MANIFEST every
//!    table is used, as LevelDB's repair does, with that risk reported.
//! 2. Every used table is verified. A damaged one contributes the entries of its good blocks.
//! 3. Every WAL (at or above the MANIFEST's log number, or all of them) is read with
//!    [`WalRecoveryMode::SkipAnyCorruptedRecords`].
//! 4. Every key range a damaged block or a missing or unreadable table took with it is
//!    reported with how many surviving keys in it may now read an older value
//!    ([`LostRange`], `lost_ranges.rs`); asked to, repair deletes those older versions.
//! 5. Everything is merged into one sorted run in the bottom level (shadowed versions,
//!    tombstones and what range tombstones cover dropped, as no snapshot exists; range
//!    tombstones only a lost MANIFEST recorded are lost with it), because tables put back side by side could
//!    shadow each other in the wrong order. This rewrites the data once.
//! 6. A new MANIFEST naming only the merged tables is made current. Only then are the merged
//!    inputs deleted and what could not be read (damaged tables and WALs, obsolete tables, old
//!    MANIFESTs) moved into `lost/`, so a crash at any point leaves a database that repair can
//!    be run on again.

mod lost_ranges;
mod salvage;
mod tree;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice_sst::fs::FileSystem;
use sluice_sst::key::SeqNo;

use crate::batch::DEFAULT_KEYSPACE_ID;
use crate::db::recover::{RecoveryReport, ReplayTarget, replay_wals, wals_to_replay};
use crate::db::{Access, lock_directory};
use crate::filename::{create_dir_all_durably, sync_dir};
use crate::keyspace::options::{KEYSPACES_DIR, keyspace_dir, parse_keyspace_dir};
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::version::edit::VersionEdit;
use crate::version::set::VersionSet;
use crate::wal::DroppedRange;
use crate::{Error, IoContext, Result};
pub use lost_ranges::LostRange;
use tree::TreeRepair;

/// A file repair could not use, and where it went.
#[derive(Clone, Debug)]
pub struct LostFile {
    /// Where it was.
    pub path: PathBuf,
    /// Where it is now, under `lost/`.
    pub moved_to: PathBuf,
    /// Why it was set aside.
    pub reason: String,
}

/// What [`repair`] kept and what it dropped.
#[derive(Clone, Debug, Default)]
pub struct RepairReport {
    /// The MANIFEST could be read and said which tables were live.
    pub manifest_readable: bool,
    /// Tables merged whole.
    pub tables_whole: usize,
    /// Damaged tables whose good blocks were merged.
    pub tables_partial: usize,
    /// WAL files read.
    pub wal_files: usize,
    /// WAL records (write batches) merged.
    pub wal_records: u64,
    /// Tables the repaired database holds.
    pub output_tables: usize,
    /// Entries in them.
    pub output_entries: u64,
    /// Bytes of them.
    pub output_bytes: u64,
    /// The repaired database's last sequence number.
    pub last_sequence: SeqNo,
    /// Files set aside in `lost/`.
    pub lost: Vec<LostFile>,
    /// Parts of WALs and tables not merged (damaged blocks and records).
    pub dropped: Vec<DroppedRange>,
    /// Tables the MANIFEST listed that were not on disk.
    pub missing: Vec<PathBuf>,
    /// Key ranges whose newest versions may be lost: those of damaged data blocks, and of
    /// tables the MANIFEST listed that are missing or unreadable.
    pub lost_ranges: Vec<LostRange>,
    /// The keys at risk in `lost_ranges` had their older versions deleted
    /// ([`RepairOptions::drop_older_in_lost_ranges`]).
    pub dropped_older_in_lost_ranges: bool,
    /// The file in `lost/` listing `lost_ranges` (when there are any).
    pub lost_ranges_file: Option<PathBuf>,
    /// The keyspaces of the repaired database, by id: those its MANIFEST named, or, when it
    /// could not be read, every `keyspaces/<id>/` directory, named `keyspace-<id>`.
    pub keyspaces: Vec<(u32, String)>,
}

/// How [`repair_with`] treats what it could not read.
#[derive(Clone, Copy, Debug, Default)]
pub struct RepairOptions {
    /// Delete, in every lost key range, each version no newer than the newest the damaged
    /// table held: a key whose newest version was lost then reads as absent instead of as an
    /// older value (and a key rewritten since keeps its newer value). Off by default, as in
    /// RocksDB, whose repair keeps whatever survives.
    pub drop_older_in_lost_ranges: bool,
}

/// Rebuilds the database in `dir` (see the module documentation) and returns what was kept and
/// dropped. `options` must name the same table directories the database uses (`data_dirs`),
/// and the options of its keyspaces (`keyspaces`) as an open would; partitioned databases are
/// not supported.
pub fn repair(dir: &Path, options: Options) -> Result<RepairReport> {
    repair_with(dir, options, &RepairOptions::default())
}

/// [`repair`], treating lost key ranges as `how` says.
pub fn repair_with(dir: &Path, mut options: Options, how: &RepairOptions) -> Result<RepairReport> {
    options.validate()?;
    // Salvaged values stay in the tables: repair writes no blob files.
    options.blob = Default::default();
    if options.partitions.is_some() {
        return Err(Error::InvalidArgument(
            "repair of a partitioned database is not supported".into(),
        ));
    }
    let fs = &*options.fs;
    if !fs.metadata(dir).is_ok_and(|m| m.is_dir) {
        return Err(Error::InvalidArgument(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let _lock = lock_directory(fs, dir, Access::ReadWrite)?;
    let mut report = RepairReport::default();
    let mut own = TreeRepair::collect(
        DEFAULT_KEYSPACE_ID,
        dir.to_path_buf(),
        options.clone(),
        &mut report,
    )?;
    report.manifest_readable = own.recovered.is_some();
    let keyspaces = keyspaces_of(&options, dir, own.recovered.as_ref())?;
    let mut trees = vec![];
    for (&id, name) in &keyspaces {
        let tree_options = options
            .keyspaces
            .get(name)
            .cloned()
            .unwrap_or_default()
            .tree_options(&options, id);
        trees.push(TreeRepair::collect(
            id,
            keyspace_dir(dir, id),
            tree_options,
            &mut report,
        )?);
    }
    report.keyspaces = keyspaces.iter().map(|(&id, n)| (id, n.clone())).collect();

    // The WALs, read into memtables of at most a write buffer each, every entry to its tree.
    // Salvage reads whatever WALs there are: a tracked one gone missing is no reason to stop.
    let log_number = own.recovered.as_ref().map_or(0, |v| v.log_number);
    let wals = wals_to_replay(fs, dir, log_number, &Default::default())?;
    let mut salvage_options = options.clone();
    salvage_options.wal_recovery_mode = WalRecoveryMode::SkipAnyCorruptedRecords;
    let mut wal_report = RecoveryReport::default();
    let start_seq = std::iter::once(&own)
        .chain(&trees)
        .filter_map(|t| t.recovered.as_ref().map(|v| v.last_sequence))
        .max()
        .unwrap_or(0);
    let targets: BTreeMap<u32, ReplayTarget> = std::iter::once(&own)
        .chain(&trees)
        .map(|t| {
            let target = ReplayTarget {
                skip_below: t.wal_boundary(),
                write_buffer_size: t.write_buffer_size(),
            };
            (t.id, target)
        })
        .collect();
    let mut by_id: BTreeMap<u32, Vec<MemTable>> = BTreeMap::new();
    // An entry of a keyspace not repaired (dropped) is skipped.
    let (last_mems, wal_seq) = replay_wals(
        &wals,
        &salvage_options,
        start_seq,
        &mut wal_report,
        &targets,
        u32::MAX,
        |id, m| {
            by_id.entry(id).or_default().push(m);
            Ok(())
        },
    )?;
    for (id, m) in last_mems {
        by_id.entry(id).or_default().push(m);
    }
    for tree in std::iter::once(&mut own).chain(&mut trees) {
        tree.salvaged
            .extend(by_id.remove(&tree.id).unwrap_or_default());
    }
    report.wal_files = wal_report.wal_files;
    report.wal_records = wal_report.wal_records;
    let mut wals_set_aside = Vec::new();
    for wal in &wals {
        if wal_report.dropped.iter().any(|d| d.file == wal.path) {
            wals_set_aside.push((
                wal.path.clone(),
                "damaged: its good records were merged".to_string(),
            ));
        }
    }
    report.dropped.extend(wal_report.dropped);

    // Every tree's salvaged entries become tables, merged with the rest; the keyspaces'
    // new MANIFESTs are made current first, the database's (which names them) last.
    report.last_sequence = wal_seq;
    for tree in std::iter::once(&mut own).chain(&mut trees) {
        report.last_sequence = report.last_sequence.max(tree.write_salvaged()?);
        tree.count_keys_at_risk(&mut report)?;
    }
    report.dropped_older_in_lost_ranges = how.drop_older_in_lost_ranges;
    // The numbers the salvaged tables took are durable before a keyspace's MANIFEST records
    // the WAL number after them: a later open must not hand out a lower one.
    for tree in std::iter::once(&own).chain(&trees) {
        tree.sync_dirs()?;
    }
    // Written before the repaired state is current: a crash after that leaves the damaged
    // tables obsolete, and a second repair could not tell what they took with them.
    if !report.lost_ranges.is_empty() {
        report.lost_ranges_file = Some(lost_ranges::write_report(
            fs,
            dir,
            &report.lost_ranges,
            how.drop_older_in_lost_ranges,
        )?);
    }
    let new_log = own.take_number();
    let sequences = (new_log, report.last_sequence);
    for tree in &mut trees {
        tree.rebuild(how, &mut report, sequences, VersionEdit::default())?;
    }
    let names = VersionEdit {
        keyspaces_created: report.keyspaces.clone(),
        keyspace_log_numbers: report
            .keyspaces
            .iter()
            .map(|(id, _)| (*id, new_log))
            .collect(),
        next_keyspace_id: own
            .recovered
            .as_ref()
            .map(|v| v.next_keyspace_id)
            .into_iter()
            .chain(keyspaces.keys().map(|id| id + 1))
            .max()
            .filter(|&next| next > 1),
        ..VersionEdit::default()
    };
    own.rebuild(how, &mut report, sequences, names)?;
    // Durable from here: the repaired state is current.

    let mut set_aside = wals_set_aside;
    for wal in &wals {
        if !set_aside.iter().any(|(p, _)| *p == wal.path) {
            tree::remove(fs, &wal.path);
        }
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for tree in std::iter::once(own).chain(trees) {
        dirs.extend(tree.dirs().iter().cloned());
        set_aside.extend(tree.finish());
    }
    for (path, reason) in set_aside {
        let moved_to = move_to_lost(fs, &path)?;
        report.lost.push(LostFile {
            path,
            moved_to,
            reason,
        });
    }
    // The removals and moves out of every table directory, made durable together (a crash
    // before this brings some back, which the next open or repair sorts out again).
    for d in &dirs {
        sync_dir(fs, d)?;
    }
    Ok(report)
}

/// The keyspaces to repair: those the database's MANIFEST names, or without it every
/// `keyspaces/<id>/` directory of any table directory `options` names, as `keyspace-<id>`
/// (the names were only in that MANIFEST; a dropped keyspace's leftovers come back too).
fn keyspaces_of(
    options: &Options,
    dir: &Path,
    recovered: Option<&VersionSet>,
) -> Result<BTreeMap<u32, String>> {
    if let Some(v) = recovered {
        return Ok(v.keyspaces.clone());
    }
    let fs = &*options.fs;
    let mut found = BTreeMap::new();
    for table_dir in options.table_dirs(dir) {
        let parent = table_dir.join(KEYSPACES_DIR);
        if !fs.exists(&parent).with_path(&parent)? {
            continue;
        }
        for name in fs.list_dir(&parent).with_path(&parent)? {
            if let Some(id) = parse_keyspace_dir(&name) {
                found.insert(id, format!("keyspace-{id}"));
            }
        }
    }
    Ok(found)
}

/// Moves `path` into `lost/` of its own directory (a rename never crosses devices), under a
/// name no earlier repair used. The move is durable in `lost/`; its removal from the source
/// directory is made durable by the caller's final directory syncs.
fn move_to_lost(fs: &dyn FileSystem, path: &Path) -> Result<PathBuf> {
    let lost_dir = path.parent().unwrap_or(Path::new(".")).join("lost");
    create_dir_all_durably(fs, &lost_dir)?;
    let name = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut target = lost_dir.join(&name);
    let mut n = 1;
    while fs.exists(&target).with_path(&target)? {
        target = lost_dir.join(format!("{name}.{n}"));
        n += 1;
    }
    fs.rename(path, &target).with_path(path)?;
    sync_dir(fs, &lost_dir)?;
    Ok(target)
}
