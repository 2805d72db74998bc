//! Checking what a keyspace returned against the expected state: one read, or every entry of
//! an iterator over a key range. Used by the workload threads (for the keys they own) and by
//! the full verification after a reopen (for every key).

use sluice::Keyspace;

use super::expected::{Expect, Slot};
use super::value::{decode, key_number};

/// What a read of key `k` in keyspace `ks` found, with its value fully checked.
pub fn found(ks: usize, k: u32, value: Option<&[u8]>) -> Result<Expect, String> {
    match value {
        None => Ok(Expect::Absent),
        Some(v) => decode(ks, k, v)
            .map(Expect::Version)
            .map_err(|e| format!("key {k}: {e}")),
    }
}

/// Checks a read of key `k` that found `got`, against its slot.
pub fn check_read(k: u32, slot: &Slot, got: Expect, what: &str) -> Result<(), String> {
    if slot.allows(got) {
        Ok(())
    } else {
        Err(format!(
            "{what} of key {k} found {got:?}, expected {}",
            describe(slot)
        ))
    }
}

/// How a failure message names what was expected of a slot.
pub fn describe(slot: &Slot) -> String {
    match slot.pending() {
        None => format!("{:?}", slot.committed()),
        Some(p) => format!("{:?} or (in flight) {p:?}", slot.committed()),
    }
}

/// Checks the entries an iterator of keyspace `ks` returned for keys `[lo, hi)`, given in
/// ascending key order: keys strictly increasing and in range, every value intact for its
/// key and keyspace, and for every key `slot_of` knows (the keys the caller can vouch for)
/// exactly what the slot allows, nothing missing and nothing extra. Returns how many keys it
/// verified exactly.
pub fn check_range(
    entries: &[(Vec<u8>, Vec<u8>)],
    ks: usize,
    lo: u32,
    hi: u32,
    mut slot_of: impl FnMut(u32) -> Option<Slot>,
    what: &str,
) -> Result<u64, String> {
    let mut next = lo;
    let mut verified = 0u64;
    // Keys in [next, up_to) returned nothing: each must be allowed to be absent.
    let mut absent_until = |next: &mut u32, up_to: u32, verified: &mut u64| {
        for k in *next..up_to {
            if let Some(slot) = slot_of(k) {
                check_read(k, &slot, Expect::Absent, what)?;
                *verified += 1;
            }
        }
        *next = up_to;
        Ok::<(), String>(())
    };
    let mut found_slots = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        let Some(k) = key_number(key) else {
            return Err(format!("{what} returned a key never written: {key:?}"));
        };
        if k < next || k >= hi {
            return Err(format!(
                "{what} of [{lo}, {hi}) returned key {k} out of order or out of range (next \
                 allowed: {next})"
            ));
        }
        let got = found(ks, k, Some(value)).map_err(|e| format!("{what}: {e}"))?;
        absent_until(&mut next, k, &mut verified)?;
        found_slots.push((k, got));
        next = k + 1;
    }
    absent_until(&mut next, hi, &mut verified)?;
    for (k, got) in found_slots {
        if let Some(slot) = slot_of(k) {
            check_read(k, &slot, got, what)?;
            verified += 1;
        }
    }
    Ok(verified)
}

/// Every entry of keyspace `ks` with a key in `[lo, hi)`, in ascending key order.
pub fn scan(ks: &Keyspace, lo: u32, hi: u32) -> sluice::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let (lo, hi) = (super::value::key(lo), super::value::key(hi));
    ks.range(lo..hi).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::stress::value::{encode, key};

    fn slot(version: u32) -> Slot {
        Slot::default().begin(version, false, 0).commit()
    }

    #[test]
    fn ranges_must_hold_exactly_the_expected_keys() {
        let slots = [Slot::default(), slot(1), slot(2), slot(1)];
        let slot_of = |k: u32| slots.get(k as usize).copied();
        let entry = |k: u32, v: u32| (key(k), encode(1, k, v));
        let good = vec![entry(1, 1), entry(2, 2), entry(3, 1)];
        assert_eq!(check_range(&good, 1, 0, 4, slot_of, "scan"), Ok(4));
        // Missing, stale, extra, unordered, out of range, damaged.
        let missing = vec![entry(1, 1), entry(3, 1)];
        let stale = vec![entry(1, 1), entry(2, 1), entry(3, 1)];
        let extra = vec![entry(0, 1), entry(1, 1), entry(2, 2), entry(3, 1)];
        let unordered = vec![entry(2, 2), entry(1, 1), entry(3, 1)];
        let outside = vec![entry(1, 1), entry(2, 2), entry(3, 1), entry(4, 1)];
        let mut damaged = good.clone();
        damaged[1].1[9] ^= 1;
        let mut elsewhere = good.clone();
        elsewhere[1].1 = encode(2, 2, 2);
        for (name, bad) in [
            ("missing", missing),
            ("stale", stale),
            ("extra", extra),
            ("unordered", unordered),
            ("outside", outside),
            ("damaged", damaged),
            ("another keyspace's value", elsewhere),
        ] {
            assert!(
                check_range(&bad, 1, 0, 4, slot_of, "scan").is_err(),
                "{name}"
            );
        }
        // Keys the caller cannot vouch for are only checked for integrity.
        let none = |_| None;
        assert_eq!(check_range(&good[..1], 1, 0, 4, none, "scan"), Ok(0));
    }

    #[test]
    fn a_pending_write_may_or_may_not_be_seen() {
        let pending = slot(1).begin(2, true, 0);
        for got in [Expect::Version(1), Expect::Absent] {
            assert!(check_read(7, &pending, got, "get").is_ok());
        }
        let err = check_read(7, &pending, Expect::Version(2), "get").unwrap_err();
        assert!(err.contains("key 7") && err.contains("in flight"), "{err}");
    }
}
