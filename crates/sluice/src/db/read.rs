//! The read path: point lookups and iterators over memtables and every level.

use std::sync::Arc;

use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{SeqNo, ValueKind, parse_internal_key, seek_key, user_key};
use sluice_sst::merge::MergingIterator;
use sluice_sst::merge_operator;
use sluice_sst::prefix::PrefixExtractor;
use sluice_sst::range_del::Tombstones;
use sluice_sst::table::{BlockReads, Table};
use sluice_sst::ttl::{Expiry, now_secs};

use super::Db;
pub use crate::iter::DbIterator;
use crate::iter::Range;
use crate::iter::bounds::{KeyBounds, lower_bound, prefix_end, tighter, upper_bound};
use crate::iter::db_iter::ValueRules;
use crate::iter::level::LevelIter;
use crate::memtable::{Lookup, MemTable};
use crate::options::ReadOptions;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS};
use crate::version::l0_sublevels::l0_sublevels;
use crate::{Error, Result};

/// What a read needs, captured under the state lock and used without it.
struct ReadView {
    /// The sequence number to read at, taken with the sources below so that no flush or
    /// compaction between the two can drop a version this read should see.
    seq: u64,
    mem: Arc<MemTable>,
    imm: Vec<Arc<MemTable>>,
    version: Arc<Version>,
    reads: BlockReads,
    /// With a TTL: the read's time, against which values expire.
    expiry: Option<Expiry>,
    /// The range tombstones of every source, fragmented per source (empty, unallocated,
    /// when there are none): taken once per view, as `multi_get` reads many keys with one.
    tombstones: Vec<Arc<Tombstones>>,
}

impl ReadView {
    /// The newest range tombstone over `key` this read sees (0 for none): every version of
    /// `key` below it reads as deleted.
    fn floor(&self, key: &[u8]) -> SeqNo {
        self.tombstones
            .iter()
            .filter_map(|t| t.max_covering(key, self.seq))
            .max()
            .unwrap_or(0)
    }
}

