//! Sluice's on-disk formats and the merge that rewrites them.
//!
//! This crate has no threads and knows nothing of the version set: it encodes and decodes keys,
//! blocks, filters and tables, merges iterators, and provides the seven compaction step functions
//! (S1 read .. S7 write) that every executor schedules in its own way.

// File locks, direct I/O, fsync of directories and the worker's sandbox use Unix APIs; say so
// once instead of failing in each of them.
#[cfg(not(unix))]
compile_error!(
    "Sluice supports Linux only, the one system it is built and tested on: its file locks, \
     direct I/O and directory fsyncs use Unix APIs"
);

pub mod blob;
pub mod block;
pub mod cache;
pub mod checksum;
pub mod coding;
pub mod compact;
pub mod compaction_iter;
pub mod compression;
pub mod digest;
pub mod error;
pub mod filter;
pub mod format;
pub mod fs;
pub mod iter;
pub mod key;
pub mod merge;
pub mod merge_operator;
pub mod prefix;
pub mod profile;
pub mod properties;
pub mod range_del;
pub mod table;
pub mod ttl;

pub use error::{Error, IoContext, Result};
pub use iter::InternalIterator;
