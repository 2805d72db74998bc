//! Repair: rebuilding a database from the files that can still be read, when its MANIFEST is
//! damaged or lost, or a table or WAL is (RocksDB's and LevelDB's `RepairDB`).
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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_exec::{CompactionMode, execute_with};
use sluice_sst::compact::CompactionSpec;
use sluice_sst::fs::FileSystem;
use sluice_sst::key::SeqNo;
use sluice_sst::table::Table;

use crate::batch::DEFAULT_KEYSPACE_ID;
use crate::db::recover::{
    RecoveryReport, ReplayTarget, numbered_files, replay_wals, wals_to_replay,
};
use crate::db::{Access, lock_directory};
use crate::filename::{FileType, create_dir_all_durably, manifest_file_name, sync_dir};
use crate::flush::{flush_pieces, write_level0_tables};
use crate::options::{Options, WalRecoveryMode};
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS, VersionEdit};
use crate::version::manifest::ManifestWriter;
use crate::version::set::{COMPARATOR_NAME, VersionSet};
use crate::wal::DroppedRange;
use crate::{Error, IoContext, Result};
pub use lost_ranges::LostRange;
use salvage::{TableSalvage, salvage_table};
use sluice_sst::range_del::Tombstones;

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

/// Where a table to merge came from.
struct Input {
    table: Arc<Table>,
    /// The original file, deleted once the repaired state is durable (`None` for tables repair
    /// wrote itself, which the new MANIFEST may not name either: they are merged).
    original: Option<PathBuf>,
}

