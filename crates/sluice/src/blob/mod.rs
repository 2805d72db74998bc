//! Value separation: large values live in blob files, and the tree keeps a reference in
//! their place (RocksDB's integrated BlobDB, Pebble's value separation, WiscKey).
//!
//! ```text
//! flush ─▶ separate (values ≥ min_blob_size ─▶ NNNNNN.blob; the table gets a BlobRef)
//! compaction ─▶ moves references as small values (no blob data read or written)
//! get/iter ─▶ resolve (through the table cache's open blob files) ─▶ the value, checked
//!            against its key
//! version ─▶ blob_files (which files live tables reference, and how much of each)
//! ```
//!
//! The blob file format is in `sluice_sst::blob` and `docs/format/blob.md`; design note
//! 0016 explains the choices.

pub(crate) mod check;
pub(crate) mod gc;
mod options;
mod resolve;
mod separate;

pub use options::BlobOptions;
pub(crate) use resolve::resolve;
pub(crate) use separate::BlobSeparator;
