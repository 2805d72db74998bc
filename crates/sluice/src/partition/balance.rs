//! Storage balancing (the MStore paper, "key-range adjustment"): when the owners hold uneven
//! amounts of data, move a key range from the fullest owner to the emptiest.
//!
//! Which range moves follows the document's priorities, as the issue states them:
//! 1. a range whose move does not widen the overlap between owners: the destination's key span
//!    (from its first owned range to its last) grows over no range of another owner, because
//!    the range is inside the span or next to it;
//! 2. then a range whose move adds no owner to its reads: the destination already holds data
//!    of the range (it is a former owner, with a forwarding entry), or the range holds no data
//!    that would stay behind;
//! 3. then the rest.
//!
//! Among equals, the range whose bytes come closest to half the gap between the two owners
//! (so the move evens them out best) wins. A move must shrink the gap to at most half: a range
//! of more than three quarters of the gap would swap the owners' roles with a gap nearly as
//! wide, and the next plan would move it back. When every range of the fullest owner is that
//! big, the balancer splits one (`plan_split`, `partition::split`) and moves the piece.
//!
//! Ranges and owners are measured by their bytes below L0. L0 is a write buffer that
//! compaction drains into the base level (where overwritten versions drop out), and a hot
//! range's L0 swings by a memtable's worth between its compactions: counted, it would make
//! the hot range look alternately too big and too small, and bounce between owners. Owners
//! are compared by the bytes of the ranges they own, wherever those bytes still are, so data
//! waiting to be relocated counts for its new owner and the next plan does not undo a move in
//! flight.

use std::fmt;

use super::split::Side;
use super::stats::{PartitionStats, RangeStats};
use crate::version::range_map::OwnerId;

/// When the balancer acts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BalanceOptions {
    /// Move a range when the fullest owner holds more than `1 + max_skew` times the emptiest.
    pub max_skew: f64,
    /// Below this many bytes in the fullest owner, do nothing: small trees are not worth
    /// moving.
    pub min_bytes: u64,
}

impl Default for BalanceOptions {
    fn default() -> Self {
        BalanceOptions {
            max_skew: 0.25,
            min_bytes: 8 << 20,
        }
    }
}

/// How good a candidate move is; lower is better. See the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Priority {
    /// The destination's span does not grow over another owner's range.
    NoWiderOverlap = 1,
    /// The span grows, but reads of the range need no extra owner.
    NoExtraReadOwner = 2,
    /// Everything else.
    Other = 3,
}

/// A planned move and why.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Move {
    /// The range that moves.
    pub range: usize,
    /// Its owner now (the fullest owner).
    pub from: OwnerId,
    /// Its owner after the move (the emptiest owner).
    pub to: OwnerId,
    /// The range's bytes below L0.
    pub bytes: u64,
    /// Bytes below L0 owned by `from` and `to` before the move.
    pub owner_bytes: (u64, u64),
    /// Why this range.
    pub priority: Priority,
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.priority {
            Priority::NoWiderOverlap => "does not widen the overlap between owners",
            Priority::NoExtraReadOwner => "adds no owner to its reads",
            Priority::Other => "no better range",
        };
        write!(
            f,
            "range {} ({} bytes) from owner {} ({} bytes) to owner {} ({} bytes): {why}",
            self.range, self.bytes, self.from, self.owner_bytes.0, self.to, self.owner_bytes.1
        )
    }
}

/// The fullest and the emptiest owner, when they are uneven enough to act on.
struct Uneven {
    from: OwnerId,
    to: OwnerId,
    /// Bytes below L0 of the ranges `from` and `to` own.
    full: u64,
    empty: u64,
    /// `to`'s first and last range, if it owns any.
    to_span: Option<(usize, usize)>,
}

