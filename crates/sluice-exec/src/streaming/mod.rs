//! Streaming: the in-storage compaction engine of the in-storage compaction paper (Lim, Jung, Shin) in software.
//! Each component of the engine is a stage on its own thread, and the stages are joined by
//! bounded queues, as the paper's are by AXI4-Stream links:
//!
//! ```text
//! run 0: index decoder ─▶ data decoder (S1 S2 S3) ─┐
//!  ...                                             ├─▶ comparator (S4) ─▶ encoder (S5 S6) ─┐
//! run n: index decoder ─▶ data decoder (S1 S2 S3) ─┘                                      │
//!                                                          writer (S7, calling thread) ◀──┘
//! ```
//!
//! - `decoder`: one per input run. The index decoder picks the blocks the plan reads and runs
//!   ahead of the data decoder, which reads, verifies and decompresses them.
//! - `comparator`: merges the runs' block streams (`stream_iter`), drops what no reader can
//!   see, and builds data blocks, sealing one at every sub-task boundary of the plan.
//! - the encoder: compresses and checksums each block.
//! - the writer: the same [`OutputWriter`] as every executor, which cuts the files.
//!
//! Unlike PCP and C-PPCP, work flows between stages a few blocks at a time, not a sub-task at
//! a time: no stage waits for a whole sub-task before it starts. The plan is still used, for
//! the blocks to read and for the boundaries where blocks are sealed, which is what makes the
//! output byte-identical to the other executors' (see `comparator` for why).
//!
//! Differences from the paper: its engine has two decoders and so only takes L1+ compactions;
//! threads cost no FPGA area, so here every input run, L0 files included, gets a decoder. File
//! cutting stays in the single writer rather than the encoder, so cuts match the other
//! executors.
//!
//! # Queues
//!
//! Blocks move in bursts of up to `BURST_BLOCKS`, one message per burst, so a stage pays one
//! queue operation per burst rather than per block. Every queue holds `queue_depth` messages:
//! tables' worth of handles between the index and data decoders, bursts of blocks elsewhere.
//! Short block queues keep the data in flight (inputs x `queue_depth` x 64 KiB at the defaults)
//! within the caches, so the comparator reads blocks the decoders just wrote; a queue of a
//! whole sub-task's worth of bursts per input measured about 10% slower.
//!
//! # Failure
//!
//! A failing stage sends its error downstream and stops; the writer stops at the first error and
//! deletes every output written so far. A stopped stage drops its queues, which makes the stages
//! upstream stop at their next send, so nothing blocks forever (`queue` has the protocol). All
//! threads are joined (the scope) before the error is returned.
//!
//! # Timing
//!
//! S1..S3, S5, S6 and S7 are timed by the shared step functions. S4 is the comparator's time
//! minus the time it spent blocked on its queues.
//!
//! [`OutputWriter`]: sluice_sst::compact::writer::OutputWriter

mod comparator;
mod decoder;
mod queue;
mod stream_iter;

#[cfg(test)]
mod tests;

use std::time::Instant;

use crossbeam_channel::bounded;
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::steps::{checksum_block, compress_block};
use sluice_sst::compact::writer::OutputWriter;
use sluice_sst::compact::{CompactionSpec, StepTimes};
use sluice_sst::table::{EncodedBlock, SealedBlock};

use self::queue::{BurstOutlet, Inlet, Outlet, WaitClock};
use super::{ExecOptions, Shared};
use crate::Result;

/// Blocks per message on the block queues. A queue operation that wakes a blocked neighbour
/// costs microseconds, about what merging one block's entries does. Measured on the
/// `fillrandom,compact` benchmark (2 cores, 136 MB of input): 1 block per message ran at about
/// 135 MB/s, 4 at 165, 16 at 220, 64 at 170 (too coarse: stages wait for whole bursts). 16 blocks
/// is 64 KiB at the default block size, an eighth of a default sub-task.
const BURST_BLOCKS: usize = 16;

