//! One tree (the database's, or a keyspace's) as an open recovers it: its version set and
//! tables checked, then the memtables replay gives it written to L0, or kept when read-only.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::cache::BlockCache;

use super::recover::{check_tables_exist, raise_next_file_number};
use crate::compaction::level_targets::moves_to_the_bottom;
use crate::filename::{create_dir_all_durably, manifest_file_name, sync_dir};
use crate::flush::{flush_pieces, flush_split_keys, write_level0_tables};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::partition::RangeMap;
use crate::table_cache::TableCache;
use crate::version::blob_files::BlobFileMetaData;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::wal::DroppedRange;
use crate::{Error, Result};
use sluice_sst::range_del::RangeTombstone;

/// A tree being recovered.
pub(crate) struct RecoveringTree {
    pub id: u32,
    pub name: String,
    pub dir: PathBuf,
    pub options: Options,
    pub versions: VersionSet,
    pub table_cache: Arc<TableCache>,
    /// Partitioned mode: the range map flushes cut tables by (a new one, or the MANIFEST's).
    pub ranges: Option<RangeMap>,
    /// Partitioned mode starting on this tree: the range map its MANIFEST records now.
    pub new_range_map: Option<RangeMap>,
    /// Replayed tables written so far (read-write opens).
    pub new_files: Vec<FileMetaData>,
    /// The blob files they reference.
    pub new_blob_files: Vec<BlobFileMetaData>,
    /// Replayed range tombstones.
    pub range_tombstones: Vec<RangeTombstone>,
    /// Replayed memtables kept in memory (read-only opens), oldest first.
    pub frozen: VecDeque<Arc<MemTable>>,
    /// The torn last record of the tree's MANIFEST, dropped as never acknowledged (a
    /// keyspace's; the database's own is in its report already).
    pub dropped: Vec<DroppedRange>,
}

impl RecoveringTree {
    /// Reads keyspace `id`'s tree from `dir` and checks its tables are on disk. A read-write
    /// open creates its table directories if they are missing.
    ///
    /// `recorded` is the WAL boundary the database's MANIFEST saw this keyspace's MANIFEST
    /// make durable before it gave up older WALs (tag 31; `None` in a database written before
    /// tag 31), and `floor` the database's. A torn last record of the keyspace's MANIFEST is
    /// dropped, as the database's own is, when what remains reaches that boundary (without
    /// one: the floor) and names only tables on disk: the record was never acknowledged, and
    /// replay gives the tree its entries again. Otherwise the open fails with `Corruption`
    /// naming the MANIFEST: an acknowledged record is lost, or the MANIFEST is an older one.
    ///
    /// Like the database's own, a torn record that neither moved the boundary nor removed a
    /// file (an ingest's) cannot be told from one never acknowledged.
    pub fn recover_keyspace(
        (id, name): (u32, &str),
        dir: PathBuf,
        options: Options,
        block_cache: Option<Arc<BlockCache>>,
        (recorded, floor): (Option<u64>, u64),
        read_only: bool,
    ) -> Result<Self> {
        let fs = &*options.fs;
        let dirs = options.table_dirs(&dir);
        if !read_only {
            for d in &dirs[1..] {
                create_dir_all_durably(fs, d)?;
            }
        }
        let (mut versions, _, dropped) = VersionSet::recover(fs, &dir)?;
        let manifest = manifest_file_name(&dir, versions.manifest_number);
        let lost = |why: String| match dropped.first() {
            Some(torn) => Error::corruption(
                &torn.file,
                torn.offset,
                format!(
                    "keyspace {name:?}: the MANIFEST's last {} bytes do not form a complete \
                     record, and {why}, so the record was acknowledged and is lost",
                    torn.bytes
                ),
            ),
            None => Error::corruption(
                &manifest,
                0,
                format!("keyspace {name:?}: {why}, so this MANIFEST is not the latest"),
            ),
        };
        let boundary = versions.log_number;
        match recorded {
            Some(recorded) if boundary < recorded => {
                return Err(lost(format!(
                    "its entries from WAL #{boundary:06} on are not in its tables, while the \
                     database's MANIFEST saw it reach WAL #{recorded:06} before deleting older WALs"
                )));
            }
            None if !dropped.is_empty() && boundary < floor => {
                return Err(lost(format!(
                    "its entries from WAL #{boundary:06} on are not in its tables, WALs below \
                     #{floor:06} are gone, and the database's MANIFEST (of an older build) \
                     recorded no boundary that would show they held none of them"
                )));
            }
            _ => {}
        }
        super::open::check_value_format(&mut versions, true, &options, &dir)?;
        super::open::check_merge_operator(&mut versions, &options, (&dir, Some(name)), !read_only)?;
        raise_next_file_number(fs, &mut versions, &dirs)?;
        let table_cache = Arc::new(TableCache::new(dirs, &options, block_cache));
        check_tables_exist(&versions, &table_cache, &options).map_err(|e| match e {
            Error::Corruption { .. } if !dropped.is_empty() => {
                lost(format!("the state before it is not on disk ({e})"))
            }
            e => e,
        })?;
        for torn in &dropped {
            tracing::warn!(keyspace = name, "dropped a torn MANIFEST record: {torn}");
        }
        let new_range_map = super::open::reconcile_partitions(&versions, &options)?;
        if read_only && new_range_map.is_some() {
            return Err(Error::InvalidArgument(
                "partitioning a database needs a read-write open".into(),
            ));
        }
        let mut tree = RecoveringTree::new(id, name, dir, options, versions, table_cache);
        tree.dropped = dropped;
        Ok(tree.with_new_range_map(new_range_map))
    }

