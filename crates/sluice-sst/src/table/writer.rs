//! S7: appends encoded data blocks to the file, then writes the filter, properties and index
//! blocks and the footer, and syncs.
//!
//! ```text
//! data blocks (with trailers) | filter | properties | index | footer (64 bytes)
//! index entry = key: the data block's last internal key
//!               value: BlockHandle (varint64 offset, varint64 size excluding trailer)
//! ```
//!
//! The index block is read once, whole, when the table opens and decoded into an array, so
//! nothing seeks inside it: it is prefix-compressed like a data block (restart interval
//! [`INDEX_RESTART_INTERVAL`]) and compressed with the data blocks' compression, as RocksDB
//! does by default. On 16-byte keys that makes it about a third of the size it was with every
//! key whole and uncompressed. The filter and properties blocks are stored uncompressed.
//!
//! All file-level state is assembled here from the [`super::BlockMeta`] of the blocks appended,
//! so whoever appends decides where files are cut and the block builders need not know:
//!
//! ```text
//! smallest_key = first block's first_key      largest_key = last block's last_key
//! filter       = every block's filter_hashes in order, a hash equal to the one before dropped
//! properties   = sums of the blocks' counts and histograms, min/max of their seqs,
//!                plus num_data_blocks, data_bytes, filter_bytes, index_bytes, compression
//! ```
//!
//! Dropping the repeated hash keeps the filter identical to one built key by key over the whole
//! table (a user key whose versions span two blocks appears in both blocks' hashes).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::encode::compress_block;
use super::{EncodedBlock, TableIdentity, TableOptions};
use crate::block::BlockBuilder;
use crate::compression::CompressionType;
use crate::filter::BloomFilterBuilder;
use crate::format::{
    BLOCK_TRAILER_LEN, BlockHandle, FORMAT_VERSION, Footer, block_trailer, footer_checksum,
};
use crate::fs::{FileSystem, Storage, WriteFile};
use crate::properties::TableProperties;
use crate::{IoContext, Result};

/// What a finished table holds; the version edit that installs it is built from this.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableSummary {
    /// Final size of the file.
    pub file_size: u64,
    /// Smallest internal key (empty for an empty table).
    pub smallest_key: Vec<u8>,
    /// Largest internal key (empty for an empty table).
    pub largest_key: Vec<u8>,
    /// Everything recorded in the properties block.
    pub properties: TableProperties,
    /// CRC32C of every byte of the file, in order (RocksDB's `file_checksum` with its crc32c
    /// generator). Computed as the bytes are appended, so it costs no extra read; a reader of
    /// the whole file (a host checking a worker's output) can compare against it.
    pub file_checksum: u32,
    /// The footer's and the properties block's checksums: what every open of the table
    /// compares with the MANIFEST ([`TableIdentity`]).
    pub identity: TableIdentity,
}

/// Entries between restart points of the index block (see the module docs).
pub const INDEX_RESTART_INTERVAL: usize = 16;

/// Writes one table file: data blocks as they come, meta blocks at the end.
///
/// Not thread-safe; `Send`, so a writer thread may own it. After any error the file is
/// unusable: call [`TableFileWriter::abandon`].
#[derive(Debug)]
pub struct TableFileWriter {
    path: PathBuf,
    file: Box<dyn WriteFile>,
    /// Where the file lives, to delete it when abandoned.
    fs: Arc<dyn FileSystem>,
    /// Bytes appended so far (the offset of the next block).
    offset: u64,
    /// CRC32C of the bytes appended so far.
    checksum: u32,
    index: BlockBuilder,
    handle_buf: Vec<u8>,
    /// How the index block is compressed: the data blocks' type and zstd level.
    index_compression: (CompressionType, i32),
    /// The filter's hashes so far; `None` when the table has no filter.
    filter: Option<BloomFilterBuilder>,
    /// Properties of the blocks appended so far (the meta-block sizes are set by `finish`).
    props: TableProperties,
}

