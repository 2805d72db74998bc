//! The comparator (the in-storage compaction paper, Fig. 3): merges the decoders' streams into one entry stream,
//! keeps what a reader can still see, and builds data blocks (S4).
//!
//! One [`CompactionIterator`] runs over the whole key range of the plan instead of one per
//! sub-task, and the output is still the same bytes as the sub-task executors':
//!
//! - **Entries.** Sub-task boundaries are user keys, so every version chain lies inside one
//!   sub-task. The iterator decides each chain from that chain alone, except for a buffered
//!   tombstone waiting for its verdict, which the first entry of the next user key resolves
//!   exactly as a sub-task's end does (it is dropped). So the entries kept are the same.
//! - **Blocks.** Per-sub-task executors seal their last block at the sub-task's upper bound.
//!   The comparator seals the block it is building before the first entry whose user key is at
//!   or above each boundary, which is the same cut; inside a sub-task blocks are sealed by size
//!   by the same builder rules. A reused builder produces the same bytes as a fresh one, since
//!   sealing resets it.
//!
//! Merge statistics are added once, at the end; their totals equal the per-sub-task sums
//! because every entry inside the range is examined exactly once either way.

use std::sync::Arc;
use std::time::Instant;

use sluice_sst::block::Block;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::relocate::Relocating;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{KIND_FOR_SEEK, MAX_SEQ, make_internal_key, user_key};
use sluice_sst::merge::MergingIterator;
use sluice_sst::profile::Step;
use sluice_sst::table::{SealedBlock, TableContentBuilder};

use super::super::Shared;
use super::queue::{BurstOutlet, Inlet, WaitClock};
use super::stream_iter::StreamIter;
use crate::Result;

/// The comparator stage: merges `inputs` (one stream per input run, newest run first), sends
/// sealed blocks in key order, then `End`, or the first error from any stage above.
///
/// `clock` must be the clock of the inlets and of `tx`: S4 is charged the stage's time minus
/// the time it waited on them.
pub(super) fn comparator(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    inputs: Vec<Inlet<Vec<Arc<Block>>>>,
    mut tx: BurstOutlet<SealedBlock>,
    clock: &WaitClock,
) {
    let start = Instant::now();
    let outcome = merge(spec, plan, shared, inputs, &mut tx);
    let busy = (start.elapsed().as_nanos() as u64).saturating_sub(clock.nanos());
    shared.times.charge(Step::Merge, busy);
    match outcome {
        Ok(true) => tx.close(Ok(())),
        // The stage downstream stopped; it reports why.
        Ok(false) => {}
        Err(e) => tx.close(Err(e)),
    }
}

/// The merge loop. Ok(false) when the stage downstream stopped listening.
fn merge(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    inputs: Vec<Inlet<Vec<Arc<Block>>>>,
    tx: &mut BurstOutlet<SealedBlock>,
) -> Result<bool> {
    let (Some(first), Some(last)) = (plan.sub_tasks.first(), plan.sub_tasks.last()) else {
        return Ok(true);
    };
    let children: Vec<Box<dyn InternalIterator>> = inputs
        .into_iter()
        .map(|inlet| Box::new(StreamIter::new(inlet)) as Box<dyn InternalIterator>)
        .collect();
    let mut input = spec.compaction_iter(MergingIterator::new(children));
    input.set_upper_bound(last.upper.clone());
    match &first.lower {
        Some(lower) => input.seek(&make_internal_key(lower, MAX_SEQ, KIND_FOR_SEEK))?,
        None => input.seek_to_first()?,
    }
    // The last sub-task's upper bound is the iterator's own, so it is never crossed here.
    let mut boundaries = plan
        .sub_tasks
        .iter()
        .filter_map(|st| st.upper.as_deref())
        .peekable();
    let mut builder = TableContentBuilder::new(&spec.table);
    let mut relocating = Relocating::new(spec.blob_relocation.as_deref());
    let mut listening = true;
    while input.valid() && listening {
        let uk = user_key(input.key());
        while boundaries.next_if(|bound| uk >= *bound).is_some() {
            builder.seal_current();
        }
        relocating.add_current(&input, &mut builder)?;
        input.next()?;
        listening = send_sealed(&mut builder, tx);
    }
    let mut stats = input.stats();
    relocating.finish(&mut stats)?;
    shared.add_stats(&stats);
    shared.add_drops(first.index, input.take_drop_log());
    builder.seal_current();
    Ok(listening && send_sealed(&mut builder, tx))
}

/// Passes on every block the builder has sealed. False when the stage downstream stopped.
fn send_sealed(builder: &mut TableContentBuilder, tx: &mut BurstOutlet<SealedBlock>) -> bool {
    while let Some(sealed) = builder.take_sealed() {
        if !tx.push(sealed) {
            return false;
        }
    }
    true
}
