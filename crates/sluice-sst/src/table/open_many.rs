//! Opening many tables for one compaction. From an object store each open is a round trip or
//! two (a HEAD, the table's tail), and a compaction of many inputs would wait for them one
//! after another; the host (`sluice`'s compaction jobs) and a store-only worker open theirs
//! [`REMOTE_OPENS_AT_ONCE`] at a time through [`open_in_parallel`]. Local tables open one by
//! one: an open is a few reads from the page cache.

/// Tables a compaction opens at once from remote storage.
pub const REMOTE_OPENS_AT_ONCE: usize = 8;

/// `open` of every item, in item order, on up to `threads` threads, each a contiguous run of
/// the items; on this thread when `threads` is 1 or there is a single item. Every thread is
/// joined before anything returns: the first error in item order is returned, and a panic is
/// resumed here.
pub fn open_in_parallel<T, R, E>(
    items: &[T],
    threads: usize,
    open: impl Fn(&T) -> Result<R, E> + Sync,
) -> Result<Vec<R>, E>
where
    T: Sync,
    R: Send,
    E: Send,
{
    if threads <= 1 || items.len() < 2 {
        return items.iter().map(&open).collect();
    }
    let per_thread = items.len().div_ceil(threads);
    let open = &open;
    let joined: Vec<_> = std::thread::scope(|scope| {
        let opening: Vec<_> = items
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(open).collect::<Result<Vec<R>, E>>()))
            .collect();
        opening.into_iter().map(|t| t.join()).collect()
    });
    let mut opened = Vec::with_capacity(items.len());
    for run in joined {
        match run {
            Ok(run) => opened.extend(run?),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    Ok(opened)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_at_any_thread_count() {
        let items: Vec<u32> = (0..37).collect();
        for threads in [1, 2, 8, 64] {
            let opened = open_in_parallel(&items, threads, |&i| Ok::<_, ()>(i * 10)).unwrap();
            assert_eq!(opened, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        }
    }

    #[test]
    fn the_first_error_in_item_order_is_returned_after_every_open() {
        let items: Vec<u32> = (0..20).collect();
        let tried = std::sync::atomic::AtomicU32::new(0);
        let outcome = open_in_parallel(&items, 4, |&i| {
            tried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if i == 7 || i == 15 { Err(i) } else { Ok(i) }
        });
        assert_eq!(outcome, Err(7));
        // Chunks of 5: each thread stops at its own first error (7 and 15), the others open
        // their whole chunk: 5 + 3 + 5 + 1.
        assert_eq!(tried.load(std::sync::atomic::Ordering::SeqCst), 14);
    }
}
