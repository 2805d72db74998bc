//! How many bytes each level should hold, where L0 compacts to, and how urgent each level's
//! compaction is: RocksDB's level sizing, static or dynamic
//! (`level_compaction_dynamic_level_bytes`, `VersionStorageInfo::CalculateBaseBytes` and
//! `ComputeCompactionScore`).
//!
//! **Static sizing** fixes the targets from the top: L1 holds `max_bytes_for_level_base`, each
//! deeper level `max_bytes_for_level_multiplier` times more, and L0 compacts into L1. A tree
//! holding less than the deep levels' targets still writes its data through every level above
//! the last one that holds it.
//!
//! **Dynamic sizing** fixes them from the bottom: the largest level's size is the last level's
//! target, each level above it a multiplier smaller, and the first level whose target would
//! fall below `max_bytes_for_level_base` is the *base level*, the one L0 compacts into. The
//! levels above it stay empty. An empty tree's base level is the last one, so the first
//! flushes go straight to the bottom, and a level is added above the base only once the base
//! outgrows `max_bytes_for_level_base`: data reaches the last level in fewer rewrites, and
//! about 90% of it sits there (RocksDB's write amplification argument). No level's target is
//! below `max_bytes_for_level_base`, so the tree never takes an hourglass shape that starves L0.
//!
//! Invariant: **every level above the base level is empty** (the base level is never below
//! the first non-empty level). So an L0 compaction into the base level moves its data below
//! no older version of a key. When data shrinks, levels from the first non-empty one down to
//! the deepest one the sizes no longer need are *unnecessary*: they keep the base level up
//! until they are drained into the levels below, at a low priority.
//!
//! **Turning it on** for a database written with static sizing, whose data sits from L1 down,
//! works as in RocksDB: a read-write open moves the non-empty levels below L0 down, keeping
//! their order, so that the deepest sits in the last level and the others right above it
//! ([`moves_to_the_bottom`]), by editing the MANIFEST only. What is then still too many
//! levels for the data is drained as unnecessary.

use crate::options::CompactionOptions;
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;

/// RocksDB's `kScoreScale`: with dynamic sizing a score above 1 is scaled up tenfold, so that
/// dividing a level's size by its target plus what is about to arrive from above (which
/// ranks levels fairly) rarely brings a level over its target below 1.
const SCORE_SCALE: f64 = 10.0;

/// The level targets of one version under one set of options. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct LevelTargets {
    /// The level L0 compacts into.
    base_level: usize,
    /// Target bytes of each level; `u64::MAX` for L0 and for the levels above the base level,
    /// which take nothing.
    targets: [u64; NUM_LEVELS],
    /// Dynamic sizing: the deepest level that the size of the data no longer needs. Levels
    /// from the base level down to it are drained.
    lowest_unnecessary_level: Option<usize>,
    /// `max_bytes_for_level_base`: no level's target is below it.
    level_base_bytes: u64,
    dynamic: bool,
}

impl LevelTargets {
    /// The targets for `version`'s level sizes.
    pub fn new(version: &Version, options: &CompactionOptions) -> LevelTargets {
        let sizes: [u64; NUM_LEVELS] = std::array::from_fn(|l| version.level_bytes(l));
        LevelTargets::from_sizes(&sizes, options)
    }

    /// The targets for levels holding `sizes` bytes.
    pub fn from_sizes(sizes: &[u64; NUM_LEVELS], options: &CompactionOptions) -> LevelTargets {
        let base_max = options.max_bytes_for_level_base;
        let multiplier = options.max_bytes_for_level_multiplier;
        let mut targets = [u64::MAX; NUM_LEVELS];
        if !options.level_compaction_dynamic_level_bytes {
            for (level, target) in targets.iter_mut().enumerate().skip(1) {
                *target = options.max_bytes_for_level(level);
            }
            return LevelTargets {
                base_level: 1,
                targets,
                lowest_unnecessary_level: None,
                level_base_bytes: base_max,
                dynamic: false,
            };
        }
        let last = NUM_LEVELS - 1;
        let first_non_empty = (1..NUM_LEVELS).find(|&l| sizes[l] > 0);
        let largest = sizes[1..].iter().copied().max().unwrap_or(0);
        let Some(first_non_empty) = first_non_empty else {
            // Nothing below L0: it compacts straight into the last level.
            return LevelTargets {
                base_level: last,
                targets,
                lowest_unnecessary_level: None,
                level_base_bytes: base_max,
                dynamic: true,
            };
        };
        let base_min = base_max / multiplier;
        // The targets if the last level's were the largest level's size, up to the first
        // non-empty level; the deepest level whose target falls to `base_min` or below is
        // the deepest one not needed.
        let mut size = largest;
        let mut lowest_unnecessary_level = None;
        for level in (first_non_empty..last).rev() {
            size /= multiplier;
            if lowest_unnecessary_level.is_none() && size <= base_min {
                lowest_unnecessary_level = Some(level);
            }
        }
        let (base_level, base_size) = if size <= base_min {
            // Too many levels hold data for its size: the first of them stays the base level,
            // at the smallest size, until the unnecessary ones are drained.
            (first_non_empty, base_min + 1)
        } else {
            // Add levels above the first non-empty one until the base fits `base_max`.
            let mut base_level = first_non_empty;
            while base_level > 1 && size > base_max {
                base_level -= 1;
                size /= multiplier;
            }
            (base_level, size.clamp(1, base_max))
        };
        let mut size = base_size;
        for (level, target) in targets.iter_mut().enumerate().skip(base_level) {
            if level > base_level {
                size = size.saturating_mul(multiplier);
            }
            *target = size.max(base_max);
        }
        LevelTargets {
            base_level,
            targets,
            lowest_unnecessary_level,
            level_base_bytes: base_max,
            dynamic: true,
        }
    }

