//! The block cache: decompressed blocks shared by every open table, and the values read from
//! blob files (value separation), bounded in bytes together.
//!
//! Blob values share the cache rather than having one of their own, as Pebble's do: one
//! budget to size, and the eviction policy weighs a hot value against a hot block. A value is
//! kept with the key it was written under, which a hit checks as a read from the file would,
//! so a reference that names another key's record is caught either way.
//!
//! Keys are `(namespace, file number, block offset)`: each tree that uses the cache (a keyspace
//! of an open database; several databases may share one cache) takes a namespace of its own
//! from it ([`BlockCache::new_namespace`]), and file numbers are never reused within a tree, so
//! a cached block can never be confused with another tree's or a newer file's, and blocks of
//! deleted files simply age out.
//! Eviction is quick_cache's scan-resistant S3-FIFO policy, weighted by each block's memory
//! (a compaction or long scan does not flush the hot blocks). Thread-safe:
//! the cache is sharded internally and the counters are relaxed atomics (statistics only).

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::block::Block;

/// Typical block size, used only to size the cache's hash tables up front.
const TYPICAL_BLOCK_BYTES: usize = 4096;

/// Memory an entry costs besides its bytes (the key tuple, the `Arc`, the cache's slot).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

#[derive(Clone, Copy, Debug, Default)]
struct EntryWeighter;

/// `(namespace, file number, offset)`: a block's offset in its table, or a record's in its
/// blob file. Tables and blob files share one number space, so the two never alias.
type Key = (u32, u64, u64);

/// A value read from a blob file, with the user key it was written under.
#[derive(Debug, PartialEq, Eq)]
pub struct CachedValue {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Clone)]
enum Entry {
    Block(Arc<Block>),
    Value(Arc<CachedValue>),
}

impl Weighter<Key, Entry> for EntryWeighter {
    fn weight(&self, _key: &Key, entry: &Entry) -> u64 {
        match entry {
            Entry::Block(block) => block.charge_bytes() as u64,
            Entry::Value(v) => (v.key.len() + v.value.len()) as u64 + ENTRY_OVERHEAD_BYTES,
        }
    }
}

/// A byte-bounded cache of decompressed blocks and blob values keyed by `(namespace,
/// file_number, offset)`.
pub struct BlockCache {
    cache: Cache<Key, Entry, EntryWeighter>,
    hits: AtomicU64,
    misses: AtomicU64,
    value_hits: AtomicU64,
    value_misses: AtomicU64,
    /// The next namespace [`BlockCache::new_namespace`] gives.
    next_namespace: AtomicU32,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity_bytes", &self.capacity_bytes())
            .field("usage_bytes", &self.usage_bytes())
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most about `capacity_bytes` of blocks (their memory, not their size on
    /// disk). A block larger than one shard's share of the capacity is not cached.
    pub fn new(capacity_bytes: usize) -> Self {
        let items = (capacity_bytes / TYPICAL_BLOCK_BYTES).clamp(16, 1 << 24);
        BlockCache {
            cache: Cache::with_weighter(items, capacity_bytes.max(1) as u64, EntryWeighter),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            value_hits: AtomicU64::new(0),
            value_misses: AtomicU64::new(0),
            next_namespace: AtomicU32::new(0),
        }
    }

    /// A namespace no other user of this cache has: a tree's blocks are cached under its own.
    pub fn new_namespace(&self) -> u32 {
        self.next_namespace.fetch_add(1, Ordering::Relaxed)
    }

    /// The cached block at `block_offset` of file `file_number` in `namespace`, counting a hit
    /// or a miss.
    pub fn get(&self, namespace: u32, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let found = match self.cache.get(&(namespace, file_number, block_offset)) {
            Some(Entry::Block(block)) => Some(block),
            _ => None,
        };
        count(&self.hits, &self.misses, found.is_some());
        found
    }

    /// Caches `block`, replacing any entry under the same key.
    pub fn insert(&self, namespace: u32, file_number: u64, block_offset: u64, block: Arc<Block>) {
        self.cache
            .insert((namespace, file_number, block_offset), Entry::Block(block));
    }

    /// The cached value of the record at `offset` of blob file `file_number` in `namespace`,
    /// counting a hit or a miss.
    pub fn get_value(
        &self,
        namespace: u32,
        file_number: u64,
        offset: u64,
    ) -> Option<Arc<CachedValue>> {
        let found = match self.cache.get(&(namespace, file_number, offset)) {
            Some(Entry::Value(v)) => Some(v),
            _ => None,
        };
        count(&self.value_hits, &self.value_misses, found.is_some());
        found
    }

    /// Caches `value`, read from the record at `offset` of blob file `file_number`.
    pub fn insert_value(
        &self,
        namespace: u32,
        file_number: u64,
        offset: u64,
        value: Arc<CachedValue>,
    ) {
        self.cache
            .insert((namespace, file_number, offset), Entry::Value(value));
    }

    /// Bytes the cached blocks occupy.
    pub fn usage_bytes(&self) -> usize {
        self.cache.weight() as usize
    }

    /// The configured capacity.
    pub fn capacity_bytes(&self) -> usize {
        self.cache.capacity() as usize
    }

    /// Number of cached blocks.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.cache.is_empty()
    }

