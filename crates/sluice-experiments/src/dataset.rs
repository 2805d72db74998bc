//! The "inverted LSM" data sets the compaction experiments run on.
//!
//! A data set is loaded once into a template directory with automatic compactions off, so every
//! memtable lands in L0 and L0 ends up holding all the data as many overlapping sorted runs
//! (each run spans the whole key space, because keys are written in a shuffled order). A data
//! point then copies the template into a fresh directory and times one
//! `compact_range(None, None)`: a single compaction of L0 into the base level (the last level,
//! with nothing below L0) that reads every byte once.
//! Copying rather than reloading is cheaper, and it gives every executor measured at one data
//! set byte-identical input files, so their bandwidths differ only by scheduling.
//!
//! Each key is written exactly once (a shuffled permutation of `0..entries`), as the document's
//! insert-only workload: the merge drops nothing and output bytes track input bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use sluice::fs::FileSystem;
use sluice::{
    CompactionOptions, CompressionType, Db, Error, IoContext, MemtableOptions, Options, Result,
    TableOptions, WriteBatch, WriteOptions,
};
use sluice_bench::keys::KeyFormat;
use sluice_bench::values::ValueGenerator;

/// L0 runs a data set aims for: the memtable is sized so that loading makes about this many
/// (more when the memtable reaches [`MAX_WRITE_BUFFER_BYTES`]).
pub const TARGET_L0_RUNS: u64 = 16;

/// Largest memtable, the document's 4 MB.
pub const MAX_WRITE_BUFFER_BYTES: usize = 4 << 20;

/// Smallest memtable the engine accepts.
pub const MIN_WRITE_BUFFER_BYTES: usize = 64 << 10;

/// Compaction output file size, the document's 2 MB SSTables.
pub const TARGET_FILE_BYTES: u64 = 2 << 20;

/// Entries per write batch while loading (loading speed is not measured).
const LOAD_BATCH_ENTRIES: usize = 256;

/// What a data set holds and how its database is configured.
#[derive(Clone, Debug, PartialEq)]
pub struct DatasetSpec {
    /// Distinct keys, each written once.
    pub entries: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Block compression.
    pub compression: CompressionType,
    /// Seed of the key order and of the values.
    pub seed: u64,
    /// Data directories (`Options::data_dirs`): 0 keeps tables in the database directory,
    /// N > 0 spreads them over N subdirectories `d1..dN` of it.
    pub data_dirs: usize,
    /// Flushes and compactions use direct I/O (`O_DIRECT`).
    pub direct_io: bool,
    /// Memtable bytes, hence L0 table size; `None`: sized for [`TARGET_L0_RUNS`] runs.
    pub memtable_bytes: Option<usize>,
    /// Compaction output table bytes; `None`: the document's [`TARGET_FILE_BYTES`].
    pub output_table_bytes: Option<u64>,
}

impl DatasetSpec {
    /// Key and value bytes of the whole data set.
    pub fn raw_bytes(&self) -> u64 {
        self.entries
            .saturating_mul((self.key_size + self.value_size) as u64)
    }

    /// The memtable size: `memtable_bytes`, or the size that makes about [`TARGET_L0_RUNS`]
    /// L0 runs, within the engine's bounds and the document's 4 MB.
    pub fn write_buffer_size(&self) -> usize {
        if let Some(bytes) = self.memtable_bytes {
            return bytes;
        }
        let per_run = usize::try_from(self.raw_bytes() / TARGET_L0_RUNS).unwrap_or(usize::MAX);
        per_run.clamp(MIN_WRITE_BUFFER_BYTES, MAX_WRITE_BUFFER_BYTES)
    }

