//! The wire task for one worker share: the spec's inputs named by file, the share's key
//! range, the output format and limits, and the block of output numbers reserved for it.

use std::ops::Range;

use sluice_exec::{CompactionMode, ExecOptions};
use sluice_rpc::convert::{mode_to_wire, table_format};
use sluice_rpc::proto;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::fs::WriteFence;

/// One share of a compaction, as a worker is asked to run it.
pub struct ShareTask<'a> {
    /// The host's id of the compaction.
    pub job_id: u64,
    /// The whole compaction.
    pub spec: &'a CompactionSpec,
    /// The level of each of `spec.inputs`' runs.
    pub run_levels: &'a [u32],
    /// The share's user-key range, `[lower, upper)`.
    pub lower: Option<Vec<u8>>,
    /// See `lower`.
    pub upper: Option<Vec<u8>>,
    /// The worker's executor; `None` lets its decision component choose.
    pub mode: Option<CompactionMode>,
    /// Sub-task size, queue depth and compute threads, as the host runs them.
    pub exec: &'a ExecOptions,
    /// Output numbers reserved for the share.
    pub numbers: Range<u64>,
    /// Partitioned mode: the range owner's directory, where every output must go.
    pub output_root: Option<&'a std::path::Path>,
    /// The database's name on the workers.
    pub database: &'a str,
    /// The keyspace whose tree the share compacts (0: the default one).
    pub keyspace: u32,
    /// Written into every output's properties: what ties an output to this task.
    pub task_nonce: u64,
    /// Ask for the drop log, to audit the worker's drop decisions.
    pub log_drops: bool,
    /// The host's claim on its object-store prefix, which the worker's writes there check.
    pub fence: Option<WriteFence>,
}

impl ShareTask<'_> {
    /// The message sent to the worker. Input names are bare file names (the worker finds them
    /// in its roots); a table whose path has no UTF-8 file name cannot be sent.
    pub fn to_wire(&self) -> Result<proto::CompactionTask, String> {
        let mut runs = Vec::with_capacity(self.spec.inputs.len());
        for (i, run) in self.spec.inputs.iter().enumerate() {
            let level = self.run_levels.get(i).copied().unwrap_or_default();
            let files = run
                .iter()
                .map(|t| {
                    let name = t
                        .path()
                        .file_name()
                        .and_then(|n| n.to_str())
                        .ok_or_else(|| format!("{} has no file name", t.path().display()))?;
                    let props = t.properties();
                    Ok(proto::FileRef {
                        name: name.to_string(),
                        number: t.file_number(),
                        level,
                        size: t.file_size(),
                        smallest: props.smallest_key.clone(),
                        largest: props.largest_key.clone(),
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            runs.push(proto::InputRun { files });
        }
        let spec = self.spec;
        Ok(proto::CompactionTask {
            job_id: self.job_id,
            runs,
            lower: self.lower.clone(),
            upper: self.upper.clone(),
            snapshots: spec.snapshots.clone(),
            bottommost: spec.bottommost,
            format: Some(table_format(&spec.table)),
            target_file_size: spec.target_file_size,
            grandparents: spec
                .grandparents
                .iter()
                .map(|g| proto::GrandparentFile {
                    smallest: g.smallest.clone(),
                    largest: g.largest.clone(),
                    size: g.size,
                })
                .collect(),
            max_grandparent_overlap_bytes: spec.max_grandparent_overlap_bytes,
            mode: mode_to_wire(self.mode) as i32,
            sub_task_bytes: self.exec.sub_task_bytes,
            queue_depth: u32::try_from(self.exec.queue_depth).unwrap_or(u32::MAX),
            compute_threads: u32::try_from(self.exec.compute_threads).unwrap_or(u32::MAX),
            first_output_number: self.numbers.start,
            output_numbers: u32::try_from(self.numbers.end - self.numbers.start)
                .unwrap_or(u32::MAX),
            output_root: self
                .output_root
                .map(|p| {
                    p.to_str()
                        .map(str::to_string)
                        .ok_or_else(|| format!("{} is not UTF-8", p.display()))
                })
                .transpose()?,
            database: self.database.to_string(),
            keyspace: self.keyspace,
            task_nonce: self.task_nonce,
            log_drops: self.log_drops,
            fence: self.fence.as_ref().map(|f| proto::WriteFence {
                epoch: f.epoch,
                e_tag: f.e_tag.clone(),
            }),
            merge_operator: spec
                .merge_operator
                .as_ref()
                .map(|op| op.name().to_string())
                .unwrap_or_default(),
            compaction_filter: spec
                .filter
                .as_ref()
                .map(|f| f.name().to_string())
                .unwrap_or_default(),
            range_tombstones: spec
                .range_tombstones
                .iter()
                .flat_map(|t| t.pieces())
                .map(|t| proto::RangeTombstone {
                    start: t.start,
                    end: t.end,
                    seq: t.seq,
                })
                .collect(),
        })
    }
}

/// Output numbers to reserve for a share of `input_bytes`: outputs are cut at the target size
/// and, at most once per grandparent, where grandparent overlap grows too large; compaction
/// only shrinks data, so twice the size-based count plus one per grandparent is never short.
pub fn numbers_needed(input_bytes: u64, spec: &CompactionSpec) -> u64 {
    let by_size = input_bytes / spec.target_file_size.max(1) + 1;
    2 * by_size + spec.grandparents.len() as u64 + 4
}

/// A value no worker can predict, drawn once per job: each task's nonce is derived from it
/// and the task's first reserved output number ([`task_nonce`]), so the host need not keep a
/// table of nonces to check a reply against its task.
pub fn nonce_key() -> u64 {
    use std::hash::BuildHasher;
    // `RandomState`'s keys come from the operating system's randomness.
    std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now())
}

/// The nonce of the task whose outputs are numbered from `first_output`, in the job whose
/// [`nonce_key`] is `key`: never 0 (which means "none" on the wire). Output numbers are
/// never reused, so no two tasks of a database share a nonce but by a 2^-64 chance.
pub fn task_nonce(key: u64, first_output: u64) -> u64 {
    // SplitMix64's finalizer: neighbouring numbers give unrelated nonces.
    let mut z = key ^ first_output.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) | 1
}
