//! The range map of partitioned mode: the user-key space cut into consecutive ranges, each
//! owned by one owner (a directory, with the worker that compacts it), plus the forwarding
//! entries of ranges that moved and whose old data still sits with a former owner.
//!
//! The map is part of the version: it changes only through version edits, is written to the
//! MANIFEST whole (it is small: one entry per range) and is recovered with the tree.
//!
//! Invariants, checked by [`RangeMap::validate`] and on every decode:
//! - there is at least one range, and the first starts at the empty key (the map covers every
//!   key);
//! - range starts are strictly increasing, so range `i` is `[start_i, start_{i+1})` and the
//!   last range is unbounded above;
//! - a range's `forwarded_from` is sorted, without duplicates, and never names its owner.
//!
//! Encoding (the body of the MANIFEST's range-map field, `docs/format/manifest.md`):
//!
//! ```text
//! range_map = count: varint32, range{count}
//! range     = start: length-prefixed user key
//!             owner: varint32
//!             forwarded: varint32 count, then that many owners: varint32 each, ascending
//! ```

use std::fmt;

use sluice_sst::coding::{get_length_prefixed, get_varint32, put_length_prefixed, put_varint32};

/// Identifies an owner: an index into `PartitionOptions::owners`. Owner `i` keeps its tables in
/// table directory `i + 1` (directory 0 is the database directory, which holds the WAL and
/// MANIFEST): see [`owner_dir_index`].
pub type OwnerId = u32;

/// More owners than this in one map is taken as corruption: a real cluster has a handful.
pub const MAX_OWNERS: OwnerId = 1024;

/// The table directory index of owner `owner`'s directory.
pub fn owner_dir_index(owner: OwnerId) -> u32 {
    owner + 1
}

/// The owner whose directory is table directory `dir_index`, if any.
pub fn owner_of_dir(dir_index: u32) -> Option<OwnerId> {
    dir_index.checked_sub(1)
}

/// One range of the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    /// The first user key of the range; empty for the first range.
    pub start: Vec<u8>,
    /// Who owns the range now: its flushes and compactions go to this owner's directory.
    pub owner: OwnerId,
    /// Former owners whose directories may still hold data of this range (the MStore paper's
    /// `<key:NDP_ID>` forwarding entries). Reads of the range consult them too; compaction
    /// removes an entry once no table of the range is left in that owner's directory.
    pub forwarded_from: Vec<OwnerId>,
}

/// The whole map; see the module docs for its invariants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeMap {
    ranges: Vec<KeyRange>,
}

impl RangeMap {
    /// A map of `owners.len()` ranges: range 0 starts at the empty key, range `i > 0` at
    /// `boundaries[i - 1]`, and range `i` belongs to `owners[i]`. Fails (with the reason) if
    /// `boundaries` is not strictly increasing or does not give one owner per range.
    pub fn new(boundaries: &[Vec<u8>], owners: &[OwnerId]) -> Result<RangeMap, String> {
        if owners.len() != boundaries.len() + 1 {
            return Err(format!(
                "{} boundaries make {} ranges, but {} owners were given",
                boundaries.len(),
                boundaries.len() + 1,
                owners.len()
            ));
        }
        let starts = std::iter::once(Vec::new()).chain(boundaries.iter().cloned());
        let map = RangeMap {
            ranges: starts
                .zip(owners)
                .map(|(start, &owner)| KeyRange {
                    start,
                    owner,
                    forwarded_from: Vec::new(),
                })
                .collect(),
        };
        map.validate()?;
        Ok(map)
    }

