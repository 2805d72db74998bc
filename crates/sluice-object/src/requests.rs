//! Counting the requests an [`crate::ObjectFs`] makes, for [`StoreRequests`].

use std::sync::atomic::{AtomicU64, Ordering};

use sluice_sst::fs::StoreRequests;

/// What [`StoreRequests`] counts, as it happens.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    pub(crate) gets: AtomicU64,
    pub(crate) puts: AtomicU64,
    pub(crate) heads: AtomicU64,
    pub(crate) lists: AtomicU64,
    pub(crate) deletes: AtomicU64,
    pub(crate) copies: AtomicU64,
    pub(crate) bytes_downloaded: AtomicU64,
    pub(crate) bytes_uploaded: AtomicU64,
}

impl Requests {
    pub(crate) fn count(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts the LIST requests that returned `objects` objects: one per page.
    pub(crate) fn count_listing(&self, objects: usize) {
        Requests::count(&self.lists, (objects as u64).div_ceil(LIST_PAGE).max(1));
    }

    pub(crate) fn snapshot(&self) -> StoreRequests {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StoreRequests {
            gets: get(&self.gets),
            puts: get(&self.puts),
            heads: get(&self.heads),
            lists: get(&self.lists),
            deletes: get(&self.deletes),
            copies: get(&self.copies),
            bytes_downloaded: get(&self.bytes_downloaded),
            bytes_uploaded: get(&self.bytes_uploaded),
            cache_hits: 0,
            cache_misses: 0,
        }
    }
}

/// Objects S3 returns per page of a LIST.
pub(crate) const LIST_PAGE: u64 = 1000;
