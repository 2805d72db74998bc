//! Which L0 files an L0 compaction into the base level takes, as Pebble picks them by
//! sublevel: the files under a seed, not every file the seed's range touches.
//!
//! The one rule: a version of a key may only move down past the versions older than it. L0
//! is read before the levels below, so a file may stay in L0 above the compaction's outputs
//! if it is newer than every input it overlaps. The inputs are therefore closed *downwards*: with a file,
//! every older L0 file overlapping it. Newer overlapping files may stay, so two compactions
//! can take the bottom of two L0 intervals while the files stacked across both wait.
//!
//! Since the base level's files under the inputs' key range are rewritten anyway, the inputs
//! then grow to the rectangle above those files (Pebble's `extendCandidateToRectangle` and
//! `extendL0ForBaseCompactionTo`): every L0 file whose older overlapping files are all inputs
//! joins if it lies strictly between the base-level files on either side of the rewritten
//! ones, so that the widened range overlaps no other base-level file and costs no extra
//! base-level bytes. At the ends of the key space nothing bounds it, so the lowest and highest
//! keys of later flushes (random writes put some below and above every key so far) do not
//! leave their files behind to rewrite the same base-level file again (measured: design note
//! 0020). A file joins only if the wider range crosses no running compaction's outputs. With
//! no base-level file rewritten, and in partitioned mode, the rectangle stays inside the
//! inputs' range.

use std::sync::Arc;

use super::in_progress::InProgress;
use super::picker::key_range;
use crate::version::Version;
use crate::version::edit::FileMetaData;
use crate::version::version::{largest_user_key, smallest_user_key, user_ranges_overlap};

