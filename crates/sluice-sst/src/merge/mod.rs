//! The merging iterator: one sorted stream out of many sorted children.
//!
//! This is the S4 hot path: every compaction and every range scan pulls each entry through it.
//! It keeps a *loser tree* (tournament tree) over child indices, so advancing costs exactly one
//! match per level of the tree, `ceil(log2 k)` key comparisons for `k` children, against about
//! `2 log2 k` for a binary heap's sift-down. Nothing is allocated and no key is copied per step:
//! the tree holds indices and the comparisons borrow the children's keys. Beside each child
//! sits the first 8 bytes of its user key as an integer ([`user_key_prefix`]), so a match
//! between keys that differ there compares two integers and reads neither key.
//!
//! # Order
//!
//! The merged stream is ordered by the pair `(internal key, child index)`: internal-key order
//! (see [`crate::key::compare_internal`]), and when two children hold an identical internal key
//! (which a correct LSM never produces, but corrupt input might), the lower child index comes
//! first going forward. Callers order children newest source first, so the newest copy wins.
//! Going backwards the same total order is walked in reverse, so `next` then `prev` always
//! returns to the same entry, ties included.
//!
//! # Direction
//!
//! As in LevelDB's `MergingIterator`, while moving forward every child is positioned at its
//! first entry `>=` the current one (the current child *on* it, the others strictly after it);
//! while moving backwards every child is at its last entry `<=` the current one. Switching
//! direction re-seeks every non-current child to the other side of the current key (`k` seeks,
//! rare in practice), then rebuilds the tree with the opposite comparison.

#[cfg(test)]
mod tests;

use std::cmp::Ordering;

use crate::key::{compare_internal, user_key_prefix};
use crate::{InternalIterator, Result};

/// Which way the iterator last moved; decides how children are positioned relative to the
/// current entry and which comparison the loser tree uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// Every child is at its first entry `>=` the current one; the tree picks the minimum.
    Forward,
    /// Every child is at its last entry `<=` the current one; the tree picks the maximum.
    Reverse,
}

/// Merges `k` internal-key-ordered children into one internal-key-ordered stream.
///
/// Generic over the child type so a compaction, whose children are all block lists, gets
/// `valid` and `key` inlined into the tournament; readers mixing memtables and tables use the
/// default, boxed children.
///
/// Not thread-safe by itself (it is `Send`, not `Sync`): one caller drives it.
pub struct MergingIterator<I = Box<dyn InternalIterator>> {
    /// The sources, newest first (ties go to the lower index).
    children: Vec<I>,
    /// The loser tree. Nodes are numbered heap-style: internal nodes `1..k`, leaf of child `i`
    /// at `k + i`, parent of node `p` at `p / 2`. `losers[p]` for `1 <= p < k` holds the child
    /// that *lost* the match at node `p`; `losers[0]` is unused. Valid only while `positioned`.
    losers: Vec<usize>,
    /// Each child's [`user_key_prefix`] (0 when it is not valid), refreshed whenever the
    /// child moves: at the start of every `rebuild` and `replay`.
    prefixes: Vec<u64>,
    /// The child that won the whole tournament: the current entry. `< k` whenever `k > 0`.
    winner: usize,
    direction: Direction,
    /// True after a successful seek; false before the first one and after any child error
    /// (the tree may then be stale), which makes `valid()` false until the next seek.
    positioned: bool,
}

impl<I: InternalIterator> MergingIterator<I> {
    /// Merges `children`, which the caller orders newest source first. The iterator starts
    /// unpositioned: call a seek method before anything else.
    pub fn new(children: Vec<I>) -> Self {
        let losers = vec![0; children.len().max(1)];
        MergingIterator {
            prefixes: vec![0; children.len()],
            children,
            losers,
            winner: 0,
            direction: Direction::Forward,
            positioned: false,
        }
    }

    /// The number of children being merged.
    pub fn num_children(&self) -> usize {
        self.children.len()
    }

    /// Runs `op`, then records whether the iterator is positioned: any child error leaves the
    /// tree in an unknown state, so the iterator reports invalid until the next seek.
    fn track(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let result = op(self);
        self.positioned = result.is_ok();
        result
    }

    /// Positions every child with `position`, then picks the winner for `direction`.
    fn reposition_all(
        &mut self,
        direction: Direction,
        mut position: impl FnMut(&mut I) -> Result<()>,
    ) -> Result<()> {
        for child in &mut self.children {
            position(child)?;
        }
        self.direction = direction;
        self.rebuild();
        Ok(())
    }

    /// Replays every match of the tournament: `k - 1` comparisons.
    fn rebuild(&mut self) {
        for child in 0..self.children.len() {
            self.refresh_prefix(child);
        }
        self.winner = match self.children.len() {
            0 | 1 => 0,
            _ => self.build(1),
        };
    }

    /// Plays the matches of the subtree rooted at `node`, recording losers; returns its winner.
    /// Recursion depth is the tree height, `ceil(log2 k)`.
    fn build(&mut self, node: usize) -> usize {
        let k = self.children.len();
        if node >= k {
            return node - k;
        }
        let left = self.build(2 * node);
        let right = self.build(2 * node + 1);
        let (winner, loser) = if self.beats(left, right) {
            (left, right)
        } else {
            (right, left)
        };
        self.losers[node] = loser;
        winner
    }

