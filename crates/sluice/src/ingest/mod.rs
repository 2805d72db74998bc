//! Bulk load: tables written outside the database ([`SstFileWriter`]) placed into its tree
//! by a version edit (RocksDB's `IngestExternalFile`).
//!
//! # Where a file goes, and with which sequence number
//!
//! An ingested file is the newest write of its keys, so nothing older may sit above it in
//! the tree: reads go memtables, L0 (newest first), L1, ... and take the first version they
//! find. Memtables overlapping a file are flushed first. Then, with writes and compactions
//! held off:
//!
//! - a file that overlaps no table, while no snapshot is live, keeps sequence number 0 and
//!   moves as it is to the last level: no other version of its keys exists, and no reader
//!   can tell when it arrived;
//! - otherwise every entry needs a sequence number above every write so far: the files get
//!   the next one, and are rewritten with it (RocksDB records a "global sequence number" in
//!   the file instead; Sluice's executors read blocks raw, so a number recorded beside the
//!   entries would have to be honoured by every decoder). Such a file goes to the deepest
//!   level above every table it overlaps: L0 if L0 overlaps it, otherwise the level just
//!   above the first one that does. The levels above the base level (dynamic level sizing,
//!   `compaction::level_targets`) are not places for it, as in RocksDB: they stay empty, and a
//!   file that overlaps the base level goes to L0.
//!   Every memtable is flushed first, under the barrier that holds writes off, so that writes
//!   from before the ingest and after it never share a memtable (or a replayed WAL) whose L0
//!   file would straddle the ingested sequence number.
//!
//! Files of one ingest must not overlap each other. Partitioned databases do not take
//! ingests: which owner's directory would hold a file depends on its key range.
//!
//! This module is the job: it reads and checks the files (`inspect`), plans their levels
//! (`plan`) and writes them into the tree's directory (`write_tables`), returning an edit.
//! `db/ingest.rs` holds writes and compactions off, installs the edit and publishes the
//! sequence number, as `db/` does for every job.

mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::{IoMode, Storage, copy_file, link_or_copy, open_file_crc32c};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{
    MAX_SEQ, ValueKind, append_internal_key, parse_internal_key, seek_key, user_key,
};
use sluice_sst::table::{Table, TableBuilder, TableReadOptions};

pub use writer::{ExternalFile, SstFileWriter};

use crate::compaction::env::JobEnv;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS, VersionEdit};
use crate::version::version::file_overlaps;
use crate::{Error, IoContext, Result};

/// How [`crate::Db::ingest`] takes the files.
#[derive(Clone, Debug, Default)]
pub struct IngestOptions {
    /// Hard-link each file into the database (when it needs no rewrite) and delete the
    /// original once the ingest is installed, instead of copying it. The original must not
    /// be changed afterwards, which deleting it ensures.
    pub move_files: bool,
}

/// One file [`crate::Db::ingest`] placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IngestedFile {
    /// The file given.
    pub source: PathBuf,
    /// Its table number in the database.
    pub number: u64,
    /// The level it went to.
    pub level: usize,
    /// Whether it was rewritten with a new sequence number (see the module docs).
    pub rewritten: bool,
    /// Its entries.
    pub entries: u64,
}

/// What [`crate::Db::ingest`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// The files, in key order.
    pub files: Vec<IngestedFile>,
    /// The sequence number the rewritten files' entries got, if any was needed.
    pub sequence: Option<u64>,
}

/// An external table, read and checked.
pub(crate) struct External {
    /// The file given.
    pub path: PathBuf,
    /// Its entries as they will be placed without a rewrite (sequence number 0).
    meta: FileMetaData,
}

impl External {
    pub(crate) fn smallest_user(&self) -> &[u8] {
        user_key(&self.meta.smallest)
    }
    pub(crate) fn largest_user(&self) -> &[u8] {
        user_key(&self.meta.largest)
    }
}

