//! The input end of a compaction: one sorted run of tables read block by block through the
//! step functions S1..S3, so their time is charged to the right step.
//!
//! Unlike a table iterator used for reads, this one bypasses the block cache (a compaction
//! reads each block once; caching it would only evict blocks readers need) and always verifies
//! checksums. It only moves forward.

use std::sync::Arc;

use crate::block::BlockIter;
use crate::format::BlockHandle;
use crate::iter::InternalIterator;
use crate::key::compare_internal;
use crate::table::Table;
use crate::{Error, Result};

use super::steps::{StepTimes, decompress_block, read_block, verify_block};

/// A forward-only cursor over a sorted run of non-overlapping tables (or a single L0 table).
pub struct RunIter {
    tables: Vec<Arc<Table>>,
    times: Arc<StepTimes>,
    /// Index of the table being read; `tables.len()` when exhausted.
    table_index: usize,
    /// The index entries of the current table.
    blocks: Vec<(Vec<u8>, BlockHandle)>,
    /// Index into `blocks` of the block `current` reads.
    block_index: usize,
    current: Option<BlockIter>,
}

impl RunIter {
    /// A cursor over `tables`, which must be sorted and non-overlapping.
    pub fn new(tables: Vec<Arc<Table>>, times: Arc<StepTimes>) -> Self {
        let table_index = tables.len();
        RunIter {
            tables,
            times,
            table_index,
            blocks: Vec::new(),
            block_index: 0,
            current: None,
        }
    }

    fn open_table(&mut self, index: usize) {
        self.table_index = index;
        self.blocks = self
            .tables
            .get(index)
            .map(|t| t.index_entries())
            .unwrap_or_default();
        self.block_index = 0;
        self.current = None;
    }

    /// S1..S3 for block `block_index` of the current table.
    fn load_block(&mut self) -> Result<()> {
        let (Some(table), Some((_, handle))) = (
            self.tables.get(self.table_index),
            self.blocks.get(self.block_index),
        ) else {
            self.current = None;
            return Ok(());
        };
        let raw = read_block(table, *handle, &self.times)?;
        verify_block(&raw, &self.times)?;
        let block = decompress_block(raw, &self.times)?;
        self.current = Some(block.iter());
        Ok(())
    }

    /// Moves to the next non-empty block, across tables, positioned on its first entry.
    fn skip_exhausted(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.block_index += 1;
            if self.block_index >= self.blocks.len() {
                self.open_table(self.table_index + 1);
            }
            if self.table_index >= self.tables.len() {
                self.current = None;
                return Ok(());
            }
            self.load_block()?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn unsupported() -> Error {
        Error::InvalidArgument("compaction input streams only move forward".into())
    }
}

impl InternalIterator for RunIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open_table(0);
        if self.tables.is_empty() {
            return Ok(());
        }
        self.load_block()?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_exhausted()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let index = self
            .tables
            .partition_point(|t| compare_internal(&t.properties().largest_key, target).is_lt());
        self.open_table(index);
        if index >= self.tables.len() {
            return Ok(());
        }
        self.block_index = self
            .blocks
            .partition_point(|(last, _)| compare_internal(last, target).is_lt());
        if self.block_index >= self.blocks.len() {
            self.open_table(index + 1);
            return self.seek_to_first_of_current();
        }
        self.load_block()?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_exhausted()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::unsupported())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_exhausted()
    }

    fn prev(&mut self) -> Result<()> {
        Err(Self::unsupported())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.key()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.value()).unwrap_or_default()
    }
}

impl RunIter {
    fn seek_to_first_of_current(&mut self) -> Result<()> {
        if self.table_index >= self.tables.len() {
            self.current = None;
            return Ok(());
        }
        self.load_block()?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_exhausted()
    }
}
