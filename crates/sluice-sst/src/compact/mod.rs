//! Rewriting tables: the seven compaction steps as functions, the input and output ends they
//! drive, and the sequential runner (SCP) built from them.
//!
//! Every executor (sequential, pipelined, parallel, streaming, offloaded) schedules these same
//! step functions; they differ only in which thread runs which step when.

pub mod block_list;
pub mod input;
pub mod output;
pub mod plan;
pub mod runner;
pub mod steps;
pub mod subtask;
pub mod writer;

pub use output::{OutputFile, TableSink};
pub use runner::{CompactionOutput, CompactionSpec, run_sequential};
pub use steps::StepTimes;
