//! Per-operation latencies in an HdrHistogram.
//!
//! Values are recorded in nanoseconds, because a memtable hit takes well under a microsecond,
//! and reported in microseconds with decimals. Three significant digits bound the error of any
//! percentile to 0.1%; the range is 1 ns to 1 hour, and longer operations are clamped to it.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Longest latency the histogram distinguishes, in nanoseconds (one hour).
pub const MAX_LATENCY_NANOS: u64 = 3_600 * 1_000_000_000;

/// Significant decimal digits kept per value.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// Smallest ratio between the latencies of two neighbouring points of [`LatencyHistogram::cdf`].
pub const CDF_STEP_RATIO: f64 = 1.02;

/// The latencies of one thread, or of all threads once merged.
#[derive(Clone, Debug, PartialEq)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

/// The percentiles reports print, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest recorded value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // Both bounds and the precision are constants that satisfy hdrhistogram's preconditions
        // (low >= 1, high >= 2 * low, sigfig <= 5), so construction cannot fail.
        let hist = Histogram::new_with_bounds(1, MAX_LATENCY_NANOS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        LatencyHistogram { hist }
    }

    /// Records one operation that took `d`.
    #[inline]
    pub fn record(&mut self, d: Duration) {
        self.record_nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Records one operation that took `nanos` nanoseconds (clamped to the histogram's range).
    #[inline]
    pub fn record_nanos(&mut self, nanos: u64) {
        self.hist
            .saturating_record(nanos.clamp(1, MAX_LATENCY_NANOS));
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both histograms have the same bounds, so no value of `other` is out of range.
        if let Err(e) = self.hist.add(&other.hist) {
            tracing::warn!(error = %e, "could not merge latency histograms");
        }
    }

    /// Number of operations recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// The latency at `percentile` (0 to 100) in microseconds; 0 when empty.
    pub fn percentile_us(&self, percentile: f64) -> f64 {
        if self.hist.is_empty() {
            return 0.0;
        }
        self.hist
            .value_at_quantile(percentile.clamp(0.0, 100.0) / 100.0) as f64
            / 1e3
    }

    /// The cumulative distribution, for a latency CDF chart: `(latency in microseconds,
    /// percent of operations at or below it)`, ascending in both. The latency of a point is
    /// the highest value its histogram bucket stands for. Points closer than
    /// [`CDF_STEP_RATIO`] to the previous one are merged into the next, so a line holds a few
    /// hundred points whatever the count; the last point (100%) is always kept.
    pub fn cdf(&self) -> Vec<(f64, f64)> {
        let total = self.hist.len();
        if total == 0 {
            return Vec::new();
        }
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut below = 0u64;
        let mut last_kept = 0.0;
        for v in self.hist.iter_recorded() {
            below += v.count_since_last_iteration();
            let us = self.hist.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
            let percent = below as f64 / total as f64 * 100.0;
            if below == total || us >= last_kept * CDF_STEP_RATIO {
                points.push((us, percent));
                last_kept = us;
            }
        }
        points
    }

    /// The percentiles reports print.
    pub fn summary(&self) -> LatencySummary {
        if self.hist.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            p50: self.percentile_us(50.0),
            p99: self.percentile_us(99.0),
            p999: self.percentile_us(99.9),
            max: self.hist.max() as f64 / 1e3,
            mean: self.hist.mean() / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= b.abs() * 0.002 + 1e-9
    }

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let mut h = LatencyHistogram::new();
        // 1..=10_000 microseconds, one each.
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        let s = h.summary();
        assert_eq!(h.len(), 10_000);
        assert!(close(s.p50, 5_000.0), "{s:?}");
        assert!(close(s.p99, 9_900.0), "{s:?}");
        assert!(close(s.p999, 9_990.0), "{s:?}");
        assert!(close(s.max, 10_000.0), "{s:?}");
        assert!(close(s.mean, 5_000.5), "{s:?}");
    }

    #[test]
    fn sub_microsecond_values_keep_their_decimals() {
        let mut h = LatencyHistogram::new();
        for _ in 0..99 {
            h.record_nanos(250);
        }
        h.record_nanos(1_500);
        let s = h.summary();
        assert!(close(s.p50, 0.25), "{s:?}");
        assert!(close(s.p99, 0.25), "{s:?}");
        assert!(close(s.max, 1.5), "{s:?}");
    }

    #[test]
    fn merge_combines_threads_and_extremes_are_clamped() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for _ in 0..90 {
            a.record_nanos(1_000);
        }
        for _ in 0..10 {
            b.record_nanos(100_000);
        }
        a.merge(&b);
        assert_eq!(a.len(), 100);
        assert!(close(a.percentile_us(50.0), 1.0));
        assert!(close(a.percentile_us(95.0), 100.0));
        a.record_nanos(0);
        a.record(Duration::from_secs(10 * 3600));
        assert_eq!(a.len(), 102);
        assert!(a.summary().max <= MAX_LATENCY_NANOS as f64 / 1e3 * 1.001);
    }

    #[test]
    fn cdf_rises_to_100_percent_with_log_spaced_points() {
        let mut h = LatencyHistogram::new();
        for us in 1..=10_000u64 {
            h.record(Duration::from_micros(us));
        }
        let cdf = h.cdf();
        assert!(cdf.len() > 100 && cdf.len() < 1_000, "{}", cdf.len());
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        let (last_us, last_pct) = *cdf.last().unwrap();
        assert_eq!(last_pct, 100.0);
        assert!(close(last_us, 10_000.0), "{last_us}");
        // Half the operations took at most about 5 ms.
        let half = cdf.iter().find(|p| p.1 >= 50.0).unwrap();
        assert!((4_900.0..5_100.0).contains(&half.0), "{half:?}");
        assert!(LatencyHistogram::new().cdf().is_empty());
    }

    #[test]
    fn empty_histogram_reports_zeros() {
        let h = LatencyHistogram::default();
        assert!(h.is_empty());
        assert_eq!(h.summary(), LatencySummary::default());
        assert_eq!(h.percentile_us(99.0), 0.0);
    }
}
