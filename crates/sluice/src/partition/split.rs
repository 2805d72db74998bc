//! Where to cut a range in two (partitioned mode), when the balancer must move part of one.
//!
//! A range moves whole, and a move must shrink the gap between the fullest and the emptiest
//! owner to at most half ([`super::balance`]). A hot range that holds most of its owner's
//! bytes is bigger than that on its own, so without splits the owners stay uneven for good.
//! The balancer then cuts such a range so that the piece next to the destination holds about
//! half the gap, and moves the piece.
//!
//! A split must keep the partitioning invariant that every table lies inside one range, so
//! the tables crossing the split key are rewritten in two, at their own level, in the same
//! edit that changes the map (`Db::split_range`). The key is chosen where little has to be
//! rewritten: it is the first key of a table below L0, so at most one table per other level
//! crosses it, plus the range's L0 tables, which hold a few memtables' worth and are about to
//! be compacted anyway.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_exec::Executor;
use sluice_sst::compact::CompactionSpec;

use crate::Result;
use crate::compaction::choose::{History, Request, local_exec};
use crate::compaction::env::JobEnv;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS};
use crate::version::version::{largest_user_key, smallest_user_key};

/// Which half of a split range is the piece that moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `[start, key)`.
    Lower,
    /// `[key, end)`.
    Upper,
}

/// A chosen split key and what it costs.
#[derive(Clone, Debug, PartialEq)]
pub struct SplitKey {
    /// The first user key of the upper half.
    pub key: Vec<u8>,
    /// Bytes below L0 of the piece on the chosen side, counting each crossing table half.
    pub piece_bytes: u64,
    /// The tables that cross `key`, with their levels: they are rewritten in two.
    pub crossing: Vec<(usize, Arc<FileMetaData>)>,
}

/// True if `f` has keys on both sides of `key`: below it and at or above it.
pub fn crosses(f: &FileMetaData, key: &[u8]) -> bool {
    smallest_user_key(f) < key && key <= largest_user_key(f)
}

/// The tables of `version` that cross `key`, with their levels.
pub fn tables_crossing(version: &Version, key: &[u8]) -> Vec<(usize, Arc<FileMetaData>)> {
    (0..NUM_LEVELS)
        .flat_map(|level| {
            version
                .files(level)
                .iter()
                .filter(|f| crosses(f, key))
                .map(move |f| (level, Arc::clone(f)))
        })
        .collect()
}

/// Where to cut range `range` of `version`'s map so that the piece on `side` holds about
/// `target` bytes below L0, and no more than `max_piece`; among equally good keys, the one
/// crossing the fewest bytes. Candidates are the first keys of the range's tables below L0.
/// `None` when the map has no such range or no candidate gives a piece of 1..=`max_piece`
/// bytes.
pub fn choose_split_key(
    version: &Version,
    range: usize,
    side: Side,
    target: u64,
    max_piece: u64,
) -> Option<SplitKey> {
    let map = version.range_map()?;
    if range >= map.len() {
        return None;
    }
    let (start, _) = map.bounds(range);
    let tables: Vec<&Arc<FileMetaData>> = (1..NUM_LEVELS)
        .flat_map(|level| version.files(level))
        .filter(|f| map.index_of(smallest_user_key(f)) == range)
        .collect();
    let total: u64 = tables.iter().map(|f| f.file_size).sum();
    let best = tables
        .iter()
        .map(|f| smallest_user_key(f))
        .filter(|&key| key > start)
        .filter_map(|key| {
            let (mut lower, mut crossing) = (0u64, 0u64);
            for f in &tables {
                if crosses(f, key) {
                    lower += f.file_size / 2;
                    crossing += f.file_size;
                } else if largest_user_key(f) < key {
                    lower += f.file_size;
                }
            }
            let piece = match side {
                Side::Lower => lower,
                Side::Upper => total - lower,
            };
            (piece > 0 && piece <= max_piece)
                .then(|| ((piece.abs_diff(target), crossing), key, piece))
        })
        .min()?;
    let ((_, _), key, piece_bytes) = best;
    Some(SplitKey {
        key: key.to_vec(),
        piece_bytes,
        crossing: tables_crossing(version, key),
    })
}

