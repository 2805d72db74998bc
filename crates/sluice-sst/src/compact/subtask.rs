//! One sub-task through the steps, as separate functions each executor schedules its own way:
//! [`read_sub_task`] (S1), [`decode_sub_task`] (S2, S3), [`merge_sub_task`] (S4) and
//! [`encode_sub_task`] (S5, S6). S7 is the [`super::writer::OutputWriter`].
//!
//! A sub-task's last data block is always sealed at its upper bound, so the stream of blocks a
//! compaction produces depends only on the plan, not on which thread ran which sub-task.

use std::sync::Arc;
use std::time::Instant;

use crate::Result;
use crate::block::Block;
use crate::compaction_iter::{CompactionIterStats, CompactionIterator};
use crate::key::{KIND_FOR_SEEK, MAX_SEQ, make_internal_key};
use crate::merge::MergingIterator;
use crate::profile::Step;
use crate::table::{EncodedBlock, RawBlock, SealedBlock, TableContentBuilder};

use super::block_list::BlockListIter;
use super::plan::SubTask;
use super::spec::CompactionSpec;
use super::steps::{
    StepTimes, checksum_block, compress_block, decompress_block, read_blocks, verify_block,
};

/// S1: reads every block of `st`, per input run, adjacent blocks of a table in one read.
pub fn read_sub_task(
    spec: &CompactionSpec,
    st: &SubTask,
    times: &StepTimes,
) -> Result<Vec<Vec<RawBlock>>> {
    st.blocks
        .iter()
        .zip(&spec.inputs)
        .map(|(refs, run)| {
            let mut raw = Vec::with_capacity(refs.len());
            // The plan lists a run's blocks table by table, in order.
            for group in refs.chunk_by(|a, b| a.table == b.table) {
                let Some(first) = group.first() else {
                    continue;
                };
                let table = run.get(first.table).ok_or_else(|| {
                    crate::Error::InvalidArgument(format!(
                        "sub-task {} names table {} of a run of {}",
                        st.index,
                        first.table,
                        run.len()
                    ))
                })?;
                let handles: Vec<_> = group.iter().map(|r| r.handle).collect();
                raw.extend(read_blocks(table, &handles, times)?);
            }
            Ok(raw)
        })
        .collect()
}

/// S2 and S3: verifies and decompresses every block read for a sub-task.
pub fn decode_sub_task(raw: Vec<Vec<RawBlock>>, times: &StepTimes) -> Result<Vec<Vec<Arc<Block>>>> {
    raw.into_iter()
        .map(|run| {
            run.into_iter()
                .map(|raw| {
                    verify_block(&raw, times)?;
                    decompress_block(raw, times)
                })
                .collect()
        })
        .collect()
}

/// What S4 produced for one sub-task.
#[derive(Debug, Default)]
pub struct MergedSubTask {
    /// Data blocks in key order, the last one sealed at the sub-task's end.
    pub blocks: Vec<SealedBlock>,
    /// Entries read and dropped.
    pub stats: CompactionIterStats,
}

/// S4: merges the decoded blocks of `st`, drops what no reader can see, and builds data blocks.
pub fn merge_sub_task(
    spec: &CompactionSpec,
    st: &SubTask,
    blocks: Vec<Vec<Arc<Block>>>,
    times: &StepTimes,
) -> Result<MergedSubTask> {
    let start = Instant::now();
    let children: Vec<BlockListIter> = blocks.into_iter().map(BlockListIter::new).collect();
    let mut input = CompactionIterator::new(
        MergingIterator::new(children),
        spec.snapshots.clone(),
        spec.bottommost,
    );
    input.set_upper_bound(st.upper.clone());
    match &st.lower {
        Some(lower) => input.seek(&make_internal_key(lower, MAX_SEQ, KIND_FOR_SEEK))?,
        None => input.seek_to_first()?,
    }
    let mut builder = TableContentBuilder::new(&spec.table);
    let mut out = Vec::new();
    while input.valid() {
        builder.add(input.key(), input.value());
        input.next()?;
        while let Some(sealed) = builder.take_sealed() {
            out.push(sealed);
        }
    }
    builder.seal_current();
    while let Some(sealed) = builder.take_sealed() {
        out.push(sealed);
    }
    times.charge(Step::Merge, start.elapsed().as_nanos() as u64);
    Ok(MergedSubTask {
        blocks: out,
        stats: input.stats(),
    })
}

/// S5 and S6: compresses and checksums a sub-task's blocks.
pub fn encode_sub_task(
    blocks: Vec<SealedBlock>,
    spec: &CompactionSpec,
    times: &StepTimes,
) -> Vec<EncodedBlock> {
    blocks
        .into_iter()
        .map(|sealed| {
            let (compressed, used) = compress_block(&sealed, &spec.table, times);
            checksum_block(sealed, compressed, used, times)
        })
        .collect()
}
