//! The static split's shares: a compaction's sub-tasks cut into one contiguous run per side (so
//! each side's outputs cover one key range and the sides' files never overlap), sized by
//! Co-KV's fixed ratio, and a worker's run cut again into pieces sent one after another. Also
//! each side's measured bandwidth, which sizes the dynamic split's chunks
//! ([`super::dispatch`]).

use std::ops::Range;

/// Cuts sub-tasks of `sizes` bytes into `weights.len()` contiguous ranges, in order, the
/// `i`-th holding about `weights[i] / sum(weights)` of the bytes. Ranges may be empty; their
/// union is `0..sizes.len()`. Cuts fall on sub-task boundaries, at whichever boundary is
/// closest to the ideal byte offset.
pub fn cut(sizes: &[u64], weights: &[f64]) -> Vec<Range<usize>> {
    let total: u64 = sizes.iter().sum();
    let weight_sum: f64 = weights.iter().filter(|w| w.is_finite() && **w > 0.0).sum();
    let mut prefix = Vec::with_capacity(sizes.len() + 1);
    prefix.push(0u64);
    for s in sizes {
        prefix.push(prefix.last().copied().unwrap_or(0) + s);
    }
    let mut ranges = Vec::with_capacity(weights.len());
    let (mut start, mut acc) = (0usize, 0.0f64);
    for (i, w) in weights.iter().enumerate() {
        let end = if i + 1 == weights.len() {
            sizes.len()
        } else if weight_sum <= 0.0 {
            start
        } else {
            acc += if w.is_finite() && *w > 0.0 { *w } else { 0.0 };
            let target = total as f64 * acc / weight_sum;
            // The first boundary at or past the target, or the one before it if closer.
            let after = prefix
                .partition_point(|&p| (p as f64) < target)
                .min(sizes.len());
            let before = after.saturating_sub(1);
            let pick = if target - prefix[before] as f64 <= prefix[after] as f64 - target {
                before
            } else {
                after
            };
            pick.max(start)
        };
        ranges.push(start..end);
        start = end;
    }
    ranges
}

/// Cuts `range` of sub-tasks (of `sizes` bytes) into contiguous pieces of about `piece_bytes`
/// input bytes each, in order, none empty; their union is `range`. `piece_bytes == 0`, or a
/// range that holds no more than one piece, stays whole. A piece is at least one sub-task.
pub fn pieces(sizes: &[u64], range: Range<usize>, piece_bytes: u64) -> Vec<Range<usize>> {
    let within = sizes.get(range.clone()).unwrap_or_default();
    let bytes: u64 = within.iter().sum();
    let count = match piece_bytes {
        0 => 1,
        _ => bytes
            .div_ceil(piece_bytes)
            .clamp(1, within.len().max(1) as u64) as usize,
    };
    cut(within, &vec![1.0; count])
        .into_iter()
        .filter(|r| !r.is_empty())
        .map(|r| range.start + r.start..range.start + r.end)
        .collect()
}

/// Each side's compaction bandwidth, as a moving average of its recent jobs (its share's, or
/// its chunks' summed, input bytes over busy seconds).
#[derive(Clone, Debug)]
pub struct Bandwidths {
    /// Bytes per second, per side; `None` until the side has run a share.
    per_side: Vec<Option<f64>>,
}

/// Weight of the newest measurement in the moving average: recent enough to follow a worker
/// that slows down, smooth enough that one noisy share does not swing the split.
const NEWEST_WEIGHT: f64 = 0.5;

impl Bandwidths {
    /// No measurements yet, for `sides` sides.
    pub fn new(sides: usize) -> Bandwidths {
        Bandwidths {
            per_side: vec![None; sides],
        }
    }

    /// Folds in a share of `bytes` that side `side` ran in `seconds`.
    pub fn record(&mut self, side: usize, bytes: u64, seconds: f64) {
        if bytes == 0 || seconds.is_nan() || seconds <= 0.0 {
            return;
        }
        let now = bytes as f64 / seconds;
        if let Some(slot) = self.per_side.get_mut(side) {
            *slot = Some(match *slot {
                Some(old) => NEWEST_WEIGHT * now + (1.0 - NEWEST_WEIGHT) * old,
                None => now,
            });
        }
    }