/// The range-split job: rewrites each table of `crossing` as two, the keys below `at` and the
/// rest, at the same level and in the same directory, and returns them for the version edit.
/// Each half is a one-input compaction, so versions no snapshot can see are dropped as any
/// compaction would, and nothing else.
pub(crate) fn split_tables(
    crossing: &[(usize, Arc<FileMetaData>)],
    at: &[u8],
    base_level: usize,
    env: &JobEnv<'_>,
) -> Result<Vec<(usize, FileMetaData)>> {
    let executor = local_exec(env.options, &History::default(), Request::RangeSplit);
    let mut new_files = Vec::new();
    for (level, f) in crossing {
        let table = env.table_cache.get_for_compaction(f)?;
        for (lower, upper) in [(None, Some(at.to_vec())), (Some(at.to_vec()), None)] {
            let spec = CompactionSpec {
                inputs: vec![vec![Arc::clone(&table)]],
                snapshots: env.snapshots.clone(),
                table: env.options.table_for_level(*level, base_level, false),
                storage: env.options.background_storage(),
                lower,
                upper,
                ..CompactionSpec::default()
            };
            let mut new_output =
                || -> sluice_sst::Result<(u64, PathBuf)> { Ok(env.new_table(f.dir_index)) };
            let out = executor.execute(&spec, Arc::default(), &mut new_output)?;
            new_files.extend(out.files.iter().map(|o| {
                (
                    *level,
                    FileMetaData::of_new_table(o.number, f.dir_index, &o.summary),
                )
            }));
        }
    }
    Ok(new_files)
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::partition::RangeMap;
    use crate::version::edit::VersionEdit;

    fn table(number: u64, lo: &str, hi: &str, size: u64) -> FileMetaData {
        FileMetaData {
            dir_index: 1,
            ..crate::version::testing::table(number, lo, hi, size, number)
        }
    }

    /// Range 0 `[.. "m")` holds L1 tables b-c (10), d-e (10), f-g (40), an L2 table a-f (60)
    /// and an L0 table a-k (100); range 1 holds an L1 table n-o.
    fn version() -> Version {
        let mut edit = VersionEdit {
            range_map: Some(RangeMap::new(&[b"m".to_vec()], &[0, 0]).unwrap()),
            ..VersionEdit::default()
        };
        edit.add_file(1, table(1, "b", "c", 10));
        edit.add_file(1, table(2, "d", "e", 10));
        edit.add_file(1, table(3, "f", "g", 40));
        edit.add_file(2, table(4, "a", "f", 60));
        edit.add_file(0, table(5, "a", "k", 100));
        edit.add_file(1, table(6, "n", "o", 500));
        Version::default().apply(&edit).unwrap()
    }

    fn numbers(k: &SplitKey) -> Vec<u64> {
        k.crossing.iter().map(|(_, f)| f.number).collect()
    }

    #[test]
    fn the_piece_comes_closest_to_the_target_bytes() {
        let v = version();
        // Below L0 range 0 holds 120 bytes. Cutting at "f": the upper piece is f-g (40) and
        // half of a-f, which crosses "f" (30).
        let k = choose_split_key(&v, 0, Side::Upper, 70, 100).unwrap();
        assert_eq!((k.key.as_slice(), k.piece_bytes), (&b"f"[..], 70));
        assert_eq!(
            numbers(&k),
            vec![5, 4],
            "the L0 table and the L2 table cross 'f'"
        );
        // Cutting at "d": the lower piece is b-c (10) and half of a-f (30).
        let k = choose_split_key(&v, 0, Side::Lower, 38, 100).unwrap();
        assert_eq!((k.key.as_slice(), k.piece_bytes), (&b"d"[..], 40));
        // A limit that every candidate's piece exceeds.
        assert_eq!(choose_split_key(&v, 0, Side::Upper, 10, 20), None);
    }

    #[test]
    fn a_range_without_tables_below_l0_or_a_missing_range_has_no_split() {
        let v = version();
        // Range 1's only table below L0 begins at its one candidate key, "n", which leaves
        // the lower piece empty.
        assert_eq!(choose_split_key(&v, 1, Side::Lower, 1, u64::MAX), None);
        assert_eq!(choose_split_key(&v, 2, Side::Lower, 1, u64::MAX), None);
        assert_eq!(
            choose_split_key(&Version::default(), 0, Side::Lower, 1, u64::MAX),
            None
        );
    }

    #[test]
    fn crossing_means_keys_on_both_sides() {
        let f = table(1, "b", "d", 1);
        assert!(crosses(&f, b"c") && crosses(&f, b"d"));
        assert!(!crosses(&f, b"b") && !crosses(&f, b"e") && !crosses(&f, b"a"));
    }
}
