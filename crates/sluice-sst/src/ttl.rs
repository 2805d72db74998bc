//! Time to live: values that expire a fixed time after they were written (RocksDB's
//! `DBWithTTL`).
//!
//! A database opened with a TTL stores each value followed by its write time:
//!
//! ```text
//! stored value = user value || write time: fixed64 LE (seconds since the Unix epoch)
//! ```
//!
//! Reads strip the write time and treat a value older than the TTL as absent; compactions
//! remove such values with [`TtlFilter`], a compaction filter whose name carries its cutoff
//! (`ttl(<unix seconds>)`), so a worker rebuilds the same filter from the name alone
//! ([`builtin_filter`]) and decides exactly as the host would have.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::compaction_iter::{CompactionFilter, FilterDecision};

/// Bytes of the write time after every value of a database with a TTL.
pub const WRITE_TIME_LEN: usize = 8;

/// Seconds since the Unix epoch now (0 if the clock is before it).
pub fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `value` with write time `secs` appended.
pub fn with_write_time(value: &[u8], secs: u64) -> Vec<u8> {
    let mut stored = Vec::with_capacity(value.len() + WRITE_TIME_LEN);
    stored.extend_from_slice(value);
    stored.extend_from_slice(&secs.to_le_bytes());
    stored
}

/// A stored value split into the user's value and its write time; `None` when it is too short
/// to hold one (only damage produces that).
pub fn split_write_time(stored: &[u8]) -> Option<(&[u8], u64)> {
    let at = stored.len().checked_sub(WRITE_TIME_LEN)?;
    let (value, time) = stored.split_at(at);
    Some((value, u64::from_le_bytes(time.try_into().ok()?)))
}

/// True when a value written at `written` has expired at `now` under a TTL of `ttl_secs`:
/// more than `ttl_secs` whole seconds have passed, RocksDB's `timestamp + ttl < now`. It is
/// the rule [`TtlFilter`] applies too, so a value reads as expired exactly when a compaction
/// would remove it, and a value read within the second after its write is never gone yet.
pub fn expired(written: u64, ttl_secs: u64, now: u64) -> bool {
    written.saturating_add(ttl_secs) < now
}

/// What a read at `now` makes of stored values under a TTL of `ttl_secs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    /// The TTL, in seconds.
    pub ttl_secs: u64,
    /// The read's time (Unix seconds), taken once per read or iterator.
    pub now: u64,
}

impl Expiry {
    /// The user's value in `stored`, `Ok(None)` when it has expired, and `Err` (in words)
    /// when `stored` is too short to hold a write time.
    pub fn live<'a>(&self, stored: &'a [u8]) -> Result<Option<&'a [u8]>, String> {
        let (value, written) = split_write_time(stored).ok_or_else(|| {
            format!(
                "a stored value of {} bytes has no write time (a TTL database's values end with 8)",
                stored.len()
            )
        })?;
        Ok((!expired(written, self.ttl_secs, self.now)).then_some(value))
    }
}

/// Removes values written before a cutoff, and shows the rest, without their write time, to
/// an optional inner filter (the user's own). See the module docs.
#[derive(Debug)]
pub struct TtlFilter {
    /// Values written before this time (Unix seconds) are removed.
    expired_before: u64,
    inner: Option<Arc<dyn CompactionFilter>>,
    name: String,
}

impl TtlFilter {
    /// A filter removing what a TTL of `ttl_secs` has expired at `now`, then applying `inner`.
    pub fn new(ttl_secs: u64, now: u64, inner: Option<Arc<dyn CompactionFilter>>) -> Self {
        Self::expiring_before(now.saturating_sub(ttl_secs), inner)
    }

    fn expiring_before(expired_before: u64, inner: Option<Arc<dyn CompactionFilter>>) -> Self {
        let mut name = format!("ttl({expired_before})");
        if let Some(inner) = &inner {
            // No worker knows the user's filter: the name says so.
            name = format!("{name}+{}", inner.name());
        }
        TtlFilter {
            expired_before,
            inner,
            name,
        }
    }

    /// The filter a name from [`TtlFilter::name`] stands for, without an inner filter.
    fn from_name(name: &str) -> Option<Self> {
        let secs = name.strip_prefix("ttl(")?.strip_suffix(')')?;
        if secs.is_empty() || !secs.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Self::expiring_before(secs.parse().ok()?, None))
    }
}

impl CompactionFilter for TtlFilter {
    fn name(&self) -> &str {
        &self.name
    }