    /// Lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that did not.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Blob value lookups that found their value.
    pub fn value_hits(&self) -> u64 {
        self.value_hits.load(Ordering::Relaxed)
    }

    /// Blob value lookups that did not.
    pub fn value_misses(&self) -> u64 {
        self.value_misses.load(Ordering::Relaxed)
    }
}

fn count(hits: &AtomicU64, misses: &AtomicU64, hit: bool) {
    let counter = if hit { hits } else { misses };
    counter.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::block::BlockBuilder;
    use crate::key::{ValueKind, make_internal_key};

    fn block(value_len: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(
            &make_internal_key(b"k", 1, ValueKind::Value),
            &vec![7; value_len],
        );
        Arc::new(Block::new(b.finish(0), Arc::from(Path::new("f")), 0).unwrap())
    }

    #[test]
    fn hits_misses_and_usage() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(0, 1, 0).is_none());
        let b = block(1000);
        c.insert(0, 1, 0, Arc::clone(&b));
        let got = c.get(0, 1, 0).unwrap();
        assert!(Arc::ptr_eq(&got, &b));
        assert!(c.get(0, 2, 0).is_none(), "other file numbers do not alias");
        assert!(c.get(1, 1, 0).is_none(), "other namespaces do not alias");
        assert_eq!((c.hits(), c.misses()), (1, 3));
        assert_eq!(c.usage_bytes(), b.charge_bytes());
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn values_and_blocks_share_the_budget_and_never_alias() {
        let c = BlockCache::new(1 << 20);
        let v = Arc::new(CachedValue {
            key: b"k".to_vec(),
            value: vec![3; 10_000],
        });
        assert!(c.get_value(0, 9, 16).is_none());
        c.insert_value(0, 9, 16, Arc::clone(&v));
        assert_eq!(c.get_value(0, 9, 16).as_deref(), Some(&*v));
        // A block lookup under the same key finds nothing, and counts as a block miss.
        assert!(c.get(0, 9, 16).is_none());
        c.insert(0, 1, 0, block(100));
        assert!(c.get_value(0, 1, 0).is_none());
        assert_eq!((c.value_hits(), c.value_misses()), (1, 2));
        assert_eq!((c.hits(), c.misses()), (0, 1));
        assert!(c.usage_bytes() >= 10_000, "{}", c.usage_bytes());
        // Values are evicted by weight like blocks: a small cache keeps a few only.
        let small = BlockCache::new(64 << 10);
        for offset in 0..100 {
            small.insert_value(0, 1, offset, Arc::clone(&v));
        }
        assert!(
            small.usage_bytes() <= 64 << 10 && small.len() < 10,
            "{}",
            small.len()
        );
    }

    #[test]
    fn usage_stays_within_capacity() {
        let capacity = 256 * 1024;
        let c = BlockCache::new(capacity);
        for i in 0..1000 {
            c.insert(0, 7, i * 4096, block(4000));
        }
        assert!(
            c.usage_bytes() <= capacity,
            "{} > {capacity}",
            c.usage_bytes()
        );
        assert!(c.len() > 10, "cache keeps blocks: {}", c.len());
        assert!(c.len() < 1000, "cache evicts");
    }
}
