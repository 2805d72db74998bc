//! The sequential compaction procedure (SCP): one thread runs S1..S7 block after block.
//!
//! Input: sorted runs of tables (each L0 file is its own run; a deeper level's files form one
//! run), newest run first. Output: tables cut at `target_file_size` and wherever the output
//! would overlap too much of the grandparent level, always between two user keys so that all
//! versions of a key land in one file.

use std::sync::Arc;
use std::time::Instant;

use crate::Result;
use crate::compaction_iter::{CompactionIterStats, CompactionIterator};
use crate::iter::InternalIterator;
use crate::key::{KIND_FOR_SEEK, MAX_SEQ, SeqNo, compare_internal, make_internal_key, user_key};
use crate::merge::MergingIterator;
use crate::profile::{StageProfile, thread_cpu_time};
use crate::table::{Table, TableOptions};

use super::input::RunIter;
use super::output::{NewOutput, OutputFile, TableSink};
use super::steps::{MergeStop, StepTimes, merge_into_block};

/// A grandparent-level file, as far as output cutting cares.
#[derive(Clone, Debug)]
pub struct GrandparentFile {
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Size in bytes.
    pub size: u64,
}

/// Everything a compaction (or one sub-task of it) needs, with no reference to the version
/// set: the same spec can be run by any executor, on the host or on a worker.
#[derive(Clone)]
pub struct CompactionSpec {
    /// Sorted runs, newest first.
    pub inputs: Vec<Vec<Arc<Table>>>,
    /// Live snapshots: versions they can see are kept.
    pub snapshots: Vec<SeqNo>,
    /// No older data for these keys exists below the output: tombstones may be dropped.
    pub bottommost: bool,
    /// Output table format.
    pub table: TableOptions,
    /// Cut output files at about this size.
    pub target_file_size: u64,
    /// Grandparent files, sorted, for output cutting.
    pub grandparents: Vec<GrandparentFile>,
    /// Cut an output once it overlaps this many grandparent bytes.
    pub max_grandparent_overlap_bytes: u64,
    /// Inclusive lower user-key bound (a sub-task's start), or the whole input.
    pub lower: Option<Vec<u8>>,
    /// Exclusive upper user-key bound (a sub-task's end).
    pub upper: Option<Vec<u8>>,
}

/// What a compaction produced.
#[derive(Debug)]
pub struct CompactionOutput {
    /// Output tables in key order.
    pub files: Vec<OutputFile>,
    /// Time per step, bytes and entries.
    pub profile: StageProfile,
    /// What the compaction iterator dropped.
    pub stats: CompactionIterStats,
}

/// Decides where output files end, as LevelDB's `ShouldStopBefore`.
struct Cutter<'a> {
    spec: &'a CompactionSpec,
    grandparent_index: usize,
    overlapped_bytes: u64,
    seen_key: bool,
    last_user_key: Vec<u8>,
}

impl Cutter<'_> {
    /// True if the output file should end before `ikey`. Only cuts where the user key changes.
    fn should_cut(&mut self, ikey: &[u8], file_size: u64, has_entries: bool) -> bool {
        let uk = user_key(ikey);
        let new_user_key = !self.seen_key || uk != self.last_user_key.as_slice();
        if new_user_key {
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(uk);
        }
        let gps = &self.spec.grandparents;
        while self.grandparent_index < gps.len()
            && compare_internal(ikey, &gps[self.grandparent_index].largest).is_gt()
        {
            if self.seen_key {
                self.overlapped_bytes += gps[self.grandparent_index].size;
            }
            self.grandparent_index += 1;
        }
        self.seen_key = true;
        if !has_entries || !new_user_key {
            return false;
        }
        let cut = file_size >= self.spec.target_file_size
            || self.overlapped_bytes > self.spec.max_grandparent_overlap_bytes;
        if cut {
            self.overlapped_bytes = 0;
        }
        cut
    }
}

/// Builds the merged, filtered input of `spec`, charging S1..S3 to `times`.
pub fn compaction_input(
    spec: &CompactionSpec,
    times: &Arc<StepTimes>,
) -> Result<CompactionIterator<MergingIterator>> {
    let children: Vec<Box<dyn InternalIterator>> = spec
        .inputs
        .iter()
        .map(|run| {
            Box::new(RunIter::new(run.clone(), Arc::clone(times))) as Box<dyn InternalIterator>
        })
        .collect();
    let mut input = CompactionIterator::new(
        MergingIterator::new(children),
        spec.snapshots.clone(),
        spec.bottommost,
    );
    input.set_upper_bound(spec.upper.clone());
    match &spec.lower {
        Some(lower) => input.seek(&make_internal_key(lower, MAX_SEQ, KIND_FOR_SEEK))?,
        None => input.seek_to_first()?,
    }
    Ok(input)
}

/// Runs `spec` on the calling thread: SCP.
pub fn run_sequential(
    spec: &CompactionSpec,
    new_output: &mut NewOutput<'_>,
) -> Result<CompactionOutput> {
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let times = Arc::new(StepTimes::default());
    let mut input = compaction_input(spec, &times)?;
    let mut sink = TableSink::new(spec.table.clone(), &times, new_output);
    let mut cutter = Cutter {
        spec,
        grandparent_index: 0,
        overlapped_bytes: 0,
        seen_key: false,
        last_user_key: Vec::new(),
    };
    let mut entries_out = 0u64;
    let outcome = (|| -> Result<()> {
        while input.valid() {
            // Blocks already written; the block under construction is added per entry below.
            let written = sink.current_file_size();
            let builder = sink.builder()?;
            let stop =
                merge_into_block(&mut input, builder, &times, &mut entries_out, |ikey, b| {
                    let size = written + b.current_block_size() as u64;
                    cutter.should_cut(ikey, size, b.num_entries() > 0)
                })?;
            sink.drain_sealed()?;
            if stop == MergeStop::Cut {
                sink.finish_file()?;
            }
        }
        Ok(())
    })();
    if let Err(e) = outcome {
        sink.abandon();
        return Err(e);
    }
    let files = sink.finish()?;
    let mut profile = times.profile();
    profile.entries_in = input.stats().entries_in;
    profile.entries_out = entries_out;
    profile.wall_nanos = start.elapsed().as_nanos() as u64;
    profile.cpu_nanos = thread_cpu_time().saturating_sub(cpu_start).as_nanos() as u64;
    Ok(CompactionOutput {
        files,
        profile,
        stats: input.stats(),
    })
}
