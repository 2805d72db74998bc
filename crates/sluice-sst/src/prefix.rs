//! Prefix extractors: which leading bytes of a key its table filter also records, so a scan
//! over one prefix skips every table that holds no key with it (RocksDB's `SliceTransform`
//! with prefix bloom filters).
//!
//! A key's prefix is what the extractor takes from its start. The writer adds each distinct
//! prefix's [`hash64`](crate::filter::hash64) to the table's bloom filter beside the whole keys'
//! (see `docs/format/sst.md`, section 7) and records the extractor's [`PrefixExtractor::name`]
//! in the table's properties: a reader only trusts the filter for a prefix when the table was
//! written with the same extractor, so changing it is safe, merely slower until compactions
//! rewrite the old tables.
//!
//! A scan over prefix `p` can use the filter when every key starting with `p` has the same
//! extracted prefix, [`PrefixExtractor::scan_prefix`]: for both extractors, when `p` is at
//! least as long as their length.

/// Takes a fixed-length prefix of each key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PrefixExtractor {
    /// The first `n` bytes; keys shorter than `n` have no prefix (RocksDB's
    /// `NewFixedPrefixTransform`).
    Fixed(usize),
    /// The first `n` bytes, or the whole key when it is shorter (RocksDB's
    /// `NewCappedPrefixTransform`).
    Capped(usize),
}

impl PrefixExtractor {
    /// The prefix length.
    pub fn len(&self) -> usize {
        match *self {
            PrefixExtractor::Fixed(n) | PrefixExtractor::Capped(n) => n,
        }
    }

    /// True for a zero length, which [`PrefixExtractor::validate`] refuses.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The prefix the filter records for `key`, if it has one.
    pub fn prefix<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        match *self {
            PrefixExtractor::Fixed(n) => key.get(..n),
            PrefixExtractor::Capped(n) => Some(&key[..n.min(key.len())]),
        }
    }

    /// The prefix every key starting with `scan` has, when there is one: then a table whose
    /// filter lacks it holds no key starting with `scan`.
    pub fn scan_prefix<'p>(&self, scan: &'p [u8]) -> Option<&'p [u8]> {
        scan.get(..self.len())
    }

    /// The name recorded in tables: `fixed:N` or `capped:N`.
    pub fn name(&self) -> String {
        match *self {
            PrefixExtractor::Fixed(n) => format!("fixed:{n}"),
            PrefixExtractor::Capped(n) => format!("capped:{n}"),
        }
    }

    /// The extractor [`PrefixExtractor::name`] gave `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        let (kind, n) = name.split_once(':')?;
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: usize = n.parse().ok()?;
        let extractor = match kind {
            "fixed" => PrefixExtractor::Fixed(n),
            "capped" => PrefixExtractor::Capped(n),
            _ => return None,
        };
        extractor.validate().ok()?;
        Some(extractor)
    }

    /// Checks the length is usable: at least 1 byte, at most a key's maximum length.
    pub fn validate(&self) -> Result<(), String> {
        match self.len() {
            0 => Err(format!("prefix extractor {}: length 0", self.name())),
            n if n > MAX_PREFIX_LEN => Err(format!(
                "prefix extractor {}: length above {MAX_PREFIX_LEN}",
                self.name()
            )),
            _ => Ok(()),
        }
    }
}

/// Longest prefix an extractor may take.
pub const MAX_PREFIX_LEN: usize = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_and_capped_prefixes() {
        let fixed = PrefixExtractor::Fixed(3);
        assert_eq!(fixed.prefix(b"abcdef"), Some(&b"abc"[..]));
        assert_eq!(fixed.prefix(b"ab"), None);
        let capped = PrefixExtractor::Capped(3);
        assert_eq!(capped.prefix(b"abcdef"), Some(&b"abc"[..]));
        assert_eq!(capped.prefix(b"ab"), Some(&b"ab"[..]));
        for e in [fixed, capped] {
            assert_eq!(e.scan_prefix(b"abcd"), Some(&b"abc"[..]));
            assert_eq!(
                e.scan_prefix(b"ab"),
                None,
                "keys under ab have several prefixes"
            );
        }
    }

    #[test]
    fn every_key_under_a_scan_prefix_has_that_prefix() {
        for e in [PrefixExtractor::Fixed(2), PrefixExtractor::Capped(2)] {
            for scan in [&b"ab"[..], b"abc", b"a", b""] {
                let Some(p) = e.scan_prefix(scan) else {
                    continue;
                };
                for tail in [&b""[..], b"x", b"xyz"] {
                    let key = [scan, tail].concat();
                    assert_eq!(e.prefix(&key), Some(p), "{e:?} {key:?}");
                }
            }
        }
    }

    #[test]
    fn names_round_trip_and_bad_ones_are_refused() {
        for e in [PrefixExtractor::Fixed(8), PrefixExtractor::Capped(1)] {
            assert_eq!(PrefixExtractor::from_name(&e.name()), Some(e));
        }
        for bad in [
            "",
            "fixed",
            "fixed:",
            "fixed:0",
            "fixed:-1",
            "fixed:+3",
            "nope:3",
            "capped:99999999999999999999",
        ] {
            assert_eq!(PrefixExtractor::from_name(bad), None, "{bad}");
        }
        assert!(PrefixExtractor::Fixed(0).validate().is_err());
    }
}
