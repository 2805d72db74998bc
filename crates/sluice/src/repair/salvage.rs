//! Reading what can be read: whole tables, the good blocks of damaged ones, and the records
//! of damaged WALs. Every byte left behind is reported as a [`DroppedRange`].

use std::path::Path;
use std::sync::Arc;

use sluice_sst::fs::Storage;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::parse_internal_key;
use sluice_sst::table::{Table, TableReadOptions};

use super::LostRange;
use crate::memtable::MemTable;
use crate::wal::DroppedRange;
use crate::{Error, Result};

/// What reading one table file gave.
pub(super) enum TableSalvage {
    /// Every block verified: the table is merged as it is.
    Whole(Arc<Table>),
    /// Some data blocks are damaged: the entries of the others, and what was lost (the
    /// bytes, and the key ranges).
    Partial {
        entries: Box<MemTable>,
        dropped: Vec<DroppedRange>,
        lost: Vec<LostRange>,
    },
    /// Not even the footer, index or properties could be read.
    Unreadable(Error),
}

/// Opens and verifies the table at `path`; if a data block is damaged, keeps the entries of
/// every block that checks out.
/// The table is read through `storage`.
pub(super) fn salvage_table(path: &Path, number: u64, storage: Storage) -> TableSalvage {
    let opts = TableReadOptions {
        load_filter: false,
        storage,
        ..TableReadOptions::default()
    };
    let table = match Table::open(path, number, opts) {
        Ok(table) => table,
        Err(e) => return TableSalvage::Unreadable(e.into()),
    };
    if table.verify_all().is_ok() {
        return TableSalvage::Whole(table);
    }
    let entries = Box::new(MemTable::new(0));
    let mut dropped = Vec::new();
    let mut bad = Vec::new();
    for i in 0..table.num_data_blocks() {
        let Some((_, handle)) = table.index_entry(i) else {
            break;
        };
        if let Err(e) = copy_block(&table, handle, &entries) {
            dropped.push(DroppedRange {
                file: path.to_path_buf(),
                offset: handle.offset,
                bytes: handle.size,
                reason: format!("data block not salvaged: {e}"),
            });
            bad.push(i);
        }
    }
    let lost = LostRange::of_blocks(&table, &bad);
    TableSalvage::Partial {
        entries,
        dropped,
        lost,
    }
}

/// Adds every entry of one data block to `mem`. A block is taken whole or not at all: an
/// entry that does not decode fails it before anything is added.
fn copy_block(
    table: &Table,
    handle: sluice_sst::format::BlockHandle,
    mem: &MemTable,
) -> Result<()> {
    let block = table.read_block(handle)?;
    let mut it = block.iter();
    it.seek_to_first()?;
    let mut entries = Vec::new();
    while it.valid() {
        let key = parse_internal_key(it.key()).ok_or_else(|| {
            Error::corruption(table.path(), handle.offset, "entry with a bad internal key")
        })?;
        entries.push((
            key.seq,
            key.kind,
            key.user_key.to_vec(),
            it.value().to_vec(),
        ));
        it.next()?;
    }
    for (seq, kind, key, value) in entries {
        mem.add(seq, kind, &key, &value);
    }
    Ok(())
}