impl Uneven {
    fn find(stats: &PartitionStats, options: &BalanceOptions) -> Option<Uneven> {
        // Bytes per owner, counting each range for its owner.
        let mut owned = vec![0u64; stats.owners.len()];
        for r in &stats.ranges {
            if let Some(b) = owned.get_mut(r.owner as usize) {
                *b += settled(r);
            }
        }
        let (from, &full) = owned.iter().enumerate().max_by_key(|(_, b)| **b)?;
        let (to, &empty) = owned.iter().enumerate().min_by_key(|(_, b)| **b)?;
        if full < options.min_bytes || full as f64 <= (1.0 + options.max_skew) * empty as f64 {
            return None;
        }
        let to = to as OwnerId;
        let mut owned_by_to = stats
            .ranges
            .iter()
            .enumerate()
            .filter(|(_, r)| r.owner == to)
            .map(|(i, _)| i);
        let first = owned_by_to.next();
        let last = owned_by_to.next_back().or(first);
        Some(Uneven {
            from: from as OwnerId,
            to,
            full,
            empty,
            to_span: first.zip(last),
        })
    }

    fn gap(&self) -> u64 {
        self.full - self.empty
    }

    /// True if giving range `i` to `to` stretches `to`'s span over a range of another owner.
    fn widens(&self, stats: &PartitionStats, i: usize) -> bool {
        let Some((lo, hi)) = self.to_span else {
            return false;
        };
        (lo.min(i)..=hi.max(i))
            .filter(|&j| !(lo..=hi).contains(&j) && j != i)
            .any(|j| stats.ranges[j].owner != self.to)
    }

    /// True if `bytes` may move: the gap after the move, `|gap - 2 * bytes|`, is at most half
    /// the gap now.
    fn may_move(&self, bytes: u64) -> bool {
        bytes > 0 && 4 * bytes <= 3 * self.gap()
    }
}

/// A range's bytes below L0.
fn settled(r: &RangeStats) -> u64 {
    r.bytes.saturating_sub(r.l0_bytes)
}

/// The move to make now, if the owners are uneven enough.
pub(crate) fn plan_move(stats: &PartitionStats, options: &BalanceOptions) -> Option<Move> {
    let u = Uneven::find(stats, options)?;
    let gap = u.gap();
    stats
        .ranges
        .iter()
        .enumerate()
        .filter(|(_, r)| r.owner == u.from && u.may_move(settled(r)))
        .map(|(i, r)| {
            let widens = u.widens(stats, i);
            // After the move `from` keeps the range's data until it is relocated; reads then
            // need `to` as well, unless `to` already holds some of it.
            let extra_read_owner = !r.forwarded_from.contains(&u.to);
            let priority = match (widens, extra_read_owner) {
                (false, _) => Priority::NoWiderOverlap,
                (true, false) => Priority::NoExtraReadOwner,
                (true, true) => Priority::Other,
            };
            let fit = settled(r).abs_diff(gap / 2);
            (priority, extra_read_owner, fit, i, settled(r))
        })
        .min()
        .map(|(priority, _, _, range, bytes)| Move {
            range,
            from: u.from,
            to: u.to,
            bytes,
            owner_bytes: (u.full, u.empty),
            priority,
        })
}

/// A planned split: cut `range` so that the piece on `side` can move from `from` to `to`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SplitPlan {
    /// The range to cut, owned by `from`.
    pub range: usize,
    /// The fullest owner.
    pub from: OwnerId,
    /// The emptiest owner, which the piece moves to next.
    pub to: OwnerId,
    /// The half that moves: the one next to `to`'s ranges.
    pub side: Side,
    /// The piece should hold about this many bytes below L0 (half the gap)...
    pub target_bytes: u64,
    /// ...and at most this many, or moving it would not even the owners out.
    pub max_piece_bytes: u64,
    /// The range's bytes below L0.
    pub range_bytes: u64,
    /// Bytes below L0 owned by `from` and `to`.
    pub owner_bytes: (u64, u64),
}

impl fmt::Display for SplitPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "split range {} ({} bytes) of owner {} ({} bytes) to move its {:?} piece of about {} \
             bytes to owner {} ({} bytes): no range of the owner is small enough to move whole",
            self.range,
            self.range_bytes,
            self.from,
            self.owner_bytes.0,
            self.side,
            self.target_bytes,
            self.to,
            self.owner_bytes.1
        )
    }
}

