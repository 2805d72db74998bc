//! Read-ahead for an object read by ranged GETs: a read that continues where an earlier one
//! ended fetches more than it asked for, twice as much each time up to [`MAX_WINDOW`], so a
//! compaction or a scan reading a table front to back makes one request per window instead of
//! one per few blocks. A read that continues nothing (a point lookup's block) fetches exactly
//! its bytes: random reads never pay for bytes they do not use.
//!
//! Up to [`STREAMS`] sequential readers of one object are followed at once (the parallel
//! executors read one table from several threads, each its own key range); the least recently
//! used stream makes room for a new one. The state is only consulted and updated under its
//! lock: the fetch itself runs outside it, so concurrent readers of one object do not queue
//! behind one another's requests (two of them may fetch overlapping bytes; both are correct).

use std::ops::Range;

use bytes::Bytes;

/// The window of a stream's second read; each later read doubles it.
pub(crate) const FIRST_WINDOW: u64 = 64 << 10;
/// The largest window: requests per GB read sequentially are then about 1 GB / 2 MiB.
pub(crate) const MAX_WINDOW: u64 = 2 << 20;
/// Sequential readers of one object followed at once.
pub(crate) const STREAMS: usize = 4;

/// The streams of one object.
#[derive(Debug, Default)]
pub(crate) struct ReadAhead {
    streams: Vec<Stream>,
    /// Counts reads, to find the least recently used stream.
    clock: u64,
}

/// Bytes fetched for one sequential reader.
#[derive(Debug)]
struct Stream {
    /// Offset of `bytes[0]`.
    start: u64,
    bytes: Bytes,
    /// The window its last fetch used (0: it fetched exactly the read).
    window: u64,
    used: u64,
}

impl Stream {
    fn end(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

/// What to fetch for a read the streams could not serve.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Fetch {
    pub range: Range<u64>,
    /// The stream it continues, if any, and the window it used.
    stream: Option<usize>,
    window: u64,
}

impl ReadAhead {
    /// Copies `[offset, offset + buf.len())` into `buf` if a stream holds all of it.
    pub(crate) fn copy(&mut self, buf: &mut [u8], offset: u64) -> bool {
        self.clock += 1;
        let end = offset + buf.len() as u64;
        let Some(s) = self
            .streams
            .iter_mut()
            .find(|s| s.start <= offset && end <= s.end())
        else {
            return false;
        };
        let from = (offset - s.start) as usize;
        buf.copy_from_slice(&s.bytes[from..from + buf.len()]);
        s.used = self.clock;
        true
    }

    /// The range to fetch for a read of `len` bytes at `offset` of an object of `size` bytes
    /// that [`ReadAhead::copy`] could not serve: more than asked when the read starts within
    /// or right at the end of a stream's bytes.
    pub(crate) fn plan(&self, offset: u64, len: u64, size: u64) -> Fetch {
        let continued = self
            .streams
            .iter()
            .position(|s| s.start <= offset && offset <= s.end());
        let window = continued.map_or(0, |i| match self.streams[i].window {
            0 => FIRST_WINDOW,
            w => (w * 2).min(MAX_WINDOW),
        });
        // The caller checked that the read lies within the object, so `end >= offset + len`.
        let end = offset.saturating_add(len.max(window)).min(size);
        Fetch {
            range: offset..end,
            stream: continued,
            window,
        }
    }

    /// Keeps what `fetch` brought as the bytes of the stream it continued, or of a new stream
    /// in place of the least recently used one.
    pub(crate) fn keep(&mut self, fetch: Fetch, bytes: Bytes) {
        let stream = Stream {
            start: fetch.range.start,
            bytes,
            window: fetch.window,
            used: self.clock,
        };
        // The stream may have moved on or been replaced since `plan`: then this is a new one.
        let slot = fetch
            .stream
            .filter(|&i| self.streams.get(i).is_some_and(|s| s.end() >= stream.start))
            .or_else(|| (self.streams.len() >= STREAMS).then(|| self.least_recently_used()));
        match slot.and_then(|i| self.streams.get_mut(i)) {
            Some(s) => *s = stream,
            None => self.streams.push(stream),
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

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u64 = 64 << 20;

    /// The object's byte at `i`.
    fn byte(i: u64) -> u8 {
        (i % 251) as u8
    }

    /// Reads `len` bytes at `offset` through `ahead`, fetching from the pattern; returns the
    /// bytes fetched (0 when served from a stream).
    fn read(ahead: &mut ReadAhead, offset: u64, len: usize) -> u64 {
        let mut buf = vec![0u8; len];
        let fetched = if ahead.copy(&mut buf, offset) {
            0
        } else {
            let fetch = ahead.plan(offset, len as u64, SIZE);
            let bytes: Bytes = fetch.range.clone().map(byte).collect::<Vec<_>>().into();
            let n = bytes.len() as u64;
            let from = (offset - fetch.range.start) as usize;
            buf.copy_from_slice(&bytes[from..from + len]);
            ahead.keep(fetch, bytes);
            n
        };
        for (i, b) in buf.iter().enumerate() {
            assert_eq!(
                *b,
                byte(offset + i as u64),
                "byte {i} of a read at {offset}"
            );
        }
        fetched
    }

    #[test]
    fn a_sequential_reader_fetches_growing_windows_up_to_the_largest() {
        let mut ahead = ReadAhead::default();
        let block = 4096;
        let mut fetches = Vec::new();
        for k in 0..4096u64 {
            match read(&mut ahead, k * block, block as usize) {
                0 => {}
                n => fetches.push(n),
            }
        }
        assert_eq!(fetches[0], block, "the first read fetches exactly itself");
        assert_eq!(fetches[1], FIRST_WINDOW);
        assert_eq!(fetches[2], FIRST_WINDOW * 2);
        assert!(fetches.iter().all(|&n| n <= MAX_WINDOW));
        // 16 MiB in about 16 MiB / 2 MiB requests, plus the ramp.
        assert!(fetches.len() <= 8 + 6, "{fetches:?}");
    }

    #[test]
    fn random_reads_fetch_exactly_their_bytes() {
        let mut ahead = ReadAhead::default();
        for k in [90u64, 7, 55, 13, 2, 70, 31] {
            assert_eq!(read(&mut ahead, k * 100_000, 4096), 4096);
        }
    }

    #[test]
    fn interleaved_readers_each_keep_their_stream() {
        let mut ahead = ReadAhead::default();
        let starts = [0u64, 16 << 20, 32 << 20];
        let mut fetched = 0;
        for k in 0..1024u64 {
            for s in starts {
                fetched += u64::from(read(&mut ahead, s + k * 4096, 4096) > 0);
            }
        }
        // Without following each stream every read would be a fetch: 3072.
        assert!(fetched < 60, "{fetched} fetches");
    }

    #[test]
    fn a_window_stops_at_the_end_of_the_object() {
        let mut ahead = ReadAhead::default();
        read(&mut ahead, SIZE - 8192, 4096);
        let fetch = ahead.plan(SIZE - 4096, 4096, SIZE);
        assert_eq!(fetch.range, SIZE - 4096..SIZE);
    }

    #[test]
    fn a_read_larger_than_the_window_is_fetched_whole() {
        let mut ahead = ReadAhead::default();
        read(&mut ahead, 0, 10);
        assert_eq!(read(&mut ahead, 10, 1 << 20), 1 << 20);
    }
}
