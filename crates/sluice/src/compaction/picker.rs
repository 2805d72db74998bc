//! The compaction picker: scores every level and chooses what to compact next.
//!
//! The picker only reads a version and returns a value; it never touches files. L0 is scored by
//! its depth (sublevels) against `l0_compaction_trigger`, or by its file count against
//! `l0_compaction_file_threshold` if that is higher (and, with dynamic level sizing, by its
//! bytes); deeper levels by bytes against their target ([`LevelTargets`]). Levels with a score
//! of at least 1 are tried most urgent first; in a level the candidates start after the
//! level's compact pointer (so successive compactions sweep the key space; L0 starts at its
//! oldest file), and the first one that does not conflict with the compactions already
//! running ([`InProgress`]) is chosen. L0 compacts into the base level, every other level into
//! the next.

use std::sync::Arc;

use sluice_sst::key::{compare_internal, user_key};

use super::in_progress::InProgress;
use super::l0_inputs::l0_inputs;
use super::level_targets::LevelTargets;
use super::{Compaction, Reason};
use crate::options::Options;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS};
use crate::version::version::{file_overlaps, smallest_user_key};

/// The compaction score of every level: at least 1 means it should be compacted. The last
/// level's is 0: it has nowhere to go.
pub fn level_scores(version: &Version, options: &Options) -> [f64; NUM_LEVELS] {
    targets_and_scores(version, options, &InProgress::default()).1
}

/// The level targets of `version` and the scores under them, counting in the scores only the
/// bytes that no compaction of `running` holds.
pub(crate) fn targets_and_scores(
    version: &Version,
    options: &Options,
    running: &InProgress,
) -> (LevelTargets, [f64; NUM_LEVELS]) {
    let targets = LevelTargets::new(version, &options.compaction);
    let idle: [u64; NUM_LEVELS] = std::array::from_fn(|l| {
        let files = version.files(l).iter();
        files
            .filter(|f| !running.is_busy(f.number))
            .map(|f| f.file_size)
            .sum()
    });
    let scores = targets.scores(&idle, l0_score(version, options));
    (targets, scores)
}

/// L0's score by its shape: its depth (sublevels) against `l0_compaction_trigger`, or its file
/// count against `l0_compaction_file_threshold`, whichever is higher.
fn l0_score(version: &Version, options: &Options) -> f64 {
    let depth = version.l0_depth() as f64 / options.compaction.l0_compaction_trigger as f64;
    let files =
        version.num_files(0) as f64 / options.compaction.l0_compaction_file_threshold as f64;
    depth.max(files)
}

/// True if some level has a score of at least 1, or (partitioned mode) a table waits to be
/// relocated to its range's new owner.
pub fn needs_compaction(version: &Version, options: &Options) -> bool {
    level_scores(version, options).iter().any(|&s| s >= 1.0)
        || forwarded_tables(version).next().is_some()
        || crate::blob::gc::forced_compaction_due(version, &options.blob)
}

/// Picks the most urgent compaction that can run beside `running`, if any level needs one.
pub fn pick(
    version: &Arc<Version>,
    options: &Options,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
    running: &InProgress,
) -> Option<Compaction> {
    let (targets, scores) = targets_and_scores(version, options, running);
    let base_level = targets.base_level();
    let mut levels: Vec<(usize, f64)> = scores
        .into_iter()
        .enumerate()
        .filter(|(_, score)| *score >= 1.0)
        .collect();
    levels.sort_by(|a, b| b.1.total_cmp(&a.1));
    levels
        .into_iter()
        .find_map(|(level, _)| pick_in_level(version, level, base_level, compact_pointers, running))
        .or_else(|| relocation(version, running))
        .or_else(|| crate::blob::gc::forced_compaction(version, &options.blob, running))
}

/// Partitioned mode: `(level, table)` of every table left in a former owner's directory by a
/// range move, or whose blob values were, deepest level first (where tables are biggest and
/// least likely to be compacted soon anyway). Rewriting one in place moves both into the
/// owner's directory.
fn forwarded_tables(version: &Version) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
    let map = version.range_map();
    (0..NUM_LEVELS).rev().flat_map(move |level| {
        version.files(level).iter().filter_map(move |f| {
            let map = map?;
            let owner = map.range_of(smallest_user_key(f)).owner;
            let dir = crate::version::range_map::owner_dir_index(owner);
            let values_elsewhere = || {
                f.blob_refs
                    .iter()
                    .any(|(blob, _)| crate::blob::gc::is_elsewhere(version, blob, dir))
            };
            (f.dir_index != dir || values_elsewhere()).then_some((level, f))
        })
    })
}

