//! An iterator over decoded blocks already in memory: the input of S4 once a sub-task's blocks
//! have been read (S1), verified (S2) and decompressed (S3), possibly on another thread.

use std::sync::Arc;

use crate::Result;
use crate::block::{Block, BlockIter};
use crate::iter::InternalIterator;
use crate::key::compare_internal;

/// A forward cursor over consecutive blocks of one sorted run.
///
/// REQUIRES: the blocks are in key order and do not overlap (consecutive blocks of one table,
/// or of tables of one level).
pub struct BlockListIter {
    blocks: Vec<Arc<Block>>,
    /// Index of the block `current` reads; `blocks.len()` when exhausted.
    index: usize,
    current: Option<BlockIter>,
}

impl BlockListIter {
    /// A cursor over `blocks`, unpositioned.
    pub fn new(blocks: Vec<Arc<Block>>) -> Self {
        let index = blocks.len();
        BlockListIter {
            blocks,
            index,
            current: None,
        }
    }

    /// Moves to block `index`, and starts loading the one after it (`prefetch.rs`).
    fn open(&mut self, index: usize) {
        self.index = index;
        self.current = self.blocks.get(index).map(|b| b.iter());
        if let Some(next) = self.blocks.get(index + 1) {
            super::prefetch::block(next.data());
        }
    }

    fn skip_exhausted(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.index + 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn backward_unsupported() -> crate::Error {
        crate::Error::InvalidArgument("block list iterators only move forward".into())
    }
}

impl InternalIterator for BlockListIter {
    #[inline]
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0);
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_exhausted()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        // The first block whose last key is >= target holds the first entry >= target.
        let mut index = self.blocks.len();
        for (i, b) in self.blocks.iter().enumerate() {
            let mut it = b.iter();
            it.seek_to_last()?;
            if it.valid() && compare_internal(it.key(), target).is_ge() {
                index = i;
                break;
            }
        }
        self.open(index);
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_exhausted()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::backward_unsupported())
    }

    #[inline]
    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_exhausted()
    }

    fn prev(&mut self) -> Result<()> {
        Err(Self::backward_unsupported())
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.key()).unwrap_or_default()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.value()).unwrap_or_default()
    }
}
