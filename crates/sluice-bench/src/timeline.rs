//! Throughput over time: operations completed in each whole second of a benchmark or phase,
//! so a stall shows as a dip rather than vanishing into an average.
//!
//! Sample `i` counts the operations whose completion fell in `[i, i + 1)` seconds after the
//! phase began. Each client thread keeps its own [`PerSecond`] (no sharing on the hot path)
//! and the threads' counts are summed at the end. The last sample usually covers only part
//! of a second; [`rates`] accounts for that when turning counts into ops/s.

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

/// Throughput points `(seconds since start, ops/s)` of per-second `counts` over a phase of
/// `seconds`: each at the middle of its second, the last one divided by the part of its second
/// the phase lasted (a final half second of 500 operations ran at 1000 ops/s). A final slice
/// shorter than [`MIN_LAST_SLICE_SECONDS`] is dropped: its rate would be mostly noise.
pub fn rates(counts: &[u64], seconds: f64) -> Vec<(f64, f64)> {
    counts
        .iter()
        .enumerate()
        .filter_map(|(i, &n)| {
            let start = i as f64;
            let width = (seconds - start).clamp(0.0, 1.0);
            let last = i + 1 == counts.len();
            let width = if last && width > 0.0 { width } else { 1.0 };
            if last && i > 0 && width < MIN_LAST_SLICE_SECONDS {
                return None;
            }
            Some((start + width / 2.0, n as f64 / width))
        })
        .collect()
}

/// The shortest final slice of a phase [`rates`] plots.
pub const MIN_LAST_SLICE_SECONDS: f64 = 0.2;

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
    fn spread_ignores_the_partial_last_second() {
        assert_eq!(spread(&[]), None);
        assert_eq!(spread(&[7]), Some((7, 7, 7)));
        assert_eq!(spread(&[10, 30, 20, 1]), Some((10, 20, 30)));
    }
}
