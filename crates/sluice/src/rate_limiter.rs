//! A limit on the bytes per second flushes and compactions write, so background work cannot
//! take all of a device's bandwidth from foreground reads and writes (RocksDB's
//! `GenericRateLimiter` in its default writes-only mode).
//!
//! A token bucket: tokens accrue at `bytes_per_second`, up to one refill period's worth
//! ([`REFILL_PERIOD`], 100 ms as in RocksDB), and a write takes as many tokens as it has bytes,
//! waiting until they have accrued. A write larger than the bucket takes them in bucket-sized
//! pieces. The rate can be changed while writes wait; a waiting write notices within a
//! millisecond-scale wait and continues at the new rate. Zero means unlimited.
//!
//! The limiter sits in the storage layer (`RateLimitedFs`) under the tables flushes and
//! compactions write, so every executor's S7 is limited without knowing it.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sluice_sst::fs::{FileSystem, WrapWrites, WriteFile, WriteWrapper};

/// How much time's worth of tokens the bucket holds.
pub const REFILL_PERIOD: Duration = Duration::from_millis(100);

/// Where the limiter gets time from: the real clock, or a test's.
pub(crate) trait Clock: Send + Sync {
    /// Time since an arbitrary fixed start.
    fn now(&self) -> Duration;
    /// Waits on `cond` (with `guard` locked) for at most `timeout`.
    fn wait(
        &self,
        cond: &Condvar,
        guard: &mut parking_lot::MutexGuard<'_, Bucket>,
        timeout: Duration,
    );
}

/// The real clock.
struct SystemClock {
    start: Instant,
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    fn wait(
        &self,
        cond: &Condvar,
        guard: &mut parking_lot::MutexGuard<'_, Bucket>,
        timeout: Duration,
    ) {
        cond.wait_for(guard, timeout);
    }
}

/// The bucket's state.
#[derive(Debug)]
pub(crate) struct Bucket {
    bytes_per_second: u64,
    tokens: f64,
    /// When `tokens` was last brought up to date.
    updated: Duration,
}

impl Bucket {
    fn capacity(&self) -> f64 {
        self.bytes_per_second as f64 * REFILL_PERIOD.as_secs_f64()
    }

    fn refill(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.bytes_per_second as f64).min(self.capacity());
        self.updated = now;
    }
}

/// The limiter; share it as `Arc<RateLimiter>` (see the module docs).
pub struct RateLimiter {
    bucket: Mutex<Bucket>,
    changed: Condvar,
    clock: Box<dyn Clock>,
    bytes_through: AtomicU64,
    wait_nanos: AtomicU64,
}

impl fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiter")
            .field("bytes_per_second", &self.bytes_per_second())
            .field("bytes_through", &self.bytes_through())
            .finish()
    }
}

impl RateLimiter {
    /// A limiter at `bytes_per_second` (0: unlimited).
    pub fn new(bytes_per_second: u64) -> Arc<Self> {
        Self::with_clock(
            bytes_per_second,
            Box::new(SystemClock {
                start: Instant::now(),
            }),
        )
    }

    /// A limiter reading time from `clock` (tests drive time by hand).
    pub(crate) fn with_clock(bytes_per_second: u64, clock: Box<dyn Clock>) -> Arc<Self> {
        let now = clock.now();
        let mut bucket = Bucket {
            bytes_per_second,
            tokens: 0.0,
            updated: now,
        };
        bucket.tokens = bucket.capacity();
        Arc::new(RateLimiter {
            bucket: Mutex::new(bucket),
            changed: Condvar::new(),
            clock,
            bytes_through: AtomicU64::new(0),
            wait_nanos: AtomicU64::new(0),
        })
    }

    /// The current limit (0: unlimited).
    pub fn bytes_per_second(&self) -> u64 {
        self.bucket.lock().bytes_per_second
    }

    /// Changes the limit; writes waiting now continue at the new rate.
    pub fn set_bytes_per_second(&self, bytes_per_second: u64) {
        let mut b = self.bucket.lock();
        b.refill(self.clock.now());
        b.bytes_per_second = bytes_per_second;
        b.tokens = b.tokens.min(b.capacity());
        drop(b);
        self.changed.notify_all();
    }

    /// Bytes granted so far.
    pub fn bytes_through(&self) -> u64 {
        self.bytes_through.load(Ordering::Relaxed)
    }

    /// Time writers spent waiting for tokens so far.
    pub fn wait_time(&self) -> Duration {
        Duration::from_nanos(self.wait_nanos.load(Ordering::Relaxed))
    }

    /// Waits until `bytes` may be written.
    pub fn request(&self, bytes: u64) {
        let started = self.clock.now();
        let mut left = bytes as f64;
        let mut b = self.bucket.lock();
        while left > 0.0 {
            if b.bytes_per_second == 0 {
                break;
            }
            b.refill(self.clock.now());
            // Never ask for more than the bucket holds, or a large write would wait forever.
            let piece = left.min(b.capacity());
            if b.tokens >= piece {
                b.tokens -= piece;
                left -= piece;
                continue;
            }
            let missing = piece - b.tokens;
            let wait = Duration::from_secs_f64(missing / b.bytes_per_second as f64);
            self.clock.wait(&self.changed, &mut b, wait);
        }
        drop(b);
        self.bytes_through.fetch_add(bytes, Ordering::Relaxed);
        let waited = self.clock.now().saturating_sub(started);
        self.wait_nanos
            .fetch_add(waited.as_nanos() as u64, Ordering::Relaxed);
    }
}

/// A file system whose files' appends first take tokens from a [`RateLimiter`].
pub(crate) type RateLimitedFs = WrapWrites<LimitWrites>;

/// Builds a [`RateLimitedFs`]: `inner`, with writes limited by `limiter`.
pub(crate) fn rate_limited(inner: Arc<dyn FileSystem>, limiter: Arc<RateLimiter>) -> RateLimitedFs {
    WrapWrites::new(inner, LimitWrites(limiter))
}

/// Wraps each new file's writer so that its appends take tokens from the limiter first.
#[derive(Debug)]
pub(crate) struct LimitWrites(Arc<RateLimiter>);

impl WriteWrapper for LimitWrites {
    fn wrap(&self, _path: &Path, file: Box<dyn WriteFile>) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(RateLimitedFile {
            inner: file,
            limiter: Arc::clone(&self.0),
        }))
    }
}

#[derive(Debug)]
struct RateLimitedFile {
    inner: Box<dyn WriteFile>,
    limiter: Arc<RateLimiter>,
}

impl WriteFile for RateLimitedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.limiter.request(data.len() as u64);
        self.inner.append(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()
    }
}

#[cfg(test)]
mod tests;
