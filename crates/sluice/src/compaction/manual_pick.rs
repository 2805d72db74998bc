//! What `compact_range` compacts at each level, and what it only moves.
//!
//! A manual compaction pushes every file of a level in the range into the next level (for L0,
//! the base level: [`super::level_targets`]). A file
//! that overlaps nothing there need not be rewritten to get there: it moves by a version edit,
//! as RocksDB's and Pebble's manual compactions move it, and is counted as a trivial move. So
//! the level's files are cut, in key order, into
//!
//! - **moves**: a file that overlaps no other file of the level being compacted (two L0 files
//!   may overlap; two files of a deeper level may share a boundary user key, whose versions
//!   must then stay in one level) and no file of the next level, and
//! - **merges**: each maximal run of the other files between two moves, with the files of the
//!   next level under it.
//!
//! Merges and moves never overlap: a merge's outputs lie within its inputs' key range, which
//! holds no moved file, because every file of the next level it pulls in overlaps one of its
//! own files and no moved one. A file that would land at the bottom of the tree holding
//! tombstones is rewritten instead ([`must_rewrite`]): the user asked for the range to be
//! compacted, and at the bottom a rewrite drops the tombstones (and zeroes the sequence
//! numbers) that a move would keep forever.

use std::sync::Arc;

use super::picker::expand;
use super::{Compaction, Reason};
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS};
use crate::version::version::{largest_user_key, smallest_user_key};

/// The compactions `compact_range` runs for `level` into `output_level` over `[lo, hi]`, in
/// key order: moves and merges as the module docs say, or none if the level has no file
/// there. In partitioned mode they are cut per range too, so that each stays inside its range
/// and runs on its owner. With `rewrite_all` (a compaction filter is set) nothing moves: every
/// file is rewritten. REQUIRES: the levels between `level` and `output_level` are empty.
pub fn pick_manual(
    version: &Arc<Version>,
    level: usize,
    output_level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
    rewrite_all: bool,
) -> Vec<Compaction> {
    let reason = match rewrite_all {
        true => Reason::ManualRewrite,
        false => Reason::Manual,
    };
    files_per_range(version, level, lo, hi)
        .into_iter()
        .flat_map(|files| match rewrite_all {
            true => vec![files],
            false => cut_into_moves(version, output_level, files),
        })
        .map(|inputs0| expand(version, level, output_level, inputs0, reason))
        .collect()
}