    /// The level L0 compacts into: L1 with static sizing.
    pub fn base_level(&self) -> usize {
        self.base_level
    }

    /// The bytes `level` should hold at most; `u64::MAX` for L0 and for the levels above the
    /// base level.
    pub fn target(&self, level: usize) -> u64 {
        self.targets[level]
    }

    /// The compaction score of every level under these targets: at least 1 means the level
    /// should be compacted, and a higher score is more urgent. `sizes` are each level's bytes
    /// that no running compaction holds (RocksDB's `level_bytes_no_compacting`: what is being
    /// compacted away does not make a level more urgent); `l0_score` is L0's score by its
    /// depth and file count.
    pub fn scores(&self, sizes: &[u64; NUM_LEVELS], l0_score: f64) -> [f64; NUM_LEVELS] {
        let mut scores = [0.0; NUM_LEVELS];
        if !self.dynamic {
            scores[0] = l0_score;
            for level in 1..NUM_LEVELS - 1 {
                scores[level] = sizes[level] as f64 / self.targets[level] as f64;
            }
            return scores;
        }
        // L0 counts as due once it holds as much as the base level should (RocksDB: it can
        // grow large through intra-L0 compactions), and more urgent than the base level once
        // it holds more than the base level does.
        let base = self.base_level;
        let base_target = self.targets[base];
        let mut score = l0_score;
        if sizes[0] >= self.level_base_bytes {
            score = score.max(1.01);
        }
        if sizes[0] > base_target {
            score = score.max(sizes[0] as f64 / sizes[base].max(base_target) as f64);
        }
        scores[0] = scaled(score);
        // What compactions will bring into the level being scored (all of L0, and the excess
        // of every level above): a level over its target is ranked against its target plus
        // that, so that a level about to receive a lot waits for the levels above it.
        let mut arriving = sizes[0];
        for level in 1..NUM_LEVELS - 1 {
            let (size, target) = (sizes[level], self.targets[level]);
            let mut score = if size < target {
                size as f64 / target as f64
            } else {
                SCORE_SCALE * size as f64 / target.saturating_add(arriving) as f64
            };
            let unnecessary = self.lowest_unnecessary_level.filter(|&u| level <= u);
            if let Some(lowest) = unnecessary
                && size > 0
            {
                // Drained, shallowest first, behind a due L0.
                let above_lowest = (lowest - level) as f64;
                score = score.max(SCORE_SCALE * (1.001 + 0.001 * above_lowest));
            }
            scores[level] = score;
            arriving = arriving.saturating_add(match unnecessary {
                Some(_) => size,
                None => size.saturating_sub(target),
            });
        }
        scores
    }

    /// `score` on the scale of static sizing, where a due level scores its fill, so that trees
    /// sized either way can be ranked against each other.
    pub fn comparable(&self, score: f64) -> f64 {
        match self.dynamic && score > 1.0 {
            true => (score / SCORE_SCALE).max(1.0),
            false => score,
        }
    }
}

/// `(from, to)` for each level below L0 that moves down when dynamic sizing is turned on for
/// `version`: the non-empty levels, in order, shifted so that the deepest one is the last
/// level (RocksDB's open-time migration). Empty if they already are.
pub(crate) fn moves_to_the_bottom(version: &Version) -> Vec<(usize, usize)> {
    let mut to = NUM_LEVELS - 1;
    let mut moves = Vec::new();
    for from in (1..NUM_LEVELS).rev() {
        if version.num_files(from) == 0 {
            continue;
        }
        if from < to {
            moves.push((from, to));
        }
        to -= 1;
    }
    moves
}