/// The rewrite of one forwarded table into its range owner's directory, at its level, when no
/// other compaction is due. One table at a time: several tables of one level need not be
/// adjacent, and outputs spanning the gap between them would overlap the level's other tables.
fn relocation(version: &Arc<Version>, running: &InProgress) -> Option<Compaction> {
    forwarded_tables(version)
        .filter(|(_, f)| !running.is_busy(f.number))
        .map(|(level, f)| Compaction::in_place(version, level, f, Reason::Relocate))
        .find(|c| !running.conflicts(c))
}

/// The first compaction out of `level` that does not conflict with `running`; L0 compacts
/// into `base_level`.
fn pick_in_level(
    version: &Arc<Version>,
    level: usize,
    base_level: usize,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
    running: &InProgress,
) -> Option<Compaction> {
    let files = version.files(level);
    if level == 0 {
        // Oldest file first (L0 is kept newest first), with the files under it and the
        // rectangle above them (`l0_inputs`): no older version of a key is left behind above.
        return l0_seeds(version)
            .filter(|seed| !running.is_busy(seed.number))
            .map(|seed| {
                let inputs0 = l0_inputs(version, seed, base_level, running);
                expand(version, 0, base_level, inputs0, Reason::L0FileCount)
            })
            .find(|c| !running.conflicts(c))
            .or_else(|| intra_l0(version, running));
    }
    let pointer = &compact_pointers[level];
    let start = files
        .iter()
        .position(|f| pointer.is_empty() || compare_internal(&f.largest, pointer).is_gt())
        .unwrap_or(0);
    let (before, after) = files.split_at(start);
    after
        .iter()
        .chain(before)
        .filter(|seed| !running.is_busy(seed.number))
        .map(|seed| {
            let inputs0 = vec![Arc::clone(seed)];
            expand(version, level, level + 1, inputs0, Reason::LevelSize)
        })
        .find(|c| !running.conflicts(c))
}

/// The L0 files a compaction may start from, oldest first. In partitioned mode only files of
/// ranges at least three quarters as deep as the deepest qualify, deepest range first: a range
/// holding one or two L0 files would otherwise be compacted (with all of its L1 overlap) only
/// because another range is deep, while ranges nearly as deep can still compact beside it.
fn l0_seeds(version: &Version) -> impl Iterator<Item = &Arc<FileMetaData>> {
    let files = version.files(0);
    let mut seeds: Vec<&Arc<FileMetaData>> = files.iter().rev().collect();
    if let (Some(map), Some(counts)) = (version.range_map(), version.l0_files_per_range()) {
        let depth = |f: &FileMetaData| {
            counts
                .get(map.index_of(smallest_user_key(f)))
                .copied()
                .unwrap_or(0)
        };
        let deepest = counts.iter().copied().max().unwrap_or(0);
        // Ranges within a quarter of the deepest, so several owners can compact at once.
        seeds.retain(|f| 4 * depth(f) >= 3 * deepest);
        seeds.sort_by_key(|f| std::cmp::Reverse(depth(f)));
    }
    seeds.into_iter()
}

/// Fewest L0 files an intra-L0 compaction merges (RocksDB's `kMinFilesForIntraL0Compaction`).
pub const MIN_INTRA_L0_FILES: usize = 4;

/// The newest L0 files, merged into one L0 file, when the base level is busy. Only a run
/// starting at the newest file qualifies: every L0 file left out is then older than every
/// input, so the output (whose sequence numbers span the inputs') still sits above them.
fn intra_l0(version: &Arc<Version>, running: &InProgress) -> Option<Compaction> {
    // Partitioned mode: one output file would span ranges; the owners' L0 compactions
    // run independently instead.
    if version.range_map().is_some() {
        return None;
    }
    let files = version.files(0);
    let mut n = files
        .iter()
        .take_while(|f| !running.is_busy(f.number))
        .count();
    // A flush cut into pieces leaves files of one flush side by side in L0. A run ending
    // inside a flush would give its output sequence numbers that a piece left out also holds,
    // and the output's range overlaps that piece: shorten the run until no file left out
    // both overlaps it and is as new as its oldest entry.
    loop {
        if n < MIN_INTRA_L0_FILES {
            return None;
        }
        let run = &files[..n];
        let oldest_seq = run.iter().map(|f| f.smallest_seq).min().unwrap_or(0);
        let (lo, hi) = key_range(run);
        let shares_seqs = files[n..]
            .iter()
            .any(|f| f.largest_seq >= oldest_seq && file_overlaps(f, Some(&lo), Some(&hi)));
        if !shares_seqs {
            break;
        }
        n -= 1;
    }
    let inputs = files[..n].to_vec();
    let c = Compaction {
        level: 0,
        output_level: 0,
        inputs: [inputs, Vec::new()],
        grandparents: Vec::new(),
        bottommost: false,
        reason: Reason::IntraL0,
        version: Arc::clone(version),
    };
    (!running.conflicts(&c)).then_some(c)
}