    /// The options of a database in `dir` holding this data set. Automatic compactions are off
    /// (and with them the L0 write stalls), so L0 keeps everything until a manual compaction.
    pub fn options(&self, dir: &Path) -> Options {
        Options {
            create_if_missing: true,
            data_dirs: (1..=self.data_dirs)
                .map(|i| dir.join(format!("d{i}")))
                .collect(),
            memtable: MemtableOptions {
                write_buffer_size: self.write_buffer_size(),
                ..MemtableOptions::default()
            },
            table: TableOptions {
                compression: self.compression,
                ..TableOptions::default()
            },
            compaction: CompactionOptions {
                target_file_size_base: self.output_table_bytes.unwrap_or(TARGET_FILE_BYTES),
                disable_auto_compactions: true,
                use_direct_io_for_flush_and_compaction: self.direct_io,
                ..CompactionOptions::default()
            },
            ..Options::default()
        }
    }
}

/// A loaded data set: a closed database in `dir` whose tables are all in L0.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// What it holds.
    pub spec: DatasetSpec,
    /// The template directory; copied, never compacted.
    pub dir: PathBuf,
    /// L0 files after loading.
    pub l0_files: usize,
    /// Bytes of those files: the input of the compaction a data point times.
    pub l0_bytes: u64,
}

impl Dataset {
    /// Writes `spec.entries` keys in a shuffled order into a new database in `dir` (which must
    /// not exist or be empty), flushes the last memtable and closes the database. Fails if
    /// fewer than two L0 runs result: one run would be moved down without a merge.
    pub fn load(spec: &DatasetSpec, dir: &Path) -> Result<Dataset> {
        Dataset::load_on(spec, dir, Options::default().fs)
    }

    /// [`Dataset::load`] with the database's files on `fs` (its tables in a bucket, say).
    pub fn load_on(spec: &DatasetSpec, dir: &Path, fs: Arc<dyn FileSystem>) -> Result<Dataset> {
        let keys = KeyFormat::new(spec.key_size, spec.entries)?;
        let options = Options {
            error_if_exists: true,
            fs,
            ..spec.options(dir)
        };
        let db = Db::open(dir, options)?;
        let mut rng = SmallRng::seed_from_u64(spec.seed);
        let mut order: Vec<u64> = (0..spec.entries).collect();
        order.shuffle(&mut rng);
        let mut values = ValueGenerator::new(&mut rng, spec.value_size);
        let mut key = Vec::with_capacity(spec.key_size);
        for chunk in order.chunks(LOAD_BATCH_ENTRIES) {
            let mut batch = WriteBatch::new();
            for &n in chunk {
                keys.write(n, &mut key);
                batch.put(&key, values.generate(spec.value_size));
            }
            db.write(&WriteOptions::default(), batch)?;
        }
        db.flush()?;
        let l0 = db.metrics().levels.first().cloned().unwrap_or_default();
        db.close()?;
        if l0.files < 2 {
            return Err(Error::InvalidArgument(format!(
                "a data set of {} entries of {} bytes made {} L0 file(s): too small to merge \
                 (raise --num)",
                spec.entries,
                spec.key_size + spec.value_size,
                l0.files
            )));
        }
        Ok(Dataset {
            spec: spec.clone(),
            dir: dir.to_path_buf(),
            l0_files: l0.files,
            l0_bytes: l0.size_bytes,
        })
    }

    /// Copies the template into `dest` (which must not exist) and returns the options to open
    /// the copy with: the data directories point into `dest`, and the manifest's per-file
    /// directory indexes stay valid because the layout below the root is the same.
    pub fn copy_to(&self, dest: &Path) -> Result<Options> {
        copy_tree(&self.dir, dest)?;
        Ok(self.spec.options(dest))
    }
}

/// Copies the regular files and subdirectories below `from` into a new directory `to`,
/// skipping the `LOCK` file (a copy must be lockable on its own).
fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    clone_tree(from, to, false)
}

/// [`copy_tree`], except that tables (`*.sst`) are hard links to the originals rather than
/// copies: instant and free of disk space, for a database that only reads them and removes
/// them (a compaction). Tables are never modified after they are written, and removing a
/// link leaves the original. `from` and `to` must be on one file system.
pub(crate) fn link_tree(from: &Path, to: &Path) -> Result<()> {
    clone_tree(from, to, true)
}

