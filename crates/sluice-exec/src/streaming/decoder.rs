//! The decoder of one input run (the in-storage compaction paper, Fig. 2): an index decoder and a data decoder,
//! each on its own thread, the first running ahead of the second.
//!
//! ```text
//! plan ─▶ index decoder ──(one table's handles per message)──▶ data decoder (S1 S2 S3) ──blocks──▶
//! ```
//!
//! The index decoder walks the index of each table of the run, in order, and picks the data
//! blocks the plan reads. Sluice pins every table's index in memory at open, so this is a walk
//! over decoded entries, not a parse of the index block; it still runs on its own thread and
//! up to `queue_depth` tables ahead, which is the paper's point: metadata handling overlaps
//! data-block work instead of stalling it at every table boundary. One message per table keeps
//! the hand-off to one queue operation per table rather than per block.
//!
//! The data decoder reads (S1), verifies (S2) and decompresses (S3) each block with the shared
//! step functions and streams the blocks to the comparator in key order, in bursts of a few
//! blocks (the paper's data decoder likewise moves data in DMA bursts).

use std::sync::Arc;

use sluice_sst::block::Block;
use sluice_sst::compact::StepTimes;
use sluice_sst::compact::plan::{BlockRef, CompactionPlan};
use sluice_sst::compact::steps::{decompress_block, read_block, verify_block};
use sluice_sst::format::BlockHandle;
use sluice_sst::table::Table;

use super::queue::{BurstOutlet, Inlet, Outlet};
use crate::{Error, Result};

/// The blocks of one table the compaction reads, in index (key) order.
#[derive(Debug)]
pub(super) struct TableBlocks<'a> {
    /// The table they belong to.
    pub table: &'a Table,
    /// Their handles, each listed once.
    pub handles: Vec<BlockHandle>,
}

/// The blocks of input run `run` the plan reads: the union over sub-tasks of
/// `st.blocks[run]`, each block once, in key order.
///
/// A block that straddles a sub-task boundary is listed by both neighbours (they each read it in
/// the other executors); a stream crosses the boundary, so it reads the block once. Sorting by
/// `(table, offset)` is key order because a run's tables are in key order and a table's blocks
/// are in key order by offset.
pub(super) fn run_blocks(plan: &CompactionPlan, run: usize) -> Vec<BlockRef> {
    let mut refs: Vec<BlockRef> = plan
        .sub_tasks
        .iter()
        .filter_map(|st| st.blocks.get(run))
        .flatten()
        .copied()
        .collect();
    refs.sort_by_key(|r| (r.table, r.handle.offset, r.handle.size));
    refs.dedup();
    refs
}

/// The index decoder: for each table of `run` that `planned` (from [`run_blocks`]) names, walks
/// the table's index and sends the handles of the planned blocks, then `End`.
///
/// A planned block the table's index does not list, or a table the run does not have, means the
/// plan was not made from these inputs: the stream ends with `InvalidArgument`.
pub(super) fn index_decoder<'a>(
    run: &'a [Arc<Table>],
    planned: &[BlockRef],
    tx: Outlet<TableBlocks<'a>>,
) {
    for group in planned.chunk_by(|a, b| a.table == b.table) {
        if !tx.forward(select_blocks(run, group)) {
            return;
        }
    }
    tx.close(Ok(()));
}

/// Matches one table's planned blocks (`group`, non-empty, one table, offset order) against the
/// table's index entries.
fn select_blocks<'a>(run: &'a [Arc<Table>], group: &[BlockRef]) -> Result<TableBlocks<'a>> {
    let Some(first) = group.first() else {
        return Err(Error::InvalidArgument("empty block group".into()));
    };
    let table = run.get(first.table).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "the plan reads table {} of an input run of {}",
            first.table,
            run.len()
        ))
    })?;
    let mut wanted = group.iter().map(|r| r.handle).peekable();
    let mut handles = Vec::with_capacity(group.len());
    for (_, handle) in (0..table.num_data_blocks()).filter_map(|i| table.index_entry(i)) {
        if wanted.next_if_eq(&handle).is_some() {
            handles.push(handle);
        }
    }
    match wanted.next() {
        None => Ok(TableBlocks {
            table: table.as_ref(),
            handles,
        }),
        Some(missing) => Err(Error::InvalidArgument(format!(
            "the plan reads a block at offset {} of {} bytes that the index of {} does not list",
            missing.offset,
            missing.size,
            table.path().display()
        ))),
    }
}

/// The data decoder: S1, S2 and S3 for every handle the index decoder sends; streams the
/// decoded blocks in order, in bursts, then `End`, or the first error. Step times go to
/// `total` once per batch (see [`StepTimes::drain_into`]).
pub(super) fn data_decoder(
    total: &StepTimes,
    mut rx: Inlet<TableBlocks<'_>>,
    mut tx: BurstOutlet<Arc<Block>>,
) {
    let times = StepTimes::default();
    loop {
        times.drain_into(total);
        let batch = match rx.recv() {
            Ok(Some(batch)) => batch,
            Ok(None) => return tx.close(Ok(())),
            Err(e) => return tx.close(Err(e)),
        };
        for handle in batch.handles {
            match decode_block(batch.table, handle, &times) {
                Ok(block) => {
                    if !tx.push(block) {
                        return;
                    }
                }
                Err(e) => return tx.close(Err(e)),
            }
        }
    }
}

/// S1, S2, S3 for one block.
fn decode_block(table: &Table, handle: BlockHandle, times: &StepTimes) -> Result<Arc<Block>> {
    let raw = read_block(table, handle, times)?;
    verify_block(&raw, times)?;
    decompress_block(raw, times)
}
