//! Full verification of a database against the expected-state file: every key of every
//! keyspace read by a scan and by a point get (two read paths: iterators merge levels, gets
//! stop at the first table that has the key), each answer checked exactly. After a kill, a key
//! whose write was in flight may hold either version: verification learns which and records
//! it, so the next round starts from an exact state, and checks that a batch landed whole or
//! not at all, across keyspaces.

use std::collections::BTreeMap;

use sluice::{Db, Keyspace};

use super::check::{check_range, check_read, found, scan};
use super::engine::{KEYSPACES, keyspaces_of};
use super::expected::{Expect, ExpectedFile, Slot, slot_key, slot_name};
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

/// What every key of every keyspace of `db` holds, in the order of `slots` (see
/// [`super::expected`]), after checking each against its slot (a scan and a get per key,
/// which must agree). A keyspace not created yet holds nothing.
pub fn compare(db: &Db, slots: &[Slot]) -> Result<Vec<Expect>, VerifyError> {
    let keys = slots.len() / KEYSPACES.len();
    let mut state = Vec::with_capacity(slots.len());
    for (ks, (handle, slots)) in keyspaces_of(db)
        .iter()
        .zip(slots.chunks_exact(keys))
        .enumerate()
    {
        let found = compare_keyspace(ks, handle.as_ref(), slots).map_err(|e| match e {
            VerifyError::Mismatch(m) => {
                VerifyError::Mismatch(format!("keyspace {:?}: {m}", KEYSPACES[ks]))
            }
            e => e,
        })?;
        state.extend(found);
    }
    Ok(state)
}

/// [`compare`] for keyspace `ks` (`None`: not created) and its `slots`.
fn compare_keyspace(
    ks: usize,
    handle: Option<&Keyspace>,
    slots: &[Slot],
) -> Result<Vec<Expect>, VerifyError> {
    let keys = slots.len() as u32;
    let entries = match handle {
        Some(handle) => scan(handle, 0, keys).map_err(VerifyError::Db)?,
        None => Vec::new(),
    };
    let slot_of = |k: u32| slots.get(k as usize).copied();
    check_range(&entries, ks, 0, keys, slot_of, "full scan").map_err(VerifyError::Mismatch)?;
    let mut state = vec![Expect::Absent; slots.len()];
    for (key, value) in &entries {
        if let Some(k) = super::value::key_number(key) {
            state[k as usize] = found(ks, k, Some(value)).map_err(VerifyError::Mismatch)?;
        }
    }
    for (k, slot) in slots.iter().enumerate() {
        let k = k as u32;
        let value = match handle {
            Some(handle) => handle.get(key(k)).map_err(VerifyError::Db)?,
            None => None,
        };
        let got = found(ks, k, value.as_deref()).map_err(VerifyError::Mismatch)?;
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
    for (s, slot) in settle(&slots, &state)? {
        let (ks, k) = slot_key(s, expected.keys() as usize);
        expected
            .store(ks, k, &slot)
            .map_err(VerifyError::Mismatch)?;
    }
    Ok(slots.len() as u64)
}

/// The new slot of every pending key, by slot index, given what the database holds (`state`,
/// already checked to be allowed); fails if the keys of one batch, in whichever keyspaces,
/// disagree on whether it landed.
pub fn settle(slots: &[Slot], state: &[Expect]) -> Result<Vec<(usize, Slot)>, VerifyError> {
    let mut settled = Vec::new();
    // Batch group -> (a slot that shows the batch landed, a slot that shows it did not).
    let mut groups: BTreeMap<u32, (Option<usize>, Option<usize>)> = BTreeMap::new();
    for (s, (slot, &got)) in slots.iter().zip(state).enumerate() {
        let Some(pending) = slot.pending() else {
            continue;
        };
        let landed = got == pending;
        settled.push((
            s,
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
                g.0.get_or_insert(s);
            } else {
                g.1.get_or_insert(s);
            }
        }
    }
    if let Some((group, (Some(yes), Some(no)))) = groups
        .into_iter()
        .find(|(_, g)| g.0.is_some() && g.1.is_some())
    {
        let keys = slots.len() / KEYSPACES.len();
        return Err(VerifyError::Mismatch(format!(
            "batch {group:#x} landed in part: {} has its write, {} does not",
            slot_name(yes, keys),
            slot_name(no, keys)
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
        // One key in each keyspace, all in batch 9.
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
        assert!(
            err.contains(r#"key 0 of keyspace "stress-a" does not"#),
            "{err}"
        );
    }
}
