//! The engine options a stress run opens its database with: small memtables, tables, blocks
//! and level targets, so flushes and compactions happen all the time; drawn anew each round
//! (memtable and file sizes, compression, L0 trigger), so rounds meet different tree shapes.
//!
//! The database has [`KEYSPACES`]: the default one and two more, created by the first open
//! for a workload with that round's settings. Every open (workload, verification, damage
//! check) gives the other keyspaces the default keyspace's settings in `Options::keyspaces`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::Rng;
use rand::rngs::StdRng;
use sluice::options::{PartitionOptions, PartitionOwner};
use sluice::partition::balance::BalanceOptions;
use sluice::{
    BlobOptions, CompactionMode, CompactionOptions, CompressionType, Db, Keyspace, KeyspaceOptions,
    MemtableOptions, Options,
};
use sluice_offload::{OffloadOptions, SideMode, Split};
use sluice_sst::fs::{FileSystem, os_fs};

use super::value::key;

/// The keyspaces the workload spreads its keys over, by index; the default one first.
pub const KEYSPACES: [&str; 3] = ["default", "stress-a", "stress-b"];

/// What every open of one run's database shares.
#[derive(Clone, Debug)]
pub struct Engine {
    pub db: PathBuf,
    pub keys: u32,
    /// Partition owners (0: not partitioned), in `<db>/owner<i>`.
    pub owners: u32,
    /// Compaction workers to offload to, if any.
    pub offload: Option<OffloadOptions>,
    /// Where the tables are kept as objects (`--object-store`, with the run's own prefix), and
    /// the file system that keeps them there, if anywhere.
    pub object_url: Option<String>,
    pub object_fs: Option<Arc<dyn FileSystem>>,
}

impl Engine {
    /// Owner `i`'s directory.
    pub fn owner_dir(db: &Path, i: u32) -> PathBuf {
        db.join(format!("owner{i}"))
    }