/// Builds the compaction of `inputs0` (files of `level`) into `output_level`. REQUIRES: the
/// levels between the two are empty.
pub fn expand(
    version: &Arc<Version>,
    level: usize,
    output_level: usize,
    inputs0: Vec<Arc<FileMetaData>>,
    reason: Reason,
) -> Compaction {
    debug_assert!(
        (level + 1..output_level).all(|l| version.num_files(l) == 0),
        "L{level} -> L{output_level} skips a level holding tables"
    );
    let (lo, hi) = key_range(&inputs0);
    let inputs1 = version.overlapping_files(output_level, Some(&lo), Some(&hi));
    let all: Vec<_> = inputs0.iter().chain(&inputs1).cloned().collect();
    let (all_lo, all_hi) = key_range(&all);
    let grandparents = if output_level + 1 < NUM_LEVELS {
        version.overlapping_files(output_level + 1, Some(&all_lo), Some(&all_hi))
    } else {
        Vec::new()
    };
    let bottommost = ((output_level + 1)..NUM_LEVELS).all(|l| {
        version
            .overlapping_files(l, Some(&all_lo), Some(&all_hi))
            .is_empty()
    });
    Compaction {
        level,
        output_level,
        inputs: [inputs0, inputs1],
        grandparents,
        bottommost,
        reason,
        version: Arc::clone(version),
    }
}