impl TableFileWriter {
    /// Creates (or truncates) the file at `path` in `storage` for a table written with `opts`
    /// (the filter bits per key, the compression and the prefix extractor recorded in the
    /// properties matter here).
    ///
    /// REQUIRES: `opts` passed [`TableOptions::validate`].
    pub fn create(storage: &Storage, path: &Path, opts: &TableOptions) -> Result<Self> {
        let file = storage.create(path).with_path(path)?;
        Ok(TableFileWriter {
            path: path.to_path_buf(),
            file,
            fs: Arc::clone(&storage.fs),
            offset: 0,
            checksum: 0,
            index: BlockBuilder::new(INDEX_RESTART_INTERVAL),
            handle_buf: Vec::with_capacity(BlockHandle::MAX_ENCODED_LEN),
            index_compression: (opts.compression, opts.zstd_level),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key)),
            props: TableProperties {
                compression: opts.compression,
                // Only a filter can hold the prefixes.
                prefix_extractor: opts
                    .prefix_extractor
                    .filter(|_| opts.bloom_bits_per_key > 0)
                    .map(|e| e.name()),
                ..TableProperties::default()
            },
        })
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a data block, records its index entry and folds its meta into the filter and
    /// properties.
    ///
    /// REQUIRES: blocks arrive in key order (each block's `first_key` above the previous
    /// block's `last_key`) and are not empty; checked in debug builds.
    pub fn append_data_block(&mut self, block: &EncodedBlock) -> Result<()> {
        let meta = &block.meta;
        debug_assert!(
            block.bytes.len() >= BLOCK_TRAILER_LEN,
            "block has no trailer"
        );
        debug_assert!(
            self.index.is_empty()
                || crate::key::compare_internal(self.index.last_key(), &meta.first_key).is_lt(),
            "data blocks must be appended in key order"
        );
        let handle = BlockHandle::new(
            self.offset,
            block.bytes.len().saturating_sub(BLOCK_TRAILER_LEN) as u64,
        );
        self.append(&block.bytes)?;
        self.handle_buf.clear();
        handle.encode_to(&mut self.handle_buf);
        self.index.add(&meta.last_key, &self.handle_buf);
        if let Some(f) = self.filter.as_mut() {
            for &h in &meta.filter_hashes {
                f.add_hash(h);
            }
        }
        self.props.add_block(meta);
        self.props.num_data_blocks += 1;
        self.props.data_bytes += block.bytes.len() as u64;
        Ok(())
    }

    /// Records `nonce` in the properties as the offloaded task the table answers (property
    /// `task_nonce`), so that the host can refuse the table as an answer to any other task.
    pub fn set_task_nonce(&mut self, nonce: u64) {
        self.props.task_nonce = Some(nonce);
    }

    /// Bytes appended so far.
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Entries in the blocks appended so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the filter, properties and index blocks and the footer, and fsyncs the file.
    /// Syncing the directory entry is the caller's job (it happens before the version edit that
    /// names the file is committed). With no block appended this writes a valid empty table.
    ///
    /// On failure the file is deleted (best effort, as [`TableFileWriter::abandon`]): nobody
    /// holds the writer any more to do it.
    pub fn finish(mut self) -> Result<TableSummary> {
        match self.write_meta_and_sync() {
            Ok(summary) => Ok(summary),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    fn write_meta_and_sync(&mut self) -> Result<TableSummary> {
        let filter = match self.filter.take() {
            Some(f) => Some(self.write_block(&f.finish(), CompressionType::None)?.0),
            None => None,
        };
        let (ctype, level) = self.index_compression;
        let mut index_contents = Vec::new();
        let index_type = compress_block(&self.index.finish(0), ctype, level, &mut index_contents);
        let mut props = std::mem::take(&mut self.props);
        props.filter_bytes = filter.map_or(0, |h| h.size + BLOCK_TRAILER_LEN as u64);
        props.index_bytes = (index_contents.len() + BLOCK_TRAILER_LEN) as u64;
        let props_bytes = props.encode();
        let (properties, properties_checksum) =
            self.write_block(&props_bytes, CompressionType::None)?;
        let (index, _) = self.write_block(&index_contents, index_type)?;
        let footer = Footer {
            index,
            filter,
            properties,
            format_version: FORMAT_VERSION,
        };
        let footer_bytes = footer.encode();
        self.append(&footer_bytes)?;
        // Durable once this returns; if we crash before, the file is not yet referenced by any
        // version and is deleted as garbage on recovery.
        self.file.sync().with_path(&self.path)?;
        Ok(TableSummary {
            file_size: self.offset,
            smallest_key: props.smallest_key.clone(),
            largest_key: props.largest_key.clone(),
            properties: props,
            file_checksum: self.checksum,
            identity: TableIdentity::new(footer_checksum(&footer_bytes), properties_checksum),
        })
    }

    /// Appends `bytes` to the file, advancing the offset and the file checksum.
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.append(bytes).with_path(&self.path)?;
        self.offset += bytes.len() as u64;
        self.checksum = crc32c::crc32c_append(self.checksum, bytes);
        Ok(())
    }

    /// Writes `stored` (contents already compressed as `ctype` says) with its trailer; returns
    /// where it went and the trailer's checksum (the properties block's is part of the
    /// table's identity).
    fn write_block(&mut self, stored: &[u8], ctype: CompressionType) -> Result<(BlockHandle, u32)> {
        let handle = BlockHandle::new(self.offset, stored.len() as u64);
        let trailer = block_trailer(stored, ctype);
        self.append(stored)?;
        self.append(&trailer)?;
        let checksum = u32::from_le_bytes([trailer[1], trailer[2], trailer[3], trailer[4]]);
        Ok((handle, checksum))
    }

    /// Drops buffered data and deletes the file, best effort: a file left behind is not named by
    /// any version and is removed as garbage when the database next opens.
    pub fn abandon(self) {
        drop(self.file);
        let _ = self.fs.remove(&self.path);
    }
}
