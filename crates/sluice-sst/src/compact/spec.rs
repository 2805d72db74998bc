//! What an executor is given (a [`CompactionSpec`]) and what it returns (a
//! [`CompactionOutput`]). Neither refers to the version set, so the same spec can be run by any
//! executor, on the host or on a worker.

use std::sync::Arc;

use crate::compaction_iter::drop_log::DropLog;
use crate::compaction_iter::{CompactionFilter, CompactionIterStats, CompactionIterator};
use crate::digest::EntryDigest;
use crate::fs::Storage;
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::merge_operator::MergeOperator;
use crate::profile::{StageProfile, StageTiming};
use crate::range_del::Tombstones;
use crate::table::{Table, TableOptions};

use super::output::OutputFile;

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
    /// Where output tables are written, and how (buffered or direct I/O). Inputs are read
    /// through their own [`Table`]s.
    pub storage: Storage,
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
    /// Shown each live value ([`crate::compaction_iter`] says which); `None` writes every
    /// value as it is. A spec with a filter runs where the filter is: on the host, unless a
    /// worker has one of the same name.
    pub filter: Option<Arc<dyn CompactionFilter>>,
    /// Combines merge operands ([`crate::compaction_iter`] says when); `None` writes them as
    /// they are. Like the filter, it runs on a worker only if the worker knows its name.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The database's range tombstones: versions they cover in their stripe are dropped, and
    /// keys they cover keep their sequence numbers ([`crate::compaction_iter`]).
    pub range_tombstones: Option<Arc<Tombstones>>,
    /// Blob garbage collection: references into the blob files it collects get their values
    /// moved ([`super::relocate`]). A spec with one runs on the host, where the blob files are.
    pub blob_relocation: Option<Arc<dyn super::BlobRelocation>>,
    /// The nonce of the offloaded task this compaction answers: written into every output's
    /// properties (`task_nonce`), so the host can tell these outputs from any other task's.
    /// `None` for the host's own compactions.
    pub task_nonce: Option<u64>,
    /// Log every dropped entry with the reason ([`CompactionOutput::drops`]): a worker does,
    /// so that the host can check its drop decisions ([`super::drop_audit`]).
    pub log_drops: bool,
}

impl Default for CompactionSpec {
    /// A spec with no inputs whose merge keeps every version, writes every value as it is
    /// and writes one unbounded output: no snapshots, not bottommost, default table options
    /// and storage, no file cut (`target_file_size` and the grandparent overlap at
    /// `u64::MAX`), no key bounds, filter, merge operator, range tombstones, blob relocation,
    /// task nonce or drop log.
    ///
    /// Tests, benchmarks and the engine's one-table rewrites (repair, partition splits) name
    /// what they need and take the rest from here. The compaction job and the worker spell
    /// out every field instead, so that a field added here makes them decide its value.
    fn default() -> Self {
        CompactionSpec {
            inputs: Vec::new(),
            snapshots: Vec::new(),
            bottommost: false,
            table: TableOptions::default(),
            storage: Storage::default(),
            target_file_size: u64::MAX,
            grandparents: Vec::new(),
            max_grandparent_overlap_bytes: u64::MAX,
            lower: None,
            upper: None,
            filter: None,
            merge_operator: None,
            range_tombstones: None,
            blob_relocation: None,
            task_nonce: None,
            log_drops: false,
        }
    }
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
    /// Every dropped entry with the reason, in key order, when the spec asks (`log_drops`).
    pub drops: DropLog,
    /// Busy and idle time per executor stage.
    pub stages: Vec<StageTiming>,
}

impl CompactionSpec {
    /// The compaction iterator over `merged` (the inputs merged in internal-key order) that
    /// applies this spec's rules: its snapshots, bottommost flag, filter, merge operator and
    /// range tombstones. Every executor, and the host's sampled checks of a worker's outputs,
    /// decide what to keep through this one function.
    pub fn compaction_iter<I: InternalIterator>(&self, merged: I) -> CompactionIterator<I> {
        let mut it = CompactionIterator::new(merged, self.snapshots.clone(), self.bottommost);
        it.set_filter(self.filter.clone());
        it.set_merge_operator(self.merge_operator.clone());
        it.set_range_tombstones(self.range_tombstones.clone());
        if self.log_drops {
            it.log_drops();
        }
        it
    }

    /// The count and digest of every input entry, from the input tables' properties: what a
    /// correct compaction of the whole spec accounts for ([`CompactionOutput::accounted`]).
    /// `None` when that is unknown: a table was written before digests were recorded, or the
    /// spec is bounded to a key range (a share), which the tables' whole-file digests do not
    /// describe.
    pub fn input_digest(&self) -> Option<EntryDigest> {
        if self.lower.is_some() || self.upper.is_some() {
            return None;
        }
        self.inputs
            .iter()
            .flatten()
            .map(|t| t.properties().digest())
            .sum()
    }
}

impl CompactionOutput {
    /// The count and digest of what the outputs hold plus what was dropped: equal to
    /// [`CompactionSpec::input_digest`] when nothing was lost, changed or invented.
    pub fn accounted(&self) -> EntryDigest {
        accounted(&self.files, &self.stats)
    }
}

/// What `files` hold plus what `stats` says was dropped or rewritten making them (an output written
/// without a digest counts as none: it cannot add up).
pub fn accounted(files: &[OutputFile], stats: &CompactionIterStats) -> EntryDigest {
    let written: EntryDigest = files
        .iter()
        .map(|f| f.summary.properties.digest().unwrap_or_default())
        .sum();
    written + stats.unwritten()
}