/// The user-key range covered by `files`. REQUIRES: `files` is not empty.
pub fn key_range(files: &[Arc<FileMetaData>]) -> (Vec<u8>, Vec<u8>) {
    let lo = files
        .iter()
        .map(|f| user_key(&f.smallest))
        .min()
        .unwrap_or_default();
    let hi = files
        .iter()
        .map(|f| user_key(&f.largest))
        .max()
        .unwrap_or_default();
    (lo.to_vec(), hi.to_vec())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::options::CompactionOptions;
    use crate::version::edit::VersionEdit;
    use sluice_sst::key::{ValueKind, make_internal_key};

    use crate::version::testing::table;

    pub(crate) fn version(files: Vec<(usize, FileMetaData)>) -> Arc<Version> {
        let edit = VersionEdit {
            new_files: files,
            ..VersionEdit::default()
        };
        Arc::new(Version::default().apply(&edit).unwrap())
    }

    #[test]
    fn l0_trigger_picks_the_oldest_file_with_the_l1_files_under_it() {
        // A staircase 1 <- 2 <- 3 is three sublevels deep.
        let opts = Options {
            compaction: CompactionOptions {
                level_compaction_dynamic_level_bytes: false,
                l0_compaction_trigger: 3,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let v = version(vec![
            (0, table(1, "a", "c", 10, 1)),
            (0, table(2, "b", "d", 10, 2)),
            (0, table(3, "c", "e", 10, 3)),
            (0, table(4, "x", "y", 10, 4)),
            (1, table(5, "a", "b", 10, 0)),
            (1, table(6, "m", "n", 10, 0)),
        ]);
        let c = pick(&v, &opts, &Default::default(), &InProgress::default()).unwrap();
        assert_eq!(c.level, 0);
        let mut l0: Vec<u64> = c.inputs[0].iter().map(|f| f.number).collect();
        l0.sort();
        // 2 and 3 rest on 1 and reach past [a-c] only into L1's gap before [m-n]: they join
        // at no extra L1 cost. 4 lies past [m-n].
        assert_eq!(l0, vec![1, 2, 3]);
        assert_eq!(
            c.inputs[1].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![5]
        );
        assert!(c.bottommost);
    }

    #[test]
    fn with_dynamic_sizing_l0_compacts_into_the_base_level() {
        let opts = Options {
            compaction: CompactionOptions {
                level_compaction_dynamic_level_bytes: true,
                l0_compaction_trigger: 2,
                max_bytes_for_level_base: 1000,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let l0 = || {
            vec![
                (0, table(1, "a", "c", 10, 1)),
                (0, table(2, "b", "d", 10, 2)),
            ]
        };
        // Nothing below L0: straight into the last level.
        let c = pick(
            &version(l0()),
            &opts,
            &Default::default(),
            &InProgress::default(),
        )
        .unwrap();
        assert_eq!((c.level, c.output_level()), (0, NUM_LEVELS - 1));
        assert!(c.bottommost && c.grandparents.is_empty());
        // 5000 bytes in L6 need L5 above it: L0 compacts into L5, with L6 below.
        let mut files = l0();
        files.push((5, table(3, "a", "b", 500, 0)));
        files.push((5, table(4, "x", "y", 100, 0)));
        files.push((6, table(5, "a", "z", 5000, 0)));
        let v = version(files);
        let c = pick(&v, &opts, &Default::default(), &InProgress::default()).unwrap();
        assert_eq!((c.level, c.output_level()), (0, 5));
        assert_eq!(
            c.inputs[1].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!(c.grandparents[0].number, 5);
        assert!(!c.bottommost);
    }

    #[test]
    fn partitioned_l0_is_as_deep_as_its_deepest_range_and_compacts_it_first() {
        use crate::version::range_map::{RangeMap, owner_dir_index};
        let opts = Options::default(); // trigger 4
        let map = RangeMap::new(&[b"m".to_vec()], &[0, 1]).unwrap();
        let in_range = |number, lo, hi, seq, owner| {
            let f = table(number, lo, hi, 10, seq);
            FileMetaData {
                dir_index: owner_dir_index(owner),
                ..f
            }
        };
        // Range 1's single file is the oldest of all; range 0 holds four.
        let mut files = vec![(0, in_range(1, "x", "y", 1, 1))];
        files.extend((2..6).map(|n| (0, in_range(n, "a", "c", n, 0))));
        let edit = VersionEdit {
            new_files: files,
            range_map: Some(map),
            ..VersionEdit::default()
        };
        let v = Arc::new(Version::default().apply(&edit).unwrap());
        assert_eq!(v.num_files(0), 5);
        assert_eq!(v.l0_files_per_range(), Some(vec![4, 1]));
        assert_eq!(v.l0_depth(), 4);
        let c = pick(&v, &opts, &Default::default(), &InProgress::default()).unwrap();
        let mut l0: Vec<u64> = c.inputs[0].iter().map(|f| f.number).collect();
        l0.sort();
        assert_eq!(l0, vec![2, 3, 4, 5], "the deep range, not the oldest file");
        // Three files in each of two ranges stay below the trigger although six are in L0.
        let mut files: Vec<_> = (1..4).map(|n| (0, in_range(n, "x", "y", n, 1))).collect();
        files.extend((4..7).map(|n| (0, in_range(n, "a", "c", n, 0))));
        let edit = VersionEdit {
            new_files: files,
            range_map: Some(RangeMap::new(&[b"m".to_vec()], &[0, 1]).unwrap()),
            ..VersionEdit::default()
        };
        let v = Arc::new(Version::default().apply(&edit).unwrap());
        assert_eq!(v.l0_depth(), 3);
        assert!(!needs_compaction(&v, &opts));
    }

    #[test]
    fn disjoint_l0_files_form_one_sublevel_and_move_down_only_past_the_file_threshold() {
        // A sequential load: flushes that never overlap stack no deeper than one sublevel.
        let files: Vec<_> = (1..=6u64)
            .map(|n| {
                let lo = format!("{n:02}a");
                let hi = format!("{n:02}z");
                (0, table(n, &lo, &hi, 10, n))
            })
            .collect();
        let v = version(files);
        assert_eq!(v.l0_depth(), 1);
        let opts = Options::default();
        assert!(!needs_compaction(&v, &opts), "depth 1 is below the trigger");
        let opts = Options {
            compaction: CompactionOptions {
                l0_compaction_file_threshold: 6,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let c = pick(&v, &opts, &Default::default(), &InProgress::default()).unwrap();
        // The oldest file alone: the others neither lie under it nor inside its range.
        assert_eq!(c.inputs[0].len(), 1);
        assert_eq!(c.inputs[0][0].number, 1);
        assert!(c.is_trivial_move(u64::MAX));
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let opts = Options::default();
        let v = version(vec![(0, table(1, "a", "c", 10, 1))]);
        assert!(pick(&v, &opts, &Default::default(), &InProgress::default()).is_none());
        assert!(!needs_compaction(&v, &opts));
    }

    #[test]
    fn level_size_follows_the_compact_pointer_and_sees_deeper_data() {
        let opts = Options {
            compaction: CompactionOptions {
                max_bytes_for_level_base: 1 << 20,
                target_file_size_base: 1 << 20,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let v = version(vec![
            (1, table(1, "a", "b", 1 << 20, 1)),
            (1, table(2, "c", "d", 1 << 20, 1)),
            (3, table(3, "c", "c", 10, 0)),
        ]);
        let mut pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
        pointers[1] = make_internal_key(b"b", 1, ValueKind::Value);
        let c = pick(&v, &opts, &pointers, &InProgress::default()).unwrap();
        assert_eq!(c.inputs[0][0].number, 2);
        assert!(!c.bottommost, "L3 holds data in the range");
        assert!(c.is_trivial_move(u64::MAX));
    }
    #[test]
    fn picks_around_running_compactions_and_stops_when_all_conflict() {
        let opts = Options {
            compaction: CompactionOptions {
                l0_compaction_trigger: 1,
                max_bytes_for_level_base: 1 << 20,
                target_file_size_base: 1 << 20,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        // L0 over its trigger and L1 over its target, with L2 below both.
        let v = version(vec![
            (0, table(1, "a", "c", 10, 9)),
            (0, table(2, "b", "d", 10, 8)),
            (0, table(3, "b", "c", 10, 7)),
            (0, table(4, "a", "b", 10, 6)),
            (1, table(5, "a", "e", 1 << 20, 1)),
            (1, table(6, "m", "n", 1 << 20, 1)),
            (1, table(7, "p", "q", 1 << 20, 1)),
            (2, table(8, "m", "n", 10, 0)),
        ]);
        let mut running = InProgress::default();
        let picked = |running: &InProgress| {
            pick(&v, &opts, &Default::default(), running).map(|c| {
                let mut files: Vec<u64> = c.all_inputs().map(|f| f.number).collect();
                files.sort();
                (c, files)
            })
        };
        // The most urgent first: L0 (score 4, L1 has 3) with the L1 file it overlaps.
        let (c, files) = picked(&running).unwrap();
        assert_eq!((c.level, files), (0, vec![1, 2, 3, 4, 5]));
        running.register(&c);
        // Beside it: L1 -> L2 on files L0 does not touch.
        let (c, files) = picked(&running).unwrap();
        assert_eq!((c.level, files), (1, vec![6, 8]));
        running.register(&c);
        let (c, files) = picked(&running).unwrap();
        assert_eq!((c.level, files), (1, vec![7]));
        running.register(&c);
        assert_eq!(running.peak(), 3);
        // Everything left conflicts.
        assert!(picked(&running).is_none());
    }
    #[test]
    fn a_busy_l1_turns_an_l0_compaction_into_an_intra_l0_one() {
        let opts = Options::default();
        let mut files: Vec<(usize, FileMetaData)> =
            (1..=5).map(|n| (0, table(n, "a", "z", 10, n))).collect();
        files.push((1, table(10, "a", "z", 10, 0)));
        files.push((2, table(11, "a", "z", 10, 0)));
        let v = version(files);
        // An L1 -> L2 compaction holds the only L1 file.
        let mut running = InProgress::default();
        running.register(&expand(&v, 1, 2, v.files(1).to_vec(), Reason::LevelSize));
        let c = pick(&v, &opts, &Default::default(), &running).unwrap();
        assert_eq!(c.reason, Reason::IntraL0);
        assert_eq!((c.level, c.output_level()), (0, 0));
        let mut inputs: Vec<u64> = c.all_inputs().map(|f| f.number).collect();
        inputs.sort();
        assert_eq!(inputs, vec![1, 2, 3, 4, 5]);
        assert!(!c.bottommost && !c.is_trivial_move(u64::MAX));
        // With the newest file busy, no run of newest files is free: nothing to do.
        let newest = v.files(0)[0].clone();
        running.register(&Compaction {
            level: 0,
            output_level: 0,
            inputs: [vec![newest], Vec::new()],
            grandparents: Vec::new(),
            bottommost: false,
            reason: Reason::IntraL0,
            version: Arc::clone(&v),
        });
        assert!(pick(&v, &opts, &Default::default(), &running).is_none());
    }
}
