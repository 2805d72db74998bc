//! Compaction: deciding what to compact, running it, and handing back the result.
//!
//! - `picker` returns a `Compaction` value (what to merge, and why);
//! - `choose` decides who runs it: a local executor of the `sluice-exec` crate (re-exported
//!   as [`executor`]) or, with `Options::offload`, the host and its workers ([`remote`]);
//! - `job` runs it through the chosen [`executor::Executor`] inside a narrow `env::JobEnv`
//!   (file numbers, table paths, open tables, snapshots) and returns a version edit.
//!
//! Nothing here touches the version set or the MANIFEST: the database installs the edit.

pub use sluice_exec as executor;

pub(crate) mod choose;
pub(crate) mod debt;
pub mod env;
pub(crate) mod in_progress;
pub(crate) mod job;
pub(crate) mod l0_inputs;
pub(crate) mod level_targets;
pub mod manual;
pub(crate) mod manual_pick;
pub(crate) mod picker;
pub mod remote;

use std::sync::Arc;

use crate::version::Version;
use crate::version::edit::FileMetaData;

/// Why a compaction was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// L0 is due: too deep, too many files, or (dynamic level sizing) too many bytes.
    L0FileCount,
    /// A level holds more bytes than its target.
    LevelSize,
    /// `compact_range` asked for it.
    Manual,
    /// L0 is due but the base level is busy: the newest L0 files are merged into one L0 file,
    /// cutting L0's read amplification until an L0 compaction into the base level can run
    /// (RocksDB's and Pebble's intra-L0 compaction).
    IntraL0,
    /// Partitioned mode: a table of a range that moved, still in its former owner's
    /// directory, is rewritten at its level into the range owner's directory (the MStore paper:
    /// moved data is rewritten by compaction, not copied ahead of it).
    Relocate,
    /// `compact_range` with a compaction filter: like [`Reason::Manual`], but every file is
    /// rewritten, none moved, so that the filter sees all of it.
    ManualRewrite,
    /// `compact_range` with a compaction filter: the deepest level's files in the range are
    /// rewritten in place, so the filter sees what no push-down reaches (RocksDB's
    /// `bottommost_level_compaction = kIfHaveCompactionFilter`).
    ManualInPlace,
    /// A table referencing blob files garbage collection collects is rewritten at its level,
    /// moving their live values out (`blob::gc`).
    BlobGarbage,
}

impl Reason {
    /// The name logs and event listeners give it.
    pub fn name(self) -> &'static str {
        match self {
            Reason::L0FileCount => "l0-files",
            Reason::LevelSize => "level-size",
            Reason::Manual => "manual",
            Reason::IntraL0 => "intra-l0",
            Reason::Relocate => "relocate",
            Reason::ManualRewrite => "manual-rewrite",
            Reason::ManualInPlace => "manual-in-place",
            Reason::BlobGarbage => "blob-garbage",
        }
    }
}

/// One compaction: inputs from `level` and `output_level`, outputs into `output_level`. That
/// is `level + 1`, except for L0, which compacts into the base level
/// ([`level_targets::LevelTargets::base_level`]; every level between is empty), and for
/// [`Reason::IntraL0`], [`Reason::Relocate`], [`Reason::ManualInPlace`] and
/// [`Reason::BlobGarbage`], whose inputs and outputs are in `level`.
#[derive(Clone, Debug)]
pub(crate) struct Compaction {
    /// The upper input level.
    pub level: usize,
    /// The level the outputs go to.
    pub output_level: usize,
    /// `inputs[0]` from `level`, `inputs[1]` from `output_level`.
    pub inputs: [Vec<Arc<FileMetaData>>; 2],
    /// Files of `output_level + 1` overlapping the output, used to cut outputs so that a later
    /// compaction of one output file does not rewrite too much of the grandparent level.
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// No level below the output holds data in this compaction's key range, so tombstones that
    /// no snapshot needs can be dropped.
    pub bottommost: bool,
    /// Why it was picked.
    pub reason: Reason,
    /// The version the inputs were chosen from.
    pub version: Arc<Version>,
}

impl Compaction {
    /// The rewrite of `file` alone at its `level` of `version`, for `reason` (one that stays in
    /// the level). One table at a time: several tables of one level need not be adjacent,
    /// and outputs spanning the gap between them would overlap the level's other tables.
    pub(crate) fn in_place(
        version: &Arc<Version>,
        level: usize,
        file: &Arc<FileMetaData>,
        reason: Reason,
    ) -> Compaction {
        Compaction {
            level,
            output_level: level,
            inputs: [vec![Arc::clone(file)], Vec::new()],
            grandparents: Vec::new(),
            // Deeper levels (or older L0 tables) may hold older versions of its keys.
            bottommost: false,
            reason,
            version: Arc::clone(version),
        }
    }

    /// The level outputs are written to.
    pub fn output_level(&self) -> usize {
        self.output_level
    }

    /// True for the compactions whose outputs stay in the input level.
    pub fn stays_in_level(&self) -> bool {
        self.output_level == self.level
    }

    /// All input files.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs.iter().flatten()
    }

    /// Total bytes of the input files.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }

    /// Partitioned mode: the range the compaction lies in (every input lies in one range, see
    /// [`crate::partition`]) and its owner. `None` when the database is not partitioned.
    pub fn range(&self) -> Option<(usize, crate::version::range_map::OwnerId)> {
        let map = self.version.range_map()?;
        let first = self.all_inputs().next()?;
        let i = map.index_of(crate::version::version::smallest_user_key(first));
        Some((i, map.ranges()[i].owner))
    }

    /// A single input file with nothing to merge against, and little grandparent overlap: it
    /// can move down to the output level by editing the MANIFEST only. A manual compaction's
    /// file moves too, unless it would keep tombstones at the bottom that a rewrite drops
    /// (`manual_pick::must_rewrite`).
    pub fn is_trivial_move(&self, max_grandparent_overlap_bytes: u64) -> bool {
        let [file] = self.inputs[0].as_slice() else {
            return false;
        };
        let rewrite = match self.reason {
            Reason::Relocate
            | Reason::ManualRewrite
            | Reason::ManualInPlace
            | Reason::BlobGarbage => true,
            Reason::Manual => manual_pick::must_rewrite(&self.version, self.output_level, file),
            _ => false,
        };
        !rewrite
            && self.inputs[1].is_empty()
            && self.grandparents.iter().map(|f| f.file_size).sum::<u64>()
                <= max_grandparent_overlap_bytes
    }
}
