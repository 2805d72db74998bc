//! The read path: point lookups and iterators over memtables and every level.

use std::sync::Arc;

use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{ValueKind, parse_internal_key, seek_key};
use sluice_sst::merge::MergingIterator;

use super::Db;
pub use crate::iter::DbIterator;
use crate::iter::level::LevelIter;
use crate::memtable::{Lookup, MemTable};
use crate::options::ReadOptions;
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;
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
}

impl Db {
    fn read_view(&self, opts: &ReadOptions<'_>) -> ReadView {
        let st = self.inner.state.lock();
        ReadView {
            seq: opts
                .snapshot
                .map_or_else(|| self.inner.latest_seq(), |s| s.sequence()),
            mem: Arc::clone(&st.mem),
            imm: st.imm.iter().rev().cloned().collect(),
            version: Arc::clone(st.versions.current()),
        }
    }

    /// The value of `key`, or `None` if it is absent or deleted.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// The value of `key` with explicit read options (snapshot, checksum verification).
    pub fn get_opt(&self, opts: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let view = self.read_view(opts);
        let seq = view.seq;
        for mem in std::iter::once(&view.mem).chain(&view.imm) {
            match mem.get(key, seq) {
                Some(Lookup::Value(v)) => return Ok(Some(v)),
                Some(Lookup::Deleted) => return Ok(None),
                None => {}
            }
        }
        let lookup = seek_key(key, seq);
        for file in view.version.files_for_get(key) {
            let table = self.inner.table_cache.get(file)?;
            let Some((ikey, value)) = table.get(&lookup)? else {
                continue;
            };
            let parsed = parse_internal_key(&ikey).ok_or_else(|| {
                Error::corruption(table.path(), 0, "table returned an unparseable key")
            })?;
            if parsed.user_key != key {
                continue;
            }
            return Ok(match parsed.kind {
                ValueKind::Value => Some(value),
                ValueKind::Deletion => None,
            });
        }
        Ok(None)
    }

    /// An iterator over the latest state (or the snapshot in `opts`), unpositioned.
    pub fn iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        let view = self.read_view(opts);
        let seq = view.seq;
        let cache = Arc::clone(&self.inner.table_cache);
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        children.push(Box::new(view.mem.iter()));
        for m in &view.imm {
            children.push(Box::new(m.iter()));
        }
        // One child per L0 sublevel, not per file: each sublevel is a run of disjoint files.
        for sublevel in l0_sublevels(view.version.files(0)) {
            children.push(Box::new(LevelIter::new(sublevel, Arc::clone(&cache))));
        }
        for level in 1..NUM_LEVELS {
            let files = view.version.files(level);
            if !files.is_empty() {
                children.push(Box::new(LevelIter::new(files.to_vec(), Arc::clone(&cache))));
            }
        }
        Ok(DbIterator::new(
            MergingIterator::new(children),
            seq,
            opts.lower_bound.map(<[u8]>::to_vec),
            opts.upper_bound.map(<[u8]>::to_vec),
            view.version,
        ))
    }

    /// Every `(key, value)` with `lower <= key < upper` (bounds optional), in key order.
    pub fn scan(&self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Result<crate::iter::Entries> {
        let opts = ReadOptions {
            lower_bound: lower,
            upper_bound: upper,
            ..ReadOptions::default()
        };
        Ok(self.iter(&opts)?.entries())
    }
}