/// The L0 inputs of a compaction into `output_level` (the base level) seeded by `seed` (an L0
/// file of `version`), newest first as the version lists them. The rectangle never adds a
/// file that a `running` compaction holds; if the downward closure needs one, the result
/// conflicts with `running` and the caller tries another seed.
pub fn l0_inputs(
    version: &Version,
    seed: &FileMetaData,
    output_level: usize,
    running: &InProgress,
) -> Vec<Arc<FileMetaData>> {
    // Newest first: every file older than `files[i]` has a higher index.
    let files = version.files(0);
    let Some(seed_at) = files.iter().position(|f| f.number == seed.number) else {
        return Vec::new();
    };
    let mut taken = vec![false; files.len()];
    taken[seed_at] = true;
    // Downward closure: a taken file takes every older file it overlaps. Older files come
    // later, so one pass in list order follows every chain.
    for i in seed_at..files.len() {
        if taken[i] {
            for j in i + 1..files.len() {
                taken[j] = taken[j] || user_ranges_overlap(&files[i], &files[j]);
            }
        }
    }
    let chosen = |taken: &[bool]| -> Vec<Arc<FileMetaData>> {
        files
            .iter()
            .zip(taken)
            .filter(|(_, t)| **t)
            .map(|(f, _)| Arc::clone(f))
            .collect()
    };
    let closure = chosen(&taken);
    // The range the outputs cover: the closure's, widened to the files of the output level it
    // overlaps; and how far it may grow without rewriting another file of that level.
    let (lo, hi) = key_range(&closure);
    let mut covered = version.overlapping_files(output_level, Some(&lo), Some(&hi));
    let rewrites_base = !covered.is_empty();
    covered.extend(closure);
    let (mut lo, mut hi) = key_range(&covered);
    // How far the rectangle may reach: to the base-level files beside the rewritten ones. With
    // none rewritten, a file left out costs nothing later, and disjoint stacks of L0 files
    // compact side by side: it stays inside the range. So it does in partitioned mode, where
    // reaching past the range would take another range's files into one compaction, whose
    // outputs could then cross the boundary (design note 0006).
    let base = version.files(output_level);
    let reach = rewrites_base && version.range_map().is_none();
    // The neighbours are found by where they start and end, not by their far keys: a
    // neighbour may end at the user key the rewritten files start with, and a file reaching
    // that key would overlap both.
    let neighbours = reach.then(|| {
        let below = base
            .iter()
            .rev()
            .find(|f| smallest_user_key(f) < lo.as_slice())
            .map(|f| largest_user_key(f).to_vec());
        let above = base
            .iter()
            .find(|f| largest_user_key(f) > hi.as_slice())
            .map(|f| smallest_user_key(f).to_vec());
        (below, above)
    });
    let range = (lo.clone(), hi.clone());
    let free = |f_lo: &[u8], f_hi: &[u8]| match &neighbours {
        Some((below, above)) => {
            below.as_deref().is_none_or(|b| b < f_lo) && above.as_deref().is_none_or(|a| f_hi < a)
        }
        None => range.0.as_slice() <= f_lo && f_hi <= range.1.as_slice(),
    };
    // The rectangle, oldest first so that a file's older neighbours are decided before it.
    for i in (0..files.len()).rev() {
        let f = &files[i];
        let (f_lo, f_hi) = (smallest_user_key(f), largest_user_key(f));
        if taken[i] || !free(f_lo, f_hi) || running.is_busy(f.number) {
            continue;
        }
        let wider = (lo.as_slice().min(f_lo), hi.as_slice().max(f_hi));
        if wider != (lo.as_slice(), hi.as_slice())
            && running.writes_across(wider.0, wider.1, (1, output_level))
        {
            continue;
        }
        taken[i] = (i + 1..files.len()).all(|j| taken[j] || !user_ranges_overlap(f, &files[j]));
        if taken[i] {
            (lo, hi) = (wider.0.to_vec(), wider.1.to_vec());
        }
    }
    chosen(&taken)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::picker::expand;
    use crate::compaction::{Compaction, Reason};
    use crate::version::edit::VersionEdit;

    fn meta(number: u64, lo: &str, hi: &str) -> (usize, FileMetaData) {
        // Sequence numbers follow file numbers: a higher number is newer.
        (
            0,
            crate::version::testing::table(number, lo, hi, 10, number),
        )
    }

    fn version(files: Vec<(usize, FileMetaData)>) -> Arc<Version> {
        let edit = VersionEdit {
            new_files: files,
            ..VersionEdit::default()
        };
        Arc::new(Version::default().apply(&edit).unwrap())
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        let mut n: Vec<u64> = files.iter().map(|f| f.number).collect();
        n.sort();
        n
    }

    fn inputs(v: &Version, seed: u64, running: &InProgress) -> Vec<u64> {
        let seed = v.files(0).iter().find(|f| f.number == seed).unwrap();
        numbers(&l0_inputs(v, seed, 1, running))
    }

    #[test]
    fn newer_files_overlapping_the_inputs_may_stay_but_older_ones_may_not() {
        // A staircase: 1 [a-f] is the oldest, 2 [e-k] overlaps it, 3 [j-p] overlaps 2.
        let v = version(vec![
            meta(1, "a", "f"),
            meta(2, "e", "k"),
            meta(3, "j", "p"),
        ]);
        let idle = InProgress::default();
        // The oldest file goes alone; a transitive closure would have taken all three.
        assert_eq!(inputs(&v, 1, &idle), vec![1]);
        // A newer file takes what lies under it, and the range grows with it.
        assert_eq!(inputs(&v, 2, &idle), vec![1, 2]);
        assert_eq!(inputs(&v, 3, &idle), vec![1, 2, 3]);
    }

    #[test]
    fn the_rectangle_above_the_inputs_joins_unless_it_rests_on_a_file_left_out() {
        // 1 [a-m] at the bottom; 2 [b-c] and 3 [d-e] inside its range; 4 [k-z] spills out of
        // it; 5 [l-m] is inside but rests on 4.
        let v = version(vec![
            meta(1, "a", "m"),
            meta(2, "b", "c"),
            meta(3, "d", "e"),
            meta(4, "k", "z"),
            meta(5, "l", "m"),
        ]);
        assert_eq!(inputs(&v, 1, &InProgress::default()), vec![1, 2, 3]);
        // A file a running compaction holds stays out, and so do the files resting on it.
        let mut running = InProgress::default();
        let busy = v.files(0).iter().find(|f| f.number == 2).unwrap().clone();
        running.register(&Compaction {
            level: 0,
            output_level: 1,
            inputs: [vec![busy], Vec::new()],
            grandparents: Vec::new(),
            bottommost: false,
            reason: Reason::IntraL0,
            version: Arc::clone(&v),
        });
        assert_eq!(inputs(&v, 1, &running), vec![1, 3]);
    }

    /// The compaction into L1 that L0 file `seed` starts.
    fn seeded(v: &Arc<Version>, seed: u64, running: &InProgress) -> Compaction {
        let seed = v.files(0).iter().find(|f| f.number == seed).unwrap();
        expand(v, 0, 1, l0_inputs(v, seed, 1, running), Reason::L0FileCount)
    }

    /// An L1 file.
    fn l1(number: u64, lo: &str, hi: &str) -> (usize, FileMetaData) {
        (1, meta(number, lo, hi).1)
    }

    #[test]
    fn the_rectangle_reaches_as_far_as_the_l1_files_the_inputs_rewrite() {
        // 1 [a-b] is the oldest; the L1 file under it spans [a-e], so 2 [c-d] joins too; 3
        // [d-f] would also rewrite the next L1 file, [f-z].
        let v = version(vec![
            meta(1, "a", "b"),
            meta(2, "c", "d"),
            meta(3, "d", "f"),
            l1(9, "a", "e"),
            l1(10, "f", "z"),
        ]);
        assert_eq!(inputs(&v, 1, &InProgress::default()), vec![1, 2]);
    }

    /// L1 holds [d-h] and [m-r], with a gap between them; L0 holds 1 [e-g] at the bottom, 2
    /// [a-g] on it (reaching below every L1 key), and `more`.
    fn over_a_gap(more: &[(u64, &str, &str)]) -> Arc<Version> {
        let mut files = vec![meta(1, "e", "g"), meta(2, "a", "g")];
        files.extend(more.iter().map(|&(n, lo, hi)| meta(n, lo, hi)));
        files.extend([l1(8, "d", "h"), l1(9, "m", "r")]);
        version(files)
    }

    #[test]
    fn the_rectangle_reaches_to_the_l1_files_beside_the_rewritten_ones() {
        // L1 holds [d-h] and [m-r]. Seeded by 1 [e-g], the compaction rewrites [d-h]: 2 [a-g]
        // (below every L1 key) and 3 [e-k] (into the gap before [m-r]) join at no L1 cost;
        // 4 [f-n] would rewrite [m-r] too.
        let v = over_a_gap(&[(3, "e", "k"), (4, "f", "n")]);
        let c = seeded(&v, 1, &InProgress::default());
        assert_eq!(numbers(&c.inputs[0]), vec![1, 2, 3]);
        assert_eq!(
            numbers(&c.inputs[1]),
            vec![8],
            "no other L1 file is rewritten"
        );
    }

    #[test]
    fn in_partitioned_mode_the_rectangle_stays_in_its_range() {
        use crate::version::range_map::{RangeMap, owner_dir_index};
        // Ranges [..m) and [m..). The seed 1 [b-c] rewrites L1's [a-d]; 2 [x-y], in the other
        // range and above every L1 key, would join in a tree without ranges.
        let in_range = |(level, f): (usize, FileMetaData), owner| {
            let dir_index = owner_dir_index(owner);
            (level, FileMetaData { dir_index, ..f })
        };
        let files = vec![
            in_range(meta(1, "b", "c"), 0),
            in_range(meta(2, "x", "y"), 1),
            in_range(l1(8, "a", "d"), 0),
        ];
        let plain = version(files.clone());
        assert_eq!(inputs(&plain, 1, &InProgress::default()), vec![1, 2]);
        let edit = VersionEdit {
            new_files: files,
            range_map: Some(RangeMap::new(&[b"m".to_vec()], &[0, 1]).unwrap()),
            ..VersionEdit::default()
        };
        let partitioned = Version::default().apply(&edit).unwrap();
        assert_eq!(inputs(&partitioned, 1, &InProgress::default()), vec![1]);
    }

    #[test]
    fn the_rectangle_does_not_grow_across_a_running_compactions_outputs() {
        // L1 holds [d-h] and [m-r]; 5 [i-j] compacts into the gap between them already. Seeded
        // by 1 [e-g], 2 [a-g] joins, but 3 [k-l] would stretch the range across 5's outputs.
        let v = over_a_gap(&[(3, "k", "l"), (5, "i", "j")]);
        // Idle, every one of them joins.
        assert_eq!(inputs(&v, 1, &InProgress::default()), vec![1, 2, 3, 5]);
        let mut running = InProgress::default();
        let five = v.files(0).iter().find(|f| f.number == 5).unwrap();
        running.register(&expand(
            &v,
            0,
            1,
            vec![Arc::clone(five)],
            Reason::L0FileCount,
        ));
        let c = seeded(&v, 1, &running);
        assert_eq!(numbers(&c.inputs[0]), vec![1, 2]);
        assert!(!running.conflicts(&c));
    }

    #[test]
    fn the_rectangle_stops_short_of_a_neighbour_sharing_a_user_key() {
        // L1's [a-e] ends at the user key its neighbour [e-h] starts with. Seeded by 1 [f-g]
        // the compaction rewrites [e-h] only: 2 [b-c] would take [a-e] too.
        let v = version(vec![
            meta(1, "f", "g"),
            meta(2, "b", "c"),
            l1(8, "a", "e"),
            l1(9, "e", "h"),
        ]);
        let c = seeded(&v, 1, &InProgress::default());
        assert_eq!(numbers(&c.inputs[0]), vec![1]);
        assert_eq!(numbers(&c.inputs[1]), vec![9]);
    }

    #[test]
    fn flushes_cut_at_the_same_keys_make_stacks_that_compact_side_by_side() {
        // Three flushes, each cut at "m": two stacks of three files.
        let mut files = Vec::new();
        for flush in 0..3u64 {
            files.push(meta(10 + 2 * flush, "a", "l"));
            files.push(meta(11 + 2 * flush, "m", "z"));
        }
        let v = version(files);
        let mut running = InProgress::default();
        let left = seeded(&v, 10, &running);
        assert_eq!(numbers(&left.inputs[0]), vec![10, 12, 14]);
        running.register(&left);
        let right = seeded(&v, 11, &running);
        assert_eq!(numbers(&right.inputs[0]), vec![11, 13, 15]);
        assert!(!running.conflicts(&right), "disjoint intervals run at once");
    }

    #[test]
    fn the_rectangle_never_rewrites_a_base_file_the_closure_does_not() {
        // Random L0 files over random disjoint L1 files, some sharing boundary user keys:
        // whatever the seed, the compaction rewrites exactly the L1 files under the seed's
        // downward closure, and leaves no older file above a newer input.
        let mut x = 11u64;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut files = Vec::new();
        let mut at = 0;
        for n in 100..120u64 {
            let lo = at + next(40);
            let hi = lo + next(60);
            files.push(l1(n, &format!("{lo:04}"), &format!("{hi:04}")));
            // Every third file ends where the next one starts.
            at = if n % 3 == 0 { hi } else { hi + 1 };
        }
        for n in 1..=30u64 {
            let lo = next(at + 100);
            let hi = lo + next(150);
            files.push(meta(n, &format!("{lo:04}"), &format!("{hi:04}")));
        }
        let v = version(files);
        let l0 = v.files(0);
        for (at, seed) in l0.iter().enumerate() {
            // The downward closure, and the L1 files under its range.
            let mut closure = vec![Arc::clone(seed)];
            for older in &l0[at + 1..] {
                if closure.iter().any(|f| user_ranges_overlap(f, older)) {
                    closure.push(Arc::clone(older));
                }
            }
            let (lo, hi) = key_range(&closure);
            let under = numbers(&v.overlapping_files(1, Some(&lo), Some(&hi)));
            let taken = l0_inputs(&v, seed, 1, &InProgress::default());
            let c = expand(&v, 0, 1, taken.clone(), Reason::L0FileCount);
            assert_eq!(numbers(&c.inputs[1]), under, "seed {}", seed.number);
            for left in l0.iter().filter(|f| !taken.contains(f)) {
                for input in &taken {
                    assert!(!(user_ranges_overlap(left, input) && left.number < input.number));
                }
            }
        }
    }

    #[test]
    fn what_stays_in_l0_is_newer_than_every_input_it_overlaps() {
        // Random files; whatever the seed, no file left in L0 may be older than an input it
        // overlaps, or a read would find the older version first once the inputs reach L1.
        let mut x = 7u64;
        let mut files = Vec::new();
        for n in 1..=30u64 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lo = (x >> 40) % 1000;
            let hi = lo + (x >> 20) % 150;
            files.push(meta(n, &format!("{lo:04}"), &format!("{hi:04}")));
        }
        let v = version(files);
        for seed in v.files(0) {
            let taken = l0_inputs(&v, seed, 1, &InProgress::default());
            assert!(taken.iter().any(|f| f.number == seed.number));
            for left in v.files(0).iter().filter(|f| !taken.contains(f)) {
                for input in &taken {
                    assert!(
                        !(user_ranges_overlap(left, input) && left.number < input.number),
                        "file {} stays above newer input {}",
                        left.number,
                        input.number
                    );
                }
            }
        }
    }
}