    /// Checks the invariants of the module docs.
    pub fn validate(&self) -> Result<(), String> {
        let Some(first) = self.ranges.first() else {
            return Err("the range map has no range".into());
        };
        if !first.start.is_empty() {
            return Err("the first range does not start at the empty key".into());
        }
        for (i, pair) in self.ranges.windows(2).enumerate() {
            if pair[0].start >= pair[1].start {
                return Err(format!("range {} does not start after range {i}", i + 1));
            }
        }
        for (i, r) in self.ranges.iter().enumerate() {
            if r.owner >= MAX_OWNERS {
                return Err(format!("range {i}: owner {} is out of range", r.owner));
            }
            if r.forwarded_from.windows(2).any(|w| w[0] >= w[1]) {
                return Err(format!("range {i}: forwarding entries are not ascending"));
            }
            if let Some(bad) = r
                .forwarded_from
                .iter()
                .find(|&&o| o == r.owner || o >= MAX_OWNERS)
            {
                return Err(format!("range {i}: bad forwarding entry to owner {bad}"));
            }
        }
        Ok(())
    }

    /// The ranges, in key order.
    pub fn ranges(&self) -> &[KeyRange] {
        &self.ranges
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Always false: a map has at least one range.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The index of the range holding `user_key`.
    pub fn index_of(&self, user_key: &[u8]) -> usize {
        // The first range starts at the empty key, so at least one start is <= any key.
        self.ranges
            .partition_point(|r| r.start.as_slice() <= user_key)
            .saturating_sub(1)
    }

    /// The range holding `user_key`.
    pub fn range_of(&self, user_key: &[u8]) -> &KeyRange {
        &self.ranges[self.index_of(user_key)]
    }

    /// Range `i` as `[start, end)`, `end = None` for the last range. REQUIRES: `i < len()`.
    pub fn bounds(&self, i: usize) -> (&[u8], Option<&[u8]>) {
        (
            &self.ranges[i].start,
            self.ranges.get(i + 1).map(|r| r.start.as_slice()),
        )
    }

    /// Every owner that may hold data of `user_key`: the range's owner, then its forwarding
    /// entries.
    pub fn owners_for(&self, user_key: &[u8]) -> impl Iterator<Item = OwnerId> + '_ {
        let r = self.range_of(user_key);
        std::iter::once(r.owner).chain(r.forwarded_from.iter().copied())
    }

    /// The largest owner id named anywhere in the map.
    pub fn max_owner(&self) -> OwnerId {
        self.ranges
            .iter()
            .flat_map(|r| std::iter::once(r.owner).chain(r.forwarded_from.iter().copied()))
            .max()
            .unwrap_or(0)
    }

    /// The map after range `i` moves to `to`. The owner a range moves back to loses its
    /// forwarding entry; the old owner gains one from [`RangeMap::with_forwarding`] when it
    /// still holds data of the range (the host settles forwarding with every edit).
    pub fn with_move(&self, i: usize, to: OwnerId) -> RangeMap {
        let mut next = self.clone();
        if let Some(r) = next.ranges.get_mut(i) {
            r.owner = to;
            r.forwarded_from.retain(|&o| o != to);
        }
        next
    }

    /// The map after range `i` is cut in two at `at`: `[start_i, at)` keeps index `i`, `[at,
    /// end_i)` becomes range `i + 1`, and every later range's index grows by one. Both halves
    /// keep the owner and the forwarding entries (the host settles those with the edit).
    /// Fails unless `at` lies strictly inside range `i`.
    pub fn with_split(&self, i: usize, at: &[u8]) -> Result<RangeMap, String> {
        let Some(r) = self.ranges.get(i) else {
            return Err(format!("range {i} is not one of the {} ranges", self.len()));
        };
        let (start, end) = self.bounds(i);
        if at <= start || end.is_some_and(|end| at >= end) {
            return Err(format!(
                "'{}' is not strictly inside range {i}",
                at.escape_ascii()
            ));
        }
        let upper = KeyRange {
            start: at.to_vec(),
            ..r.clone()
        };
        let mut next = self.clone();
        next.ranges.insert(i + 1, upper);
        Ok(next)
    }

