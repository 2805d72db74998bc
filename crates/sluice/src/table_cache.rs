//! The table cache: open SSTable readers and blob files, keyed by file number (tables and
//! blob files share one number space).
//!
//! Opening a table reads its footer, index, filter and properties, so readers are kept open and
//! shared. The cache is bounded by `max_open_files` (tables and blob files each); an evicted
//! reader closes its file when the last iterator using it is dropped.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_sst::blob::{BlobFile, BlobRef};
use sluice_sst::cache::{BlockCache, CachedValue};
use sluice_sst::fs::{FileSystem, IoMode, Storage};
use sluice_sst::table::{BloomCounters, Table, TableReadOptions};

use crate::filename::{blob_file_name, table_file_name};
use crate::version::blob_files::BlobFileMetaData;
use crate::version::edit::FileMetaData;
use crate::version::pin;
use sluice_sst::{Error, Result};

use crate::Options;
use crate::metrics::{BloomMetrics, TableCacheMetrics};

/// Open table readers shared by reads and compactions.
pub struct TableCache {
    dirs: Vec<PathBuf>,
    tables: quick_cache::sync::Cache<u64, Arc<Table>>,
    blob_files: quick_cache::sync::Cache<u64, Arc<BlobFile>>,
    block_cache: Option<Arc<BlockCache>>,
    /// [`crate::BlobOptions::cache_values`].
    cache_blob_values: bool,
    /// The keyspace id: its tables' blocks are cached under it.
    cache_namespace: u32,
    verify_checksums: bool,
    /// How foreground reads reach the tables.
    storage: Storage,
    /// How compactions read their inputs.
    compaction_storage: Storage,
    /// Turn counter for [`TableCache::dir_for_new_table`].
    next_dir: std::sync::atomic::AtomicUsize,
    /// [`TableCache::get`] calls that found the reader open, and those that opened it.
    hits: AtomicU64,
    misses: AtomicU64,
    /// The bloom filter figures of every table this cache opens.
    bloom: Arc<BloomCounters>,
    /// A secondary instance's readers of every file a version it may still read lists
    /// ([`TableCache::hold_files`]); `None` for a database that deletes its own files.
    held: Option<parking_lot::Mutex<HeldFiles>>,
}

/// Open readers kept whatever the cache's bound, so that a file another process deletes
/// stays readable through them (POSIX keeps an unlinked file's data while a descriptor is
/// open): RocksDB's secondary instances keep every file open for the same reason.
#[derive(Default)]
struct HeldFiles {
    tables: std::collections::HashMap<u64, Arc<Table>>,
    blob_files: std::collections::HashMap<u64, Arc<BlobFile>>,
}

impl TableCache {
    /// A cache for tables living in `dirs` (index 0 is the database directory), opened as
    /// `options` say, whose blocks go to `block_cache` under a namespace of their own (trees
    /// number their files apart, and several trees and databases may share one block cache).
    pub fn new(
        dirs: Vec<PathBuf>,
        options: &Options,
        block_cache: Option<Arc<BlockCache>>,
    ) -> Self {
        let cache_namespace = block_cache.as_ref().map_or(0, |c| c.new_namespace());
        TableCache {
            dirs,
            tables: quick_cache::sync::Cache::new(options.max_open_files),
            blob_files: quick_cache::sync::Cache::new(options.max_open_files),
            cache_blob_values: options.blob.cache_values,
            block_cache,
            cache_namespace,
            verify_checksums: options.verify_checksums,
            storage: options.table_storage(),
            compaction_storage: options.background_storage(),
            next_dir: std::sync::atomic::AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bloom: Arc::default(),
            held: None,
        }
    }

    /// A cache that keeps open every file it is asked to hold (a secondary instance's: see
    /// [`TableCache::hold`]).
    pub fn holding_files(mut self) -> Self {
        self.held = Some(Default::default());
        self
    }

    /// Opens every table and blob file `version` lists, now, and keeps them open until
    /// [`TableCache::release_all_but`] lets them go: whatever deletes them afterwards, reads
    /// of `version` still find them. Fails as the first open fails (an [`Error::Io`] of kind
    /// `NotFound` when a file is already gone). A no-op unless made by
    /// [`TableCache::holding_files`].
    pub fn hold(&self, version: &crate::version::Version) -> Result<()> {
        let Some(held) = &self.held else {
            return Ok(());
        };
        // Opened with the lock released: `get` looks in it.
        let missing: Vec<_> = {
            let held = held.lock();
            version
                .live_files()
                .filter(|f| !held.tables.contains_key(&f.number))
                .cloned()
                .collect()
        };
        for file in missing {
            let table = self.get(&file)?;
            held.lock().tables.insert(file.number, table);
        }
        let missing: Vec<_> = {
            let held = held.lock();
            version
                .blob_files()
                .values()
                .filter(|b| !held.blob_files.contains_key(&b.meta.number))
                .map(|b| Arc::clone(&b.meta))
                .collect()
        };
        for meta in missing {
            let file = self.blob_file(&meta)?;
            held.lock().blob_files.insert(meta.number, file);
        }
        Ok(())
    }

