//! Table files (SSTables): writing them as separately schedulable steps, and reading them.
//!
//! ```text
//! [data block 0][trailer] ... [data block n-1][trailer]
//! [filter block][trailer]        (absent when bloom_bits_per_key = 0)
//! [properties block][trailer]
//! [index block][trailer]
//! [footer: 64 bytes]
//! ```
//!
//! Each block is followed by a 5-byte trailer (compression type, masked CRC32C); see
//! [`crate::format`] and `docs/format/sst.md` for the bytes.
//!
//! The write side is split along the seven compaction steps so that executors can run them on
//! different threads:
//!
//! | step | function | input -> output |
//! |---|---|---|
//! | S4 build | [`TableContentBuilder::add`], [`TableContentBuilder::take_sealed`] | entries -> [`SealedBlock`] (contents + [`BlockMeta`]) |
//! | S5 compress | [`compress_block`] | contents -> compressed bytes |
//! | S6 re-checksum | [`seal_block_trailer`] | compressed bytes -> [`EncodedBlock`] |
//! | S7 write | [`TableFileWriter::append_data_block`], [`TableFileWriter::finish`] | -> file |
//!
//! Each block carries its own [`BlockMeta`] (key range, filter hashes, entry statistics) through
//! S5 and S6, and the S7 writer assembles the file's filter, properties and key range from the
//! blocks it is given: S4..S6 never need to know which file a block ends up in, so one writer
//! may cut files anywhere between blocks built on different threads.
//!
//! The read side likewise: S1 [`read_raw_block`], S2 [`verify_raw_block`], S3
//! [`decompress_raw_block`]. [`TableBuilder`] composes the write steps on one thread (tools and tests);
//! [`Table`] serves reads with a pinned index and filter and an optional shared block cache.
//!
//! Index entries use each data block's exact last key (not a shortened separator): the write
//! steps never see the next block's first key when they record an index entry, and exact keys
//! let compaction planners and decoders know each block's true key range.

mod builder;
mod content;
mod encode;
mod identity;
mod iter;
mod meta;
mod open_many;
mod read;
mod reader;
mod writer;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod write_tests;

pub use builder::TableBuilder;
pub use content::{SealedBlock, TableContentBuilder};
pub use encode::{EncodedBlock, compress_block, encode_block, seal_block_trailer};
pub use identity::TableIdentity;
pub use iter::TableIter;
pub use meta::BlockMeta;
pub use open_many::{REMOTE_OPENS_AT_ONCE, open_in_parallel};
pub use read::{RawBlock, decompress_raw_block, read_raw_block, read_raw_blocks, verify_raw_block};
pub use reader::{BlockReads, BloomCounters, BloomStats, Table, TableReadOptions, VerifyReport};
pub use writer::{TableFileWriter, TableSummary};

use crate::compression::{CompressionType, DEFAULT_ZSTD_LEVEL};
use crate::filter::MAX_BITS_PER_KEY;
use crate::format::MAX_TABLE_BLOCK_SIZE_BYTES;
use crate::prefix::PrefixExtractor;
use crate::{Error, Result};

/// How tables are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableOptions {
    /// Target uncompressed size of a data block; a block is sealed once it reaches this size.
    pub block_size: usize,
    /// Entries between restart points in data blocks.
    pub restart_interval: usize,
    /// Compression for data blocks (a block that does not shrink by 1/8 is stored uncompressed).
    pub compression: CompressionType,
    /// zstd level, used when `compression` is zstd.
    pub zstd_level: i32,
    /// Bloom filter bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Also records each key's prefix in the bloom filter, so that a scan over one prefix
    /// skips tables without it ([`crate::prefix`]); `None` records whole keys only.
    pub prefix_extractor: Option<PrefixExtractor>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            restart_interval: 16,
            compression: CompressionType::Lz4,
            zstd_level: DEFAULT_ZSTD_LEVEL,
            bloom_bits_per_key: 10,
            prefix_extractor: None,
        }
    }
}

impl TableOptions {
    /// Checks every field is in range; [`TableBuilder::create`] calls this.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::InvalidArgument(what));
        if !(1..=MAX_TABLE_BLOCK_SIZE_BYTES).contains(&self.block_size) {
            return bad(format!(
                "block_size {} outside 1..={MAX_TABLE_BLOCK_SIZE_BYTES}",
                self.block_size
            ));
        }
        if self.restart_interval == 0 || self.restart_interval > u16::MAX as usize {
            return bad(format!(
                "restart_interval {} outside 1..=65535",
                self.restart_interval
            ));
        }
        if !zstd::compression_level_range().contains(&self.zstd_level) {
            return bad(format!(
                "zstd_level {} is not a valid zstd level",
                self.zstd_level
            ));
        }
        if self.bloom_bits_per_key > MAX_BITS_PER_KEY {
            return bad(format!(
                "bloom_bits_per_key {} above {MAX_BITS_PER_KEY}",
                self.bloom_bits_per_key
            ));
        }
        if let Some(extractor) = &self.prefix_extractor {
            extractor.validate().map_err(Error::InvalidArgument)?;
        }
        Ok(())
    }
}
