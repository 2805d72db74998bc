//! An open table: footer, index, filter and properties read and checked once at open and pinned
//! in memory; data blocks read on demand through the shared block cache.
//!
//! Thread-safety: a `Table` is immutable after open and shared as `Arc<Table>`; buffered reads
//! use positioned I/O (`pread`), so any number of threads read one table without locking. (A
//! table opened for direct I/O serializes reads on its readahead window; such tables are opened
//! by one compaction for itself.) The counters are relaxed atomics.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::read::{
    adjacent_run, decompress_raw_block, decompress_raw_contents, read_raw_block_at,
    verify_and_decompress_stored, verify_raw_block,
};
use super::{BlockMeta, TableIdentity, TableIter};
use crate::block::{Block, BlockIter};
use crate::cache::BlockCache;
use crate::digest::EntryHash;
use crate::filter::BloomFilter;
use crate::format::{
    BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer, MAX_BLOCK_BYTES, footer_checksum,
};
use crate::fs::{ReadFile, Storage};
use crate::iter::InternalIterator;
use crate::key::{compare_bytes, compare_internal, trailer, user_key};
use crate::prefix::PrefixExtractor;
use crate::properties::TableProperties;
use crate::{Error, IoContext, Result};

use super::RawBlock;

/// How a table is read.
#[derive(Clone, Debug)]
pub struct TableReadOptions {
    /// Shared cache of decompressed blocks; `None` reads every block from the file.
    pub cache: Option<Arc<BlockCache>>,
    /// Verify data block checksums on every read from the file (the footer, index, filter and
    /// properties are always verified at open; compaction and `check` always verify).
    pub verify_checksums: bool,
    /// The file system the table is read from, and how.
    pub storage: Storage,
    /// Read the bloom filter at open. A table opened only to be compacted never looks a key
    /// up, so it can skip the filter block: about as many bytes as the index to read, check
    /// and keep in memory for nothing.
    pub load_filter: bool,
    /// The block cache namespace of the table's file numbers: each keyspace of a database
    /// numbers its files on its own and shares the cache under its id.
    pub cache_namespace: u32,
    /// Where the filter's [`BloomStats`] are counted: a database passes one set of counters
    /// to every table it opens, so the figures outlive tables closed and reopened. `None`
    /// counts for this table alone.
    pub bloom_counters: Option<Arc<BloomCounters>>,
}

impl Default for TableReadOptions {
    fn default() -> Self {
        TableReadOptions {
            cache_namespace: 0,
            cache: None,
            verify_checksums: true,
            storage: Storage::default(),
            load_filter: true,
            bloom_counters: None,
        }
    }
}

/// How one read (a lookup, or an iterator's block loads) treats checksums and the block cache:
/// RocksDB's per-read `verify_checksums` and `fill_cache`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockReads {
    /// Verify each data block read from the file; `None` keeps the table's
    /// [`TableReadOptions::verify_checksums`]. Blocks found in the cache were verified (or
    /// not) when they were read.
    pub verify_checksums: Option<bool>,
    /// Put blocks read from the file into the block cache. `false` suits a one-off scan that
    /// would otherwise push out the blocks point lookups keep using; cached blocks are still
    /// used.
    pub fill_cache: bool,
}

impl Default for BlockReads {
    fn default() -> Self {
        BlockReads {
            verify_checksums: None,
            fill_cache: true,
        }
    }
}

/// Outcome of [`Table::verify_all`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Blocks read and verified (data blocks and meta blocks).
    pub blocks: u64,
    /// Bytes read, trailers and footer included.
    pub bytes: u64,
    /// CRC32C of every byte of the file, computed from the blocks as they were read: `Some`
    /// when the blocks and the footer tile the file with no gap, as every table the writer
    /// makes does; otherwise a separate read of the whole file is needed for it.
    pub file_crc32c: Option<u32>,
}

/// The whole-file CRC32C of a table, fed its blocks in file order as [`Table::verify_all`]
/// reads them: it holds only while each piece starts where the previous one ended.
struct TilingCrc {
    crc: u32,
    next: u64,
    tiles: bool,
}

impl TilingCrc {
    fn feed(&mut self, offset: u64, bytes: &[u8]) {
        if offset != self.next {
            self.tiles = false;
        }
        self.crc = crc32c::crc32c_append(self.crc, bytes);
        self.next = offset.saturating_add(bytes.len() as u64);
    }