    /// Lets go of every held file not in `live` (the numbers of every version something may
    /// still read).
    pub fn release_all_but(&self, live: &std::collections::BTreeSet<u64>) {
        if let Some(held) = &self.held {
            let mut held = held.lock();
            held.tables.retain(|n, _| live.contains(n));
            held.blob_files.retain(|n, _| live.contains(n));
        }
    }

    /// The held reader of table `number`, if any.
    fn held_table(&self, number: u64) -> Option<Arc<Table>> {
        self.held.as_ref()?.lock().tables.get(&number).cloned()
    }

    /// The data directory the next new table goes to: with `Options::data_dirs` set, tables
    /// are dealt over them in turn (one directory per storage device, so the devices share the
    /// I/O, as S-PPCP does); otherwise the database directory (index 0). A counter, not the
    /// file number, picks the directory: flushes interleave WAL and table numbers, so numbers
    /// modulo the directory count would put every L0 table on the same device.
    pub fn dir_for_new_table(&self) -> u32 {
        match self.dirs.len().saturating_sub(1) {
            0 => 0,
            data_dirs => {
                let turn = self
                    .next_dir
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                1 + (turn % data_dirs) as u32
            }
        }
    }

    /// The index of the data directory holding the table at `path` (0 if it is none of them).
    pub fn dir_index_of(&self, path: &std::path::Path) -> u32 {
        let parent = path.parent();
        self.dirs
            .iter()
            .position(|d| Some(d.as_path()) == parent)
            .map_or(0, |i| i as u32)
    }

    /// Every directory that may hold tables, database directory first.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The path of table `number` stored in data directory `dir_index`. An index beyond the
    /// directories (which the open refuses for every table of the tree) gives a path under a
    /// directory named `<unknown table directory N>`: whatever opens it fails with an error
    /// naming the index, and never reads a table of the same number elsewhere.
    pub fn table_path(&self, dir_index: u32, number: u64) -> PathBuf {
        table_file_name(&self.dir(dir_index), number)
    }

    /// The path of blob file `number` in table directory `dir_index`, as
    /// [`TableCache::table_path`].
    pub fn blob_path(&self, dir_index: u32, number: u64) -> PathBuf {
        blob_file_name(&self.dir(dir_index), number)
    }

    fn dir(&self, dir_index: u32) -> PathBuf {
        match self.dirs.get(dir_index as usize) {
            Some(dir) => dir.clone(),
            None => PathBuf::from(format!("<unknown table directory {dir_index}>")),
        }
    }

    /// The open blob file `meta` describes, opening it on first use. Corruption if its size
    /// is not the one the MANIFEST recorded.
    pub fn blob_file(&self, meta: &BlobFileMetaData) -> Result<Arc<BlobFile>> {
        if let Some(file) = self.blob_files.get(&meta.number) {
            return Ok(file);
        }
        let held = self.held.as_ref();
        if let Some(file) = held.and_then(|h| h.lock().blob_files.get(&meta.number).cloned()) {
            return Ok(file);
        }
        let path = self.blob_path(meta.dir_index, meta.number);
        let file = Arc::new(BlobFile::open(&self.storage, &path, meta.number)?);
        if file.size() != meta.file_size {
            return Err(Error::corruption(
                &path,
                0,
                format!(
                    "blob file is {} bytes, but the MANIFEST recorded {}",
                    file.size(),
                    meta.file_size
                ),
            ));
        }
        self.blob_files.insert(meta.number, Arc::clone(&file));
        Ok(file)
    }

    /// The value the reference `blob`, stored for user key `key`, points at in the blob file
    /// `meta` describes: with [`crate::BlobOptions::cache_values`], from the block cache when
    /// it holds it (and it was written under `key`), otherwise read from the file, checked,
    /// and cached.
    pub fn blob_value(
        &self,
        meta: &BlobFileMetaData,
        blob: &BlobRef,
        key: &[u8],
    ) -> Result<Vec<u8>> {
        let ns = self.cache_namespace;
        let cache = self.block_cache.as_ref().filter(|_| self.cache_blob_values);
        if let Some(hit) = cache.and_then(|c| c.get_value(ns, blob.file_number, blob.offset))
            && hit.key == key
        {
            return Ok(hit.value.clone());
        }
        // On a key mismatch too: the read below names the damaged reference.
        let value = self.blob_file(meta)?.get(blob, key)?;
        if let Some(cache) = cache {
            let cached = CachedValue {
                key: key.to_vec(),
                value: value.clone(),
            };
            cache.insert_value(ns, blob.file_number, blob.offset, Arc::new(cached));
        }
        Ok(value)
    }

