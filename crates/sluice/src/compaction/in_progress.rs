//! The compactions running now, as far as picking another one cares.
//!
//! Several compactions run at once when they cannot interfere (RocksDB's rule):
//!
//! - no file is input to two of them: each deletes its inputs when it installs;
//! - two compactions writing into the same level cover disjoint user-key ranges, or their
//!   outputs would overlap in that level (possible even with disjoint inputs, when the output
//!   level has a gap where both ranges meet). An L0 compaction into a base level below L1
//!   counts as writing into every level it skips: those are empty when it is picked
//!   ([`super::level_targets`]), and the picker's rules already keep them so in its range
//!   until it installs; holding them here makes that a rule of this module too, so that no
//!   output can land below newer data whatever the picker does.
//!
//! Everything else may run side by side. A compaction into level `n` beside one out of `n`
//! works on disjoint files of `n`, and the one into `n` took every file of `n` overlapping its
//! range, so the other's files lie outside it; newer data still ends up above older data.
//! Since L0 inputs take every older L0 file they overlap ([`super::l0_inputs`]), two L0
//! compactions with disjoint inputs and disjoint ranges never reorder versions of one key
//! either: what either leaves in L0 is newer than its outputs.
//!
//! A range split (partitioned mode) registers here too, as a job that rewrites the tables
//! crossing its split key and may not run beside any compaction whose outputs could cross
//! that key, into whatever level ([`InProgress::reserve_split_key`]).

use super::Compaction;
use super::picker::key_range;

/// Identifies a registered compaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobId(u64);

#[derive(Debug)]
struct Job {
    id: JobId,
    /// Numbers of every input file.
    files: Vec<u64>,
    /// The levels it writes into or skips on the way there; `None` for a range split, which
    /// conflicts in every level.
    levels: Option<(usize, usize)>,
    /// The user-key range of the inputs, which bounds the outputs.
    lo: Vec<u8>,
    hi: Vec<u8>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct InProgress {
    jobs: Vec<Job>,
    next_id: u64,
    /// The most compactions ever running at once.
    peak: usize,
}

impl InProgress {
    /// True if `c` may not run beside the registered compactions.
    pub fn conflicts(&self, c: &Compaction) -> bool {
        let (lo, hi) = range_of(c);
        c.all_inputs().any(|f| self.is_busy(f.number))
            || self.writes_across(&lo, &hi, written_levels(c))
    }

    /// True if a registered job writes (or skips, or splits) within levels `top..=bottom`
    /// somewhere in the user-key range `lo..=hi`.
    pub fn writes_across(&self, lo: &[u8], hi: &[u8], (top, bottom): (usize, usize)) -> bool {
        self.jobs.iter().any(|job| {
            job.levels
                .is_none_or(|(job_top, job_bottom)| top <= job_bottom && job_top <= bottom)
                && lo <= job.hi.as_slice()
                && job.lo.as_slice() <= hi
        })
    }

    /// True if file `number` is input to a running compaction.
    pub fn is_busy(&self, number: u64) -> bool {
        self.jobs.iter().any(|j| j.files.contains(&number))
    }

    /// Records `c` as running. REQUIRES: `!self.conflicts(c)`.
    pub fn register(&mut self, c: &Compaction) -> JobId {
        debug_assert!(!self.conflicts(c), "registering a conflicting compaction");
        let (lo, hi) = range_of(c);
        let files = c.all_inputs().map(|f| f.number).collect();
        let id = self.push(files, Some(written_levels(c)), lo, hi);
        self.peak = self.peak.max(self.jobs.len());
        id
    }

    /// Registers a range split at user key `key` that rewrites `files` (the tables crossing
    /// it), unless a running job holds one of them or may write a table crossing `key`: one
    /// whose key range reaches `key`. While it runs, every compaction whose range reaches
    /// `key` conflicts with it, so no table crossing `key` appears until the split installs.
    pub fn reserve_split_key(&mut self, key: &[u8], files: Vec<u64>) -> Option<JobId> {
        let blocked = self.jobs.iter().any(|job| {
            files.iter().any(|n| job.files.contains(n))
                || (job.lo.as_slice() <= key && key <= job.hi.as_slice())
        });
        if blocked {
            return None;
        }
        Some(self.push(files, None, key.to_vec(), key.to_vec()))
    }

    /// Records a job under a fresh id.
    fn push(
        &mut self,
        files: Vec<u64>,
        levels: Option<(usize, usize)>,
        lo: Vec<u8>,
        hi: Vec<u8>,
    ) -> JobId {
        let id = JobId(self.next_id);
        self.next_id += 1;
        self.jobs.push(Job {
            id,
            files,
            levels,
            lo,
            hi,
        });
        id
    }

    /// The most compactions that ran at once so far.
    pub fn peak(&self) -> usize {
        self.peak
    }

    /// Forgets a finished (installed or failed) compaction.
    pub fn finish(&mut self, id: JobId) {
        self.jobs.retain(|j| j.id != id);
    }

