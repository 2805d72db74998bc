//! The engine's insides that tools need, not part of the embedding API and not stable: the
//! CLI (its dumps, and the commands that find a database's files by name), the offload crate,
//! the fuzzers and the tests read files and records through them. An application uses [`crate::Db`],
//! [`crate::Keyspace`], their options and the types the crate root exports.
//!
//! - [`filename`]: the names of a database's files, and `CURRENT`;
//! - [`version`]: versions, version edits and the MANIFEST that records them;
//! - [`wal`]: the write-ahead log's records, writer and reader;
//! - [`memtable`]: the in-memory write buffer.

pub mod filename;
pub mod memtable;
pub mod version;
pub mod wal;