/// Rebuilds the database in `dir` (see the module documentation) and returns what was kept and
/// dropped. `options` must name the same table directories the database uses (`data_dirs`);
/// partitioned databases are not supported.
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
    let keyspaces = dir.join(crate::keyspace::options::KEYSPACES_DIR);
    if fs.exists(&keyspaces).with_path(&keyspaces)? {
        return Err(Error::InvalidArgument(
            "repair of a database with keyspaces is not supported".into(),
        ));
    }
    let _lock = lock_directory(fs, dir, Access::ReadWrite)?;
    let dirs = options.table_dirs(dir);
    let table_cache = TableCache::new(dirs.clone(), &options, None, 0);
    let mut report = RepairReport::default();
    let mut set_aside: Vec<(PathBuf, String)> = Vec::new();

    let recovered = match VersionSet::recover(fs, dir) {
        Ok((versions, _, _)) => Some(versions),
        Err(e) => {
            tracing::warn!(error = %e, "the MANIFEST cannot be read; using every table found");
            None
        }
    };
    report.manifest_readable = recovered.is_some();
    let mut next_number = recovered.as_ref().map_or(2, |v| v.next_file_number);
    let mut tables = Vec::new();
    for (dir_index, d) in dirs.iter().enumerate() {
        for (kind, number) in numbered_files(fs, d)? {
            if kind == FileType::Blob {
                return Err(Error::InvalidArgument(
                    "repair of a database with blob files is not supported".into(),
                ));
            }
            next_number = next_number.max(number.saturating_add(1));
            if kind == FileType::Table {
                tables.push((table_cache.table_path(dir_index as u32, number), number));
            }
        }
    }
    let live: BTreeSet<u64> = recovered.as_ref().map_or_else(BTreeSet::new, |v| {
        v.current().live_files().map(|f| f.number).collect()
    });
    if let Some(v) = &recovered {
        for f in v.current().live_files() {
            let path = table_cache.table_path(f.dir_index, f.number);
            if !fs.exists(&path).with_path(&path)? {
                report.lost_ranges.push(LostRange::of_file(&path, f));
                report.missing.push(path);
            }
        }
    }

    let mut new_number = || {
        let n = next_number;
        next_number += 1;
        n
    };
    let mut inputs = Vec::new();
    let mut salvaged = Vec::new();
    for (path, number) in tables {
        let obsolete = recovered
            .as_ref()
            .is_some_and(|v| !live.contains(&number) && number < v.next_file_number);
        if obsolete {
            set_aside.push((path, "obsolete: not in the MANIFEST's version".into()));
            continue;
        }
        match salvage_table(&path, number, options.table_storage()) {
            TableSalvage::Whole(table) => {
                report.tables_whole += 1;
                inputs.push(Input {
                    table,
                    original: Some(path),
                });
            }
            TableSalvage::Partial {
                entries,
                dropped,
                lost,
            } => {
                report.tables_partial += 1;
                report.dropped.extend(dropped);
                report.lost_ranges.extend(lost);
                salvaged.push(*entries);
                set_aside.push((path, "damaged: its good blocks were merged".into()));
            }
            TableSalvage::Unreadable(e) => {
                let described = recovered.as_ref().and_then(|v| {
                    v.current()
                        .live_files()
                        .find(|f| f.number == number)
                        .cloned()
                });
                if let Some(meta) = described {
                    report.lost_ranges.push(LostRange::of_file(&path, &meta));
                }
                set_aside.push((path, format!("unreadable: {e}")));
            }
        }
    }

    // The WALs, read into memtables of at most a write buffer each.
    // Salvage reads whatever WALs there are: a tracked one gone missing is no reason to stop.
    let log_number = recovered.as_ref().map_or(0, |v| v.log_number);
    let wals = wals_to_replay(fs, dir, log_number, &Default::default())?;
    let mut salvage_options = options.clone();
    salvage_options.wal_recovery_mode = WalRecoveryMode::SkipAnyCorruptedRecords;
    let mut wal_report = RecoveryReport::default();
    let start_seq = recovered.as_ref().map_or(0, |v| v.last_sequence);
    let only_default = BTreeMap::from([(
        DEFAULT_KEYSPACE_ID,
        ReplayTarget {
            skip_below: log_number,
            write_buffer_size: options.memtable.write_buffer_size,
        },
    )]);
    // Any other keyspace's entry is skipped (there are none: see the check above).
    let (last_mems, wal_seq) = replay_wals(
        &wals,
        &salvage_options,
        start_seq,
        &mut wal_report,
        &only_default,
        u32::MAX,
        |_, m| {
            salvaged.push(m);
            Ok(())
        },
    )?;
    salvaged.extend(last_mems.into_values());
    report.wal_files = wal_report.wal_files;
    report.wal_records = wal_report.wal_records;
    for wal in &wals {
        let damaged = wal_report.dropped.iter().any(|d| d.file == wal.path);
        if damaged {
            set_aside.push((
                wal.path.clone(),
                "damaged: its good records were merged".into(),
            ));
        }
    }
    report.dropped.extend(wal_report.dropped);

    // Salvaged entries become tables, merged with the rest.
    let pieces = flush_pieces(None, &[], &table_cache);
    for mem in salvaged.iter().filter(|m| !m.is_empty()) {
        let written = write_level0_tables(mem, &table_cache, &pieces, &mut new_number, &options)?;
        for meta in written.tables {
            inputs.push(Input {
                table: table_cache.get(&meta)?,
                original: None,
            });
        }
    }
    report.last_sequence = inputs
        .iter()
        .map(|i| i.table.properties().largest_seq)
        .fold(wal_seq, SeqNo::max);

    // The range tombstones (the MANIFEST's, when it can be read, and the WALs') are applied
    // by the merge, which reads every table: what they cover is dropped, and they are needed
    // no more. Without a readable MANIFEST its tombstones are lost, like its file list.
    let merged: Vec<_> = inputs.iter().map(|i| Arc::clone(&i.table)).collect();
    lost_ranges::count_keys_at_risk(&mut report.lost_ranges, &merged)?;
    report.dropped_older_in_lost_ranges = how.drop_older_in_lost_ranges;
    let dropping_older = how
        .drop_older_in_lost_ranges
        .then_some(&report.lost_ranges)
        .into_iter()
        .flatten()
        .map(LostRange::tombstone);
    let all_tombstones: Vec<_> = recovered
        .iter()
        .flat_map(|v| v.current().range_tombstones().to_vec())
        .chain(salvaged.iter().flat_map(|m| m.range_tombstones()))
        .chain(dropping_older)
        .collect();
    let tombstones = Arc::new(Tombstones::new(&all_tombstones));
    let edit = merge_into_bottom_level(
        &inputs,
        &table_cache,
        &options,
        &tombstones,
        &mut new_number,
        &mut report,
    )?;
    let manifest_number = new_number();
    let snapshot = VersionEdit {
        comparator: Some(COMPARATOR_NAME.to_string()),
        log_number: Some(new_number()),
        next_file_number: Some(new_number()),
        last_sequence: Some(report.last_sequence),
        // What the values look like is not in the tables: the options say.
        value_format: options
            .ttl
            .map(|_| crate::version::edit::VALUE_FORMAT_TTL.to_string()),
        ..edit
    };
    Version::default().apply(&snapshot)?;
    for d in &dirs {
        sync_dir(fs, d)?;
    }
    let old_manifests: Vec<PathBuf> = numbered_files(fs, dir)?
        .into_iter()
        .filter(|&(kind, _)| kind == FileType::Manifest)
        .map(|(_, n)| manifest_file_name(dir, n))
        .collect();
    ManifestWriter::create(&*options.fs, dir, manifest_number, &snapshot)?;
    // Durable from here: the repaired state is current.

    for input in &inputs {
        let path = input
            .original
            .clone()
            .unwrap_or_else(|| input.table.path().to_path_buf());
        remove(fs, &path);
    }
    for wal in &wals {
        if !set_aside.iter().any(|(p, _)| *p == wal.path) {
            remove(fs, &wal.path);
        }
    }
    for path in old_manifests {
        set_aside.push((path, "the MANIFEST before the repair".into()));
    }
    if !report.lost_ranges.is_empty() {
        report.lost_ranges_file = Some(lost_ranges::write_report(
            fs,
            dir,
            &report.lost_ranges,
            how.drop_older_in_lost_ranges,
        )?);
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

/// Merges every input into one sorted run and returns the edit adding it to the bottom level.
fn merge_into_bottom_level(
    inputs: &[Input],
    table_cache: &TableCache,
    options: &Options,
    tombstones: &Arc<Tombstones>,
    new_number: &mut (dyn FnMut() -> u64 + Send),
    report: &mut RepairReport,
) -> Result<VersionEdit> {
    let mut edit = VersionEdit::default();
    if inputs.is_empty() {
        return Ok(edit);
    }
    let spec = CompactionSpec {
        // Every table is its own sorted run; the merge orders versions by sequence number,
        // so the order of the runs does not matter.
        inputs: inputs.iter().map(|i| vec![Arc::clone(&i.table)]).collect(),
        snapshots: Vec::new(),
        bottommost: true,
        table: options.table.clone(),
        storage: options.background_storage(),
        target_file_size: options.compaction.target_file_size_base,
        grandparents: Vec::new(),
        max_grandparent_overlap_bytes: u64::MAX,
        lower: None,
        upper: None,
        filter: None,
        merge_operator: None,
        range_tombstones: Some(Arc::clone(tombstones)),
        blob_relocation: None,
        task_nonce: None,
        log_drops: false,
    };
    let mut exec = options.exec_options();
    if exec.mode == CompactionMode::Auto {
        exec.mode = CompactionMode::Sequential;
    }
    let mut new_output = || -> sluice_sst::Result<(u64, PathBuf)> {
        let number = new_number();
        let dir = table_cache.dir_for_new_table();
        Ok((number, table_cache.table_path(dir, number)))
    };
    let out = execute_with(&spec, &exec, Arc::default(), &mut new_output)?;
    for f in &out.files {
        report.output_tables += 1;
        report.output_entries += f.summary.properties.num_entries;
        report.output_bytes += f.summary.file_size;
        let dir = table_cache.dir_index_of(&f.path);
        edit.add_file(
            NUM_LEVELS - 1,
            FileMetaData::of_new_table(f.number, dir, &f.summary),
        );
    }
    Ok(edit)
}

/// Deletes a file the repaired state no longer needs; a failure leaves an orphan the next
/// open sweeps.
fn remove(fs: &dyn FileSystem, path: &Path) {
    if let Err(e) = fs.remove(path) {
        tracing::warn!(file = %path.display(), error = %e, "could not delete a merged file");
    }
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
