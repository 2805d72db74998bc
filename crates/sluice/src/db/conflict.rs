//! Has a key been written since a sequence number? The check a transaction's commit runs on
//! every key it tracks (RocksDB's `TransactionUtil::CheckKeyForConflicts`).
//!
//! The answer is read from every source a version newer than `since` can be in: each
//! memtable, the range tombstones, and the tables whose newest entry is newer than `since`
//! (most tables, flushed before the transaction began, are not opened). It is exact only while
//! a snapshot at or below `since` is pinned: without one, a compaction may zero the sequence
//! number of a newer version at the bottom level, or drop a newer tombstone with nothing under
//! it, and the write would no longer show. A transaction pins its start for its whole life.

use std::sync::Arc;

use sluice_sst::key::{MAX_SEQ, SeqNo, parse_internal_key, seek_key};
use sluice_sst::table::BlockReads;

use super::Tree;
use crate::{Error, Result};

impl Tree {
    /// True when `key` has a version (a value, tombstone or merge operand) or a range tombstone
    /// over it with a sequence number above `since`. See the module docs for what must be
    /// pinned.
    pub(crate) fn written_since(&self, key: &[u8], since: SeqNo) -> Result<bool> {
        let st = self.state.lock();
        let mems: Vec<_> = std::iter::once(&st.mem)
            .chain(&st.imm)
            .map(Arc::clone)
            .collect();
        let version = Arc::clone(st.versions.current());
        drop(st);
        let newer = |seq: Option<SeqNo>| seq.is_some_and(|seq| seq > since);
        for mem in &mems {
            let covered = mem.tombstones().and_then(|t| t.max_covering(key, MAX_SEQ));
            if newer(mem.newest_seq(key)) || newer(covered) {
                return Ok(true);
            }
        }
        if newer(
            version
                .tombstones()
                .and_then(|t| t.max_covering(key, MAX_SEQ)),
        ) {
            return Ok(true);
        }
        let lookup = seek_key(key, MAX_SEQ);
        for file in version.files_for_get(key) {
            // A version above `since` is in a table whose newest entry is above it too.
            if file.largest_seq <= since {
                continue;
            }
            let table = self.table_cache.get(file)?;
            let Some((ikey, _)) = table.get_with(&lookup, BlockReads::default())? else {
                continue;
            };
            let parsed = parse_internal_key(&ikey).ok_or_else(|| {
                Error::corruption(table.path(), 0, "table returned an unparseable key")
            })?;
            if parsed.user_key == key && parsed.seq > since {
                return Ok(true);
            }
        }
        Ok(false)
    }
}
