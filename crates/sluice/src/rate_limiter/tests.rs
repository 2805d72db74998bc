use std::sync::mpsc;

use super::*;
use sluice_sst::fs::IoMode;

/// A clock that only moves when the limiter waits: a wait of `d` advances it by `d`, so tests
/// see exactly how long a write would have waited without spending that time.
#[derive(Default)]
struct ManualClock {
    now: Arc<Mutex<Duration>>,
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        *self.now.lock()
    }

    fn wait(
        &self,
        _cond: &Condvar,
        _guard: &mut parking_lot::MutexGuard<'_, Bucket>,
        timeout: Duration,
    ) {
        *self.now.lock() += timeout;
    }
}

fn manual(bytes_per_second: u64) -> (Arc<RateLimiter>, Arc<Mutex<Duration>>) {
    let clock = ManualClock::default();
    let now = Arc::clone(&clock.now);
    (
        RateLimiter::with_clock(bytes_per_second, Box::new(clock)),
        now,
    )
}

fn secs(now: &Arc<Mutex<Duration>>) -> f64 {
    now.lock().as_secs_f64()
}

#[test]
fn a_full_bucket_grants_a_refill_period_at_once_then_the_rate_applies() {
    let (limiter, now) = manual(1_000_000);
    // The bucket starts full: 100 ms worth.
    limiter.request(100_000);
    assert_eq!(secs(&now), 0.0);
    limiter.request(1_000_000);
    assert!((secs(&now) - 1.0).abs() < 0.01, "waited {} s", secs(&now));
    assert_eq!(limiter.bytes_through(), 1_100_000);
    assert!(limiter.wait_time() >= Duration::from_millis(990));
}

#[test]
fn a_request_larger_than_the_bucket_is_served_in_pieces() {
    let (limiter, now) = manual(1_000_000);
    limiter.request(100_000);
    limiter.request(10_000_000);
    assert!((secs(&now) - 10.0).abs() < 0.05, "waited {} s", secs(&now));
}

#[test]
fn zero_is_unlimited() {
    let (limiter, now) = manual(0);
    limiter.request(1 << 40);
    assert_eq!(secs(&now), 0.0);
    assert_eq!(limiter.bytes_through(), 1 << 40);
}

#[test]
fn a_new_rate_applies_to_later_requests() {
    let (limiter, now) = manual(1_000_000);
    limiter.request(100_000);
    limiter.set_bytes_per_second(4_000_000);
    assert_eq!(limiter.bytes_per_second(), 4_000_000);
    limiter.request(2_000_000);
    assert!((secs(&now) - 0.5).abs() < 0.01, "waited {} s", secs(&now));
}

#[test]
fn raising_the_rate_releases_a_waiting_writer() {
    // 1 KiB/s: the request below would take over 15 minutes at that rate.
    let limiter = RateLimiter::new(1024);
    let (done_tx, done_rx) = mpsc::channel();
    let waiting = Arc::clone(&limiter);
    let writer = std::thread::spawn(move || {
        waiting.request(1 << 20);
        done_tx.send(()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(50));
    limiter.set_bytes_per_second(0);
    // A liveness check, not a timing one: the writer must finish at all.
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the waiting writer was not released");
    writer.join().unwrap();
}

#[test]
fn limited_files_take_tokens_for_every_append() {
    let dir = tempfile::tempdir().unwrap();
    let (limiter, now) = manual(1_000_000);
    let fs = rate_limited(sluice_sst::fs::os_fs(), Arc::clone(&limiter));
    let mut f = fs.create(&dir.path().join("t"), IoMode::Buffered).unwrap();
    for _ in 0..11 {
        f.append(&[0u8; 100_000]).unwrap();
    }
    f.sync().unwrap();
    assert_eq!(limiter.bytes_through(), 1_100_000);
    assert!((secs(&now) - 1.0).abs() < 0.01, "waited {} s", secs(&now));
    assert_eq!(
        std::fs::metadata(dir.path().join("t")).unwrap().len(),
        1_100_000
    );
}