    /// The reader for `file`, opening it on first use.
    pub fn get(&self, file: &FileMetaData) -> Result<Arc<Table>> {
        if let Some(t) = self.tables.get(&file.number) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(t);
        }
        if let Some(t) = self.held_table(file.number) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(t);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let table = self.open_pinned(
            file,
            TableReadOptions {
                cache: self.block_cache.clone(),
                cache_namespace: self.cache_namespace,
                verify_checksums: self.verify_checksums,
                storage: self.storage.clone(),
                load_filter: true,
                bloom_counters: Some(Arc::clone(&self.bloom)),
            },
        )?;
        self.tables.insert(file.number, Arc::clone(&table));
        Ok(table)
    }

    /// The reader a compaction uses for `file`. With direct I/O this is a reader of its own,
    /// opened with `O_DIRECT` and bypassing the block cache, so a compaction streams its inputs
    /// from the device without evicting what foreground reads cached (RocksDB opens compaction
    /// inputs the same way); otherwise it is the shared reader of [`TableCache::get`].
    pub fn get_for_compaction(&self, file: &FileMetaData) -> Result<Arc<Table>> {
        if self.compaction_storage.mode == IoMode::Buffered {
            return self.get(file);
        }
        self.open_pinned(
            file,
            TableReadOptions {
                cache: None,
                verify_checksums: true,
                storage: self.compaction_storage.clone(),
                // This reader only serves the compaction, which looks no key up.
                load_filter: false,
                ..TableReadOptions::default()
            },
        )
    }

    /// A reader of `file` of its own, opened from disk now and never cached: what a check of
    /// the files as they are (not as the cache opened them) reads. It loads the filter, so a
    /// full verification checks it holds every key.
    pub fn open_uncached(&self, file: &FileMetaData) -> Result<Arc<Table>> {
        self.open_pinned(
            file,
            TableReadOptions {
                cache: None,
                verify_checksums: true,
                storage: self.storage.clone(),
                load_filter: true,
                ..TableReadOptions::default()
            },
        )
    }

    /// Opens the table `file` describes and checks that it is the file the MANIFEST pinned:
    /// not a symbolic link, with the recorded size and identity ([`crate::version::pin`]).
    fn open_pinned(&self, file: &FileMetaData, opts: TableReadOptions) -> Result<Arc<Table>> {
        let path = self.table_path(file.dir_index, file.number);
        pin::refuse_symlink(self.fs(), &path)?;
        let table = Table::open(&path, file.number, opts)?;
        pin::check_opened(&table, file)?;
        Ok(table)
    }

    /// Open tables and how often [`TableCache::get`] found a reader open.
    pub fn metrics(&self) -> TableCacheMetrics {
        TableCacheMetrics {
            open_tables: self.tables.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
        }
    }

    /// What the bloom filters of the tables opened here saved.
    pub fn bloom_metrics(&self) -> BloomMetrics {
        let s = self.bloom.stats();
        BloomMetrics {
            useful: s.useful,
            passed: s.passed,
            false_positives: s.false_positives,
        }
    }

    /// Forgets table or blob file `number` (after it was deleted).
    pub fn evict(&self, number: u64) {
        self.tables.remove(&number);
        self.blob_files.remove(&number);
    }

    /// The file system tables live on (`Options::fs`, without rate limiting).
    pub fn fs(&self) -> &dyn FileSystem {
        &*self.storage.fs
    }

    /// Removes table `number`'s file from directory `dir_index` (not its cache entry: see
    /// [`TableCache::evict`]). Durable only once that directory is synced.
    pub fn remove_file(&self, dir_index: u32, number: u64) -> std::io::Result<()> {
        self.fs().remove(&self.table_path(dir_index, number))
    }

    /// The shared block cache, if enabled.
    pub fn block_cache(&self) -> Option<&Arc<BlockCache>> {
        self.block_cache.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_directory_index_never_resolves_to_another_directory() {
        let dirs = vec![PathBuf::from("/db"), PathBuf::from("/data1")];
        let cache = TableCache::new(dirs, &Options::default(), None);
        assert_eq!(
            cache.table_path(1, 7),
            table_file_name(std::path::Path::new("/data1"), 7)
        );
        let unknown = cache.table_path(5, 7);
        assert!(!unknown.starts_with("/db") && !unknown.starts_with("/data1"));
        assert!(
            unknown
                .to_string_lossy()
                .contains("unknown table directory 5"),
            "{}",
            unknown.display()
        );
    }
}
