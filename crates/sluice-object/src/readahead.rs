//! Read-ahead for an object read by ranged GETs: a read that continues where an earlier one
//! ended fetches more than it asked for, twice as much each time up to [`MAX_WINDOW`], and
//! once a stream is sequential the next window is fetched in the background while the reader
//! works through the current one. A compaction or a scan reading a table front to back then
//! makes one request per window and rarely waits for one; a read that continues nothing (a
//! point lookup's block) fetches exactly its bytes, so random reads never pay for bytes they
//! do not use. A read that ends at the object's end (a table's footer, read first at open)
//! fetches the last [`TAIL_BYTES`] with it, so the index and properties that follow are
//! already there.
//!
//! Up to [`STREAMS`] sequential readers of one object are followed at once (the parallel
//! executors read one table from several threads, each its own key range); the least recently
//! used stream makes room for a new one, and its background fetch is dropped (`P`'s `Drop`
//! cancels it). The state is only consulted and updated under the caller's lock: fetches run
//! outside it, so concurrent readers of one object do not queue behind one another's requests
//! (two of them may fetch overlapping bytes; both are correct).
//!
//! Memory: a stream holds at most one window (a larger read keeps only its last window) and
//! the next one being fetched, so an open object holds at most `STREAMS x 2 x MAX_WINDOW`
//! (16 MiB), also after a scan ends, until the streams are replaced or the object closed; the
//! tail is let go at the first read it does not serve. A database that keeps many tables open
//! and scans them all should use the object cache instead, which holds nothing in memory.
//!
//! `P` is a fetch in flight: the reader's task handle, or in the tests the bytes themselves.

use std::ops::Range;

use bytes::Bytes;

/// The window of a stream's second read; each later read doubles it.
pub(crate) const FIRST_WINDOW: u64 = 64 << 10;
/// The largest window: requests per GB read sequentially are then about 1 GB / 2 MiB.
pub(crate) const MAX_WINDOW: u64 = 2 << 20;
/// Sequential readers of one object followed at once.
pub(crate) const STREAMS: usize = 4;
/// Bytes a read that ends at the object's end fetches at least: a table's open reads its
/// footer there first, then the index and properties just before it, and this makes those
/// one request instead of three.
pub(crate) const TAIL_BYTES: u64 = 256 << 10;

/// The streams of one object.
#[derive(Debug)]
pub(crate) struct ReadAhead<P> {
    streams: Vec<Stream<P>>,
    /// Counts reads, to find the least recently used stream.
    clock: u64,
    /// Names streams: an index may name another stream once the lock has been let go.
    next_id: u64,
}

impl<P> Default for ReadAhead<P> {
    fn default() -> Self {
        ReadAhead {
            streams: Vec::new(),
            clock: 0,
            next_id: 0,
        }
    }
}

/// Bytes fetched for one sequential reader, and the fetch of the bytes after them.
#[derive(Debug)]
struct Stream<P> {
    id: u64,
    /// Offset of `bytes[0]`.
    start: u64,
    bytes: Bytes,
    /// The window its last fetch used (0: it fetched exactly the read, so it is not known to
    /// be sequential yet).
    window: u64,
    used: u64,
    /// The background fetch of the next window, and its range.
    ahead: Option<(Range<u64>, P)>,
    /// The object's tail, fetched for an open: dropped at the first read it does not serve.
    tail: bool,
}

impl<P> Stream<P> {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// A fetch, and the stream whose bytes it becomes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fetch {
    pub range: Range<u64>,
    /// The stream it continues, if any.
    stream: Option<u64>,
    window: u64,
    /// It fetches the object's tail for an open.
    tail: bool,
}

/// What a read the streams did not serve must do.
#[derive(Debug)]
pub(crate) enum Miss<P> {
    /// Wait for this background fetch, then [`ReadAhead::keep`] it: the read is `head` (the
    /// stream's last bytes, often none) followed by the fetch's first bytes.
    Wait {
        fetch: Fetch,
        pending: P,
        head: Bytes,
    },
    /// Fetch this range now, then [`ReadAhead::keep`] it.
    Fetch(Fetch),
}

