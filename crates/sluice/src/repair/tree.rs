//! One tree under repair: the database's own, or a keyspace's (its MANIFEST and tables in
//! `keyspaces/<id>/`). Each is rebuilt on its own from its tables and the WAL entries replay
//! gives it; only the WALs and the database's MANIFEST are shared (`super` drives them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_exec::execute_with;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::fs::FileSystem;
use sluice_sst::key::SeqNo;
use sluice_sst::range_del::{RangeTombstone, Tombstones};
use sluice_sst::table::Table;

use super::lost_ranges::{self, LostRange};
use super::salvage::{TableSalvage, salvage_table};
use super::{RepairOptions, RepairReport};
use crate::compaction::choose::{History, Request, local_exec};
use crate::db::open::{check_merge_operator, check_value_format};
use crate::db::recover::numbered_files;
use crate::filename::{FileType, create_dir_all_durably, manifest_file_name, sync_dir};
use crate::flush::{flush_pieces, write_level0_tables};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS, VersionEdit};
use crate::version::manifest::ManifestWriter;
use crate::version::set::{COMPARATOR_NAME, VersionSet};
use crate::{Error, IoContext, Result};

/// Where a table to merge came from.
struct Input {
    table: Arc<Table>,
    /// The original file, deleted once the repaired state is durable (`None` for tables repair
    /// wrote itself, which the new MANIFEST may not name either: they are merged).
    original: Option<PathBuf>,
}

/// One tree being repaired.
pub(super) struct TreeRepair {
    /// Its keyspace id (0: the database's own tree).
    pub id: u32,
    /// Where its MANIFEST lives.
    dir: PathBuf,
    /// Its options: its table directories, how its tables are written, its TTL.
    options: Options,
    table_cache: TableCache,
    /// Its MANIFEST, if it could be read.
    pub recovered: Option<VersionSet>,
    next_number: u64,
    inputs: Vec<Input>,
    /// Entries of damaged tables' good blocks, and the WAL entries replay gave the tree.
    pub salvaged: Vec<MemTable>,
    /// Files to move into `lost/` once the repaired state is durable, and why.
    pub set_aside: Vec<(PathBuf, String)>,
    /// Tombstones over the surviving versions of keys that went back in time.
    stale: Vec<RangeTombstone>,
    /// Its MANIFESTs before the repair, set aside once the new one is current.
    old_manifests: Vec<PathBuf>,
}

