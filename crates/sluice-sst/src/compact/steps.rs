//! The seven steps of a compaction (the PCP paper), one function each, every one timed.
//!
//! | step | function | resource |
//! |---|---|---|
//! | S1 read | [`read_block`] | I/O |
//! | S2 checksum | [`verify_block`] | CPU |
//! | S3 decompress | [`decompress_block`] | CPU |
//! | S4 merge | [`super::subtask::merge_sub_task`] | CPU |
//! | S5 compress | [`compress_block`] | CPU |
//! | S6 re-checksum | [`checksum_block`] | CPU |
//! | S7 write | [`write_block`] | I/O |

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::Result;
use crate::block::Block;
use crate::compression::CompressionType;
use crate::format::BlockHandle;
use crate::profile::{StageProfile, Step};
use crate::table::{
    EncodedBlock, RawBlock, SealedBlock, Table, TableFileWriter, TableOptions,
    decompress_raw_block, read_raw_block, seal_block_trailer, verify_raw_block,
};

/// Time per step and bytes moved, shared by the parts of one executor thread.
///
/// Counters are atomics so stage threads of pipelined executors can each own one and still
/// hand it across threads; a sequential executor uses one for everything. Threads that run
/// steps side by side each keep a tally of their own and [`StepTimes::drain_into`] the job's
/// total once per sub-task: charging one shared set of counters per block made every block
/// bounce its cache line between the cores.
#[derive(Debug, Default)]
pub struct StepTimes {
    nanos: [AtomicU64; 7],
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl StepTimes {
    /// Runs `f`, charging its duration to `step`.
    #[inline]
    pub fn timed<T>(&self, step: Step, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.charge(step, start.elapsed().as_nanos() as u64);
        out
    }

    /// Adds `nanos` to `step`.
    #[inline]
    pub fn charge(&self, step: Step, nanos: u64) {
        self.nanos[step as usize].fetch_add(nanos, Ordering::Relaxed);
    }

    /// Nanoseconds charged to `step` so far.
    pub fn nanos(&self, step: Step) -> u64 {
        self.nanos[step as usize].load(Ordering::Relaxed)
    }

    /// Nanoseconds charged to the input steps S1..S3 so far.
    pub fn input_nanos(&self) -> u64 {
        self.nanos(Step::Read) + self.nanos(Step::Checksum) + self.nanos(Step::Decompress)
    }

    /// Bytes read from input files so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read.load(Ordering::Relaxed)
    }

    /// Counts bytes read from input files.
    pub fn add_bytes_read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts bytes written to output files.
    pub fn add_bytes_written(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    /// Moves everything counted so far into `total`, leaving this tally at zero.
    pub fn drain_into(&self, total: &StepTimes) {
        for (mine, theirs) in self.nanos.iter().zip(&total.nanos) {
            theirs.fetch_add(mine.swap(0, Ordering::Relaxed), Ordering::Relaxed);
        }
        total.bytes_read.fetch_add(
            self.bytes_read.swap(0, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        total.bytes_written.fetch_add(
            self.bytes_written.swap(0, Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// The steps and byte counts as a profile (entries, wall and CPU time left for the caller).
    pub fn profile(&self) -> StageProfile {
        let mut p = StageProfile::default();
        for step in Step::ALL {
            p.step_nanos[step as usize] = self.nanos(step);
        }
        p.bytes_read = self.bytes_read.load(Ordering::Relaxed);
        p.bytes_written = self.bytes_written.load(Ordering::Relaxed);
        p
    }
}

/// S1: reads the stored bytes of one block (with its trailer) from `table`.
pub fn read_block(table: &Table, handle: BlockHandle, times: &StepTimes) -> Result<RawBlock> {
    let raw = times.timed(Step::Read, || {
        read_raw_block(table.file(), table.path(), handle)
    })?;
    times.add_bytes_read(raw.stored_len() as u64);
    Ok(raw)
}

/// S1 for several blocks of `table`, adjacent ones read together (see
/// [`crate::table::read_raw_blocks`]).
pub fn read_blocks(
    table: &Table,
    handles: &[BlockHandle],
    times: &StepTimes,
) -> Result<Vec<RawBlock>> {
    let raw = times.timed(Step::Read, || {
        crate::table::read_raw_blocks(table.file(), table.path(), handles)
    })?;
    times.add_bytes_read(raw.iter().map(|r| r.stored_len() as u64).sum());
    Ok(raw)
}

/// S2: verifies the block's CRC32C.
pub fn verify_block(raw: &RawBlock, times: &StepTimes) -> Result<()> {
    times.timed(Step::Checksum, || verify_raw_block(raw))
}

/// S3: decompresses (and parses) the block.
pub fn decompress_block(raw: RawBlock, times: &StepTimes) -> Result<Arc<Block>> {
    times.timed(Step::Decompress, || decompress_raw_block(raw).map(Arc::new))
}

/// S5: compresses a sealed block with the table's compression.
pub fn compress_block(
    sealed: &SealedBlock,
    opts: &TableOptions,
    times: &StepTimes,
) -> (Vec<u8>, CompressionType) {
    times.timed(Step::Compress, || {
        let mut out = Vec::new();
        let used = crate::table::compress_block(
            &sealed.contents,
            opts.compression,
            opts.zstd_level,
            &mut out,
        );
        (out, used)
    })
}

/// S6: appends the trailer (compression type and CRC32C) to a compressed block.
pub fn checksum_block(
    sealed: SealedBlock,
    compressed: Vec<u8>,
    used: CompressionType,
    times: &StepTimes,
) -> EncodedBlock {
    times.timed(Step::Rechecksum, || {
        seal_block_trailer(sealed, compressed, used)
    })
}

/// S7: appends an encoded block to the output file.
pub fn write_block(
    writer: &mut TableFileWriter,
    block: &EncodedBlock,
    times: &StepTimes,
) -> Result<()> {
    times.timed(Step::Write, || writer.append_data_block(block))?;
    times.add_bytes_written(block.stored_len() as u64);
    Ok(())
}