/// Opens `path` as a table, verifies every block and entry, and describes it.
pub(crate) fn inspect(options: &Options, path: &Path) -> Result<External> {
    let storage = Storage::new(Arc::clone(&options.fs), IoMode::Buffered);
    let table = Table::open(
        path,
        0,
        TableReadOptions {
            cache: None,
            verify_checksums: true,
            storage,
            load_filter: false,
            ..TableReadOptions::default()
        },
    )?;
    table.verify_all()?;
    let mut meta = FileMetaData {
        file_size: table.file_size(),
        identity: Some(table.identity()),
        ..FileMetaData::default()
    };
    let mut it = table.iter();
    it.seek_to_first()?;
    let mut last_user: Option<Vec<u8>> = None;
    while it.valid() {
        let ikey = it.key();
        let bad =
            |what: String| Error::InvalidArgument(format!("ingest: {}: {what}", path.display()));
        let parsed = parse_internal_key(ikey)
            .ok_or_else(|| Error::corruption(path, 0, "unparseable internal key"))?;
        if parsed.seq != 0 {
            return Err(bad(format!(
                "an entry has sequence number {}: only tables from SstFileWriter (sequence \
                 number 0) can be ingested",
                parsed.seq
            )));
        }
        if last_user.as_deref().is_some_and(|l| l >= parsed.user_key) {
            return Err(bad("a key appears twice".into()));
        }
        if parsed.user_key.len() > options.max_key_size || it.value().len() > options.max_value_size
        {
            return Err(bad(format!(
                "an entry exceeds max_key_size ({}) or max_value_size ({})",
                options.max_key_size, options.max_value_size
            )));
        }
        if meta.num_entries == 0 {
            meta.smallest = ikey.to_vec();
        }
        meta.largest.clear();
        meta.largest.extend_from_slice(ikey);
        meta.num_entries += 1;
        match parsed.kind {
            ValueKind::Deletion => meta.num_deletions += 1,
            ValueKind::Value => meta.raw_value_bytes += it.value().len() as u64,
            ValueKind::Merge => {
                let Some(operator) = &options.merge_operator else {
                    return Err(bad(
                        "it holds merge operands and the database has no merge operator".into(),
                    ));
                };
                // Refused now, a bad operand cannot fail every later read of its key.
                if let Err(why) = operator.validate_operand(parsed.user_key, it.value()) {
                    return Err(bad(format!(
                        "merge operator {:?} refuses the operand of key {}: {why}",
                        operator.name(),
                        sluice_sst::key::escape_bytes(parsed.user_key)
                    )));
                }
                meta.raw_value_bytes += it.value().len() as u64;
            }
            ValueKind::RangeDeletion => {
                return Err(bad("it holds a range tombstone among its entries".into()));
            }
            ValueKind::BlobIndex => {
                return Err(bad(
                    "it holds references into blob files it does not bring".into()
                ));
            }
        }
        last_user = Some(parsed.user_key.to_vec());
        it.next()?;
    }
    if meta.num_entries == 0 {
        return Err(Error::InvalidArgument(format!(
            "ingest: {} holds no entries",
            path.display()
        )));
    }
    Ok(External {
        path: path.to_path_buf(),
        meta,
    })
}

/// True if one of `mems` holds a key in one of the files' ranges.
pub(crate) fn memtables_overlap(mems: &[Arc<MemTable>], externals: &[External]) -> bool {
    mems.iter().any(|mem| {
        externals.iter().any(|e| {
            // A range tombstone there must reach the version first: it may cover the range.
            let tombstone = mem
                .range_tombstones()
                .iter()
                .any(|t| t.overlaps(e.smallest_user(), e.largest_user()));
            let mut it = mem.iter();
            tombstone ||
            // A memtable iterator reads memory only: it cannot fail.
            it.seek(&seek_key(e.smallest_user(), MAX_SEQ)).is_ok()
                && it.valid()
                && user_key(it.key()) <= e.largest_user()
        })
    })
}

/// Where each file goes and whether the files need a sequence number (see the module docs).
pub(crate) struct Plan {
    /// The files take the next sequence number and are rewritten with it.
    pub needs_sequence: bool,
    /// The level of each file, in the order of the files.
    pub levels: Vec<usize>,
}

/// Plans the files' places in `version`, whose base level is `base_level`, with
/// `snapshots_live` whether any snapshot is held.
pub(crate) fn plan(
    version: &Version,
    base_level: usize,
    externals: &[External],
    snapshots_live: bool,
) -> Plan {
    let overlaps = |e: &External, level: usize| {
        version
            .files(level)
            .iter()
            .any(|f| file_overlaps(f, Some(e.smallest_user()), Some(e.largest_user())))
    };
    // Under a range tombstone a file must be newer than it: sequence number 0 would put its
    // entries beneath the tombstone.
    let under_tombstone = |e: &External| {
        version
            .range_tombstones()
            .iter()
            .any(|t| t.overlaps(e.smallest_user(), e.largest_user()))
    };
    let needs_sequence = snapshots_live
        || externals
            .iter()
            .any(|e| under_tombstone(e) || (0..NUM_LEVELS).any(|level| overlaps(e, level)));
    let levels = externals
        .iter()
        .map(|e| match needs_sequence {
            false => NUM_LEVELS - 1,
            true => std::iter::once(0)
                .chain(base_level..NUM_LEVELS)
                .take_while(|&level| !overlaps(e, level))
                .last()
                .unwrap_or(0),
        })
        .collect();
    Plan {
        needs_sequence,
        levels,
    }
}