    /// The current bandwidth of side `side`, if measured.
    pub fn get(&self, side: usize) -> Option<f64> {
        self.per_side.get(side).copied().flatten()
    }

    /// Every side's bandwidth, host first; `None` where not measured yet.
    pub fn priors(&self) -> Vec<Option<f64>> {
        self.per_side.clone()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn half_and_half() {
        assert_eq!(cut(&[10; 10], &[1.0, 1.0]), vec![0..5, 5..10]);
        assert_eq!(cut(&[10; 10], &[4.0, 1.0]), vec![0..8, 8..10]);
        // A tie between two boundaries goes to the earlier one.
        assert_eq!(cut(&[10; 10], &[3.0, 1.0]), vec![0..7, 7..10]);
        assert_eq!(cut(&[10; 10], &[1.0, 0.0]), vec![0..10, 10..10]);
        assert_eq!(cut(&[10; 10], &[0.0, 1.0]), vec![0..0, 0..10]);
        assert_eq!(cut(&[], &[1.0, 1.0]), vec![0..0, 0..0]);
        // Uneven sub-tasks: the cut goes to the closest boundary.
        assert_eq!(cut(&[1, 1, 100, 1], &[1.0, 1.0]), vec![0..2, 2..4]);
    }

    #[test]
    fn pieces_of_a_share() {
        // 100 bytes in sub-tasks 2..12: pieces of 25 bytes make four pieces.
        assert_eq!(pieces(&[10; 20], 2..12, 25), vec![2..4, 4..7, 7..9, 9..12]);
        assert_eq!(pieces(&[10; 20], 2..12, 0), vec![2..12]);
        assert_eq!(pieces(&[10; 20], 2..12, 1000), vec![2..12]);
        // Never more pieces than sub-tasks, never an empty one.
        assert_eq!(pieces(&[10; 3], 0..3, 1), vec![0..1, 1..2, 2..3]);
        assert_eq!(pieces(&[10; 3], 1..1, 1), Vec::<Range<usize>>::new());
        assert_eq!(pieces(&[0; 3], 0..3, 1), vec![0..3]);
    }

    #[test]
    fn bandwidths_follow_measurements() {
        let mut b = Bandwidths::new(3);
        assert_eq!(b.priors(), vec![None, None, None]);
        b.record(0, 100, 1.0);
        b.record(1, 50, 1.0);
        assert_eq!(b.priors(), vec![Some(100.0), Some(50.0), None]);
        b.record(1, 150, 1.0);
        assert_eq!(b.get(1), Some(100.0));
        b.record(2, 0, 1.0);
        b.record(2, 10, 0.0);
        assert_eq!(b.get(2), None);
    }

    proptest! {
        #[test]
        fn ranges_tile_the_sub_tasks(
            sizes in proptest::collection::vec(0u64..1000, 0..40),
            weights in proptest::collection::vec(0.0f64..10.0, 1..5),
        ) {
            let ranges = cut(&sizes, &weights);
            prop_assert_eq!(ranges.len(), weights.len());
            let mut next = 0;
            for r in &ranges {
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end >= r.start);
                next = r.end;
            }
            prop_assert_eq!(next, sizes.len());
        }

        #[test]
        fn pieces_tile_their_range(
            sizes in proptest::collection::vec(0u64..1000, 0..40),
            start in 0usize..40,
            len in 0usize..40,
            piece_bytes in 0u64..3000,
        ) {
            let start = start.min(sizes.len());
            let range = start..(start + len).min(sizes.len());
            let got = pieces(&sizes, range.clone(), piece_bytes);
            let mut next = range.start;
            for r in &got {
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end > r.start);
                next = r.end;
            }
            prop_assert_eq!(next, range.end);
        }
    }
}
