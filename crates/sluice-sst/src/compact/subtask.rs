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
use crate::compaction_iter::CompactionIterStats;
use crate::compaction_iter::drop_log::DropLog;
use crate::key::{KIND_FOR_SEEK, MAX_SEQ, make_internal_key};
use crate::merge::MergingIterator;
use crate::profile::Step;
use crate::table::{EncodedBlock, RawBlock, SealedBlock, Table, TableContentBuilder, TableOptions};

use super::block_list::BlockListIter;
use super::plan::SubTask;
use super::relocate::Relocating;
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
    Ok(assemble_sub_task(vec![read_sub_task_part(
        spec,
        st,
        times,
        &|_| true,
    )?]))
}

/// What one reader read of a sub-task: per input run, the groups of blocks it read (a group is
/// one table's blocks), each with its position among the run's groups.
pub type PartialRead = Vec<Vec<(usize, Vec<RawBlock>)>>;

/// S1 for the tables `include` accepts. S-PPCP gives each data directory a reader of its own
/// that reads only the tables stored there; [`assemble_sub_task`] puts the parts together.
pub fn read_sub_task_part(
    spec: &CompactionSpec,
    st: &SubTask,
    times: &StepTimes,
    include: &dyn Fn(&Table) -> bool,
) -> Result<PartialRead> {
    st.blocks
        .iter()
        .zip(&spec.inputs)
        .map(|(refs, run)| {
            let mut groups = Vec::new();
            // The plan lists a run's blocks table by table, in order.
            for (position, group) in refs.chunk_by(|a, b| a.table == b.table).enumerate() {
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
                if include(table) {
                    let handles: Vec<_> = group.iter().map(|r| r.handle).collect();
                    groups.push((position, read_blocks(table, &handles, times)?));
                }
            }
            Ok(groups)
        })
        .collect()
}

/// The blocks of one sub-task, per input run in plan order, from the parts its readers read.
pub fn assemble_sub_task(parts: Vec<PartialRead>) -> Vec<Vec<RawBlock>> {
    let runs = parts.iter().map(Vec::len).max().unwrap_or(0);
    let mut by_run: Vec<Vec<(usize, Vec<RawBlock>)>> = (0..runs).map(|_| Vec::new()).collect();
    for part in parts {
        for (groups, into) in part.into_iter().zip(by_run.iter_mut()) {
            into.extend(groups);
        }
    }
    by_run
        .into_iter()
        .map(|mut groups| {
            groups.sort_by_key(|(position, _)| *position);
            groups.into_iter().flat_map(|(_, blocks)| blocks).collect()
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
    /// The dropped entries, when the spec logs them.
    pub drops: DropLog,
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
    let mut input = spec.compaction_iter(MergingIterator::new(children));
    input.set_upper_bound(st.upper.clone());
    match &st.lower {
        Some(lower) => input.seek(&make_internal_key(lower, MAX_SEQ, KIND_FOR_SEEK))?,
        None => input.seek_to_first()?,
    }
    let mut builder = TableContentBuilder::new(&spec.table);
    let mut relocating = Relocating::new(spec.blob_relocation.as_deref());
    let mut out = Vec::new();
    while input.valid() {
        relocating.add_current(&input, &mut builder)?;
        input.next()?;
        while let Some(sealed) = builder.take_sealed() {
            out.push(sealed);
        }
    }
    builder.seal_current();
    while let Some(sealed) = builder.take_sealed() {
        out.push(sealed);
    }
    let mut stats = input.stats();
    relocating.finish(&mut stats)?;
    times.charge(Step::Merge, start.elapsed().as_nanos() as u64);
    Ok(MergedSubTask {
        blocks: out,
        stats,
        drops: input.take_drop_log(),
    })
}

/// S5 and S6: compresses and checksums a sub-task's blocks.
pub fn encode_sub_task(
    blocks: Vec<SealedBlock>,
    table: &TableOptions,
    times: &StepTimes,
) -> Vec<EncodedBlock> {
    blocks
        .into_iter()
        .map(|sealed| {
            let (compressed, used) = compress_block(&sealed, table, times);
            checksum_block(sealed, compressed, used, times)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compact::plan::plan;
    use crate::compact::plan::tests::{spec, table};

    /// Readers that each read some of the tables, put together, read what one reader of all
    /// of them reads, in the same order.
    #[test]
    fn parts_read_by_table_assemble_into_the_whole_sub_task() {
        let dir = tempfile::tempdir().unwrap();
        let keys = |r: std::ops::Range<u32>| r.collect::<Vec<_>>();
        // Run 0: one table; run 1: three tables of one level, alternating "directories".
        let spec = spec(vec![
            vec![table(dir.path(), 1, &keys(0..900), 10)],
            vec![
                table(dir.path(), 2, &keys(0..300), 1),
                table(dir.path(), 3, &keys(300..600), 1),
                table(dir.path(), 4, &keys(600..900), 1),
            ],
        ]);
        let plan = plan(&spec, 1 << 10);
        assert!(plan.sub_tasks.len() > 3);
        let times = StepTimes::default();
        let odd = |t: &Table| t.file_number() % 2 == 1;
        let even = |t: &Table| t.file_number().is_multiple_of(2);
        for st in &plan.sub_tasks {
            let whole = read_sub_task(&spec, st, &times).unwrap();
            let parts = vec![
                read_sub_task_part(&spec, st, &times, &even).unwrap(),
                read_sub_task_part(&spec, st, &times, &odd).unwrap(),
            ];
            let assembled = assemble_sub_task(parts);
            assert_eq!(assembled.len(), whole.len());
            for (a, w) in assembled.iter().zip(&whole) {
                let a: Vec<_> = a.iter().map(|r| (r.path().clone(), r.handle())).collect();
                let w: Vec<_> = w.iter().map(|r| (r.path().clone(), r.handle())).collect();
                assert_eq!(a, w, "sub-task {}", st.index);
            }
        }
    }
}