impl<P> ReadAhead<P> {
    /// Copies `[offset, offset + buf.len())` into `buf` if a stream holds all of it; otherwise
    /// says what to fetch for a read of an object of `size` bytes: the background fetch that
    /// holds the rest of the read, or more than asked when the read starts within or right at the
    /// end of a stream's bytes.
    pub(crate) fn read(&mut self, buf: &mut [u8], offset: u64, size: u64) -> Option<Miss<P>> {
        self.clock += 1;
        let len = buf.len() as u64;
        let end = offset + len;
        // The open is over at the first read the tail does not serve: the tail is not kept for
        // the life of the reader (the table has parsed what it needed from it).
        let in_tail = |s: &Stream<P>| s.tail && s.start <= offset && end <= s.end();
        if !self.streams.iter().any(in_tail) {
            self.streams.retain(|s| !s.tail);
        }
        if let Some(s) = self
            .streams
            .iter_mut()
            .find(|s| s.start <= offset && end <= s.end())
        {
            let from = (offset - s.start) as usize;
            buf.copy_from_slice(&s.bytes[from..from + buf.len()]);
            s.used = self.clock;
            return None;
        }

        // A background fetch that holds the read, or its end when the stream's bytes hold
        // its start (a block across the windows' boundary).
        if let Some(s) = self.streams.iter_mut().find(|s| {
            s.ahead.as_ref().is_some_and(|(r, _)| {
                end <= r.end && (r.start <= offset || (s.start <= offset && s.end() == r.start))
            })
        }) && let Some((range, pending)) = s.ahead.take()
        {
            let head = match offset < range.start {
                true => s.bytes.slice((offset - s.start) as usize..),
                false => Bytes::new(),
            };
            let window = range.end - range.start;
            let fetch = Fetch {
                range,
                stream: Some(s.id),
                window,
                tail: false,
            };
            return Some(Miss::Wait {
                fetch,
                pending,
                head,
            });
        }
        let continued = self
            .streams
            .iter()
            .find(|s| s.start <= offset && offset <= s.end());
        let window = continued.map_or(0, |s| grow(s.window));
        // The caller checked that the read lies within the object, so `fetch_end >= end`.
        let fetch_end = offset.saturating_add(len.max(window)).min(size);
        let tail = end == size && continued.is_none();
        let fetch_start = match tail {
            true => offset.min(size.saturating_sub(TAIL_BYTES)),
            false => offset,
        };
        Some(Miss::Fetch(Fetch {
            range: fetch_start..fetch_end,
            stream: continued.map(|s| s.id),
            window,
            tail,
        }))
    }

    /// Keeps what `fetch` brought as the bytes of the stream it continued, or of a new stream
    /// in place of the least recently used one. Returns the range to fetch in the background
    /// next, if the stream is sequential and the object goes on; the caller starts that fetch
    /// and hands it to [`ReadAhead::ahead`].
    pub(crate) fn keep(
        &mut self,
        fetch: Fetch,
        bytes: Bytes,
        size: u64,
    ) -> Option<(u64, Range<u64>)> {
        // A read larger than a window keeps only its last window: what a reader continuing it
        // needs, and the bound on what a stream holds.
        let dropped = bytes.len().saturating_sub(MAX_WINDOW as usize);
        let (start, bytes) = match dropped {
            0 => (fetch.range.start, bytes),
            // A copy: a slice would keep the whole fetch alive.
            _ => (
                fetch.range.start + dropped as u64,
                Bytes::copy_from_slice(&bytes[dropped..]),
            ),
        };
        // The stream may have been replaced since: then this is a new one.
        let slot = fetch
            .stream
            .and_then(|id| self.streams.iter().position(|s| s.id == id))
            .or_else(|| (self.streams.len() >= STREAMS).then(|| self.least_recently_used()));
        let id = self.next_id;
        self.next_id += 1;
        let stream = Stream {
            id,
            start,
            bytes,
            window: fetch.window,
            used: self.clock,
            ahead: None,
            tail: fetch.tail,
        };
        let next = (stream.window > 0 && stream.end() < size).then(|| {
            (
                id,
                stream.end()..stream.end().saturating_add(grow(stream.window)).min(size),
            )
        });
        match slot.and_then(|i| self.streams.get_mut(i)) {
            // Replacing a stream drops its background fetch, if any.
            Some(s) => *s = stream,
            None => self.streams.push(stream),
        }
        next
    }