    fn finish(self, file_size: u64) -> Option<u32> {
        (self.tiles && self.next == file_size).then_some(self.crc)
    }
}

/// What the bloom filter saved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BloomStats {
    /// Lookups the filter answered "absent" (no block read).
    pub useful: u64,
    /// Lookups the filter let through.
    pub passed: u64,
    /// Lookups the filter let through that found no entry for the key.
    pub false_positives: u64,
}

/// The counters behind [`BloomStats`], shared by the tables that count into them.
#[derive(Debug, Default)]
pub struct BloomCounters {
    useful: AtomicU64,
    passed: AtomicU64,
    false_positives: AtomicU64,
}

impl BloomCounters {
    /// The figures counted so far.
    pub fn stats(&self) -> BloomStats {
        BloomStats {
            useful: self.useful.load(Ordering::Relaxed),
            passed: self.passed.load(Ordering::Relaxed),
            false_positives: self.false_positives.load(Ordering::Relaxed),
        }
    }

    /// Counts one filter check: `passed` if the filter let the lookup through.
    fn checked(&self, passed: bool) {
        let counter = if passed { &self.passed } else { &self.useful };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The decoded index: each data block's last key and handle. Keys live in one buffer.
#[derive(Default)]
struct TableIndex {
    keys: Vec<u8>,
    /// `(end of key in keys, handle)`; a key starts where the previous one ends.
    entries: Vec<(usize, BlockHandle)>,
}

impl TableIndex {
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        let start = match i.checked_sub(1) {
            Some(p) => self.entries.get(p).map_or(0, |e| e.0),
            None => 0,
        };
        let end = self.entries.get(i).map_or(start, |e| e.0);
        self.keys.get(start..end).unwrap_or_default()
    }

    fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.entries.get(i).map(|e| e.1)
    }