impl TreeRepair {
    /// Reads what can be read of the tree whose MANIFEST is in `dir`: its MANIFEST, every table
    /// of its table directories (verified; a damaged one gives its good blocks), and what it
    /// lost (in `report`).
    pub fn collect(
        id: u32,
        dir: PathBuf,
        options: Options,
        report: &mut RepairReport,
    ) -> Result<TreeRepair> {
        let fs = &*options.fs;
        let dirs = options.table_dirs(&dir);
        let table_cache = TableCache::new(dirs.clone(), &options, None);
        let mut recovered = match VersionSet::recover(fs, &dir) {
            Ok((versions, _, _)) => Some(versions),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "the MANIFEST cannot be read; using every table found");
                None
            }
        };
        // The values keep the format they were written in: options that disagree with the
        // MANIFEST are refused, as an open refuses them.
        if let Some(v) = recovered.as_mut() {
            check_value_format(v, true, &options, &dir)?;
            // Repair combines no operands, so it needs no operator; one given must be the
            // recorded one, which the new MANIFEST keeps either way.
            if options.merge_operator.is_some() {
                check_merge_operator(v, &options, (&dir, None), false)?;
            }
        }
        // A tree the MANIFEST names whose directory is gone still gets its WAL entries.
        for d in &dirs {
            create_dir_all_durably(fs, d)?;
        }
        let mut next_number = recovered.as_ref().map_or(2, |v| v.next_file_number);
        let mut tables = Vec::new();
        let mut old_manifests = Vec::new();
        for (dir_index, d) in dirs.iter().enumerate() {
            for (kind, number) in numbered_files(fs, d)? {
                match kind {
                    FileType::Blob => {
                        return Err(Error::InvalidArgument(
                            "repair of a database with blob files is not supported".into(),
                        ));
                    }
                    FileType::Table => {
                        tables.push((table_cache.table_path(dir_index as u32, number), number));
                    }
                    FileType::Manifest if dir_index == 0 => {
                        old_manifests.push(manifest_file_name(&dir, number));
                    }
                    _ => {}
                }
                next_number = next_number.max(number.saturating_add(1));
            }
        }
        let mut tree = TreeRepair {
            id,
            dir,
            options,
            table_cache,
            recovered,
            next_number,
            inputs: Vec::new(),
            salvaged: Vec::new(),
            set_aside: Vec::new(),
            stale: Vec::new(),
            old_manifests,
        };
        tree.read_tables(tables, report)?;
        Ok(tree)
    }

    /// Verifies `tables` and sorts them into inputs, salvaged entries and files set aside.
    fn read_tables(
        &mut self,
        tables: Vec<(PathBuf, u64)>,
        report: &mut RepairReport,
    ) -> Result<()> {
        let fs = &*self.options.fs;
        let live: BTreeSet<u64> = self.recovered.as_ref().map_or_else(BTreeSet::new, |v| {
            v.current().live_files().map(|f| f.number).collect()
        });
        if let Some(v) = &self.recovered {
            for f in v.current().live_files() {
                let path = self.table_cache.table_path(f.dir_index, f.number);
                if !fs.exists(&path).with_path(&path)? {
                    report.lost_ranges.push(LostRange::of_file(&path, f));
                    report.missing.push(path);
                }
            }
        }
        for (path, number) in tables {
            let obsolete = self
                .recovered
                .as_ref()
                .is_some_and(|v| !live.contains(&number) && number < v.next_file_number);
            if obsolete {
                self.set_aside
                    .push((path, "obsolete: not in the MANIFEST's version".into()));
                continue;
            }
            match salvage_table(&path, number, self.options.table_storage()) {
                TableSalvage::Whole(table) => {
                    report.tables_whole += 1;
                    self.inputs.push(Input {
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
                    self.salvaged.push(*entries);
                    self.set_aside
                        .push((path, "damaged: its good blocks were merged".into()));
                }
                TableSalvage::Unreadable(e) => {
                    let described = self.recovered.as_ref().and_then(|v| {
                        v.current()
                            .live_files()
                            .find(|f| f.number == number)
                            .cloned()
                    });
                    if let Some(meta) = described {
                        report.lost_ranges.push(LostRange::of_file(&path, &meta));
                    }
                    self.set_aside.push((path, format!("unreadable: {e}")));
                }
            }
        }
        Ok(())
    }

    /// The WAL entries of this tree in WALs numbered below this are in its tables.
    pub fn wal_boundary(&self) -> u64 {
        self.recovered.as_ref().map_or(0, |v| {
            if self.id == crate::batch::DEFAULT_KEYSPACE_ID {
                v.default_log_number.max(v.log_number)
            } else {
                v.log_number
            }
        })
    }

    /// Its memtables' size: replay hands on its entries in pieces of this size.
    pub fn write_buffer_size(&self) -> usize {
        self.options.memtable.write_buffer_size
    }

    /// Writes the salvaged entries as tables to merge with the rest; returns the highest
    /// sequence number of any input.
    pub fn write_salvaged(&mut self) -> Result<SeqNo> {
        let pieces = flush_pieces(None, &[], &self.table_cache);
        let mut next = self.next_number;
        let mut new_number = || {
            next += 1;
            next - 1
        };
        for mem in self.salvaged.iter().filter(|m| !m.is_empty()) {
            let written = write_level0_tables(
                mem,
                &self.table_cache,
                &pieces,
                &mut new_number,
                &self.options,
            )?;
            for meta in written.tables {
                self.inputs.push(Input {
                    table: self.table_cache.get(&meta)?,
                    original: None,
                });
            }
        }
        self.next_number = next;
        Ok(self
            .inputs
            .iter()
            .map(|i| i.table.properties().largest_seq)
            .max()
            .unwrap_or(0))
    }

    /// Counts the keys at risk in the lost ranges of this tree's files (see
    /// [`lost_ranges::count_keys_at_risk`]).
    pub fn count_keys_at_risk(&mut self, report: &mut RepairReport) -> Result<()> {
        let tables: Vec<_> = self.inputs.iter().map(|i| Arc::clone(&i.table)).collect();
        let dirs = self.table_cache.dirs();
        let own = report
            .lost_ranges
            .iter_mut()
            .filter(|r| in_dirs(&r.file, dirs));
        let storage = self.options.table_storage();
        self.stale = lost_ranges::count_keys_at_risk(own, &tables, &storage)?;
        Ok(())
    }

    /// Merges every input into the bottom level, applying the range tombstones (the
    /// MANIFEST's, the WALs', and, if `how` says so, those over keys that went back in time), and makes a new MANIFEST
    /// naming only the result current. `log_number` is the first WAL after the repair;
    /// `extra` what the database's MANIFEST adds (its keyspaces).
    pub fn rebuild(
        &mut self,
        how: &RepairOptions,
        report: &mut RepairReport,
        (log_number, last_sequence): (u64, SeqNo),
        extra: VersionEdit,
    ) -> Result<()> {
        let dropping_older = match how.drop_older_in_lost_ranges {
            true => std::mem::take(&mut self.stale),
            false => Vec::new(),
        };
        let all: Vec<RangeTombstone> = self
            .recovered
            .iter()
            .flat_map(|v| v.current().range_tombstones().to_vec())
            .chain(self.salvaged.iter().flat_map(|m| m.range_tombstones()))
            .chain(dropping_older)
            .collect();
        let tombstones = Arc::new(Tombstones::new(&all));
        let edit = self.merge_into_bottom_level(&tombstones, report)?;
        let manifest_number = self.take_number();
        let snapshot = VersionEdit {
            comparator: Some(COMPARATOR_NAME.to_string()),
            log_number: Some(log_number),
            next_file_number: Some(self.next_number),
            last_sequence: Some(last_sequence),
            // What the values look like is not in the tables: the options say (held to the
            // MANIFEST's record by `collect`, when it could be read).
            value_format: self
                .options
                .ttl
                .map(|_| crate::version::edit::VALUE_FORMAT_TTL.to_string()),
            // The recorded operator; without a readable MANIFEST, the options'.
            merge_operator: self
                .recovered
                .as_ref()
                .and_then(|v| v.merge_operator.clone())
                .or_else(|| {
                    let operator = self.options.merge_operator.as_ref();
                    operator.map(|m| m.name().to_string())
                }),
            keyspaces_created: extra.keyspaces_created,
            next_keyspace_id: extra.next_keyspace_id,
            keyspace_log_numbers: extra.keyspace_log_numbers,
            ..edit
        };
        Version::default().apply(&snapshot)?;
        self.sync_dirs()?;
        ManifestWriter::create(&*self.options.fs, &self.dir, manifest_number, &snapshot)?;
        Ok(())
    }

    /// A file number of this tree no file has (the database's tree numbers WALs too).
    pub fn take_number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number - 1
    }

    /// Merges every input into one sorted run and returns the edit adding it to the bottom
    /// level.
    fn merge_into_bottom_level(
        &mut self,
        tombstones: &Arc<Tombstones>,
        report: &mut RepairReport,
    ) -> Result<VersionEdit> {
        let mut edit = VersionEdit::default();
        if self.inputs.is_empty() {
            return Ok(edit);
        }
        let options = &self.options;
        let spec = CompactionSpec {
            // Every table is its own sorted run; the merge orders versions by sequence number,
            // so the order of the runs does not matter.
            inputs: self
                .inputs
                .iter()
                .map(|i| vec![Arc::clone(&i.table)])
                .collect(),
            bottommost: true,
            // Every table goes to the last level, the base level of such a tree when its
            // levels are sized dynamically.
            table: options.table_for_level(
                NUM_LEVELS - 1,
                match options.compaction.level_compaction_dynamic_level_bytes {
                    true => NUM_LEVELS - 1,
                    false => 1,
                },
                true,
            ),
            storage: options.background_storage(),
            target_file_size: options.compaction.target_file_size_base,
            range_tombstones: Some(Arc::clone(tombstones)),
            ..CompactionSpec::default()
        };
        let exec = local_exec(options, &History::default(), Request::Repair);
        let table_cache = &self.table_cache;
        let mut next = self.next_number;
        let mut new_output = || -> sluice_sst::Result<(u64, PathBuf)> {
            next += 1;
            let dir = table_cache.dir_for_new_table();
            Ok((next - 1, table_cache.table_path(dir, next - 1)))
        };
        let out = execute_with(&spec, &exec, Arc::default(), &mut new_output)?;
        self.next_number = next;
        for f in &out.files {
            report.output_tables += 1;
            report.output_entries += f.summary.properties.num_entries;
            report.output_bytes += f.summary.file_size;
            let dir = self.table_cache.dir_index_of(&f.path);
            edit.add_file(
                NUM_LEVELS - 1,
                FileMetaData::of_new_table(f.number, dir, &f.summary),
            );
        }
        Ok(edit)
    }

    /// Once the repaired state is durable: deletes the merged inputs, and hands on what goes
    /// to `lost/` (what could not be read, and the MANIFESTs before the repair).
    pub fn finish(self) -> Vec<(PathBuf, String)> {
        let fs = &*self.options.fs;
        for input in &self.inputs {
            let path = input
                .original
                .clone()
                .unwrap_or_else(|| input.table.path().to_path_buf());
            remove(fs, &path);
        }
        let mut set_aside = self.set_aside;
        for path in self.old_manifests {
            set_aside.push((path, "the MANIFEST before the repair".into()));
        }
        set_aside
    }

    /// Its table directories.
    pub fn dirs(&self) -> &[PathBuf] {
        self.table_cache.dirs()
    }

    /// Makes the names of the tables written so far durable.
    pub fn sync_dirs(&self) -> Result<()> {
        for d in self.dirs() {
            sync_dir(&*self.options.fs, d)?;
        }
        Ok(())
    }
}

/// True if `file` is directly in one of `dirs`.
fn in_dirs(file: &Path, dirs: &[PathBuf]) -> bool {
    file.parent().is_some_and(|p| dirs.iter().any(|d| d == p))
}

/// Deletes a file the repaired state no longer needs; a failure leaves an orphan the next
/// open sweeps.
pub(super) fn remove(fs: &dyn FileSystem, path: &Path) {
    if let Err(e) = fs.remove(path) {
        tracing::warn!(file = %path.display(), error = %e, "could not delete a merged file");
    }
}