    /// Re-plays the matches on the path from `leaf` to the root after child `leaf`, which was
    /// the winner, moved. Each node on that path holds the best of the subtree `leaf` did not
    /// come from, so one match per level restores the tournament.
    #[inline]
    fn replay(&mut self, leaf: usize) {
        self.refresh_prefix(leaf);
        let mut winner = leaf;
        let mut node = (self.children.len() + leaf) / 2;
        while node >= 1 {
            let challenger = self.losers[node];
            if self.beats(challenger, winner) {
                self.losers[node] = winner;
                winner = challenger;
            }
            node /= 2;
        }
        self.winner = winner;
    }

    /// True when child `a` should be output before child `b` in the current direction.
    /// Exhausted children lose every match. This is a strict total order on indices, so the
    /// tournament result is deterministic.
    #[inline]
    fn beats(&self, a: usize, b: usize) -> bool {
        let (ca, cb) = (&self.children[a], &self.children[b]);
        match (ca.valid(), cb.valid()) {
            (true, false) => true,
            (false, true) => false,
            (false, false) => a < b,
            (true, true) => {
                let (pa, pb) = (self.prefixes[a], self.prefixes[b]);
                let order = match pa == pb {
                    true => compare_internal(ca.key(), cb.key()),
                    false => pa.cmp(&pb),
                };
                let order = order.then(a.cmp(&b));
                match self.direction {
                    Direction::Forward => order == Ordering::Less,
                    Direction::Reverse => order == Ordering::Greater,
                }
            }
        }
    }

    /// Records where child `child` now is, after it moved.
    #[inline]
    fn refresh_prefix(&mut self, child: usize) {
        let c = &self.children[child];
        self.prefixes[child] = match c.valid() {
            true => user_key_prefix(c.key()),
            false => 0,
        };
    }

    /// Moves every non-current child to its first entry after the current one in
    /// `(key, index)` order. REQUIRES: positioned and valid.
    fn switch_to_forward(&mut self) -> Result<()> {
        let cur = self.winner;
        let (before, rest) = self.children.split_at_mut(cur);
        let Some((current, after)) = rest.split_first_mut() else {
            return Ok(());
        };
        let key = current.key();
        for child in before {
            // A lower index holding the same key sorts before the current entry: step past it.
            child.seek(key)?;
            if child.valid() && compare_internal(child.key(), key).is_eq() {
                child.next()?;
            }
        }
        for child in after {
            // A higher index holding the same key sorts after the current entry: keep it.
            child.seek(key)?;
        }
        self.direction = Direction::Forward;
        Ok(())
    }

    /// Moves every non-current child to its last entry before the current one in
    /// `(key, index)` order. REQUIRES: positioned and valid.
    fn switch_to_reverse(&mut self) -> Result<()> {
        let cur = self.winner;
        let (before, rest) = self.children.split_at_mut(cur);
        let Some((current, after)) = rest.split_first_mut() else {
            return Ok(());
        };
        let key = current.key();
        for child in before {
            child.seek(key)?;
            if !child.valid() {
                child.seek_to_last()?;
            } else if !compare_internal(child.key(), key).is_eq() {
                child.prev()?;
            }
            // Else: the same key at a lower index sorts before the current entry: keep it.
        }
        for child in after {
            child.seek(key)?;
            if child.valid() {
                child.prev()?;
            } else {
                child.seek_to_last()?;
            }
        }
        self.direction = Direction::Reverse;
        Ok(())
    }

    fn next_inner(&mut self) -> Result<()> {
        let cur = self.winner;
        if self.direction == Direction::Reverse {
            self.switch_to_forward()?;
            self.children[cur].next()?;
            self.rebuild();
        } else {
            self.children[cur].next()?;
            self.replay(cur);
        }
        Ok(())
    }

    fn prev_inner(&mut self) -> Result<()> {
        let cur = self.winner;
        if self.direction == Direction::Forward {
            self.switch_to_reverse()?;
            self.children[cur].prev()?;
            self.rebuild();
        } else {
            self.children[cur].prev()?;
            self.replay(cur);
        }
        Ok(())
    }
}

impl<I> std::fmt::Debug for MergingIterator<I> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergingIterator")
            .field("num_children", &self.children.len())
            .field("winner", &self.winner)
            .field("direction", &self.direction)
            .field("positioned", &self.positioned)
            .finish()
    }
}

impl<I: InternalIterator> InternalIterator for MergingIterator<I> {
    #[inline]
    fn valid(&self) -> bool {
        self.positioned
            && self
                .children
                .get(self.winner)
                .is_some_and(|child| child.valid())
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.track(|it| it.reposition_all(Direction::Forward, |c| c.seek_to_first()))
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.track(|it| it.reposition_all(Direction::Reverse, |c| c.seek_to_last()))
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.track(|it| it.reposition_all(Direction::Forward, |c| c.seek(target)))
    }

    #[inline]
    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "MergingIterator::next requires valid()");
        self.track(Self::next_inner)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "MergingIterator::prev requires valid()");
        self.track(Self::prev_inner)
    }

    #[inline]
    fn key(&self) -> &[u8] {
        self.children[self.winner].key()
    }

    #[inline]
    fn value(&self) -> &[u8] {
        self.children[self.winner].value()
    }
}