    /// Index of the first block whose last key is `>= target` (`len()` if none).
    fn find(&self, target: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if compare_internal(self.key(mid), target).is_lt() {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// An open, immutable table file.
pub struct Table {
    file: Box<dyn ReadFile>,
    path: Arc<Path>,
    file_number: u64,
    cache_namespace: u32,
    file_size: u64,
    footer: Footer,
    index: TableIndex,
    filter: Option<BloomFilter>,
    /// The extractor whose prefixes `filter` also holds (from the properties).
    prefix_extractor: Option<PrefixExtractor>,
    properties: TableProperties,
    identity: TableIdentity,
    cache: Option<Arc<BlockCache>>,
    verify_checksums: bool,
    bloom: Arc<BloomCounters>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.path)
            .field("file_number", &self.file_number)
            .field("file_size", &self.file_size)
            .field("num_data_blocks", &self.index.len())
            .field("has_filter", &self.filter.is_some())
            .finish()
    }
}

impl Table {
    /// Opens the table at `path`, whose blocks are cached under `file_number`.
    ///
    /// Reads and verifies the footer, index, filter (unless `opts.load_filter` is off) and
    /// properties. A short file, a bad magic number, a bad checksum or an inconsistent index is
    /// `Corruption` naming the path and the offset of the bad bytes.
    pub fn open(path: &Path, file_number: u64, opts: TableReadOptions) -> Result<Arc<Table>> {
        let file = opts.storage.open_read(path).with_path(path)?;
        let file_size = file.size().with_path(path)?;
        let path: Arc<Path> = Arc::from(path);
        let corrupt = |offset: u64, reason: String| Error::corruption(&*path, offset, reason);
        let Some(footer_offset) = file_size.checked_sub(FOOTER_LEN as u64) else {
            return Err(corrupt(
                0,
                format!("file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        };
        let mut footer_bytes = [0u8; FOOTER_LEN];
        file.read_exact_at(&mut footer_bytes, footer_offset)
            .with_path(&path)?;
        let footer = Footer::decode(&footer_bytes, &path, footer_offset)?;

        // Meta blocks lie between the data blocks and the footer.
        let metas = [Some(footer.index), footer.filter, Some(footer.properties)];
        let mut data_end = footer_offset;
        for h in metas.into_iter().flatten() {
            if h.end_with_trailer().is_none_or(|end| end > footer_offset) {
                return Err(corrupt(
                    footer_offset,
                    format!(
                        "footer names a block at {} of {} bytes, past the footer",
                        h.offset, h.size
                    ),
                ));
            }
            data_end = data_end.min(h.offset);
        }

        let read_meta = |h: BlockHandle| -> Result<RawBlock> {
            let raw = read_raw_block_at(&*file, &path, h)?;
            verify_raw_block(&raw)?;
            Ok(raw)
        };
        let properties_raw = read_meta(footer.properties)?;
        let identity = TableIdentity::new(
            footer_checksum(&footer_bytes),
            properties_raw.stored_checksum(),
        );
        let properties = TableProperties::decode(
            &decompress_raw_contents(properties_raw)?,
            &path,
            footer.properties.offset,
        )?;
        let filter = match footer.filter.filter(|_| opts.load_filter) {
            Some(h) => {
                let bytes = decompress_raw_contents(read_meta(h)?)?;
                Some(
                    BloomFilter::new(bytes)
                        .map_err(|e| corrupt(h.offset, format!("bad filter: {e}")))?,
                )
            }
            None => None,
        };
        let index_block = Arc::new(decompress_raw_block(read_meta(footer.index)?)?);
        let index = decode_index(&index_block, data_end)?;
        if index.len() as u64 != properties.num_data_blocks {
            return Err(corrupt(
                footer.index.offset,
                format!(
                    "index has {} entries but the properties count {} data blocks",
                    index.len(),
                    properties.num_data_blocks
                ),
            ));
        }
        // An extractor this build does not know leaves the prefixes unused, never misread.
        let prefix_extractor = properties
            .prefix_extractor
            .as_deref()
            .and_then(PrefixExtractor::from_name);
        Ok(Arc::new(Table {
            file,
            path,
            file_number,
            file_size,
            footer,
            index,
            filter,
            prefix_extractor,
            properties,
            identity,
            cache: opts.cache,
            cache_namespace: opts.cache_namespace,
            verify_checksums: opts.verify_checksums,
            bloom: opts.bloom_counters.unwrap_or_default(),
        }))
    }

    /// The number the table's blocks are cached under.
    pub fn file_number(&self) -> u64 {
        self.file_number
    }

    /// The table's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// The properties recorded when the table was written.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The checksums the MANIFEST pins the table to, as read and verified at open.
    pub fn identity(&self) -> TableIdentity {
        self.identity
    }

    /// The decoded footer.
    pub fn footer(&self) -> &Footer {
        &self.footer
    }

    /// The open file, for positioned reads by executors.
    pub fn file(&self) -> &dyn ReadFile {
        &*self.file
    }

    /// True when the table has a bloom filter.
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// False when the filter proves the table holds no version of `user_key`; true when it
    /// may, or when the table has no filter (or was opened without loading it).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// False when the filter proves the table holds no key whose prefix under `extractor` is
    /// `prefix`; true when it may, or when the table's filter was not written with
    /// `extractor`'s prefixes. Counted in [`Table::bloom_stats`] like point lookups.
    pub fn may_contain_prefix(&self, extractor: &PrefixExtractor, prefix: &[u8]) -> bool {
        let Some(filter) = &self.filter else {
            return true;
        };
        if self.prefix_extractor.as_ref() != Some(extractor) {
            return true;
        }
        let hit = filter.may_contain(prefix);
        self.bloom.checked(hit);
        hit
    }

    /// Bloom filter counters since open, or those of every table sharing
    /// [`TableReadOptions::bloom_counters`].
    pub fn bloom_stats(&self) -> BloomStats {
        self.bloom.stats()
    }

    /// Number of data blocks.
    pub fn num_data_blocks(&self) -> usize {
        self.index.len()
    }

    /// Every data block's last internal key and handle, in key order, copied out (for tools
    /// and tests; [`Table::index_entry`] borrows one without copying).
    pub fn index_entries(&self) -> Vec<(Vec<u8>, BlockHandle)> {
        (0..self.index.len())
            .filter_map(|i| Some((self.index.key(i).to_vec(), self.index.handle(i)?)))
            .collect()
    }

    /// Data block `i`'s last internal key and handle, if `i` is in range; borrowed from the
    /// decoded index, so planning a compaction copies nothing.
    pub fn index_entry(&self, i: usize) -> Option<(&[u8], BlockHandle)> {
        Some((self.index.key(i), self.index.handle(i)?))
    }

    /// Index of the first data block whose last key is `>= target` (`num_data_blocks()` if none).
    pub(super) fn find_block(&self, target: &[u8]) -> usize {
        self.index.find(target)
    }

    /// The newest entry for the lookup key's user key at or below its sequence number: the first
    /// entry `>= lookup_ikey` if it has the same user key. Consults the bloom filter first.
    pub fn get(&self, lookup_ikey: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_with(lookup_ikey, BlockReads::default())
    }

    /// [`Table::get`] with explicit per-read options.
    pub fn get_with(
        &self,
        lookup_ikey: &[u8],
        reads: BlockReads,
    ) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let uk = user_key(lookup_ikey);
        if let Some(filter) = &self.filter {
            let passed = filter.may_contain(uk);
            self.bloom.checked(passed);
            if !passed {
                return Ok(None);
            }
        }
        let found = match self.index.handle(self.index.find(lookup_ikey)) {
            Some(handle) => {
                let block = self.read_block_with(handle, reads)?;
                // Room for neighbouring keys, which are usually about as long as the lookup's.
                let mut it = BlockIter::with_key_capacity(block, lookup_ikey.len() + 16);
                it.seek(lookup_ikey)?;
                (it.valid() && user_key(it.key()) == uk).then(|| it.take_entry())
            }
            None => None,
        };
        if found.is_none() && self.filter.is_some() {
            self.bloom.false_positives.fetch_add(1, Ordering::Relaxed);
        }
        Ok(found)
    }

    /// A two-level iterator over the whole table, unpositioned.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        self.iter_with(BlockReads::default())
    }

    /// [`Table::iter`] with explicit per-read options for every block it loads.
    pub fn iter_with(self: &Arc<Self>, reads: BlockReads) -> TableIter {
        TableIter::new(Arc::clone(self), reads)
    }

    /// S1 for block `handle` of this table (no cache, no verification).
    pub fn read_raw(&self, handle: BlockHandle) -> Result<RawBlock> {
        read_raw_block_at(&*self.file, &self.path, handle)
    }

    /// The decompressed block at `handle`: from the cache, or read (S1), verified if the read
    /// options say so (S2), decompressed (S3) and cached.
    pub fn read_block(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        self.read_block_with(handle, BlockReads::default())
    }

    /// [`Table::read_block`] with explicit per-read options.
    pub fn read_block_with(&self, handle: BlockHandle, reads: BlockReads) -> Result<Arc<Block>> {
        if let Some(cache) = &self.cache
            && let Some(block) = cache.get(self.cache_namespace, self.file_number, handle.offset)
        {
            return Ok(block);
        }
        let raw = self.read_raw(handle)?;
        if reads.verify_checksums.unwrap_or(self.verify_checksums) {
            verify_raw_block(&raw)?;
        }
        let block = Arc::new(decompress_raw_block(raw)?);
        if let Some(cache) = self.cache.as_ref().filter(|_| reads.fill_cache) {
            cache.insert(
                self.cache_namespace,
                self.file_number,
                handle.offset,
                Arc::clone(&block),
            );
        }
        Ok(block)
    }

    /// Reads every block from the file (bypassing the cache, adjacent blocks in one read),
    /// verifies its checksum, decodes every entry, and checks that entries are in order, that
    /// each data block ends with its index key, that the bloom filter (when loaded) holds
    /// every key, and that the properties are those the entries make
    /// (`check_properties_describe`). Computes the whole-file CRC32C from the same
    /// bytes. Used by `sluice check` and by the host on a worker's outputs.
    pub fn verify_all(&self) -> Result<VerifyReport> {
        self.verify_all_visiting(|_, _| Ok(()))
    }

    /// [`Table::verify_all`], showing `visit` every entry's internal key in order as it is
    /// read, with whether its user key is the previous entry's (`None` for the table's first
    /// entry): the host audits a worker's drop decisions in step with this read. An error
    /// from `visit` stops the read and is returned.
    pub fn verify_all_visiting(
        &self,
        mut visit: impl FnMut(&[u8], Option<bool>) -> Result<()>,
    ) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        let mut crc = TilingCrc {
            crc: 0,
            next: 0,
            tiles: true,
        };
        let mut prev_last: Option<&[u8]> = None;
        // What the writer would have recorded for these entries, rebuilt from the data.
        let mut found = TableProperties::default();
        let handles: Vec<BlockHandle> = (0..self.index.len())
            .filter_map(|i| self.index.handle(i))
            .collect();
        // One read buffer and one block buffer serve every block: adjacent blocks are read
        // together (up to 1 MiB), and nothing is allocated per block.
        let mut read_buf = Vec::new();
        let mut block_buf = Vec::new();
        let mut last: Vec<u8> = Vec::new();
        let mut next_block = 0;
        while next_block < handles.len() {
            let run = &handles[next_block..next_block + adjacent_run(&handles[next_block..])];
            let (Some(first), Some(end)) =
                (run.first(), run.last().and_then(|h| h.end_with_trailer()))
            else {
                break;
            };
            // A run is at most 1 MiB; a single block at most MAX_BLOCK_BYTES and its trailer.
            let len = end - first.offset;
            if len > MAX_BLOCK_BYTES as u64 + BLOCK_TRAILER_LEN as u64 {
                return Err(Error::corruption(
                    &*self.path,
                    first.offset,
                    format!("block of {len} bytes exceeds the size limit"),
                ));
            }
            read_buf.resize(len as usize, 0);
            self.file
                .read_exact_at(&mut read_buf, first.offset)
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => Error::corruption(
                        &*self.path,
                        first.offset,
                        "blocks run past the end of the file",
                    ),
                    _ => Error::io(&*self.path, e),
                })?;
            crc.feed(first.offset, &read_buf);
            for (j, handle) in run.iter().enumerate() {
                let Some((index_key, _)) = self.index_entry(next_block + j) else {
                    break;
                };
                let start = (handle.offset - first.offset) as usize;
                let stored_len = handle.size as usize + BLOCK_TRAILER_LEN;
                let stored = read_buf.get(start..start + stored_len).unwrap_or_default();
                verify_and_decompress_stored(stored, &self.path, *handle, &mut block_buf)?;
                report.blocks += 1;
                report.bytes += stored_len as u64;
                let block = Arc::new(Block::new(
                    std::mem::take(&mut block_buf),
                    Arc::clone(&self.path),
                    handle.offset,
                )?);
                let mut it = BlockIter::new(Arc::clone(&block));
                it.seek_to_first()?;
                let mut meta = BlockMeta::default();
                last.clear();
                while it.valid() {
                    let before = match last.is_empty() {
                        false => Some(last.as_slice()),
                        true => prev_last,
                    };
                    // One comparison gives the order and whether the user key repeats.
                    let by_user_key =
                        before.map(|b| compare_bytes(user_key(b), user_key(it.key())));
                    let out_of_order = match (by_user_key, before) {
                        (Some(std::cmp::Ordering::Equal), Some(b)) => {
                            trailer(it.key()) >= trailer(b)
                        }
                        (order, _) => order == Some(std::cmp::Ordering::Greater),
                    };
                    if out_of_order {
                        return Err(Error::corruption(
                            &*self.path,
                            handle.offset,
                            "entries out of order",
                        ));
                    }
                    meta.add_entry(it.key(), it.value(), EntryHash::of(it.key(), it.value()));
                    visit(it.key(), by_user_key.map(std::cmp::Ordering::is_eq))?;
                    last.clear();
                    last.extend_from_slice(it.key());
                    it.next()?;
                }
                drop(it);
                if last != index_key {
                    return Err(Error::corruption(
                        &*self.path,
                        handle.offset,
                        "block's last key differs from its index entry",
                    ));
                }
                if meta.num_entries == 0 {
                    return Err(Error::corruption(
                        &*self.path,
                        handle.offset,
                        "an empty data block",
                    ));
                }
                if meta.bad_blob_refs > 0 {
                    return Err(Error::corruption(
                        &*self.path,
                        handle.offset,
                        "a blob reference that does not decode",
                    ));
                }
                // A filter that leaves a key out makes a lookup miss what a scan finds.
                if let Some(filter) = &self.filter
                    && !meta
                        .filter_hashes
                        .iter()
                        .all(|&h| filter.may_contain_hash(h))
                {
                    return Err(Error::corruption(
                        &*self.path,
                        handle.offset,
                        "the bloom filter leaves out a key of this block",
                    ));
                }
                meta.last_key.clone_from(&last);
                found.add_block(&meta);
                prev_last = Some(index_key);
                // The iterator is gone, so the block is ours again: keep its buffer.
                block_buf = Arc::try_unwrap(block).map_or_else(|_| Vec::new(), Block::into_data);
            }
            next_block += run.len();
        }
        // The meta blocks and the footer follow the data blocks, in file order.
        let mut metas: Vec<BlockHandle> = [
            Some(self.footer.properties),
            self.footer.filter,
            Some(self.footer.index),
        ]
        .into_iter()
        .flatten()
        .collect();
        metas.sort_by_key(|h| h.offset);
        for h in metas {
            let raw = self.read_raw(h)?;
            crc.feed(h.offset, raw.bytes());
            verify_raw_block(&raw)?;
            report.blocks += 1;
            report.bytes += raw.stored_len() as u64;
        }
        let footer_offset = self.file_size.saturating_sub(FOOTER_LEN as u64);
        let mut footer = [0u8; FOOTER_LEN];
        self.file
            .read_exact_at(&mut footer, footer_offset)
            .with_path(&self.path)?;
        crc.feed(footer_offset, &footer);
        report.bytes += FOOTER_LEN as u64;
        report.file_crc32c = crc.finish(self.file_size);
        self.check_properties_describe(&found)?;
        Ok(report)
    }

