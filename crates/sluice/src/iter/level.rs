//! A level iterator: one sorted run of non-overlapping files (L1+) read as a single sequence,
//! opening each table only when the cursor reaches it.

use std::sync::Arc;

use sluice_sst::iter::InternalIterator;
use sluice_sst::key::compare_internal;
use sluice_sst::table::{BlockReads, TableIter};

use crate::table_cache::TableCache;
use crate::version::edit::FileMetaData;
use sluice_sst::Result;

/// Concatenates the files of one level. REQUIRES: `files` sorted and non-overlapping.
pub struct LevelIter {
    files: Vec<Arc<FileMetaData>>,
    cache: Arc<TableCache>,
    /// Index of the file `current` reads; `files.len()` when invalid.
    index: usize,
    current: Option<TableIter>,
    /// How each table's blocks are read.
    reads: BlockReads,
}

impl LevelIter {
    /// An unpositioned iterator over `files`.
    pub fn new(files: Vec<Arc<FileMetaData>>, cache: Arc<TableCache>, reads: BlockReads) -> Self {
        let index = files.len();
        LevelIter {
            files,
            cache,
            index,
            current: None,
            reads,
        }
    }

    fn open(&mut self, index: usize) -> Result<()> {
        self.index = index;
        self.current = match self.files.get(index) {
            Some(f) => Some(self.cache.get(f)?.iter_with(self.reads)),
            None => None,
        };
        Ok(())
    }

    fn skip_empty_forward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            self.open(self.index + 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first()?;
            }
        }
        Ok(())
    }

    fn skip_empty_backward(&mut self) -> Result<()> {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.index == 0 {
                self.current = None;
                self.index = self.files.len();
                return Ok(());
            }
            self.open(self.index - 1)?;
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last()?;
            }
        }
        Ok(())
    }
}

impl InternalIterator for LevelIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.open(0)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first()?;
        }
        self.skip_empty_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let Some(last) = self.files.len().checked_sub(1) else {
            self.current = None;
            return Ok(());
        };
        self.open(last)?;
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last()?;
        }
        self.skip_empty_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let index = self
            .files
            .partition_point(|f| compare_internal(&f.largest, target).is_lt());
        self.open(index)?;
        if let Some(c) = self.current.as_mut() {
            c.seek(target)?;
        }
        self.skip_empty_forward()
    }

    fn next(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.next()?;
        }
        self.skip_empty_forward()
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(c) = self.current.as_mut() {
            c.prev()?;
        }
        self.skip_empty_backward()
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.key()).unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current.as_ref().map(|c| c.value()).unwrap_or_default()
    }
}
