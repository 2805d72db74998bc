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
//!   above the first one that does.
//!   Every memtable is flushed first, under the barrier that holds writes off, so that writes
//!   from before the ingest and after it never share a memtable (or a replayed WAL) whose L0
//!   file would straddle the ingested sequence number.
//!
//! Files of one ingest must not overlap each other. Partitioned databases do not take
//! ingests: which owner's directory would hold a file depends on its key range.

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

use crate::compaction::env::FileNumbers;
use crate::db::{Db, DbInner};
use crate::filename::table_file_name;
use crate::memtable::MemTable;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS, VersionEdit};
use crate::version::version::file_overlaps;
use crate::{Error, IoContext, Result};

/// How [`Db::ingest`] takes the files.
#[derive(Clone, Debug, Default)]
pub struct IngestOptions {
    /// Hard-link each file into the database (when it needs no rewrite) and delete the
    /// original once the ingest is installed, instead of copying it. The original must not
    /// be changed afterwards, which deleting it ensures.
    pub move_files: bool,
}

/// One file [`Db::ingest`] placed.
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

/// What [`Db::ingest`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IngestReport {
    /// The files, in key order.
    pub files: Vec<IngestedFile>,
    /// The sequence number the rewritten files' entries got, if any was needed.
    pub sequence: Option<u64>,
}

/// An external table, read and checked.
struct External {
    path: PathBuf,
    /// Its entries as they will be placed without a rewrite (sequence number 0).
    meta: FileMetaData,
}

impl External {
    fn smallest_user(&self) -> &[u8] {
        user_key(&self.meta.smallest)
    }
    fn largest_user(&self) -> &[u8] {
        user_key(&self.meta.largest)
    }
}

/// Why one attempt to place the files did not happen.
enum Attempt {
    Placed(IngestReport),
    /// A write reached the files' key range after the flush: flush again.
    MemtableOverlaps,
    /// The files need a sequence number and a memtable holds writes: every write must be in a
    /// table first (see [`place`]).
    MemtablesNotEmpty,
}