    /// Fails unless the properties agree with `found`, what the writer records for the
    /// entries the data blocks hold: their count, tombstones, key and value bytes, value
    /// sizes, key range, sequence numbers, blob references and (when the table has one) entry
    /// digest. A table whose properties disagree with its data would be read one way and
    /// planned, compacted or proven another.
    fn check_properties_describe(&self, found: &TableProperties) -> Result<()> {
        let p = &self.properties;
        let same = [
            ("entry count", p.num_entries == found.num_entries),
            ("tombstone count", p.num_deletions == found.num_deletions),
            ("key bytes", p.raw_key_bytes == found.raw_key_bytes),
            ("value bytes", p.raw_value_bytes == found.raw_value_bytes),
            (
                "value size histogram",
                p.value_size_histogram == found.value_size_histogram,
            ),
            ("smallest key", p.smallest_key == found.smallest_key),
            ("largest key", p.largest_key == found.largest_key),
            (
                "smallest sequence number",
                p.smallest_seq == found.smallest_seq,
            ),
            (
                "largest sequence number",
                p.largest_seq == found.largest_seq,
            ),
            ("blob references", p.blob_refs == found.blob_refs),
            (
                "entry digest",
                p.entry_digest.is_none() || p.entry_digest == found.entry_digest,
            ),
        ];
        match same.iter().find(|(_, ok)| !ok) {
            None => Ok(()),
            Some((what, _)) => Err(Error::corruption(
                &*self.path,
                self.footer.properties.offset,
                format!(
                    "properties disagree with the data: the {what} is not the entries' \
                     ({} entries, keys {:?} .. {:?}, seq {}..{})",
                    found.num_entries,
                    String::from_utf8_lossy(user_key(&found.smallest_key)),
                    String::from_utf8_lossy(user_key(&found.largest_key)),
                    found.smallest_seq,
                    found.largest_seq
                ),
            )),
        }
    }
}