    /// Every directory tables may live in: the database directory and the owners'.
    pub fn table_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = vec![self.db.clone()];
        dirs.extend((0..self.owners).map(|i| Self::owner_dir(&self.db, i)));
        dirs
    }

    /// Partitioned: two ranges per owner to start with, moved by the storage balancer (and
    /// the workload) from then on. The boundaries count only when the database is created.
    /// The owners' workers are options of each open, not part of the MANIFEST, so checks
    /// (which run without offload) name none.
    fn partitions(&self, with_workers: bool) -> Option<PartitionOptions> {
        (self.owners > 0).then(|| {
            let ranges = self.owners * 2;
            PartitionOptions {
                owners: (0..self.owners)
                    .map(|i| PartitionOwner {
                        dir: Self::owner_dir(&self.db, i),
                        // With workers, each owner's compactions go to one (round robin).
                        worker: self
                            .offload
                            .as_ref()
                            .filter(|_| with_workers)
                            .and_then(|o| {
                                o.workers.get(i as usize % o.workers.len().max(1)).cloned()
                            }),
                    })
                    .collect(),
                boundaries: (1..ranges)
                    .map(|r| key((u64::from(r) * u64::from(self.keys) / u64::from(ranges)) as u32))
                    .collect(),
                balance: Some(BalanceOptions {
                    max_skew: 0.25,
                    min_bytes: 0,
                }),
                ..PartitionOptions::default()
            }
        })
    }

    /// Options for a workload round with executor `mode`, the sizes drawn from `rng`.
    pub fn workload_options(&self, mode: CompactionMode, rng: &mut StdRng) -> Options {
        let write_buffer_size = [64 << 10, 256 << 10, 1 << 20][rng.gen_range(0..3)];
        let target_file_size_base = [64 << 10, 128 << 10, 256 << 10][rng.gen_range(0..3)];
        let compression = [
            CompressionType::None,
            CompressionType::Snappy,
            CompressionType::Lz4,
            CompressionType::Zstd,
        ][rng.gen_range(0..4)];
        let offload = self.offload.clone().map(|o| OffloadOptions {
            split: if rng.r#gen() {
                Split::Dynamic
            } else {
                Split::default()
            },
            host_mode: SideMode::Fixed(mode),
            ..o
        });
        // Assigned in the order the sizes were always drawn from `rng`, so a seed gives the
        // same rounds as before.
        let mut o = self.check_options();
        o.compaction.mode = mode;
        o.memtable.write_buffer_size = write_buffer_size;
        o.compaction.target_file_size_base = target_file_size_base;
        o.compaction.max_bytes_for_level_base = target_file_size_base * 4;
        o.compaction.l0_compaction_trigger = rng.gen_range(2..=4);
        o.compaction.l0_flush_split_bytes = if rng.r#gen() { 64 << 10 } else { 0 };
        o.table.block_size = [512, 1024, 4096][rng.gen_range(0..3)];
        o.table.compression = compression;
        o.compaction.sub_task_bytes = 16 << 10;
        o.block_cache_bytes = 256 << 10;
        o.compaction.max_concurrent_compactions = rng.gen_range(1..=3);
        o.compaction.compaction_threads = 2;
        o.partitions = self.partitions(offload.is_some());
        o.offload = offload.map(Into::into);
        o.compaction.disable_auto_compactions = false;
        with_keyspaces(o)
    }

    /// Options for verifying and damage checks: no automatic compaction (the open replays and
    /// flushes the WALs, then only reads), no offload.
    pub fn check_options(&self) -> Options {
        with_keyspaces(Options {
            partitions: self.partitions(false),
            paranoid_checks: true,
            memtable: MemtableOptions {
                write_buffer_size: 1 << 20,
                ..MemtableOptions::default()
            },
            compaction: CompactionOptions {
                target_file_size_base: 128 << 10,
                max_bytes_for_level_base: 512 << 10,
                l0_compaction_trigger: 2,
                disable_auto_compactions: true,
                ..CompactionOptions::default()
            },
            // About one value in eight is 256 bytes or more: those go to blob files, so kills
            // and damage also land in them and in compactions that drop a blob file.
            blob: BlobOptions {
                min_blob_size: 256,
                blob_file_size: 64 << 10,
                // Below the default, so files are collected young and old.
                gc_min_garbage_ratio: 0.25,
                ..BlobOptions::default()
            },
            fs: self.object_fs.clone().unwrap_or_else(os_fs),
            ..Options::default()
        })
    }
}

/// `o` with the default keyspace's settings given to every other keyspace, and those the
/// database lacks created when it opens.
fn with_keyspaces(mut o: Options) -> Options {
    let settings = KeyspaceOptions::of_default(&o);
    o.keyspaces = KEYSPACES[1..]
        .iter()
        .map(|name| (name.to_string(), settings.clone()))
        .collect();
    o.create_missing_keyspaces = true;
    o
}

/// Opens the database for a workload (with [`KEYSPACES`] in `options`, created if missing);
/// returns the handles of every keyspace, by index.
pub fn open_for_workload(path: &Path, options: Options) -> sluice::Result<(Db, Vec<Keyspace>)> {
    let db = Db::open(path, options)?;
    let handles = KEYSPACES
        .iter()
        .map(|name| {
            db.keyspace(name).ok_or_else(|| {
                sluice::Error::InvalidArgument(format!(
                    "the workload's keyspace {name:?} is missing"
                ))
            })
        })
        .collect::<sluice::Result<Vec<_>>>()?;
    Ok((db, handles))
}

/// The handle of every keyspace of `db`, by index; `None` for one not created yet (the run
/// was killed before its first workload created it), which must then be empty.
pub fn keyspaces_of(db: &Db) -> Vec<Option<Keyspace>> {
    KEYSPACES.iter().map(|name| db.keyspace(name)).collect()
}

/// A worker share is worth sending at this many input bytes: the stress tables are small.
pub const OFFLOAD_MIN_BYTES: u64 = 64 << 10;
