//! Blocks: the unit of I/O, compression, checksumming and caching.
//!
//! A block is a run of prefix-compressed entries followed by a restart array (the layout is in
//! `builder.rs`'s header and `docs/format/sst.md`). Data blocks and the index block share this
//! format; their keys are internal keys compared with [`crate::key::compare_internal`].
//!
//! [`Block`] owns the uncompressed bytes and checks the restart array once, when it is built, so
//! iterators can trust it; entries are checked lazily as iterators decode them.

mod builder;
mod iter;

use std::path::Path;
use std::sync::Arc;

pub use builder::BlockBuilder;
pub use iter::BlockIter;

use crate::coding::get_fixed32;
use crate::{Error, Result};

/// Memory a cached block costs beyond its bytes (the struct, the `Arc`, the cache slot).
const BLOCK_OVERHEAD_BYTES: usize = 96;

/// An immutable, decompressed block whose restart array has been validated.
///
/// Invariants established by [`Block::new`]: `num_restarts >= 1`; the restart array fits in the
/// block; restart offsets start at 0 and strictly increase, and each is below `restarts_offset`
/// (except the single restart of an empty block, which equals it).
pub struct Block {
    data: Vec<u8>,
    /// Where the entries end and the restart array begins.
    restarts_offset: usize,
    num_restarts: usize,
    /// The file the block came from and its offset there, for error messages.
    file: Arc<Path>,
    offset: u64,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("file", &self.file)
            .field("offset", &self.offset)
            .field("len", &self.data.len())
            .field("num_restarts", &self.num_restarts)
            .finish()
    }
}

impl Block {
    /// Wraps decompressed block bytes read from `file` at `offset` (the block handle's offset),
    /// validating the restart array.
    pub fn new(data: Vec<u8>, file: Arc<Path>, offset: u64) -> Result<Block> {
        let corrupt = |reason: String| Error::corruption(&*file, offset, reason);
        let len = data.len();
        let Some(count_at) = len.checked_sub(4) else {
            return Err(corrupt(format!(
                "block of {len} bytes is too short for a restart count"
            )));
        };
        let num_restarts =
            get_fixed32(data.get(count_at..).unwrap_or_default()).unwrap_or(0) as usize;
        if num_restarts == 0 || num_restarts > count_at / 4 {
            return Err(corrupt(format!(
                "block of {len} bytes claims {num_restarts} restart points"
            )));
        }
        let restarts_offset = count_at - 4 * num_restarts;
        let mut prev: Option<usize> = None;
        for i in 0..num_restarts {
            let at = restarts_offset + 4 * i;
            let r = get_fixed32(data.get(at..).unwrap_or_default()).unwrap_or(u32::MAX) as usize;
            let ok = match prev {
                None => r == 0,
                Some(p) => r > p && r < restarts_offset,
            } && (r < restarts_offset || (restarts_offset == 0 && num_restarts == 1));
            if !ok {
                return Err(corrupt(format!(
                    "restart point {i} is {r}: not increasing or past the entries (which end at {restarts_offset})"
                )));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            restarts_offset,
            num_restarts,
            file,
            offset,
        })
    }

    /// The decompressed bytes, entries and restart array.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// The decompressed bytes, given back (to reuse the buffer for the next block).
    pub fn into_data(self) -> Vec<u8> {
        self.data
    }

    /// Number of restart points.
    pub fn num_restarts(&self) -> usize {
        self.num_restarts
    }

    /// True when the block holds no entry.
    pub fn is_empty(&self) -> bool {
        self.restarts_offset == 0
    }

    /// The file the block was read from.
    pub fn file(&self) -> &Arc<Path> {
        &self.file
    }

    /// The block's offset in its file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Memory the block occupies, for the cache's weigher.
    pub fn charge_bytes(&self) -> usize {
        self.data.capacity() + BLOCK_OVERHEAD_BYTES
    }

    /// A new iterator over the block; it starts unpositioned.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }

    /// Offset of restart point `i`. REQUIRES: `i < num_restarts` (validated at construction).
    #[inline]
    fn restart_point(&self, i: usize) -> usize {
        get_fixed32(
            self.data
                .get(self.restarts_offset + 4 * i..)
                .unwrap_or_default(),
        )
        .unwrap_or(0) as usize
    }

    fn corruption(&self, reason: impl Into<String>) -> Error {
        Error::corruption(&*self.file, self.offset, reason)
    }
}

#[cfg(test)]
mod tests;