/// A dynamic score above 1, scaled (see [`SCORE_SCALE`]).
fn scaled(score: f64) -> f64 {
    if score > 1.0 {
        score * SCORE_SCALE
    } else {
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::picker::tests::version;
    use crate::version::testing::table;

    /// Dynamic sizing with `max_bytes_for_level_base` 1000 and a multiplier of 10: no level's
    /// target below 1000, and a level too small below 100.
    fn dynamic() -> CompactionOptions {
        CompactionOptions {
            level_compaction_dynamic_level_bytes: true,
            max_bytes_for_level_base: 1000,
            max_bytes_for_level_multiplier: 10,
            ..CompactionOptions::default()
        }
    }

    fn sizes(levels: &[(usize, u64)]) -> [u64; NUM_LEVELS] {
        let mut sizes = [0; NUM_LEVELS];
        for &(level, bytes) in levels {
            sizes[level] = bytes;
        }
        sizes
    }

    fn targets(levels: &[(usize, u64)]) -> LevelTargets {
        LevelTargets::from_sizes(&sizes(levels), &dynamic())
    }

    #[test]
    fn static_targets_start_at_l1() {
        let o = CompactionOptions {
            level_compaction_dynamic_level_bytes: false,
            ..dynamic()
        };
        let t = LevelTargets::from_sizes(&sizes(&[(6, 1 << 30)]), &o);
        assert_eq!(t.base_level(), 1);
        assert_eq!(t.target(0), u64::MAX);
        let expected = [1000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];
        assert_eq!(t.targets[1..], expected);
    }

    #[test]
    fn an_empty_tree_compacts_l0_into_the_last_level() {
        let t = targets(&[(0, 5000)]);
        assert_eq!(t.base_level(), NUM_LEVELS - 1);
        assert!(t.targets.iter().all(|&target| target == u64::MAX));
    }

    #[test]
    fn the_base_level_moves_up_as_the_last_level_grows() {
        // Up to max_bytes_for_level_base the last level is the base level.
        for bytes in [50, 500, 1000] {
            let t = targets(&[(6, bytes)]);
            assert_eq!((t.base_level(), t.target(6)), (6, 1000), "{bytes}");
        }
        // Then one level more per tenfold.
        let t = targets(&[(6, 5000)]);
        assert_eq!(t.base_level(), 5);
        assert_eq!(t.targets[5..], [1000, 5000]);
        let t = targets(&[(5, 800), (6, 50_000)]);
        assert_eq!(t.base_level(), 4);
        assert_eq!(t.targets[4..], [1000, 5000, 50_000]);
        // Every level above the base level takes nothing.
        assert!(t.targets[..4].iter().all(|&target| target == u64::MAX));
        // Only L1 may be a base level with a target below the data's share: the tree has run
        // out of levels.
        let t = targets(&[(1, 10), (6, 10_000_000_000)]);
        assert_eq!(t.base_level(), 1);
        assert_eq!(t.target(1), 1000);
        assert_eq!(t.target(6), 100_000_000);
    }

    #[test]
    fn levels_too_many_for_the_data_are_unnecessary_and_drained_shallowest_first() {
        // 5000 bytes need L5 and L6; the 10 bytes in L2 keep the base level at L2.
        let t = targets(&[(2, 10), (4, 10), (6, 5000)]);
        assert_eq!(t.base_level(), 2);
        assert_eq!(t.lowest_unnecessary_level, Some(4));
        let s = t.scores(&sizes(&[(2, 10), (4, 10), (6, 5000)]), 0.0);
        assert!(s[2] > s[4] && s[4] > 10.0, "{s:?}");
        assert_eq!((s[3], s[5], s[6]), (0.0, 0.0, 0.0));
        // Once they are drained the base level is L5 again.
        let t = targets(&[(5, 20), (6, 5000)]);
        assert_eq!((t.base_level(), t.lowest_unnecessary_level), (5, None));
    }

    #[test]
    fn scores_rank_l0_and_levels_against_what_arrives_from_above() {
        let levels = [(0, 0), (5, 3000), (6, 10_000)];
        let t = targets(&levels);
        assert_eq!(t.base_level(), 5);
        // L5 holds three times its target: scaled tenfold.
        let s = t.scores(&sizes(&levels), 0.5);
        assert_eq!(s[0], 0.5);
        assert!((s[5] - 30.0).abs() < 1e-9, "{s:?}");
        // A due L0 is scaled too, and what it brings lowers L5's score.
        let levels = [(0, 2000), (5, 3000), (6, 10_000)];
        let s = t.scores(&sizes(&levels), 1.5);
        assert!((s[0] - 15.0).abs() < 1e-9, "{s:?}");
        assert!((s[5] - 10.0).abs() < 1e-9, "{s:?}");
        // L0 holding max_bytes_for_level_base is due whatever its depth, and more urgent
        // than a base level smaller than it.
        let levels = [(0, 4000), (5, 500), (6, 10_000)];
        let s = t.scores(&sizes(&levels), 0.25);
        assert!((s[0] - 40.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn turning_it_on_moves_the_levels_down_in_order() {
        let v = version(vec![
            (0, table(1, "a", "b", 10, 9)),
            (1, table(2, "a", "b", 10, 5)),
            (3, table(3, "a", "b", 10, 3)),
            (4, table(4, "a", "b", 10, 2)),
        ]);
        assert_eq!(moves_to_the_bottom(&v), vec![(4, 6), (3, 5), (1, 4)]);
        let v = version(vec![
            (5, table(1, "a", "b", 10, 2)),
            (6, table(2, "a", "b", 10, 1)),
        ]);
        assert!(moves_to_the_bottom(&v).is_empty());
    }
}