/// The in-place rewrite of `level`'s files in `[lo, hi]` that `compact_range` runs last when
/// a compaction filter is set, one per range in partitioned mode; none if the level has no
/// file there.
pub fn pick_in_place(
    version: &Arc<Version>,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Vec<Compaction> {
    files_per_range(version, level, lo, hi)
        .into_iter()
        .map(|inputs0| {
            let (all_lo, all_hi) = super::picker::key_range(&inputs0);
            Compaction {
                level,
                output_level: level,
                inputs: [inputs0, Vec::new()],
                grandparents: Vec::new(),
                bottommost: ((level + 1)..NUM_LEVELS).all(|l| {
                    version
                        .overlapping_files(l, Some(&all_lo), Some(&all_hi))
                        .is_empty()
                }),
                reason: Reason::ManualInPlace,
                version: Arc::clone(version),
            }
        })
        .collect()
}

/// `level`'s files in `[lo, hi]`, one group per range in partitioned mode (one group without
/// it), no group empty.
fn files_per_range(
    version: &Version,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Vec<Vec<Arc<FileMetaData>>> {
    let files = version.overlapping_files(level, lo, hi);
    if files.is_empty() {
        return Vec::new();
    }
    match version.range_map() {
        None => vec![files],
        Some(map) => {
            let mut by_range = std::collections::BTreeMap::<usize, Vec<_>>::new();
            for f in files {
                by_range
                    .entry(map.index_of(smallest_user_key(&f)))
                    .or_default()
                    .push(f);
            }
            by_range.into_values().collect()
        }
    }
}

/// True if moving `file` into `output_level` would keep tombstones that a rewrite there
/// drops: it holds some, and nothing below `output_level` overlaps it.
pub fn must_rewrite(version: &Version, output_level: usize, file: &FileMetaData) -> bool {
    let (lo, hi) = (smallest_user_key(file), largest_user_key(file));
    file.num_deletions > 0
        && ((output_level + 1)..NUM_LEVELS)
            .all(|l| version.overlapping_files(l, Some(lo), Some(hi)).is_empty())
}

/// Cuts `files` (of the level being compacted into `output_level`) into the input sets of
/// moves and merges, in key order.
fn cut_into_moves(
    version: &Version,
    output_level: usize,
    mut files: Vec<Arc<FileMetaData>>,
) -> Vec<Vec<Arc<FileMetaData>>> {
    files.sort_by(|a, b| smallest_user_key(a).cmp(smallest_user_key(b)));
    let mut groups: Vec<Vec<Arc<FileMetaData>>> = Vec::new();
    let mut run: Vec<Arc<FileMetaData>> = Vec::new();
    for cluster in overlapping_clusters(files) {
        let movable = match cluster.as_slice() {
            [file] => {
                let (lo, hi) = (smallest_user_key(file), largest_user_key(file));
                version
                    .overlapping_files(output_level, Some(lo), Some(hi))
                    .is_empty()
                    && !must_rewrite(version, output_level, file)
            }
            _ => false,
        };
        if movable {
            if !run.is_empty() {
                groups.push(std::mem::take(&mut run));
            }
            groups.push(cluster);
        } else {
            run.extend(cluster);
        }
    }
    if !run.is_empty() {
        groups.push(run);
    }
    groups
}

/// Splits `files`, sorted by smallest user key, into clusters whose user-key ranges overlap
/// (or touch at a shared user key) within a cluster and not between clusters.
fn overlapping_clusters(files: Vec<Arc<FileMetaData>>) -> Vec<Vec<Arc<FileMetaData>>> {
    let mut clusters: Vec<Vec<Arc<FileMetaData>>> = Vec::new();
    let mut reach: Vec<u8> = Vec::new();
    for f in files {
        match clusters.last_mut() {
            Some(cluster) if smallest_user_key(&f) <= reach.as_slice() => {
                if largest_user_key(&f) > reach.as_slice() {
                    reach = largest_user_key(&f).to_vec();
                }
                cluster.push(f);
            }
            _ => {
                reach = largest_user_key(&f).to_vec();
                clusters.push(vec![f]);
            }
        }
    }
    clusters
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::picker::tests::version;
    use crate::version::testing::table;

    /// A 1000-byte file of `[lo, hi]` at sequence number `number`, holding `deletions`.
    fn file(number: u64, lo: &str, hi: &str, deletions: u64) -> FileMetaData {
        FileMetaData {
            num_deletions: deletions,
            ..table(number, lo, hi, 1000, number)
        }
    }

    /// `(input file numbers of the upper level, of the lower level, is a move)` per compaction.
    fn picked(v: &Arc<Version>, level: usize) -> Vec<(Vec<u64>, Vec<u64>, bool)> {
        pick_manual(v, level, level + 1, None, None, false)
            .iter()
            .map(|c| {
                let numbers = |i: usize| {
                    let mut n: Vec<u64> = c.inputs[i].iter().map(|f| f.number).collect();
                    n.sort_unstable();
                    n
                };
                (numbers(0), numbers(1), c.is_trivial_move(u64::MAX))
            })
            .collect()
    }

    #[test]
    fn files_over_nothing_move_and_the_runs_between_them_merge() {
        // L1: a-b, c-d, e-f, g-h, i-j; L2 only under c-d and i-j.
        let v = version(vec![
            (1, file(1, "a", "b", 0)),
            (1, file(2, "c", "d", 0)),
            (1, file(3, "e", "f", 0)),
            (1, file(4, "g", "h", 0)),
            (1, file(5, "i", "j", 0)),
            (2, file(10, "c", "c5", 0)),
            (2, file(11, "i", "k", 0)),
        ]);
        assert_eq!(
            picked(&v, 1),
            [
                (vec![1], vec![], true),
                (vec![2], vec![10], false),
                (vec![3], vec![], true),
                (vec![4], vec![], true),
                (vec![5], vec![11], false),
            ]
        );
    }

    #[test]
    fn adjacent_files_that_must_merge_form_one_compaction() {
        let v = version(vec![
            (1, file(1, "a", "b", 0)),
            (1, file(2, "c", "d", 0)),
            (1, file(3, "e", "f", 0)),
            (2, file(10, "a", "a5", 0)),
            (2, file(11, "c5", "e5", 0)),
        ]);
        // 1 and 2-3 would be separate merges; with no move between them they are one, and it
        // takes every L2 file under its whole range.
        assert_eq!(picked(&v, 1), [(vec![1, 2, 3], vec![10, 11], false)]);
    }

    #[test]
    fn overlapping_l0_files_merge_and_a_lone_one_moves() {
        let v = version(vec![
            (0, file(1, "a", "c", 0)),
            (0, file(2, "b", "d", 0)),
            (0, file(3, "x", "z", 0)),
            (1, file(10, "a", "b", 0)),
        ]);
        assert_eq!(
            picked(&v, 0),
            [(vec![1, 2], vec![10], false), (vec![3], vec![], true)]
        );
    }

    #[test]
    fn a_shared_boundary_key_keeps_two_files_together() {
        // The versions of "b" span files 1 and 2: moving one without the other would put
        // versions of one key in two levels in the wrong order.
        let v = version(vec![(1, file(1, "a", "b", 0)), (1, file(2, "b", "c", 0))]);
        assert_eq!(picked(&v, 1), [(vec![1, 2], vec![], false)]);
    }

    #[test]
    fn tombstones_bound_for_the_bottom_are_rewritten_not_moved() {
        let v = version(vec![(0, file(1, "a", "b", 5))]);
        assert_eq!(picked(&v, 0), [(vec![1], vec![], false)]);
        // With data below the next level in its range, the tombstones still have work to do.
        let v = version(vec![(0, file(1, "a", "b", 5)), (2, file(10, "a", "a", 0))]);
        assert_eq!(picked(&v, 0), [(vec![1], vec![], true)]);
    }
}