impl Db {
    /// Ingests tables written by [`SstFileWriter`] (see the module docs of `ingest`): checks
    /// every block and entry of each, then places them into the tree atomically: a reader
    /// sees all of them or none. Writes wait while the files are placed.
    pub fn ingest(&self, files: &[impl AsRef<Path>], opts: &IngestOptions) -> Result<IngestReport> {
        let inner = &*self.inner;
        inner.check_writable()?;
        if inner.options.partitions.is_some() {
            return Err(Error::InvalidArgument(
                "ingest: a partitioned database does not take external tables".into(),
            ));
        }
        if inner.options.ttl.is_some() {
            return Err(Error::InvalidArgument(
                "ingest: a database with a ttl stores write times with its values, and \
                 external tables have none"
                    .into(),
            ));
        }
        let mut externals = files
            .iter()
            .map(|p| inspect(inner, p.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        if externals.is_empty() {
            return Ok(IngestReport::default());
        }
        externals.sort_by(|a, b| a.smallest_user().cmp(b.smallest_user()));
        for pair in externals.windows(2) {
            if pair[0].largest_user() >= pair[1].smallest_user() {
                return Err(Error::InvalidArgument(format!(
                    "ingest: {} and {} overlap; the files of one ingest must not",
                    pair[0].path.display(),
                    pair[1].path.display()
                )));
            }
        }
        // Writes may keep landing in the range between the flush and the barrier; a few
        // rounds settle any realistic load.
        let mut flush_all = false;
        for _ in 0..8 {
            if memtables_overlap(inner, &externals) {
                inner.flush_and_wait()?;
            }
            // Leader of an empty group: no write runs until `finish`. Flushing everything
            // happens here, under the barrier, so no write can follow it before the files are
            // placed. The compaction slot is taken last: compactions and flushes finish
            // without writes, so waiting for it cannot deadlock with a writer stalled on L0.
            // A keyspace's writes go through the database's commit queue: its barrier.
            let journal = inner.journal()?;
            let group = journal.commit.join_barrier();
            let attempt = (if flush_all {
                inner.flush_as_leader()
            } else {
                Ok(())
            })
            .and_then(|()| inner.acquire_compaction_slot())
            .and_then(|()| {
                let attempt = place(inner, &externals, opts);
                inner.release_compaction_slot();
                attempt
            });
            journal.commit.finish(group, &Ok(()));
            match attempt? {
                Attempt::Placed(report) => {
                    if opts.move_files {
                        for e in &externals {
                            inner.options.fs.remove(&e.path).with_path(&e.path)?;
                        }
                    }
                    return Ok(report);
                }
                Attempt::MemtableOverlaps => continue,
                Attempt::MemtablesNotEmpty => flush_all = true,
            }
        }
        Err(Error::Busy(
            "ingest: writes kept landing in the ingested key range; retry".into(),
        ))
    }
}

/// Opens `path` as a table, verifies every block and entry, and describes it.
fn inspect(inner: &DbInner, path: &Path) -> Result<External> {
    let storage = Storage::new(Arc::clone(&inner.options.fs), IoMode::Buffered);
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
        if parsed.user_key.len() > inner.options.max_key_size
            || it.value().len() > inner.options.max_value_size
        {
            return Err(bad(format!(
                "an entry exceeds max_key_size ({}) or max_value_size ({})",
                inner.options.max_key_size, inner.options.max_value_size
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
            ValueKind::Merge if inner.options.merge_operator.is_none() => {
                return Err(bad(
                    "it holds merge operands and the database has no merge operator".into(),
                ));
            }
            ValueKind::Merge => meta.raw_value_bytes += it.value().len() as u64,
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

/// True if a memtable holds a key in one of the files' ranges.
fn memtables_overlap(inner: &DbInner, externals: &[External]) -> bool {
    let mems: Vec<Arc<MemTable>> = {
        let st = inner.state.lock();
        std::iter::once(&st.mem).chain(&st.imm).cloned().collect()
    };
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

/// Places the files. REQUIRES: the commit barrier and the compaction slot are held.
///
/// Files that take a sequence number need every earlier write in a table first: a memtable
/// holding writes from before it and after it (or a WAL replay at open that puts both in one
/// memtable) would be flushed into an L0 file whose sequence numbers straddle the ingested
/// file's, which L0's ordering by sequence number cannot place.
fn place(inner: &DbInner, externals: &[External], opts: &IngestOptions) -> Result<Attempt> {
    if memtables_overlap(inner, externals) {
        return Ok(Attempt::MemtableOverlaps);
    }
    let (version, snapshots_live, latest, memtables_empty): (Arc<Version>, bool, u64, bool) = {
        let st = inner.state.lock();
        (
            Arc::clone(st.versions.current()),
            inner.snapshots.oldest().is_some(),
            inner.latest_seq(),
            st.mem.is_empty() && st.imm.is_empty(),
        )
    };
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
    let needs_seq = snapshots_live
        || externals
            .iter()
            .any(|e| under_tombstone(e) || (0..NUM_LEVELS).any(|level| overlaps(e, level)));
    if needs_seq && !memtables_empty {
        return Ok(Attempt::MemtablesNotEmpty);
    }
    let seq = needs_seq.then_some(latest + 1);
    let numbers = inner.reserve(externals.len() as u64);
    let placed = (|| -> Result<IngestReport> {
        let mut edit = VersionEdit {
            last_sequence: seq,
            ..VersionEdit::default()
        };
        let mut report = IngestReport {
            files: Vec::new(),
            sequence: seq,
        };
        for (e, number) in externals.iter().zip(numbers.clone()) {
            let level = match seq {
                None => NUM_LEVELS - 1,
                Some(_) => (0..NUM_LEVELS)
                    .take_while(|&level| !overlaps(e, level))
                    .last()
                    .unwrap_or(0),
            };
            let dest = table_file_name(&inner.dir, number);
            let meta = match seq {
                None => {
                    let placed = if opts.move_files {
                        link_or_copy(&*inner.options.fs, &e.path, &dest)
                    } else {
                        copy_file(&*inner.options.fs, &e.path, &dest, None)
                            .map(sluice_sst::fs::Placed::Copied)
                    };
                    placed.with_path(&dest)?;
                    pinned_copy(inner, e, &dest, number)?
                }
                Some(seq) => rewrite(inner, e, &dest, number, seq)?,
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
        inner.log_and_apply(edit)?;
        Ok(report)
    })();
    inner.release(&numbers.clone().collect::<Vec<_>>());
    let report = placed?;
    if let Some(seq) = seq {
        // Installed: readers from now on read at `seq` or later and see the files; snapshots
        // taken before read below it and do not.
        inner
            .visible_seq
            .store(seq, std::sync::atomic::Ordering::Release);
    }
    Ok(Attempt::Placed(report))
}

/// `e`'s description for its copy (or link) at `dest`, numbered `number`, with the checksum
/// of the bytes `dest` holds. The copy must be the table `inspect` read (size and identity):
/// a source changed in between is refused rather than installed unchecked.
fn pinned_copy(inner: &DbInner, e: &External, dest: &Path, number: u64) -> Result<FileMetaData> {
    let storage = Storage::new(Arc::clone(&inner.options.fs), IoMode::Buffered);
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
    inner: &DbInner,
    e: &External,
    dest: &Path,
    number: u64,
    seq: u64,
) -> Result<FileMetaData> {
    let storage = Storage::new(Arc::clone(&inner.options.fs), IoMode::Buffered);
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
    let mut builder = TableBuilder::create_in(&storage, dest, &inner.options.table)?;
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
