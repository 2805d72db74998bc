//! Throughput over time: operations completed in each whole second of a benchmark or phase,
//! so a stall shows as a dip rather than vanishing into an average.
//!
//! Sample `i` counts the operations whose completion fell in `[i, i + 1)` seconds after the
//! phase began. Each client thread keeps its own [`PerSecond`] (no sharing on the hot path)
//! and the threads' counts are summed at the end. The last sample usually covers only part
//! of a second; [`slices`] accounts for that when turning counts into ops/s, for the chart
//! ([`rates`]) and the text ([`rates_text`]) alike.

use std::time::Duration;

/// Per-second completion counts of one thread, or of all threads once merged.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerSecond {
    counts: Vec<u64>,
}

impl PerSecond {
    /// Counts one operation that completed `since_start` after the phase began.
    #[inline]
    pub fn record(&mut self, since_start: Duration) {
        let second = usize::try_from(since_start.as_secs()).unwrap_or(usize::MAX);
        if self.counts.len() <= second {
            // A phase cannot run for usize::MAX seconds: this only ever grows by a few slots.
            self.counts.resize(second.saturating_add(1), 0);
        }
        if let Some(n) = self.counts.get_mut(second) {
            *n += 1;
        }
    }

    /// Adds another thread's counts.
    pub fn merge(&mut self, other: &PerSecond) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
    }

    /// The counts, one per second from the start.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// The counts, consumed.
    pub fn into_counts(self) -> Vec<u64> {
        self.counts
    }
}

/// One per-second sample as a rate: the slice of the phase it covers and its operations.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slice {
    /// Seconds since the phase began when the slice starts (its index).
    pub start: f64,
    /// Length of the slice: 1, or less for the phase's last, partial second.
    pub seconds: f64,
    /// Operations completed in the slice.
    pub ops: u64,
    /// `ops / seconds`.
    pub ops_per_sec: f64,
    /// The last slice, shorter than a second.
    pub partial: bool,
    /// False for a last partial slice shorter than [`MIN_LAST_SLICE_SECONDS`] (and not the
    /// only one): its rate would be mostly noise, so neither the chart nor the text rates it.
    pub rated: bool,
}

/// The slices of per-second `counts` over a phase of `seconds`. Every sample but the last
/// covers a whole second; the last covers what is left of the phase, `seconds - (n - 1)`,
/// when that is under a second (a final half second of 500 operations ran at 1000 ops/s),
/// and a whole second otherwise (the phase went on after its last completion, waiting for
/// flushes and compactions). The throughput chart ([`rates`]) and the YCSB table both read
/// these, so they give the same rate for the same second.
pub fn slices(counts: &[u64], seconds: f64) -> Vec<Slice> {
    counts
        .iter()
        .enumerate()
        .map(|(i, &ops)| {
            let start = i as f64;
            let last = i + 1 == counts.len();
            let left = (seconds - start).clamp(0.0, 1.0);
            let width = if last && left > 0.0 { left } else { 1.0 };
            Slice {
                start,
                seconds: width,
                ops,
                ops_per_sec: ops as f64 / width,
                partial: width < 1.0,
                rated: !(last && i > 0 && width < MIN_LAST_SLICE_SECONDS),
            }
        })
        .collect()
}

/// Throughput points `(seconds since start, ops/s)` of per-second `counts` over a phase of
/// `seconds`: each rated [`Slice`] at its middle, at its rate.
pub fn rates(counts: &[u64], seconds: f64) -> Vec<(f64, f64)> {
    slices(counts, seconds)
        .into_iter()
        .filter(|s| s.rated)
        .map(|s| (s.start + s.seconds / 2.0, s.ops_per_sec))
        .collect()
}

/// The shortest final slice of a phase that is rated (plotted, and printed as a rate).
pub const MIN_LAST_SLICE_SECONDS: f64 = 0.2;

