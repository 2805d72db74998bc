//! The compaction picker: scores every level and chooses what to compact next.
//!
//! The picker only reads a version and returns a value; it never touches files. L0 is scored by
//! file count against `l0_compaction_trigger`, deeper levels by bytes against their target
//! (10x per level). The level with the highest score of at least 1 is compacted, starting after
//! the level's compact pointer so successive compactions sweep the key space.

use std::sync::Arc;

use sluice_sst::key::{compare_internal, user_key};

use super::{Compaction, Reason};
use crate::options::Options;
use crate::version::Version;
use crate::version::edit::{FileMetaData, NUM_LEVELS};
use crate::version::version::{largest_user_key, smallest_user_key};

/// The compaction score of `level`: at least 1 means it should be compacted.
pub fn level_score(version: &Version, options: &Options, level: usize) -> f64 {
    if level == 0 {
        version.num_files(0) as f64 / options.l0_compaction_trigger as f64
    } else if level == NUM_LEVELS - 1 {
        0.0 // the last level has nowhere to go
    } else {
        version.level_bytes(level) as f64 / options.max_bytes_for_level(level) as f64
    }
}

/// True if some level has a score of at least 1.
pub fn needs_compaction(version: &Version, options: &Options) -> bool {
    (0..NUM_LEVELS - 1).any(|l| level_score(version, options, l) >= 1.0)
}

/// Picks the most urgent compaction, if any level needs one.
pub fn pick(
    version: &Arc<Version>,
    options: &Options,
    compact_pointers: &[Vec<u8>; NUM_LEVELS],
) -> Option<Compaction> {
    let (level, score) = (0..NUM_LEVELS - 1)
        .map(|l| (l, level_score(version, options, l)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    if score < 1.0 {
        return None;
    }
    let files = version.files(level);
    let seed = if level == 0 {
        // The oldest L0 file; `overlapping_files` pulls in every file it overlaps.
        files.last()?.clone()
    } else {
        let pointer = &compact_pointers[level];
        files
            .iter()
            .find(|f| pointer.is_empty() || compare_internal(&f.largest, pointer).is_gt())
            .or_else(|| files.first())?
            .clone()
    };
    let inputs0 = if level == 0 {
        version.overlapping_files(
            0,
            Some(smallest_user_key(&seed)),
            Some(largest_user_key(&seed)),
        )
    } else {
        vec![seed]
    };
    let reason = if level == 0 {
        Reason::L0FileCount
    } else {
        Reason::LevelSize
    };
    Some(expand(version, level, inputs0, reason))
}

/// Builds the compaction of `inputs0` (files of `level`) into `level + 1`.
pub fn expand(
    version: &Arc<Version>,
    level: usize,
    inputs0: Vec<Arc<FileMetaData>>,
    reason: Reason,
) -> Compaction {
    let (lo, hi) = key_range(&inputs0);
    let inputs1 = version.overlapping_files(level + 1, Some(&lo), Some(&hi));
    let all: Vec<_> = inputs0.iter().chain(&inputs1).cloned().collect();
    let (all_lo, all_hi) = key_range(&all);
    let grandparents = if level + 2 < NUM_LEVELS {
        version.overlapping_files(level + 2, Some(&all_lo), Some(&all_hi))
    } else {
        Vec::new()
    };
    let bottommost = ((level + 2)..NUM_LEVELS).all(|l| {
        version
            .overlapping_files(l, Some(&all_lo), Some(&all_hi))
            .is_empty()
    });
    Compaction {
        level,
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

/// The compaction that `compact_range` runs for `level`: every file of `level` overlapping
/// `[lo, hi]`, into `level + 1`. `None` when the level has no such file.
pub fn pick_manual(
    version: &Arc<Version>,
    level: usize,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Option<Compaction> {
    let inputs0 = version.overlapping_files(level, lo, hi);
    if inputs0.is_empty() {
        return None;
    }
    Some(expand(version, level, inputs0, Reason::Manual))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::edit::VersionEdit;
    use sluice_sst::key::{ValueKind, make_internal_key};

    fn meta(number: u64, lo: &str, hi: &str, size: u64, seq: u64) -> FileMetaData {
        FileMetaData {
            number,
            file_size: size,
            smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            ..FileMetaData::default()
        }
    }

    fn version(files: Vec<(usize, FileMetaData)>) -> Arc<Version> {
        let edit = VersionEdit {
            new_files: files,
            ..VersionEdit::default()
        };
        Arc::new(Version::default().apply(&edit).unwrap())
    }

    #[test]
    fn l0_trigger_picks_overlapping_l0_and_l1_files() {
        let opts = Options::default();
        let v = version(vec![
            (0, meta(1, "a", "c", 10, 1)),
            (0, meta(2, "b", "d", 10, 2)),
            (0, meta(3, "c", "e", 10, 3)),
            (0, meta(4, "x", "y", 10, 4)),
            (1, meta(5, "a", "b", 10, 0)),
            (1, meta(6, "m", "n", 10, 0)),
        ]);
        let c = pick(&v, &opts, &Default::default()).unwrap();
        assert_eq!(c.level, 0);
        let mut l0: Vec<u64> = c.inputs[0].iter().map(|f| f.number).collect();
        l0.sort();
        assert_eq!(l0, vec![1, 2, 3]);
        assert_eq!(
            c.inputs[1].iter().map(|f| f.number).collect::<Vec<_>>(),
            vec![5]
        );
        assert!(c.bottommost);
    }

    #[test]
    fn nothing_to_do_below_the_triggers() {
        let opts = Options::default();
        let v = version(vec![(0, meta(1, "a", "c", 10, 1))]);
        assert!(pick(&v, &opts, &Default::default()).is_none());
        assert!(!needs_compaction(&v, &opts));
    }

    #[test]
    fn level_size_follows_the_compact_pointer_and_sees_deeper_data() {
        let opts = Options {
            max_bytes_for_level_base: 1 << 20,
            target_file_size_base: 1 << 20,
            ..Options::default()
        };
        let v = version(vec![
            (1, meta(1, "a", "b", 1 << 20, 1)),
            (1, meta(2, "c", "d", 1 << 20, 1)),
            (3, meta(3, "c", "c", 10, 0)),
        ]);
        let mut pointers: [Vec<u8>; NUM_LEVELS] = Default::default();
        pointers[1] = make_internal_key(b"b", 1, ValueKind::Value);
        let c = pick(&v, &opts, &pointers).unwrap();
        assert_eq!(c.inputs[0][0].number, 2);
        assert!(!c.bottommost, "L3 holds data in the range");
        assert!(c.is_trivial_move(u64::MAX));
    }
}
