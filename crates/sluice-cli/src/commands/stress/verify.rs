//! Full verification of a database against the expected-state file: every key read by a
//! scan and by a point get (two read paths: iterators merge levels, gets stop at the first
//! table that has the key), each answer checked exactly. After a kill, a key whose write was
//! in flight may hold either version: verification learns which and records it, so the next
//! round starts from an exact state, and checks that a batch landed whole or not at all.

use std::collections::BTreeMap;

use sluice::Db;

use super::check::{check_range, check_read, found, scan};
use super::expected::{Expect, ExpectedFile, Slot};
use super::value::key;

/// Why a verification did not pass.
#[derive(Debug)]
pub enum VerifyError {
    /// The database returned an error.
    Db(sluice::Error),
    /// It returned something the expected state does not allow: lost, stale, changed or
    /// invented data.
    Mismatch(String),
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyError::Db(e) => write!(f, "database error: {e}"),
            VerifyError::Mismatch(m) => f.write_str(m),
        }
    }
}

/// What every key of `db` holds, after checking each against `slots` (a scan and a get per
/// key, which must agree).
pub fn compare(db: &Db, slots: &[Slot]) -> Result<Vec<Expect>, VerifyError> {
    let keys = slots.len() as u32;
    let entries = scan(db, 0, keys).map_err(VerifyError::Db)?;
    let slot_of = |k: u32| slots.get(k as usize).copied();
    check_range(&entries, 0, keys, slot_of, "full scan").map_err(VerifyError::Mismatch)?;
    let mut state = vec![Expect::Absent; slots.len()];
    for (key, value) in &entries {
        if let Some(k) = super::value::key_number(key) {
            state[k as usize] = found(k, Some(value)).map_err(VerifyError::Mismatch)?;
        }
    }
    for (k, slot) in slots.iter().enumerate() {
        let k = k as u32;
        let value = db.get(&key(k)).map_err(VerifyError::Db)?;
        let got = found(k, value.as_deref()).map_err(VerifyError::Mismatch)?;
        check_read(k, slot, got, "get").map_err(VerifyError::Mismatch)?;
        if got != state[k as usize] {
            return Err(VerifyError::Mismatch(format!(
                "key {k}: get found {got:?}, the scan {:?}",
                state[k as usize]
            )));
        }
    }
    Ok(state)
}

/// Verifies `db` against the expected-state file and settles every pending write: whichever
/// version the database holds becomes the committed one. Fails if a batch landed in part.
/// Returns the number of keys verified.
pub fn verify_and_settle(db: &Db, expected: &ExpectedFile) -> Result<u64, VerifyError> {
    let slots = expected.load().map_err(VerifyError::Mismatch)?;
    let state = compare(db, &slots)?;
    let settled = settle(&slots, &state)?;
    for (k, slot) in settled {
        expected.store(k, &slot).map_err(VerifyError::Mismatch)?;
    }
    Ok(slots.len() as u64)
}

/// The new slot of every pending key, given what the database holds (`state`, already
/// checked to be allowed); fails if the keys of one batch disagree on whether it landed.
pub fn settle(slots: &[Slot], state: &[Expect]) -> Result<Vec<(u32, Slot)>, VerifyError> {
    let mut settled = Vec::new();
    // Batch group -> (a key that shows the batch landed, a key that shows it did not).
    let mut groups: BTreeMap<u32, (Option<u32>, Option<u32>)> = BTreeMap::new();
    for (k, (slot, &got)) in slots.iter().zip(state).enumerate() {
        let k = k as u32;
        let Some(pending) = slot.pending() else {
            continue;
        };
        let landed = got == pending;
        settled.push((
            k,
            if landed {
                slot.commit()
            } else {
                slot.abandon()
            },
        ));
        // A write that changes nothing visible (deleting an absent key) says nothing.
        if slot.group != 0 && pending != slot.committed() {
            let g = groups.entry(slot.group).or_default();
            if landed {
                g.0.get_or_insert(k);
            } else {
                g.1.get_or_insert(k);
            }
        }
    }
    if let Some((group, (Some(yes), Some(no)))) = groups
        .into_iter()
        .find(|(_, g)| g.0.is_some() && g.1.is_some())
    {
        return Err(VerifyError::Mismatch(format!(
            "batch {group:#x} landed in part: key {yes} has its write, key {no} does not"
        )));
    }
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(version: u32) -> Slot {
        Slot::default().begin(version, false, 0).commit()
    }

    #[test]
    fn pending_writes_settle_to_what_the_database_holds() {
        let slots = [
            committed(1),
            committed(1).begin(2, false, 0),
            committed(3).begin(4, true, 0),
        ];
        let state = [Expect::Version(1), Expect::Version(2), Expect::Version(3)];
        let settled = settle(&slots, &state).unwrap();
        assert_eq!(settled, vec![(1, committed(2)), (2, committed(3))]);
    }

    #[test]
    fn a_batch_that_landed_in_part_is_a_failure() {
        let slots = [
            committed(1).begin(2, false, 9),
            committed(1).begin(2, false, 9),
            // Deleting an absent key shows nothing either way.
            Slot::default().begin(1, true, 9),
        ];
        let whole = [Expect::Version(2), Expect::Version(2), Expect::Absent];
        assert!(settle(&slots, &whole).is_ok());
        let none = [Expect::Version(1), Expect::Version(1), Expect::Absent];
        assert!(settle(&slots, &none).is_ok());
        let torn = [Expect::Version(2), Expect::Version(1), Expect::Absent];
        let err = settle(&slots, &torn).unwrap_err().to_string();
        assert!(err.contains("landed in part"), "{err}");
    }
}