/// Splits stop once the map has this many ranges per owner. Every edit that changes the map
/// records it whole, and a piece whose halves came out uneven can be split again: without a
/// bound a map could grow for as long as writes stay skewed.
pub const MAX_RANGES_PER_OWNER: usize = 64;

/// The split to make when the owners are uneven but [`plan_move`] finds no range small enough
/// to move: the range of the fullest owner whose piece would move with the best priority, the
/// biggest among those. `None` once the map has [`MAX_RANGES_PER_OWNER`] ranges per owner.
pub(crate) fn plan_split(stats: &PartitionStats, options: &BalanceOptions) -> Option<SplitPlan> {
    if stats.ranges.len() >= MAX_RANGES_PER_OWNER * stats.owners.len() {
        return None;
    }
    let u = Uneven::find(stats, options)?;
    let (range, r) = stats
        .ranges
        .iter()
        .enumerate()
        .filter(|(_, r)| r.owner == u.from && settled(r) > 0 && !u.may_move(settled(r)))
        .min_by_key(|&(i, r)| (u.widens(stats, i), std::cmp::Reverse(settled(r))))?;
    // The piece next to `to`'s span, so it joins the span without stretching it further.
    let side = match u.to_span {
        Some((_, hi)) if hi < range => Side::Lower,
        _ => Side::Upper,
    };
    Some(SplitPlan {
        range,
        from: u.from,
        to: u.to,
        side,
        target_bytes: u.gap() / 2,
        max_piece_bytes: 3 * u.gap() / 4,
        range_bytes: settled(r),
        owner_bytes: (u.full, u.empty),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::stats::OwnerStats;

    /// Ranges with these (owner, bytes); owners' stored bytes follow.
    fn stats(ranges: &[(OwnerId, u64)], owners: usize) -> PartitionStats {
        let ranges: Vec<RangeStats> = ranges
            .iter()
            .map(|&(owner, bytes)| RangeStats {
                owner,
                bytes,
                ..RangeStats::default()
            })
            .collect();
        let owners = (0..owners)
            .map(|o| OwnerStats {
                owner: o as OwnerId,
                bytes: ranges
                    .iter()
                    .filter(|r| r.owner == o as OwnerId)
                    .map(|r| r.bytes)
                    .sum(),
                ..OwnerStats::default()
            })
            .collect();
        PartitionStats { ranges, owners }
    }

    const OPTS: BalanceOptions = BalanceOptions {
        max_skew: 0.25,
        min_bytes: 0,
    };

    #[test]
    fn even_owners_stay_put() {
        assert_eq!(plan_move(&stats(&[(0, 100), (1, 110)], 2), &OPTS), None);
        let small = BalanceOptions {
            min_bytes: 1000,
            ..OPTS
        };
        assert_eq!(plan_move(&stats(&[(0, 100), (1, 10)], 2), &small), None);
    }

    #[test]
    fn a_range_next_to_the_destination_goes_first() {
        // Owner 0 holds ranges 0..3, owner 1 holds 3 and owner 2 holds 4..6; owner 1 is the
        // emptiest. Range 2 sits next to owner 1's range 3; range 0 would widen owner 1's
        // span over ranges 1 and 2.
        let s = stats(&[(0, 60), (0, 60), (0, 60), (1, 10), (2, 60), (2, 60)], 3);
        let m = plan_move(&s, &OPTS).unwrap();
        assert_eq!((m.range, m.from, m.to), (2, 0, 1));
        assert_eq!(m.priority, Priority::NoWiderOverlap);
        assert!(m.to_string().contains("does not widen"));
    }

    #[test]
    fn a_former_owner_is_preferred_over_a_new_one() {
        // Owner 1 (the emptiest) owns range 4 only: moving range 0 or range 2 to it widens its
        // span over owner 2's ranges either way. Range 2 fits half the gap (95 / 2) better...
        let mut s = stats(&[(0, 50), (2, 10), (0, 45), (2, 10), (1, 5)], 3);
        let m = plan_move(&s, &OPTS).unwrap();
        assert_eq!((m.range, m.to, m.priority), (2, 1, Priority::Other));
        // ...but range 0 still has data with owner 1, a former owner: reads of it consult
        // owner 1 already, so moving it back adds no owner to them.
        s.ranges[0].forwarded_from = vec![1];
        let m = plan_move(&s, &OPTS).unwrap();
        assert_eq!(
            (m.range, m.to, m.priority),
            (0, 1, Priority::NoExtraReadOwner)
        );
    }

    #[test]
    fn l0_bytes_do_not_count() {
        // Range 1 would move, but range 0 is mostly L0: below L0 owner 0 holds 70 to owner
        // 1's 40, a gap range 1 (30) would more than half reverse.
        let mut s = stats(&[(0, 100), (0, 30), (1, 40)], 2);
        assert_eq!(plan_move(&s, &OPTS).map(|m| m.range), Some(1));
        s.ranges[0].l0_bytes = 60;
        assert_eq!(plan_move(&s, &OPTS), None);
        // Owner 1's L0 likewise: now owner 0 (40 settled) is the fuller one by far.
        let mut s = stats(&[(0, 40), (0, 10), (1, 40)], 2);
        s.ranges[2].l0_bytes = 35;
        let m = plan_move(&s, &OPTS).unwrap();
        assert_eq!((m.range, m.from, m.to, m.bytes), (1, 0, 1, 10));
        assert_eq!(m.owner_bytes, (50, 5));
    }

    #[test]
    fn moves_never_overshoot() {
        // Owner 0's only range is bigger than the gap: moving it would just swap the skew.
        assert_eq!(plan_move(&stats(&[(0, 100), (1, 60)], 2), &OPTS), None);
        let m = plan_move(&stats(&[(0, 100), (0, 30), (1, 60)], 2), &OPTS).unwrap();
        assert_eq!(m.range, 1);
        // Range 0 (70 of a gap of 80) would leave a gap of 60 the other way, and the next plan
        // would move it back.
        let m = plan_move(&stats(&[(0, 70), (0, 10), (1, 0)], 2), &OPTS).unwrap();
        assert_eq!(m.range, 1);
        // Range 1 (40 of a gap of 70) overshoots half the gap but leaves only 10 the other way.
        let m = plan_move(&stats(&[(1, 70), (0, 40), (0, 100)], 2), &OPTS).unwrap();
        assert_eq!(m.range, 1);
    }

    #[test]
    fn a_range_too_big_to_move_is_split_on_the_side_of_the_destination() {
        // Owner 0's ranges 0 and 1 are both bigger than 3/4 of the gap (170): no move.
        let s = stats(&[(0, 130), (0, 140), (1, 100)], 2);
        assert_eq!(plan_move(&s, &OPTS), None);
        let p = plan_split(&s, &OPTS).unwrap();
        // Range 1 is next to owner 1's range 2 and the bigger one: its upper piece moves.
        assert_eq!((p.range, p.from, p.to, p.side), (1, 0, 1, Side::Upper));
        assert_eq!((p.target_bytes, p.max_piece_bytes), (85, 127));
        assert!(p.to_string().contains("split range 1"));
        // Owner 1's ranges below: range 1's lower piece is the one next to them.
        let s = stats(&[(1, 100), (0, 140), (0, 130)], 2);
        let p = plan_split(&s, &OPTS).unwrap();
        assert_eq!((p.range, p.side), (1, Side::Lower));
        // No split once the map is at its size bound (here with empty ranges of owner 1).
        let crowded: Vec<(OwnerId, u64)> = [(0, 140), (1, 100)]
            .into_iter()
            .chain(std::iter::repeat_n((1, 0), 2 * MAX_RANGES_PER_OWNER - 2))
            .collect();
        assert_eq!(plan_split(&stats(&crowded, 2), &OPTS), None);
        let p = plan_split(&stats(&crowded[..crowded.len() - 1], 2), &OPTS).unwrap();
        assert_eq!((p.range, p.from), (0, 0));
        // No split when the owners are even.
        assert_eq!(plan_split(&stats(&[(0, 100), (1, 90)], 2), &OPTS), None);
    }
}