    /// A tree whose version set and table cache are recovered, with nothing replayed yet.
    pub fn new(
        id: u32,
        name: &str,
        dir: PathBuf,
        options: Options,
        versions: VersionSet,
        table_cache: Arc<TableCache>,
    ) -> Self {
        let ranges = versions.current().range_map().map(|m| (**m).clone());
        RecoveringTree {
            id,
            name: name.to_string(),
            dir,
            options,
            versions,
            table_cache,
            ranges,
            new_range_map: None,
            new_files: Vec::new(),
            new_blob_files: Vec::new(),
            range_tombstones: Vec::new(),
            frozen: VecDeque::new(),
            dropped: Vec::new(),
        }
    }

    /// Partitioned mode starts on this tree with `map` (when `Some`): flushes cut by it, and
    /// the recovery edit records it.
    pub fn with_new_range_map(mut self, map: Option<RangeMap>) -> Self {
        if let Some(map) = map {
            self.ranges = Some(map.clone());
            self.new_range_map = Some(map);
        }
        self
    }

    /// Takes a replayed memtable: written to L0 (read-write), or kept (read-only).
    pub fn take(&mut self, mem: MemTable, read_only: bool) -> Result<()> {
        if read_only {
            self.frozen.push_back(Arc::new(mem));
            return Ok(());
        }
        self.range_tombstones.extend(mem.range_tombstones());
        if !mem.has_entries() {
            return Ok(());
        }
        let split_keys = flush_split_keys(self.versions.current(), &self.options);
        let pieces = flush_pieces(self.ranges.as_ref(), &split_keys, &self.table_cache);
        let versions = &mut self.versions;
        let mut new_number = || versions.new_file_number();
        let written = write_level0_tables(
            &mem,
            &self.table_cache,
            &pieces,
            &mut new_number,
            &self.options,
        )?;
        self.new_files.extend(written.tables);
        self.new_blob_files.extend(written.blob_files);
        Ok(())
    }