/// The ingest's job: puts each file into the tree's directory under a number reserved in
/// `env` (linked or copied as it is without `seq`, rewritten with `seq` otherwise) and returns
/// the edit that installs them at `plan`'s levels. Only `db/` installs it, and it must keep
/// `env` until then.
pub(crate) fn write_tables(
    env: &JobEnv<'_>,
    externals: &[External],
    plan: &Plan,
    seq: Option<u64>,
    opts: &IngestOptions,
) -> Result<(VersionEdit, IngestReport)> {
    let fs = &*env.options.fs;
    let numbers = env.reserve_numbers(externals.len() as u64);
    let mut edit = VersionEdit {
        last_sequence: seq,
        ..VersionEdit::default()
    };
    let mut report = IngestReport {
        files: Vec::new(),
        sequence: seq,
    };
    for ((e, number), &level) in externals.iter().zip(numbers).zip(&plan.levels) {
        let dest = env.table_cache.table_path(0, number);
        let meta = match seq {
            None => {
                let placed = if opts.move_files {
                    link_or_copy(fs, &e.path, &dest)
                } else {
                    copy_file(fs, &e.path, &dest, None).map(sluice_sst::fs::Placed::Copied)
                };
                placed.with_path(&dest)?;
                pinned_copy(env.options, e, &dest, number)?
            }
            Some(seq) => rewrite(env.options, e, &dest, number, seq)?,
        };
        report.files.push(IngestedFile {
            source: e.path.clone(),
            number,
            level,
            rewritten: seq.is_some(),
            entries: meta.num_entries,
        });
        edit.new_files.push((level, meta));
    }
    Ok((edit, report))
}

/// `e`'s description for its copy (or link) at `dest`, numbered `number`, with the checksum
/// of the bytes `dest` holds. The copy must be the table `inspect` read (size and identity):
/// a source changed in between is refused rather than installed unchecked.
fn pinned_copy(options: &Options, e: &External, dest: &Path, number: u64) -> Result<FileMetaData> {
    let storage = Storage::new(Arc::clone(&options.fs), IoMode::Buffered);
    let opts = TableReadOptions {
        cache: None,
        storage,
        load_filter: false,
        ..TableReadOptions::default()
    };
    let table = Table::open(dest, number, opts)?;
    crate::version::pin::check_opened(&table, &e.meta).map_err(|_| {
        Error::InvalidArgument(format!(
            "ingest: {} changed while it was being ingested",
            e.path.display()
        ))
    })?;
    let crc = open_file_crc32c(table.file()).with_path(dest)?;
    Ok(FileMetaData {
        number,
        file_checksum: Some(crc.crc32c),
        ..e.meta.clone()
    })
}

/// Writes `e`'s entries into `dest` with sequence number `seq`, in the database's table
/// format, and describes the result.
fn rewrite(
    options: &Options,
    e: &External,
    dest: &Path,
    number: u64,
    seq: u64,
) -> Result<FileMetaData> {
    let storage = Storage::new(Arc::clone(&options.fs), IoMode::Buffered);
    let source = Table::open(
        &e.path,
        0,
        TableReadOptions {
            cache: None,
            verify_checksums: true,
            storage: storage.clone(),
            load_filter: false,
            ..TableReadOptions::default()
        },
    )?;
    let mut builder = TableBuilder::create_in(&storage, dest, &options.table)?;
    let mut it = source.iter();
    it.seek_to_first()?;
    let mut key = Vec::new();
    while it.valid() {
        let parsed = parse_internal_key(it.key())
            .ok_or_else(|| Error::corruption(&e.path, 0, "unparseable internal key"))?;
        key.clear();
        append_internal_key(&mut key, parsed.user_key, seq, parsed.kind);
        builder.add(&key, it.value())?;
        it.next()?;
    }
    let summary = builder.finish()?;
    Ok(FileMetaData {
        number,
        file_size: summary.file_size,
        file_checksum: Some(summary.file_checksum),
        identity: Some(summary.identity),
        smallest: summary.smallest_key,
        largest: summary.largest_key,
        smallest_seq: seq,
        largest_seq: seq,
        ..e.meta.clone()
    })
}