/// `[241560, 269216, 74735 (partial: 33631 ops in 0.45 s)]`: the ops/s of each second, the last,
/// partial one rated over its actual length and marked, or only counted when too short to
/// rate. The same rates as the throughput chart's points.
pub fn rates_text(counts: &[u64], seconds: f64) -> String {
    let items: Vec<String> = slices(counts, seconds)
        .iter()
        .map(|s| match (s.partial, s.rated) {
            (false, _) => format!("{:.0}", s.ops_per_sec),
            (true, true) => format!(
                "{:.0} (partial: {} ops in {:.2} s)",
                s.ops_per_sec, s.ops, s.seconds
            ),
            (true, false) => format!(
                "partial: {} ops in {:.2} s, too short to rate",
                s.ops, s.seconds
            ),
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// `(min, median, max)` of the complete seconds of `counts` (all but the last, partial one),
/// or of the only sample; `None` when there are none.
pub fn spread(counts: &[u64]) -> Option<(u64, u64, u64)> {
    let whole = match counts {
        [] => return None,
        [only] => std::slice::from_ref(only),
        [whole @ .., _] => whole,
    };
    let mut sorted = whole.to_vec();
    sorted.sort_unstable();
    Some((
        *sorted.first()?,
        *sorted.get(sorted.len() / 2)?,
        *sorted.last()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_land_in_their_second_and_threads_sum() {
        let mut a = PerSecond::default();
        a.record(Duration::from_millis(10));
        a.record(Duration::from_millis(999));
        a.record(Duration::from_millis(2_500));
        assert_eq!(a.counts(), [2, 0, 1]);
        let mut b = PerSecond::default();
        b.record(Duration::from_millis(1_000));
        b.record(Duration::from_secs(4));
        a.merge(&b);
        assert_eq!(a.into_counts(), [2, 1, 1, 0, 1]);
    }

    #[test]
    fn the_last_partial_second_is_scaled_or_dropped() {
        assert_eq!(
            rates(&[100, 200, 50], 2.5),
            [(0.5, 100.0), (1.5, 200.0), (2.25, 100.0)]
        );
        // 0.1 s left: too short to plot.
        assert_eq!(rates(&[100, 200, 5], 2.1), [(0.5, 100.0), (1.5, 200.0)]);
        // A phase shorter than a second keeps its only point.
        assert_eq!(rates(&[30], 0.1), [(0.05, 300.0)]);
        // The phase went on after the last completion (waiting for compactions): full width.
        assert_eq!(rates(&[100, 80], 5.0), [(0.5, 100.0), (1.5, 80.0)]);
        assert!(rates(&[], 1.0).is_empty());
    }

    #[test]
    fn a_partial_last_second_is_a_rate_over_its_length_in_text_and_chart() {
        // 2.45 s: two whole seconds, then 0.45 s with 45 operations, 100 ops/s.
        let s = slices(&[100, 200, 45], 2.45);
        assert_eq!(
            s.iter().map(|s| s.partial).collect::<Vec<_>>(),
            [false, false, true]
        );
        let last = s[2];
        assert!((last.seconds - 0.45).abs() < 1e-9 && (last.ops_per_sec - 100.0).abs() < 1e-6);
        // The text prints the chart's rates, the last marked as partial, not 45 ops/s.
        let points = rates(&[100, 200, 45], 2.45);
        assert!((points[2].1 - last.ops_per_sec).abs() < 1e-9);
        assert_eq!(
            rates_text(&[100, 200, 45], 2.45),
            "[100, 200, 100 (partial: 45 ops in 0.45 s)]"
        );
        // Too short to rate: counted, not rated, in the text as on the chart.
        assert_eq!(
            rates_text(&[100, 200, 5], 2.1),
            "[100, 200, partial: 5 ops in 0.10 s, too short to rate]"
        );
        // A phase of one short slice: its only rate, the one the table's header gives.
        assert_eq!(
            rates_text(&[200_000], 0.2),
            "[1000000 (partial: 200000 ops in 0.20 s)]"
        );
        // Whole seconds only, or a phase that went on after its last completion.
        assert_eq!(rates_text(&[100, 80], 2.0), "[100, 80]");
        assert_eq!(rates_text(&[100, 80], 5.0), "[100, 80]");
        assert_eq!(rates_text(&[], 0.0), "[]");
    }

    #[test]
    fn spread_ignores_the_partial_last_second() {
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[7]), Some((7, 7, 7)));
        assert_eq!(spread(&[10, 30, 20, 1]), Some((10, 20, 30)));
    }
}
