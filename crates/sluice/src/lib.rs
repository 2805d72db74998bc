//! Sluice: an embeddable LSM-tree key-value store.

pub mod batch;
pub mod compaction;
pub mod version;
pub mod wal;

pub use sluice_sst::{Error, Result};
