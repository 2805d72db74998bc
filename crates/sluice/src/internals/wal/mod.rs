//! The log: LevelDB's block-structured record format, used for the write-ahead log and the
//! MANIFEST.
//!
//! [`format`](mod@format) defines the bytes, [`LogWriter`] appends records with
//! group-commit-friendly buffering, and [`LogReader`] reads them back, distinguishing a torn
//! tail (a crash during the last write: ignorable) from damage followed by valid records (lost
//! data: an error). The full specification is `docs/format/wal.md`.
//!
//! Log files are never reused or recycled: a stale record from an earlier use of the file
//! would be indistinguishable from a live one.

pub mod format;
mod reader;
mod recovery;
mod tail;
mod writer;

pub use reader::LogReader;
pub use recovery::{DroppedRange, WalRecoveryMode};
pub use writer::LogWriter;

#[cfg(test)]
mod tests;
