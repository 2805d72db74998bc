//! The invariants partitioned mode's range map puts on a version's tables, checked with every
//! edit, and the forwarding entries that follow from where the tables are. Data rules of the
//! version; the policies that move and split ranges are in `crate::partition`.

use super::Version;
use super::edit::{FileMetaData, NUM_LEVELS};
use super::range_map::{RangeMap, owner_of_dir};
use super::version::{largest_user_key, smallest_user_key};

/// Checks that every table of `files` (per level) lies inside one range of `map` and lives in
/// the directory of that range's owner or of one of its forwarding entries. Returns the first
/// violation.
pub fn check_tables<'a>(
    map: &RangeMap,
    files: impl Iterator<Item = (usize, &'a FileMetaData)>,
) -> Result<(), String> {
    for (level, f) in files {
        debug_assert!(level < NUM_LEVELS);
        let i = map.index_of(smallest_user_key(f));
        if map.index_of(largest_user_key(f)) != i {
            return Err(format!(
                "L{level} table {} crosses the boundary after range {i}",
                f.number
            ));
        }
        let Some(owner) = owner_of_dir(f.dir_index) else {
            return Err(format!(
                "L{level} table {} is in the database directory, which no owner has",
                f.number
            ));
        };
        let r = &map.ranges()[i];
        if r.owner != owner && !r.forwarded_from.contains(&owner) {
            return Err(format!(
                "L{level} table {} of range {i} is with owner {owner}, which neither owns the range nor has a forwarding entry",
                f.number
            ));
        }
    }
    Ok(())
}

/// The range map of `version` with its forwarding entries made to match where the tables are:
/// an entry `(range, owner)` for every owner other than the range's that holds a table of the
/// range, and no other. `None` when they already match (or there is no map).
///
/// The host applies it with every edit, so forwarding entries appear with the edit that
/// makes them needed (a move, or a flush that wrote to the old owner while the range moved)
/// and end with the edit that removes the last table they point to: that is how a move
/// finishes (the MStore paper: the forwarded data "is overwritten in compaction").
pub fn settle_forwarding(version: &Version) -> Option<RangeMap> {
    let map = version.range_map()?;
    let mut held = std::collections::BTreeSet::new();
    for f in version.live_files() {
        if let Some(owner) = owner_of_dir(f.dir_index) {
            held.insert((map.index_of(smallest_user_key(f)), owner));
        }
    }
    let settled = map.with_forwarding(held);
    (settled != **map).then_some(settled)
}

#[cfg(test)]
mod tests {

    use super::*;

    fn table(number: u64, lo: &str, hi: &str, dir_index: u32) -> FileMetaData {
        FileMetaData {
            dir_index,
            ..crate::version::testing::table(number, lo, hi, 1, 1)
        }
    }

    #[test]
    fn tables_must_fit_a_range_and_sit_with_its_owner() {
        let map = RangeMap::new(&[b"m".to_vec()], &[0, 1]).unwrap();
        let ok = [table(1, "a", "l", 1), table(2, "m", "z", 2)];
        assert!(check_tables(&map, ok.iter().map(|f| (1, f))).is_ok());
        let crossing = table(3, "a", "n", 1);
        assert!(
            check_tables(&map, [(1, &crossing)].into_iter())
                .unwrap_err()
                .contains("crosses")
        );
        let misplaced = table(4, "a", "b", 2);
        assert!(check_tables(&map, [(0, &misplaced)].into_iter()).is_err());
        let in_main_dir = table(5, "a", "b", 0);
        assert!(check_tables(&map, [(0, &in_main_dir)].into_iter()).is_err());
        // After range 0 moves to owner 1, owner 0's old table is reachable by forwarding.
        let moved = map.with_move(0, 1).with_forwarding([(0, 0)]);
        let old = table(6, "a", "b", 1);
        assert!(check_tables(&moved, [(2, &old)].into_iter()).is_ok());
        let cleared = moved.with_forwarding([]);
        assert!(check_tables(&cleared, [(2, &old)].into_iter()).is_err());
    }

    #[test]
    fn forwarding_ends_when_the_old_owner_holds_nothing_of_the_range() {
        use crate::version::edit::VersionEdit;
        let map = RangeMap::new(&[b"m".to_vec()], &[0, 1])
            .unwrap()
            .with_move(0, 1);
        let mut edit = VersionEdit {
            range_map: Some(map),
            ..VersionEdit::default()
        };
        // Owner 0 (directory 1) still has a table of range 0; owner 1 has one of range 1.
        edit.add_file(2, table(1, "a", "b", 1));
        edit.add_file(1, table(2, "n", "o", 2));
        let v = Version::default().apply(&edit).unwrap();
        // The move's edit gets the forwarding entry from the table left behind.
        let settled = settle_forwarding(&v).unwrap();
        assert_eq!(settled.ranges()[0].forwarded_from, vec![0]);
        let v = v
            .apply(&VersionEdit {
                range_map: Some(settled),
                ..VersionEdit::default()
            })
            .unwrap();
        assert_eq!(settle_forwarding(&v), None);
        let mut gone = VersionEdit::default();
        gone.delete_file(2, 1);
        gone.add_file(2, table(3, "a", "b", 2));
        let v = v.apply(&gone).unwrap();
        let pruned = settle_forwarding(&v).unwrap();
        assert!(pruned.ranges()[0].forwarded_from.is_empty());
        assert_eq!(pruned.ranges()[0].owner, 1);
    }
}