    /// Records `pending`, the background fetch of `range`, as stream `id`'s next bytes; drops
    /// it if the stream is gone.
    pub(crate) fn ahead(&mut self, id: u64, range: Range<u64>, pending: P) {
        if let Some(s) = self.streams.iter_mut().find(|s| s.id == id) {
            s.ahead = Some((range, pending));
        }
    }

    fn least_recently_used(&self) -> usize {
        self.streams
            .iter()
            .enumerate()
            .min_by_key(|(_, s)| s.used)
            .map_or(0, |(i, _)| i)
    }
}

/// The window after `window`.
fn grow(window: u64) -> u64 {
    match window {
        0 => FIRST_WINDOW,
        w => (w * 2).min(MAX_WINDOW),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 64 << 20;

    /// The object's byte at `i`.
    fn byte(i: u64) -> u8 {
        (i % 251) as u8
    }

    fn fetch(range: Range<u64>) -> Bytes {
        range.map(byte).collect::<Vec<_>>().into()
    }

    /// What a read did.
    #[derive(Debug, Default, PartialEq)]
    struct Did {
        /// Bytes fetched while the reader waited.
        fetched: u64,
        /// Bytes of a background fetch the reader waited for.
        waited: u64,
        /// Bytes fetched in the background.
        ahead: u64,
    }

    /// Reads `len` bytes at `offset` through `ahead` as the reader does, the background
    /// fetches completing at once (their bytes are the pending value).
    fn read(ahead: &mut ReadAhead<Bytes>, offset: u64, len: usize) -> Did {
        let mut buf = vec![0u8; len];
        let mut did = Did::default();
        if let Some(miss) = ahead.read(&mut buf, offset, SIZE) {
            let (f, bytes, head) = match miss {
                Miss::Wait {
                    fetch,
                    pending,
                    head,
                } => {
                    did.waited = pending.len() as u64;
                    (fetch, pending, head)
                }
                Miss::Fetch(f) => {
                    let bytes = fetch(f.range.clone());
                    did.fetched = bytes.len() as u64;
                    (f, bytes, Bytes::new())
                }
            };
            buf[..head.len()].copy_from_slice(&head);
            let from = (offset + head.len() as u64 - f.range.start) as usize;
            buf[head.len()..].copy_from_slice(&bytes[from..from + len - head.len()]);
            if let Some((id, next)) = ahead.keep(f, bytes, SIZE) {
                did.ahead = next.end - next.start;
                ahead.ahead(id, next.clone(), fetch(next));
            }
        }
        for (i, b) in buf.iter().enumerate() {
            assert_eq!(
                *b,
                byte(offset + i as u64),
                "byte {i} of a read at {offset}"
            );
        }
        did
    }

    #[test]
    fn a_sequential_reader_waits_only_for_its_first_two_fetches() {
        let mut ahead = ReadAhead::default();
        let block = 4096;
        let mut did = Vec::new();
        for k in 0..4096u64 {
            did.push(read(&mut ahead, k * block, block as usize));
        }
        let fetched: Vec<u64> = did.iter().map(|d| d.fetched).filter(|&n| n > 0).collect();
        assert_eq!(fetched, [block, FIRST_WINDOW], "{did:?}");
        let background: Vec<u64> = did.iter().map(|d| d.ahead).filter(|&n| n > 0).collect();
        assert_eq!(background[0], FIRST_WINDOW * 2);
        assert!(background.iter().all(|&n| n <= MAX_WINDOW));
        // 16 MiB in about 16 MiB / 2 MiB requests, plus the ramp.
        assert!(background.len() <= 8 + 6, "{background:?}");
        let waited = did.iter().filter(|d| d.waited > 0).count();
        assert_eq!(
            waited,
            background.len() - 1,
            "every background fetch but the last is used"
        );
    }

    #[test]
    fn blocks_across_window_boundaries_wait_only_for_the_background_fetch() {
        let mut ahead = ReadAhead::default();
        // Blocks of an odd size never line up with the windows.
        let block = 4093u64;
        let mut fetched = 0;
        for k in 0..4096u64 {
            fetched += u64::from(read(&mut ahead, k * block, block as usize).fetched > 0);
        }
        assert_eq!(fetched, 2);
    }

    #[test]
    fn random_reads_fetch_exactly_their_bytes() {
        let mut ahead = ReadAhead::default();
        for k in [90u64, 7, 55, 13, 2, 70, 31] {
            let did = read(&mut ahead, k * 100_000, 4096);
            assert_eq!(
                did,
                Did {
                    fetched: 4096,
                    ..Did::default()
                }
            );
        }
    }

    #[test]
    fn interleaved_readers_each_keep_their_stream() {
        let mut ahead = ReadAhead::default();
        let starts = [0u64, 16 << 20, 32 << 20];
        let mut waits = 0;
        for k in 0..1024u64 {
            for s in starts {
                waits += u64::from(read(&mut ahead, s + k * 4096, 4096).fetched > 0);
            }
        }
        // Two fetches per stream; without following each stream every read would be one.
        assert_eq!(waits, 6);
    }

    #[test]
    fn a_replaced_stream_drops_its_background_fetch() {
        let mut ahead = ReadAhead::default();
        read(&mut ahead, 0, 10);
        assert!(read(&mut ahead, 10, 10).ahead > 0);
        for k in 1..=STREAMS as u64 {
            read(&mut ahead, k * 1_000_000, 10);
        }
        assert!(ahead.streams.iter().all(|s| s.ahead.is_none()));
        assert!(ahead.streams.iter().all(|s| s.start != 10));
    }

    #[test]
    fn windows_stop_at_the_end_of_the_object() {
        let mut ahead = ReadAhead::default();
        read(&mut ahead, SIZE - 16384, 4096);
        let did = read(&mut ahead, SIZE - 12288, 4096);
        assert_eq!(
            did,
            Did {
                fetched: 12288,
                ..Did::default()
            },
            "nothing after the end"
        );
    }

    #[test]
    fn a_read_at_the_end_fetches_the_tail_for_the_reads_before_it() {
        let mut ahead = ReadAhead::default();
        // A table open: the footer, then the index and the properties before it.
        let did = read(&mut ahead, SIZE - 53, 53);
        assert_eq!(did.fetched, TAIL_BYTES);
        assert_eq!(read(&mut ahead, SIZE - 60_000, 50_000), Did::default());
        assert_eq!(read(&mut ahead, SIZE - 10_000, 9_000), Did::default());
        // The first read elsewhere ends the open, even one another stream serves: the tail is
        // let go.
        read(&mut ahead, 0, 4096);
        assert!(ahead.streams.iter().all(|s| !s.tail));
        read(&mut ahead, SIZE - 53, 53);
        read(&mut ahead, 100, 100);
        assert!(ahead.streams.iter().all(|s| !s.tail));
        assert_eq!(read(&mut ahead, SIZE - 53, 53).fetched, TAIL_BYTES);
        // An object smaller than the tail is fetched whole.
        let mut small = ReadAhead::<Bytes>::default();
        let mut buf = [0u8; 8];
        let Some(Miss::Fetch(f)) = small.read(&mut buf, 992, 1000) else {
            panic!("a miss");
        };
        assert_eq!(f.range, 0..1000);
    }

    #[test]
    fn a_read_larger_than_the_window_is_fetched_whole_and_kept_in_part() {
        let mut ahead = ReadAhead::default();
        read(&mut ahead, 0, 10);
        assert_eq!(read(&mut ahead, 10, 1 << 20).fetched, 1 << 20);
        let big = 3 * MAX_WINDOW as usize;
        assert_eq!(read(&mut ahead, 10 << 20, big).fetched, big as u64);
        assert!(
            ahead
                .streams
                .iter()
                .all(|s| s.bytes.len() as u64 <= MAX_WINDOW)
        );
        // Its last window is still there for a reader continuing it.
        let last = (10 << 20) + big as u64 - 4096;
        assert_eq!(read(&mut ahead, last, 4096), Did::default());
    }
}