/// Runs `spec` as the stages above; returns the output files in key order, or the first error
/// of any stage after deleting every output written.
pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    exec: &ExecOptions,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    let depth = exec.queue_depth.max(1);
    std::thread::scope(|scope| {
        let comparator_clock = WaitClock::default();
        let mut streams = Vec::with_capacity(spec.inputs.len());
        for (i, run) in spec.inputs.iter().enumerate() {
            let planned = decoder::run_blocks(plan, i);
            let (handle_tx, handle_rx) = bounded(depth);
            let (block_tx, block_rx) = bounded(depth);
            scope.spawn(move || {
                let (start, clock) = (Instant::now(), WaitClock::default());
                let tx = Outlet::new(handle_tx, clock.clone());
                shared.with_cpu(|| decoder::index_decoder(run, &planned, tx));
                shared.record_stage("index decoder", start.elapsed(), clock.nanos());
            });
            scope.spawn(move || {
                let (start, clock) = (Instant::now(), WaitClock::default());
                let rx = Inlet::new(handle_rx, "index decoder", clock.clone());
                let tx = BurstOutlet::new(Outlet::new(block_tx, clock.clone()), BURST_BLOCKS);
                shared.with_cpu(|| decoder::data_decoder(&shared.times, rx, tx));
                shared.record_stage("data decoder", start.elapsed(), clock.nanos());
            });
            streams.push(Inlet::new(
                block_rx,
                "data decoder",
                comparator_clock.clone(),
            ));
        }
        let (sealed_tx, sealed_rx) = bounded(depth);
        let (encoded_tx, encoded_rx) = bounded(depth);
        scope.spawn(move || {
            let start = Instant::now();
            let tx = BurstOutlet::new(
                Outlet::new(sealed_tx, comparator_clock.clone()),
                BURST_BLOCKS,
            );
            shared.with_cpu(|| {
                comparator::comparator(spec, plan, shared, streams, tx, &comparator_clock);
            });
            shared.record_stage("comparator", start.elapsed(), comparator_clock.nanos());
        });
        scope.spawn(move || {
            let (start, clock) = (Instant::now(), WaitClock::default());
            let rx = Inlet::new(sealed_rx, "comparator", clock.clone());
            let tx = Outlet::new(encoded_tx, clock.clone());
            shared.with_cpu(|| encoder(spec, &shared.times, rx, tx));
            shared.record_stage("encoder", start.elapsed(), clock.nanos());
        });
        let (start, clock) = (Instant::now(), WaitClock::default());
        let rx = Inlet::new(encoded_rx, "encoder", clock.clone());
        let written = shared.with_cpu(|| write_stage(spec, shared, rx, new_output));
        shared.record_stage("write", start.elapsed(), clock.nanos());
        written
    })
}

/// The encoder stage: S5 and S6 for every sealed block, in order, a burst at a time. Step
/// times go to `total` once per burst.
fn encoder(
    spec: &CompactionSpec,
    total: &StepTimes,
    mut rx: Inlet<Vec<SealedBlock>>,
    tx: Outlet<Vec<EncodedBlock>>,
) {
    let times = &StepTimes::default();
    loop {
        times.drain_into(total);
        match rx.recv() {
            Ok(Some(burst)) => {
                let encoded = burst
                    .into_iter()
                    .map(|sealed| {
                        let (compressed, used) = compress_block(&sealed, &spec.table, times);
                        checksum_block(sealed, compressed, used, times)
                    })
                    .collect();
                if !tx.forward(Ok(encoded)) {
                    return;
                }
            }
            Ok(None) => return tx.close(Ok(())),
            Err(e) => return tx.close(Err(e)),
        }
    }
}

/// The writer: S7 for every encoded block, in order. On the first error from any stage it stops,
/// drops its queue (so the stages upstream stop) and deletes every output written so far.
fn write_stage(
    spec: &CompactionSpec,
    shared: &Shared,
    mut rx: Inlet<Vec<EncodedBlock>>,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    let mut writer = OutputWriter::new(spec.output_rules(), &shared.times, new_output);
    let outcome = (|| {
        while let Some(burst) = rx.recv()? {
            for block in &burst {
                shared.before_append()?;
                writer.append(block)?;
            }
        }
        Ok(())
    })();
    drop(rx);
    writer.conclude(outcome)
}