/// Decodes the index block, checking that keys increase and that handles are in order, do not
/// overlap, and end before `data_end`.
fn decode_index(block: &Arc<Block>, data_end: u64) -> Result<TableIndex> {
    let corrupt = |reason: String| Error::corruption(&**block.file(), block.offset(), reason);
    let mut index = TableIndex::default();
    let mut it = block.iter();
    it.seek_to_first()?;
    let mut next_free = 0u64;
    while it.valid() {
        let n = index.len();
        let handle = match BlockHandle::decode(it.value()) {
            Some((h, used)) if used == it.value().len() => h,
            _ => return Err(corrupt(format!("index entry {n}: bad block handle"))),
        };
        if handle.offset < next_free || handle.end_with_trailer().is_none_or(|end| end > data_end) {
            return Err(corrupt(format!(
                "index entry {n}: block at {} of {} bytes overlaps another or leaves the data area",
                handle.offset, handle.size
            )));
        }
        if n > 0 && !compare_internal(index.key(n - 1), it.key()).is_lt() {
            return Err(corrupt(format!("index entry {n}: keys out of order")));
        }
        next_free = handle.end_with_trailer().unwrap_or(u64::MAX);
        index.keys.extend_from_slice(it.key());
        index.entries.push((index.keys.len(), handle));
        it.next()?;
    }
    Ok(index)
}