impl Db {
    /// What a read with `opts` sees: the snapshot's state, or the latest.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] for a snapshot of another database (or another open
    /// of this one).
    fn read_view(&self, opts: &ReadOptions<'_>) -> Result<ReadView> {
        let st = self.tree.state.lock();
        // Checked under the state lock: a secondary's catch-up changes the version and
        // refuses older snapshots under it, so the check holds for the version taken here.
        let snapshot_seq = match opts.snapshot {
            Some(s) => Some(s.sequence_in(&self.tree.open_id)?),
            None => None,
        };
        let mut view = ReadView {
            seq: snapshot_seq.unwrap_or_else(|| self.tree.latest_seq()),
            mem: Arc::clone(&st.mem),
            imm: st.imm.iter().rev().cloned().collect(),
            version: Arc::clone(st.versions.current()),
            reads: BlockReads {
                verify_checksums: opts.verify_checksums,
                fill_cache: opts.fill_cache,
            },
            expiry: self.tree.options.ttl_secs().map(|ttl_secs| Expiry {
                ttl_secs,
                now: now_secs(),
            }),
            tombstones: Vec::new(),
        };
        drop(st);
        // Every tombstone at or below `seq` was in its memtable before `seq` was published.
        view.tombstones = std::iter::once(&view.mem)
            .chain(&view.imm)
            .filter_map(|m| m.tombstones())
            .chain(view.version.tombstones().cloned())
            .collect();
        Ok(view)
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` with explicit read options (snapshot, checksum verification, cache
    /// filling).
    pub fn get_opt(
        &self,
        opts: &ReadOptions<'_>,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.get_in(&self.read_view(opts)?, key.as_ref())
    }

    /// The values of `keys`, in their order, all read at one sequence number (the snapshot in
    /// `opts`, or the latest state when the call starts): a write that lands meanwhile is seen
    /// by none of them or, as with separate `get`s, only by some. One key's error does not
    /// fail the others.
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// let values = db.multi_get(&Default::default(), [&b"a"[..], b"b"]);
    /// # Ok::<(), sluice::Error>(())
    /// ```
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions<'_>,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let view = match self.read_view(opts) {
            Ok(view) => view,
            Err(e) => return keys.into_iter().map(|_| Err(e.duplicate())).collect(),
        };
        keys.into_iter()
            .map(|key| self.get_in(&view, key.as_ref()))
            .collect()
    }

    fn get_in(&self, view: &ReadView, key: &[u8]) -> Result<Option<Vec<u8>>> {
        // Merge operands met on the way down, newest first; empty (unallocated) for the
        // usual key without any.
        let mut operands = Vec::new();
        let found = self.find(view, key, &mut operands)?;
        let value = self.apply_operands(key, found, operands)?;
        let (Some(expiry), Some(stored)) = (view.expiry, &value) else {
            return Ok(value);
        };
        let live = expiry
            .live(stored)
            .map_err(|why| Error::corruption(&self.tree.dir, 0, why))?;
        Ok(live.map(<[u8]>::to_vec))
    }

    /// The newest visible value or tombstone of `key` (a tombstone when there is none),
    /// collecting the merge operands above it.
    fn find(&self, view: &ReadView, key: &[u8], operands: &mut Vec<Vec<u8>>) -> Result<Lookup> {
        let seq = view.seq;
        let floor = view.floor(key);
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            if let Some(found) = mem.get(key, seq, floor, operands) {
                return Ok(found);
            }
        }
        let lookup = seek_key(key, seq);
        for file in view.version.files_for_get(key) {
            let table = self.tree.table_cache.get(file)?;
            let Some((ikey, value)) = table.get_with(&lookup, view.reads)? else {
                continue;
            };
            let parsed = parse_internal_key(&ikey).ok_or_else(|| {
                Error::corruption(table.path(), 0, "table returned an unparseable key")
            })?;
            if parsed.user_key != key {
                continue;
            }
            let resolve = |encoded: &[u8]| {
                let tables = &self.tree.table_cache;
                crate::blob::resolve(tables, &view.version, key, encoded, table.path())
            };
            let found = match parsed.kind {
                _ if parsed.seq < floor => Some(Lookup::Deleted),
                ValueKind::Value => Some(Lookup::Value(value)),
                ValueKind::BlobIndex => Some(Lookup::Value(resolve(&value)?)),
                ValueKind::Deletion => Some(Lookup::Deleted),
                ValueKind::Merge => {
                    table_versions(&table, &lookup, floor, view.reads, operands, &resolve)?
                }
                ValueKind::RangeDeletion => return Err(range_deletion_in(&table)),
            };
            if let Some(found) = found {
                return Ok(found);
            }
        }
        Ok(Lookup::Deleted)
    }

    /// The value of `key` given what lies under its merge operands (`operands`, newest first).
    fn apply_operands(
        &self,
        key: &[u8],
        base: Lookup,
        operands: Vec<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>> {
        let base = match base {
            Lookup::Value(v) => Some(v),
            Lookup::Deleted => None,
        };
        if operands.is_empty() {
            return Ok(base);
        }
        let oldest_first: Vec<&[u8]> = operands.iter().rev().map(Vec::as_slice).collect();
        let operator = self.tree.options.merge_operator.as_deref();
        Ok(Some(merge_operator::resolve(
            operator,
            key,
            base.as_deref(),
            &oldest_first,
        )?))
    }

    /// A cursor over the latest state (or the snapshot in `opts`), unpositioned, within the
    /// bounds in `opts` (RocksDB's `Iterator`, rust-rocksdb's `raw_iterator`): seek, step
    /// either way, read the key and value in place. [`Db::iter`] and [`Db::range`] are the
    /// Rust iterators over it.
    pub fn raw_iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.iter_within(
            opts,
            opts.lower_bound.map(<[u8]>::to_vec),
            opts.upper_bound.map(<[u8]>::to_vec),
            None,
        )
    }

    /// An iterator within `[lower, upper)`. With `prefix` (a prefix every key in the bounds
    /// has under the table options' extractor), tables whose filter lacks it are left out.
    fn iter_within(
        &self,
        opts: &ReadOptions<'_>,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        prefix: Option<&[u8]>,
    ) -> Result<DbIterator> {
        let view = self.read_view(opts)?;
        let cache = Arc::clone(&self.tree.table_cache);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(view.mem.iter()));
        for m in &view.imm {
            children.push(Box::new(m.iter()));
        }
        let mut runs = l0_sublevels(view.version.files(0));
        runs.extend((1..NUM_LEVELS).map(|level| view.version.files(level).to_vec()));
        // One child per L0 sublevel, not per file: each sublevel is a run of disjoint files.
        for mut run in runs {
            if let (Some(prefix), Some(extractor)) =
                (prefix, self.tree.options.table.prefix_extractor.as_ref())
            {
                run = self.tables_with_prefix(run, extractor, prefix, &lower, &upper)?;
            }
            if !run.is_empty() {
                children.push(Box::new(LevelIter::new(
                    run,
                    Arc::clone(&cache),
                    view.reads,
                )));
            }
        }
        let rules = ValueRules {
            merge_operator: self.tree.options.merge_operator.clone(),
            expiry: view.expiry,
            tombstones: view.tombstones,
            tables: Arc::clone(&self.tree.table_cache),
        };
        Ok(DbIterator::new(
            MergingIterator::new(children),
            view.seq,
            (lower, upper),
            view.version,
            rules,
        ))
    }

    /// Every `(key, value)` of the latest state, in key order from either end (fjall's
    /// `iter`). As for [`Db::range`], a failure is the iterator's item.
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// for entry in db.iter() {
    ///     let (key, value) = entry?;
    /// }
    /// # Ok::<(), sluice::Error>(())
    /// ```
    pub fn iter(&self) -> Range {
        self.range(..)
    }

    /// The `(key, value)` pairs whose keys fall in `range`, in key order from either end, as
    /// `BTreeMap::range` gives them (an empty or inverted range yields nothing). Reads the
    /// latest state as of the call. A failure, opening or reading, is the iterator's item.
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// for entry in db.range("a"..="m") {
    ///     let (key, value) = entry?;
    /// }
    /// let last = db.range(..).next_back().transpose()?;
    /// # Ok::<(), sluice::Error>(())
    /// ```
    pub fn range(&self, range: impl KeyBounds) -> Range {
        self.range_opt(&ReadOptions::default(), range)
    }

    /// [`Db::range`] with read options: a snapshot, checksums, cache filling. Bounds in `opts`
    /// narrow the range further.
    pub fn range_opt(&self, opts: &ReadOptions<'_>, range: impl KeyBounds) -> Range {
        let lower = tighter(
            lower_bound(range.start()),
            opts.lower_bound.map(<[u8]>::to_vec),
            std::cmp::max,
        );
        let upper = tighter(
            upper_bound(range.end()),
            opts.upper_bound.map(<[u8]>::to_vec),
            std::cmp::min,
        );
        Range::new(self.iter_within(opts, lower, upper, None))
    }

    /// Every `(key, value)` whose key starts with `prefix`, in key order from either end.
    ///
    /// With a [`TableOptions::prefix_extractor`](crate::TableOptions::prefix_extractor) whose
    /// prefix length `prefix` reaches, tables whose bloom filter shows they hold no key with
    /// that prefix are not read at all ([`crate::Metrics::prefix_filter_skips`] counts them).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Range {
        self.prefix_opt(&ReadOptions::default(), prefix)
    }

    /// [`Db::prefix`] with read options. Bounds in `opts` narrow the range further.
    pub fn prefix_opt(&self, opts: &ReadOptions<'_>, prefix: impl AsRef<[u8]>) -> Range {
        let prefix = prefix.as_ref();
        let filter_prefix = self
            .tree
            .options
            .table
            .prefix_extractor
            .and_then(|e| e.scan_prefix(prefix).map(<[u8]>::len))
            .map(|n| &prefix[..n]);
        let lower = tighter(
            Some(prefix.to_vec()),
            opts.lower_bound.map(<[u8]>::to_vec),
            std::cmp::max,
        );
        let upper = tighter(
            prefix_end(prefix),
            opts.upper_bound.map(<[u8]>::to_vec),
            std::cmp::min,
        );
        Range::new(self.iter_within(opts, lower, upper, filter_prefix))
    }

    /// The files of `run` that overlap `[lower, upper)` and whose filter may hold `prefix`.
    fn tables_with_prefix(
        &self,
        run: Vec<Arc<FileMetaData>>,
        extractor: &PrefixExtractor,
        prefix: &[u8],
        lower: &Option<Vec<u8>>,
        upper: &Option<Vec<u8>>,
    ) -> Result<Vec<Arc<FileMetaData>>> {
        let mut kept = Vec::with_capacity(run.len());
        for file in run {
            let (smallest, largest) = (user_key(&file.smallest), user_key(&file.largest));
            let outside = lower.as_deref().is_some_and(|l| largest < l)
                || upper.as_deref().is_some_and(|u| smallest >= u);
            if outside {
                continue;
            }
            if self
                .tree
                .table_cache
                .get(&file)?
                .may_contain_prefix(extractor, prefix)
            {
                kept.push(file);
            } else {
                self.tree
                    .counters
                    .prefix_skips
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        Ok(kept)
    }
}

/// Walks `table`'s versions of `lookup`'s user key visible at its sequence number, the newest
/// a merge operand: appends the operands to `operands` and returns the value or tombstone under
/// them, or `None` when the table holds nothing more of the key.
fn table_versions(
    table: &Arc<Table>,
    lookup: &[u8],
    floor: SeqNo,
    reads: BlockReads,
    operands: &mut Vec<Vec<u8>>,
    resolve_blob: &dyn Fn(&[u8]) -> Result<Vec<u8>>,
) -> Result<Option<Lookup>> {
    let key = sluice_sst::key::user_key(lookup);
    let mut it = table.iter_with(reads);
    it.seek(lookup)?;
    while it.valid() {
        let parsed = parse_internal_key(it.key()).ok_or_else(|| {
            Error::corruption(table.path(), 0, "table returned an unparseable key")
        })?;
        if parsed.user_key != key {
            return Ok(None);
        }
        match parsed.kind {
            _ if parsed.seq < floor => return Ok(Some(Lookup::Deleted)),
            ValueKind::Value => return Ok(Some(Lookup::Value(it.value().to_vec()))),
            ValueKind::BlobIndex => return Ok(Some(Lookup::Value(resolve_blob(it.value())?))),
            ValueKind::Deletion => return Ok(Some(Lookup::Deleted)),
            ValueKind::Merge => operands.push(it.value().to_vec()),
            ValueKind::RangeDeletion => return Err(range_deletion_in(table)),
        }
        it.next()?;
    }
    Ok(None)
}

/// The error for a range tombstone among a table's point entries, which only damage puts there.
fn range_deletion_in(table: &Table) -> Error {
    Error::corruption(table.path(), 0, "a range tombstone among point entries")
}
