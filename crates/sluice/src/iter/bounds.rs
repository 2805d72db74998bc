//! [`KeyBounds`]: the ranges of keys the read calls take, and their translation into the
//! cursor's `[lower, upper)` bounds.
//!
//! The calls take their own trait rather than `RangeBounds<K>` so that `db.range(..)` compiles:
//! `RangeFull` is `RangeBounds<K>` for every `K`, which leaves `K` for the caller to name.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// A range of keys: `..`, `a..b`, `a..=b`, `a..`, `..b`, `..=b` or a pair of [`Bound`]s, over
/// anything that is bytes (`&[u8]`, `&str`, `Vec<u8>`, `[u8; N]`, ...).
///
/// ```no_run
/// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
/// let everything = db.range(..);
/// let some = db.range("a".."m");
/// let more = db.range(b"a".to_vec()..=b"z".to_vec());
/// # Ok::<(), sluice::Error>(())
/// ```
pub trait KeyBounds {
    /// Where the range starts.
    fn start(&self) -> Bound<&[u8]>;
    /// Where the range ends.
    fn end(&self) -> Bound<&[u8]>;
}

impl KeyBounds for RangeFull {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
}

impl<K: AsRef<[u8]>> KeyBounds for Range<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(self.start.as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Excluded(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyBounds for RangeInclusive<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(self.start().as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Included(RangeInclusive::end(self).as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyBounds for RangeFrom<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Included(self.start.as_ref())
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
}

impl<K: AsRef<[u8]>> KeyBounds for RangeTo<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Excluded(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyBounds for RangeToInclusive<K> {
    fn start(&self) -> Bound<&[u8]> {
        Bound::Unbounded
    }
    fn end(&self) -> Bound<&[u8]> {
        Bound::Included(self.end.as_ref())
    }
}

impl<K: AsRef<[u8]>> KeyBounds for (Bound<K>, Bound<K>) {
    fn start(&self) -> Bound<&[u8]> {
        self.0.as_ref().map(AsRef::as_ref)
    }
    fn end(&self) -> Bound<&[u8]> {
        self.1.as_ref().map(AsRef::as_ref)
    }
}

/// The inclusive lower bound of `bound` as a key: the smallest key above an excluded one is
/// the key followed by a zero byte.
pub(crate) fn lower_bound(bound: Bound<&[u8]>) -> Option<Vec<u8>> {
    match bound {
        Bound::Included(k) => Some(k.to_vec()),
        Bound::Excluded(k) => Some(successor(k)),
        Bound::Unbounded => None,
    }
}

/// The exclusive upper bound of `bound` as a key.
pub(crate) fn upper_bound(bound: Bound<&[u8]>) -> Option<Vec<u8>> {
    match bound {
        Bound::Included(k) => Some(successor(k)),
        Bound::Excluded(k) => Some(k.to_vec()),
        Bound::Unbounded => None,
    }
}

/// The smallest key greater than `key`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut next = Vec::with_capacity(key.len() + 1);
    next.extend_from_slice(key);
    next.push(0);
    next
}

/// The smallest key greater than every key starting with `prefix`; `None` when there is none
/// (the prefix is empty or all `0xff`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|&b| b != 0xff)?;
    let mut end = prefix[..=last].to_vec();
    end[last] += 1;
    Some(end)
}

/// The tighter of two optional bounds by `pick` (`max` for lower bounds, `min` for upper).
pub(crate) fn tighter(
    a: Option<Vec<u8>>,
    b: Option<Vec<u8>>,
    pick: fn(Vec<u8>, Vec<u8>) -> Vec<u8>,
) -> Option<Vec<u8>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(pick(a, b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cursor bounds of `range`.
    fn cursor<R: KeyBounds>(range: R) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        (lower_bound(range.start()), upper_bound(range.end()))
    }

    #[test]
    fn every_range_form_becomes_inclusive_lower_and_exclusive_upper_keys() {
        let k = |s: &str| Some(s.as_bytes().to_vec());
        assert_eq!(cursor(..), (None, None));
        assert_eq!(cursor("a".."m"), (k("a"), k("m")));
        assert_eq!(cursor("a"..="m"), (k("a"), k("m\0")));
        assert_eq!(cursor(b"a".to_vec()..), (k("a"), None));
        assert_eq!(cursor(..[b'm']), (None, k("m")));
        assert_eq!(cursor(..=&b"m"[..]), (None, k("m\0")));
        let pair: (Bound<&str>, Bound<&str>) = (Bound::Excluded("a"), Bound::Unbounded);
        assert_eq!(cursor(pair), (k("a\0"), None));
    }

    #[test]
    fn prefix_ends_skip_trailing_ff_bytes() {
        assert_eq!(prefix_end(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(prefix_end(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(prefix_end(b"\xff"), None);
        assert_eq!(prefix_end(b""), None);
    }

    #[test]
    fn the_tighter_bound_wins() {
        let pick = tighter(Some(b"a".to_vec()), Some(b"b".to_vec()), std::cmp::max);
        assert_eq!(pick, Some(b"b".to_vec()));
        assert_eq!(
            tighter(None, Some(b"b".to_vec()), std::cmp::min),
            Some(b"b".to_vec())
        );
    }
}