    /// Compactions running.
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// True when none runs.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// The levels, top and bottom, that `c` writes into or skips on the way to its output level.
fn written_levels(c: &Compaction) -> (usize, usize) {
    let top = match c.stays_in_level() {
        true => c.level,
        false => c.level + 1,
    };
    (top, c.output_level())
}

/// The user-key range `c`'s outputs can cover.
fn range_of(c: &Compaction) -> (Vec<u8>, Vec<u8>) {
    let files: Vec<_> = c.all_inputs().cloned().collect();
    if files.is_empty() {
        return (Vec::new(), Vec::new());
    }
    key_range(&files)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sluice_sst::key::{ValueKind, make_internal_key};

    use super::*;
    use crate::compaction::Reason;
    use crate::version::Version;
    use crate::version::edit::FileMetaData;

    fn file(number: u64, lo: &str, hi: &str) -> Arc<FileMetaData> {
        Arc::new(FileMetaData {
            number,
            file_size: 1,
            smallest: make_internal_key(lo.as_bytes(), 1, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), 1, ValueKind::Value),
            ..FileMetaData::default()
        })
    }

    fn compaction(
        level: usize,
        upper: Vec<Arc<FileMetaData>>,
        lower: Vec<Arc<FileMetaData>>,
    ) -> Compaction {
        into(level, level + 1, upper, lower)
    }

    fn into(
        level: usize,
        output_level: usize,
        upper: Vec<Arc<FileMetaData>>,
        lower: Vec<Arc<FileMetaData>>,
    ) -> Compaction {
        Compaction {
            level,
            output_level,
            inputs: [upper, lower],
            grandparents: Vec::new(),
            bottommost: false,
            reason: Reason::LevelSize,
            version: Arc::new(Version::default()),
        }
    }

    #[test]
    fn shared_files_and_overlapping_outputs_conflict_and_the_rest_does_not() {
        let mut running = InProgress::default();
        let a = compaction(1, vec![file(1, "a", "c")], vec![file(2, "a", "d")]);
        let id = running.register(&a);
        assert!(running.is_busy(1) && running.is_busy(2) && !running.is_busy(3));
        // Shares file 2.
        assert!(running.conflicts(&compaction(2, vec![file(2, "a", "d")], vec![])));
        // Same output level, overlapping range, disjoint files (a gap in L2).
        assert!(running.conflicts(&compaction(1, vec![file(3, "d", "f")], vec![])));
        // Same output level, disjoint range.
        assert!(!running.conflicts(&compaction(1, vec![file(4, "e", "f")], vec![])));
        // Another output level, overlapping range, disjoint files.
        assert!(!running.conflicts(&compaction(
            2,
            vec![file(5, "b", "c")],
            vec![file(6, "a", "z")]
        )));
        assert_eq!(running.len(), 1);
        running.finish(id);
        assert!(running.is_empty());
        assert!(!running.conflicts(&a));
    }

    #[test]
    fn a_compaction_past_empty_levels_holds_them_in_its_range() {
        let mut running = InProgress::default();
        // L0 into a base level of L4: L1 to L3 are skipped.
        running.register(&into(
            0,
            4,
            vec![file(1, "a", "c")],
            vec![file(2, "a", "d")],
        ));
        // Into L3 or L4 across its range: no.
        assert!(running.conflicts(&into(2, 3, vec![file(3, "b", "b")], vec![])));
        assert!(running.conflicts(&into(0, 4, vec![file(4, "d", "e")], vec![])));
        // Out of the output level (disjoint files), or outside its range: yes.
        assert!(!running.conflicts(&into(4, 5, vec![file(5, "e", "f")], vec![])));
        assert!(!running.conflicts(&into(4, 5, vec![file(6, "b", "b")], vec![])));
        assert!(!running.conflicts(&into(2, 3, vec![file(7, "x", "y")], vec![])));
    }

    #[test]
    fn a_split_waits_for_compactions_across_its_key_and_then_holds_them_off() {
        let mut running = InProgress::default();
        let a = running.register(&compaction(1, vec![file(1, "a", "c")], vec![]));
        // The compaction's outputs may cross "b", and file 1 is its input.
        assert_eq!(running.reserve_split_key(b"b", vec![]), None);
        assert_eq!(running.reserve_split_key(b"x", vec![1]), None);
        let split = running.reserve_split_key(b"m", vec![7]).unwrap();
        assert!(running.is_busy(7));
        // Any compaction reaching "m", into any level, waits; others do not.
        assert!(running.conflicts(&compaction(3, vec![file(8, "l", "n")], vec![])));
        assert!(running.conflicts(&compaction(0, vec![file(9, "m", "m")], vec![])));
        assert!(!running.conflicts(&compaction(3, vec![file(10, "n", "p")], vec![])));
        running.finish(split);
        running.finish(a);
        assert!(running.is_empty());
    }
}
