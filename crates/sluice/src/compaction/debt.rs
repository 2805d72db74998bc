//! Compaction debt: an estimate of the bytes compactions must still read and write before
//! every level is back within its target, RocksDB's `estimate-pending-compaction-bytes` (the
//! figure Pebble shows as `estimated debt`).
//!
//! The estimate walks down the tree carrying each level's excess into the next:
//!
//! - L0 counts in full once it needs a compaction (its score at least 1, or it holds as many
//!   bytes as the base level's target), together with all of the base level, which an L0
//!   compaction rewrites;
//! - a deeper level whose bytes (its own plus what arrives from above) exceed its target
//!   (`LevelTargets`) sends the excess down, and rewriting that excess costs the excess plus
//!   the share of the next level it overlaps, taken as the ratio of the two levels' sizes. An
//!   empty next level costs nothing: the excess moves down without a rewrite.
//!
//! Only the shape of the tree goes in, so the figure says how far behind compaction is, not
//! how long catching up will take; it is 0 for a tree within its targets. Partitioned mode's
//! per-range `pending_compaction_bytes` ([`crate::partition::stats`]) is a different,
//! cheaper measure used to balance owners: L0 plus each level's excess, without next levels.

use crate::compaction::in_progress::InProgress;
use crate::compaction::picker::targets_and_scores;
use crate::options::Options;
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;

/// The compaction debt of `version` under `options`' level targets, in bytes.
pub fn estimated_debt(version: &Version, options: &Options) -> u64 {
    let (targets, scores) = targets_and_scores(version, options, &InProgress::default());
    let base = targets.base_level();
    let l0_bytes = version.level_bytes(0);
    let l0_due = scores[0] >= 1.0 || l0_bytes >= targets.target(base);
    let mut debt = 0f64;
    // Bytes the level above sends into the current level.
    let mut arriving = 0u64;
    if l0_due {
        debt += (l0_bytes + version.level_bytes(base)) as f64;
        arriving = l0_bytes;
    }
    for level in base..NUM_LEVELS - 1 {
        let size = version.level_bytes(level) + arriving;
        arriving = size.saturating_sub(targets.target(level));
        let next = version.level_bytes(level + 1);
        if arriving > 0 && next > 0 {
            debt += arriving as f64 * (next as f64 / size as f64 + 1.0);
        }
    }
    debt as u64
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::options::CompactionOptions;
    use crate::version::edit::{FileMetaData, VersionEdit};

    fn table(number: u64, lo: &str, hi: &str, size: u64) -> FileMetaData {
        crate::version::testing::table(number, lo, hi, size, number)
    }

    /// Level 1's target is 100 bytes, level 2's 1000, L0 compacts at 2 files.
    fn options() -> Options {
        Options {
            compaction: CompactionOptions {
                level_compaction_dynamic_level_bytes: false,
                max_bytes_for_level_base: 100,
                max_bytes_for_level_multiplier: 10,
                l0_compaction_trigger: 2,
                ..CompactionOptions::default()
            },
            ..Options::default()
        }
    }

    fn version(files: &[(usize, FileMetaData)]) -> Version {
        let mut edit = VersionEdit::default();
        for (level, f) in files {
            edit.add_file(*level, f.clone());
        }
        Version::default().apply(&edit).unwrap()
    }

    #[test]
    fn a_tree_within_its_targets_owes_nothing() {
        assert_eq!(estimated_debt(&Version::default(), &options()), 0);
        let v = version(&[
            (0, table(5, "a", "z", 30)),
            (1, table(3, "a", "z", 100)),
            (2, table(1, "a", "z", 900)),
        ]);
        assert_eq!(estimated_debt(&v, &options()), 0);
    }

    #[test]
    fn l0_counts_with_l1_and_the_excess_cascades_down() {
        // Two overlapping L0 files (due), L1 at its target, L2 with 1000 bytes.
        let v = version(&[
            (0, table(6, "a", "z", 40)),
            (0, table(5, "a", "z", 20)),
            (1, table(3, "a", "z", 100)),
            (2, table(1, "a", "z", 1000)),
        ]);
        // L0 + L1 = 160; then L1 holds 160 against 100: the 60 excess costs
        // 60 * (1000 / 160 + 1) = 435.
        assert_eq!(estimated_debt(&v, &options()), 160 + 435);
    }

    #[test]
    fn an_excess_over_an_empty_level_moves_for_free() {
        let v = version(&[(1, table(3, "a", "z", 300))]);
        assert_eq!(estimated_debt(&v, &options()), 0);
        let v = version(&[(1, table(3, "a", "m", 300)), (2, table(1, "a", "z", 600))]);
        // 200 over L1's target, against 600 bytes of L2: 200 * (600 / 300 + 1).
        assert_eq!(estimated_debt(&v, &options()), 600);
    }

    #[test]
    fn with_dynamic_sizing_the_walk_starts_at_the_base_level() {
        let mut options = options();
        options.compaction.level_compaction_dynamic_level_bytes = true;
        // L6 holds 1000 bytes: the base level is L5, with a target of 100.
        let v = version(&[
            (0, table(7, "a", "z", 40)),
            (0, table(6, "a", "z", 20)),
            (5, table(3, "a", "z", 100)),
            (6, table(1, "a", "z", 1000)),
        ]);
        // L0 + L5 = 160; L5 then holds 160 against 100: 60 * (1000 / 160 + 1) = 435.
        assert_eq!(estimated_debt(&v, &options), 160 + 435);
        // With 5000 bytes in L6 the base level is the empty L4: L0 moves there for nothing
        // more than its own bytes.
        let v = version(&[
            (0, table(7, "a", "z", 40)),
            (0, table(6, "a", "z", 20)),
            (5, table(3, "a", "z", 100)),
            (6, table(1, "a", "z", 5000)),
        ]);
        assert_eq!(estimated_debt(&v, &options), 60);
    }
}
