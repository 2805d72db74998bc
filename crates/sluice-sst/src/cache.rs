//! The block cache: decompressed blocks shared by every open table, bounded in bytes.
//!
//! Keys are `(namespace, file number, block offset)`: file numbers are never reused within a
//! namespace (one per keyspace of a database, which number their files apart), so a cached
//! block can never be confused with a block of a newer file, and blocks of deleted files simply
//! age out.
//! Eviction is quick_cache's scan-resistant S3-FIFO policy, weighted by each block's memory
//! (a compaction or long scan does not flush the hot blocks). Thread-safe:
//! the cache is sharded internally and the counters are relaxed atomics (statistics only).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::block::Block;

/// Typical block size, used only to size the cache's hash tables up front.
const TYPICAL_BLOCK_BYTES: usize = 4096;

#[derive(Clone, Copy, Debug, Default)]
struct BlockWeighter;

/// `(namespace, file number, block offset)`.
type Key = (u32, u64, u64);

impl Weighter<Key, Arc<Block>> for BlockWeighter {
    fn weight(&self, _key: &Key, block: &Arc<Block>) -> u64 {
        block.charge_bytes() as u64
    }
}

/// A byte-bounded cache of decompressed blocks keyed by `(namespace, file_number, block_offset)`.
pub struct BlockCache {
    cache: Cache<Key, Arc<Block>, BlockWeighter>,
    hits: AtomicU64,
    misses: AtomicU64,
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
            cache: Cache::with_weighter(items, capacity_bytes.max(1) as u64, BlockWeighter),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The cached block at `block_offset` of file `file_number` in `namespace`, counting a hit
    /// or a miss.
    pub fn get(&self, namespace: u32, file_number: u64, block_offset: u64) -> Option<Arc<Block>> {
        let found = self.cache.get(&(namespace, file_number, block_offset));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block`, replacing any block under the same key.
    pub fn insert(&self, namespace: u32, file_number: u64, block_offset: u64, block: Arc<Block>) {
        self.cache
            .insert((namespace, file_number, block_offset), block);
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