    /// The edit that finishes a read-write recovery: the replayed tables and tombstones, and
    /// `log_number`, the WAL the tree's writes continue in.
    pub fn recovery_edit(&mut self, log_number: u64) -> Result<VersionEdit> {
        // The replayed tables' names must be durable before a MANIFEST names them: a MANIFEST
        // syncs only its own directory, and tables may sit in data or owner directories.
        let tables = self.new_files.iter().map(|f| f.dir_index);
        let table_dirs: BTreeSet<u32> = tables
            .chain(self.new_blob_files.iter().map(|b| b.dir_index))
            .collect();
        for index in table_dirs {
            if let Some(d) = self.table_cache.dirs().get(index as usize) {
                sync_dir(&*self.options.fs, d)?;
            }
        }
        let mut edit = VersionEdit {
            log_number: Some(log_number),
            range_map: self.new_range_map.take(),
            range_tombstones: std::mem::take(&mut self.range_tombstones),
            new_files: self.new_files.drain(..).map(|f| (0, f)).collect(),
            new_blob_files: std::mem::take(&mut self.new_blob_files),
            ..VersionEdit::default()
        };
        if self.options.compaction.level_compaction_dynamic_level_bytes {
            self.move_levels_to_the_bottom(&mut edit);
        }
        Ok(edit)
    }

    /// Dynamic level sizing needs the levels above the base level empty: a tree written with
    /// static sizing has its levels moved down whole, in order, by `edit`
    /// ([`moves_to_the_bottom`]). A level's compact pointer stays with its files.
    fn move_levels_to_the_bottom(&self, edit: &mut VersionEdit) {
        let version = self.versions.current();
        let moves = moves_to_the_bottom(version);
        if moves.is_empty() {
            return;
        }
        tracing::info!(
            keyspace = self.name,
            ?moves,
            "dynamic level sizing: moving levels down to the last level"
        );
        for &(from, to) in &moves {
            for f in version.files(from) {
                edit.deleted_files.insert((from, f.number));
                edit.new_files.push((to, (**f).clone()));
            }
        }
        // Pointers are read from the version before the edit; a level that another level
        // moves into keeps the pointer moved there instead of being cleared.
        for &(from, to) in &moves {
            let pointer = &self.versions.compact_pointers[from];
            edit.compact_pointers.push((to, pointer.clone()));
            if !moves.iter().any(|&(_, into)| into == from) {
                edit.compact_pointers.push((from, Vec::new()));
            }
        }
    }

    /// Applies `edit` and starts a new MANIFEST describing the result, which becomes current.
    pub fn install_in_new_manifest(
        &mut self,
        mut edit: VersionEdit,
        last_seq: u64,
    ) -> Result<ManifestWriter> {
        let manifest_number = self.versions.new_file_number();
        // Partitioned tables are checked against the range map even without paranoid checks:
        // a table in the wrong directory means the MANIFEST and the options disagree.
        let check = self.options.paranoid_checks || self.ranges.is_some();
        let version = self.versions.prepare(&mut edit, last_seq, check)?;
        self.versions.install(version, &edit);
        self.versions.manifest_number = manifest_number;
        Ok(ManifestWriter::create(
            &*self.options.fs,
            &self.dir,
            manifest_number,
            &self.versions.snapshot_edit(),
        )?)
    }
}

/// Removes `dir` and everything under it through `fs` (a dropped keyspace's files). A missing
/// directory is not an error.
pub(crate) fn remove_tree(fs: &dyn sluice_sst::fs::FileSystem, dir: &Path) -> Result<()> {
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for name in names {
        let path = dir.join(name);
        let is_dir = fs.metadata(&path).is_ok_and(|m| m.is_dir);
        if is_dir {
            remove_tree(fs, &path)?;
        } else {
            fs.remove(&path).map_err(|e| Error::io(&path, e))?;
        }
    }
    fs.remove_dir(dir).map_err(|e| Error::io(dir, e))?;
    if let Some(parent) = dir.parent() {
        sync_dir(fs, parent)?;
    }
    Ok(())
}
