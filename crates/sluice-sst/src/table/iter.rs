//! The two-level table iterator: the pinned index picks a data block, a [`BlockIter`] walks it.
//! Blocks come through [`Table::read_block`], so they are cached and verified per the table's
//! read options.

use std::sync::Arc;

use super::{BlockReads, Table};
use crate::block::BlockIter;
use crate::{InternalIterator, Result};

/// Iterates a whole table forward or backward. Holds the table (and the current block) alive.
/// After a movement method returns an error the iterator is invalid; it can be re-positioned.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    /// The data block `data` reads; meaningless while `data` is `None`.
    block_index: usize,
    /// Cursor in the current block; `None` when the iterator is invalid.
    data: Option<BlockIter>,
    /// A finished cursor kept for its key buffer, so moving between blocks does not allocate.
    spare: Option<BlockIter>,
    /// How blocks are loaded.
    reads: BlockReads,
}

impl TableIter {
    /// An unpositioned iterator over `table`.
    pub fn new(table: Arc<Table>, reads: BlockReads) -> Self {
        TableIter {
            table,
            block_index: 0,
            data: None,
            spare: None,
            reads,
        }
    }

    /// The table being iterated.
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }

    fn invalidate(&mut self) {
        if let Some(d) = self.data.take() {
            self.spare = Some(d);
        }
    }

    /// Points `data` at block `index` (unpositioned), reusing the loaded block when it is the
    /// same one. Returns false when `index` is out of range.
    fn load(&mut self, index: usize) -> Result<bool> {
        if self.data.is_some() && self.block_index == index {
            return Ok(true);
        }
        self.invalidate();
        let Some((_, handle)) = self.table.index_entry(index) else {
            return Ok(false);
        };
        let block = self.table.read_block_with(handle, self.reads)?;
        let iter = match self.spare.take() {
            Some(mut it) => {
                it.reset(block);
                it
            }
            None => BlockIter::new(block),
        };
        self.block_index = index;
        self.data = Some(iter);
        Ok(true)
    }

    /// Runs `f` on the current block cursor; on error the iterator becomes invalid.
    fn with_data(&mut self, f: impl FnOnce(&mut BlockIter) -> Result<()>) -> Result<()> {
        let Some(d) = self.data.as_mut() else {
            return Ok(());
        };
        let r = f(d);
        if r.is_err() {
            self.invalidate();
        }
        r
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(|d| d.valid())
    }

    /// Moves forward over exhausted (or empty) blocks to the first entry of the next one.
    fn skip_forward(&mut self) -> Result<()> {
        while self.data.is_some() && !self.data_valid() {
            let next = self.block_index + 1;
            if !self.load_or_invalidate(next)? {
                return Ok(());
            }
            self.with_data(|d| d.seek_to_first())?;
        }
        Ok(())
    }

    /// Moves backward over exhausted (or empty) blocks to the last entry of the previous one.
    fn skip_backward(&mut self) -> Result<()> {
        while self.data.is_some() && !self.data_valid() {
            let Some(prev) = self.block_index.checked_sub(1) else {
                self.invalidate();
                return Ok(());
            };
            if !self.load_or_invalidate(prev)? {
                return Ok(());
            }
            self.with_data(|d| d.seek_to_last())?;
        }
        Ok(())
    }

    fn load_or_invalidate(&mut self, index: usize) -> Result<bool> {
        match self.load(index) {
            Ok(true) => Ok(true),
            Ok(false) => {
                self.invalidate();
                Ok(false)
            }
            Err(e) => {
                self.invalidate();
                Err(e)
            }
        }
    }
}

impl InternalIterator for TableIter {
    #[inline]
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if self.load_or_invalidate(0)? {
            self.with_data(|d| d.seek_to_first())?;
        }
        self.skip_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.table.num_data_blocks().checked_sub(1) else {
            self.invalidate();
            return Ok(());
        };
        if self.load_or_invalidate(last)? {
            self.with_data(|d| d.seek_to_last())?;
        }
        self.skip_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let index = self.table.find_block(target);
        if self.load_or_invalidate(index)? {
            self.with_data(|d| d.seek(target))?;
        }
        self.skip_forward()
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "next() on an invalid TableIter");
        self.with_data(|d| d.next())?;
        self.skip_forward()
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "prev() on an invalid TableIter");
        self.with_data(|d| d.prev())?;
        self.skip_backward()
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.key())
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }
}