    fn filter(&self, key: &[u8], stored: &[u8]) -> FilterDecision {
        // A value without a write time is damage for reads to report: kept, never removed.
        let Some((value, written)) = split_write_time(stored) else {
            return FilterDecision::Keep;
        };
        if written < self.expired_before {
            return FilterDecision::Remove;
        }
        let Some(inner) = &self.inner else {
            return FilterDecision::Keep;
        };
        match inner.filter(key, value) {
            FilterDecision::Change(new) => FilterDecision::Change(with_write_time(&new, written)),
            decision => decision,
        }
    }
}

/// The built-in compaction filter called `name`, if there is one: what every compaction
/// worker can run (today the TTL filter without an inner filter).
pub fn builtin_filter(name: &str) -> Option<Arc<dyn CompactionFilter>> {
    TtlFilter::from_name(name).map(|f| Arc::new(f) as Arc<dyn CompactionFilter>)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Shout;

    impl CompactionFilter for Shout {
        fn name(&self) -> &str {
            "shout"
        }
        fn filter(&self, _key: &[u8], value: &[u8]) -> FilterDecision {
            match value {
                b"drop" => FilterDecision::Remove,
                _ => FilterDecision::Change(value.to_ascii_uppercase()),
            }
        }
    }

    #[test]
    fn reads_see_live_values_without_their_write_time() {
        let e = Expiry {
            ttl_secs: 10,
            now: 100,
        };
        assert_eq!(e.live(&with_write_time(b"v", 95)), Ok(Some(&b"v"[..])));
        assert_eq!(e.live(&with_write_time(b"v", 90)), Ok(Some(&b"v"[..])));
        assert_eq!(e.live(&with_write_time(b"v", 89)), Ok(None));
        assert!(e.live(b"short").is_err());
        // Reads and compactions draw the line at the same second.
        let filter = TtlFilter::new(e.ttl_secs, e.now, None);
        for written in 85..95 {
            let stored = with_write_time(b"v", written);
            let removed = filter.filter(b"k", &stored) == FilterDecision::Remove;
            assert_eq!(e.live(&stored) == Ok(None), removed, "written at {written}");
        }
    }

    #[test]
    fn write_times_round_trip() {
        let stored = with_write_time(b"v", 1_700_000_000);
        assert_eq!(stored.len(), 1 + WRITE_TIME_LEN);
        assert_eq!(split_write_time(&stored), Some((&b"v"[..], 1_700_000_000)));
        assert_eq!(split_write_time(b"short"), None);
        assert!(expired(100, 10, 111) && !expired(100, 10, 110));
        assert!(!expired(u64::MAX, 10, u64::MAX - 1), "no overflow");
    }

    #[test]
    fn the_filter_removes_what_expired_and_shows_the_rest_to_the_inner_one() {
        let plain = TtlFilter::new(100, 1000, None);
        assert_eq!(plain.name(), "ttl(900)");
        assert_eq!(
            plain.filter(b"k", &with_write_time(b"v", 899)),
            FilterDecision::Remove
        );
        assert_eq!(
            plain.filter(b"k", &with_write_time(b"v", 900)),
            FilterDecision::Keep
        );
        assert_eq!(plain.filter(b"k", b"short"), FilterDecision::Keep);

        let chained = TtlFilter::new(100, 1000, Some(Arc::new(Shout)));
        assert_eq!(chained.name(), "ttl(900)+shout");
        assert_eq!(
            chained.filter(b"k", &with_write_time(b"abc", 950)),
            FilterDecision::Change(with_write_time(b"ABC", 950)),
            "the inner filter sees the value alone, and the write time is kept"
        );
        assert_eq!(
            chained.filter(b"k", &with_write_time(b"drop", 950)),
            FilterDecision::Remove
        );
        assert_eq!(
            chained.filter(b"k", &with_write_time(b"abc", 1)),
            FilterDecision::Remove
        );
    }

    #[test]
    fn workers_rebuild_the_plain_filter_from_its_name_only() {
        let f = builtin_filter("ttl(900)").unwrap();
        assert_eq!(f.name(), "ttl(900)");
        assert_eq!(
            f.filter(b"k", &with_write_time(b"v", 5)),
            FilterDecision::Remove
        );
        for bad in ["ttl(900)+shout", "ttl()", "ttl(-1)", "ttl(9", "janitor", ""] {
            assert!(builtin_filter(bad).is_none(), "{bad}");
        }
    }
}