    /// The map with exactly the forwarding entries `(range, owner)` of `entries`, leaving out
    /// those naming a range's own owner or no range.
    pub fn with_forwarding(&self, entries: impl IntoIterator<Item = (usize, OwnerId)>) -> RangeMap {
        let mut next = self.clone();
        for r in &mut next.ranges {
            r.forwarded_from.clear();
        }
        for (i, owner) in entries {
            if let Some(r) = next.ranges.get_mut(i)
                && r.owner != owner
                && owner < MAX_OWNERS
            {
                r.forwarded_from.push(owner);
            }
        }
        for r in &mut next.ranges {
            r.forwarded_from.sort_unstable();
            r.forwarded_from.dedup();
        }
        next
    }

    /// Appends the encoding of the module docs to `dst`.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        put_varint32(dst, self.ranges.len() as u32);
        for r in &self.ranges {
            put_length_prefixed(dst, &r.start);
            put_varint32(dst, r.owner);
            put_varint32(dst, r.forwarded_from.len() as u32);
            for &o in &r.forwarded_from {
                put_varint32(dst, o);
            }
        }
    }

    /// Decodes [`RangeMap::encode`]'s output, which must be all of `src`. An error gives the
    /// byte position in `src` and the reason.
    pub fn decode(src: &[u8]) -> Result<RangeMap, (usize, String)> {
        let mut pos = 0usize;
        let rest = |pos: usize| src.get(pos..).unwrap_or_default();
        let varint = |pos: &mut usize, what: &str| {
            let (v, n) = get_varint32(rest(*pos)).ok_or((*pos, format!("bad {what}")))?;
            *pos += n;
            Ok::<u32, (usize, String)>(v)
        };
        let count = varint(&mut pos, "range count")?;
        let mut ranges = Vec::new();
        for _ in 0..count {
            let (start, n) =
                get_length_prefixed(rest(pos)).ok_or((pos, "truncated range start".to_string()))?;
            pos += n;
            let owner = varint(&mut pos, "owner")?;
            let forwarded = varint(&mut pos, "forwarding count")?;
            if forwarded > MAX_OWNERS {
                return Err((pos, format!("{forwarded} forwarding entries")));
            }
            let mut forwarded_from = Vec::new();
            for _ in 0..forwarded {
                forwarded_from.push(varint(&mut pos, "forwarding owner")?);
            }
            ranges.push(KeyRange {
                start: start.to_vec(),
                owner,
                forwarded_from,
            });
        }
        if pos != src.len() {
            return Err((pos, "trailing bytes after the range map".into()));
        }
        let map = RangeMap { ranges };
        map.validate().map_err(|reason| (src.len(), reason))?;
        Ok(map)
    }
}

