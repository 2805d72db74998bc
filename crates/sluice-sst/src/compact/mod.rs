//! Rewriting tables: the compaction planner, the seven steps as functions, and the single
//! writer that cuts output files. No threads: the executors in the `sluice` crate schedule
//! these functions.
//!
//! Every executor (sequential, pipelined, parallel, streaming, offloaded) schedules these same
//! step functions; they differ only in which thread runs which step when.

pub mod block_list;
pub mod drop_audit;
pub mod output;
pub mod plan;
mod prefetch;
pub mod relocate;
pub mod spec;
pub mod steps;
pub mod subtask;
pub mod writer;

pub use output::{NewOutput, OutputFile};
pub use relocate::{BlobRelocation, RelocationWriter};
pub use spec::{CompactionOutput, CompactionSpec, GrandparentFile};
pub use steps::StepTimes;
pub use writer::{OutputRules, OutputWriter};