fn clone_tree(from: &Path, to: &Path, link_tables: bool) -> Result<()> {
    std::fs::create_dir(to).with_path(to)?;
    for entry in std::fs::read_dir(from).with_path(from)? {
        let entry = entry.with_path(from)?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().with_path(&source)?;
        if kind.is_dir() {
            clone_tree(&source, &target, link_tables)?;
        } else if !kind.is_file() || entry.file_name() == "LOCK" {
            continue;
        } else if link_tables && source.extension() == Some("sst".as_ref()) {
            std::fs::hard_link(&source, &target).with_path(&target)?;
        } else {
            // The MANIFEST, CURRENT and WALs: the copy's database appends to them.
            std::fs::copy(&source, &target).with_path(&target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(entries: u64, data_dirs: usize) -> DatasetSpec {
        DatasetSpec {
            entries,
            key_size: 16,
            value_size: 100,
            compression: CompressionType::Lz4,
            seed: 7,
            data_dirs,
            direct_io: false,
            memtable_bytes: None,
            output_table_bytes: None,
        }
    }

    #[test]
    fn memtable_size_aims_for_sixteen_runs_within_bounds() {
        assert_eq!(spec(1_000, 0).write_buffer_size(), MIN_WRITE_BUFFER_BYTES);
        assert_eq!(
            spec(10_000_000, 0).write_buffer_size(),
            MAX_WRITE_BUFFER_BYTES
        );
        let s = spec(100_000, 0);
        assert_eq!(s.write_buffer_size() as u64, s.raw_bytes() / TARGET_L0_RUNS);
    }

    #[test]
    fn loaded_data_set_is_all_l0_and_copies_open_with_every_key() {
        let tmp = tempfile::tempdir().unwrap();
        let s = spec(12_000, 2);
        let ds = Dataset::load(&s, &tmp.path().join("template")).unwrap();
        assert!(ds.l0_files >= 2, "{ds:?}");
        assert!(ds.l0_bytes > 12_000 * 50, "{ds:?}");
        // Tables went to the data directories, none to the database directory. (How they are
        // spread is the engine's choice: it picks a directory by file number, and flushes
        // alternate numbers with new WALs, so L0 tables may all land in one directory.)
        let tables = |dir: &Path| {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension() == Some("sst".as_ref()))
                .count()
        };
        assert_eq!(tables(&ds.dir), 0);
        assert_eq!(
            tables(&ds.dir.join("d1")) + tables(&ds.dir.join("d2")),
            ds.l0_files
        );
        let copy = tmp.path().join("copy");
        let options = ds.copy_to(&copy).unwrap();
        assert_eq!(options.data_dirs, vec![copy.join("d1"), copy.join("d2")]);
        let db = Db::open(&copy, options).unwrap();
        let m = db.metrics();
        assert_eq!(m.levels[0].files, ds.l0_files);
        db.compact_range(None, None).unwrap();
        let keys = KeyFormat::new(16, 12_000).unwrap();
        for n in [0, 5_999, 11_999] {
            assert_eq!(db.get(keys.key(n)).unwrap().map(|v| v.len()), Some(100));
        }
        let after = db.metrics();
        assert_eq!(after.levels[0].files, 0);
        assert_eq!(after.compaction.entries_out, 12_000);
        db.close().unwrap();
        // The template is untouched by the copy's compaction.
        assert_eq!(
            tables(&ds.dir.join("d1")) + tables(&ds.dir.join("d2")),
            ds.l0_files
        );
        assert!(
            copy_tree(&ds.dir, &copy).is_err(),
            "copy into an existing dir"
        );
    }

    #[test]
    fn one_memtable_is_too_small_to_merge() {
        let tmp = tempfile::tempdir().unwrap();
        let err = Dataset::load(&spec(100, 0), &tmp.path().join("t")).unwrap_err();
        assert!(err.to_string().contains("too small"), "{err}");
    }
}