impl fmt::Display for RangeMap {
    /// One line per range: `[start .. end) owner N (forwarded from M, ..)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for i in 0..self.ranges.len() {
            let (start, end) = self.bounds(i);
            let r = &self.ranges[i];
            write!(
                f,
                "range {i} ['{}' .. {}) owner {}",
                start.escape_ascii(),
                end.map_or("end".to_string(), |e| format!("'{}'", e.escape_ascii())),
                r.owner
            )?;
            if !r.forwarded_from.is_empty() {
                write!(f, " forwarded from {:?}", r.forwarded_from)?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn map() -> RangeMap {
        RangeMap::new(&[b"g".to_vec(), b"p".to_vec()], &[0, 1, 1]).unwrap()
    }

    #[test]
    fn lookups_follow_the_starts() {
        let m = map();
        assert_eq!(m.index_of(b""), 0);
        assert_eq!(m.index_of(b"f"), 0);
        assert_eq!(m.index_of(b"g"), 1);
        assert_eq!(m.index_of(b"ozzz"), 1);
        assert_eq!(m.index_of(b"p"), 2);
        assert_eq!(m.index_of(b"zzz"), 2);
        assert_eq!(m.bounds(1), (&b"g"[..], Some(&b"p"[..])));
        assert_eq!(m.bounds(2), (&b"p"[..], None));
        assert_eq!(m.owners_for(b"a").collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn moves_and_forwarding_entries() {
        let m = map().with_move(0, 1).with_forwarding([(0, 0)]);
        assert_eq!(m.ranges()[0].owner, 1);
        assert_eq!(m.owners_for(b"a").collect::<Vec<_>>(), vec![1, 0]);
        assert_eq!(m.max_owner(), 1);
        // Moving back to the former owner: it owns the range again, nothing to forward to it.
        let back = m.with_move(0, 0);
        assert_eq!(back.ranges()[0].owner, 0);
        assert!(back.ranges()[0].forwarded_from.is_empty());
        // An owner never forwards to itself; duplicates and unknown ranges are dropped.
        let all = map().with_forwarding([(0, 2), (0, 1), (0, 0), (0, 2), (1, 0), (7, 0)]);
        assert_eq!(all.ranges()[0].forwarded_from, vec![1, 2]);
        assert_eq!(all.ranges()[1].forwarded_from, vec![0]);
        assert_eq!(all.with_forwarding([]), map());
    }

    #[test]
    fn a_split_cuts_one_range_in_two_with_the_same_owner() {
        let m = map().with_move(1, 0).with_forwarding([(1, 1)]);
        let split = m.with_split(1, b"k").unwrap();
        assert_eq!(split.len(), 4);
        assert_eq!(split.bounds(1), (&b"g"[..], Some(&b"k"[..])));
        assert_eq!(split.bounds(2), (&b"k"[..], Some(&b"p"[..])));
        assert_eq!(split.ranges()[2].owner, 0);
        assert_eq!(split.ranges()[2].forwarded_from, vec![1]);
        assert_eq!(split.index_of(b"zz"), 3);
        assert!(split.validate().is_ok());
        // The last range splits too; a split at a range's start or outside it does not.
        assert_eq!(
            map().with_split(2, b"x").unwrap().bounds(3),
            (&b"x"[..], None)
        );
        for (i, at) in [(1, &b"g"[..]), (1, b"p"), (0, b""), (0, b"h"), (3, b"z")] {
            assert!(map().with_split(i, at).is_err(), "range {i} at {at:?}");
        }
    }

    #[test]
    fn bad_maps_are_refused() {
        assert!(RangeMap::new(&[b"b".to_vec(), b"a".to_vec()], &[0, 0, 0]).is_err());
        assert!(RangeMap::new(&[b"b".to_vec()], &[0]).is_err());
        assert!(RangeMap::new(&[Vec::new()], &[0, 1]).is_err());
        let mut m = map();
        m.ranges[1].forwarded_from = vec![1];
        assert!(m.validate().is_err());
    }

    #[test]
    fn round_trip_and_damage() {
        let m = map().with_move(1, 0).with_forwarding([(1, 1)]);
        let mut buf = Vec::new();
        m.encode(&mut buf);
        assert_eq!(RangeMap::decode(&buf).unwrap(), m);
        for cut in 0..buf.len() {
            assert!(RangeMap::decode(&buf[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = buf.clone();
        longer.push(0);
        assert!(RangeMap::decode(&longer).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(m) = RangeMap::decode(&bytes) {
                prop_assert!(m.validate().is_ok());
            }
        }

        #[test]
        fn every_key_is_in_the_range_whose_bounds_hold_it(
            mut starts in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..4), 0..6),
            key in proptest::collection::vec(any::<u8>(), 0..5),
        ) {
            starts.remove(&Vec::new());
            let boundaries: Vec<Vec<u8>> = starts.into_iter().collect();
            let owners = vec![0; boundaries.len() + 1];
            let m = RangeMap::new(&boundaries, &owners).unwrap();
            let (lo, hi) = m.bounds(m.index_of(&key));
            prop_assert!(lo <= key.as_slice());
            prop_assert!(hi.is_none_or(|hi| key.as_slice() < hi));
        }
    }
}
