//! Keyspaces (RocksDB's column families, fjall's partitions): named trees in one database, each
//! with its own memtables, levels and [`KeyspaceOptions`], sharing the WAL so that a
//! [`crate::WriteBatch`] spanning them is atomic, and sharing sequence numbers so that a
//! snapshot is one point in time across them.
//!
//! Layout: keyspace `id` keeps its MANIFEST and tables in `keyspaces/<id>/` (and its tables in
//! the same subdirectory of each data or owner directory); the database's MANIFEST records
//! which keyspaces exist (`keyspace` and `drop_keyspace` records) and the WALs stay in the
//! database directory. Each tree records in its own MANIFEST the WAL from which its writes are
//! not yet in tables, so replay gives each keyspace exactly the entries it lacks
//! (`db/journal.rs` has the rules that keep WALs until no keyspace needs them).
//!
//! Creating one: the tree's directory and MANIFEST are made durable first, then the database's
//! MANIFEST names it; a crash in between leaves a directory no MANIFEST names, which the next
//! open deletes. Dropping one: the database's MANIFEST records the drop first, then the files
//! go; WAL entries of a dropped keyspace are skipped on replay (ids are never reused).

pub(crate) mod handle;
pub mod options;

use std::sync::Arc;

use crate::db::Tree;

pub use handle::Keyspace;
pub use options::KeyspaceOptions;

/// The name of the default keyspace: the database's own tree.
pub const DEFAULT_KEYSPACE: &str = "default";

/// Longest keyspace name, in bytes.
pub const MAX_KEYSPACE_NAME_BYTES: usize = 255;

/// One open keyspace other than the default one: its name and tree (flushed and compacted by
/// the database's background threads).
pub(crate) struct KeyspaceTree {
    pub id: u32,
    pub name: String,
    pub tree: Arc<Tree>,
}

/// Checks a name given to [`crate::Db::create_keyspace`] or in [`crate::Options::keyspaces`].
pub(crate) fn check_name(name: &str) -> crate::Result<()> {
    if name.is_empty() || name.len() > MAX_KEYSPACE_NAME_BYTES {
        return Err(crate::Error::InvalidArgument(format!(
            "a keyspace name has 1 to {MAX_KEYSPACE_NAME_BYTES} bytes, got {}",
            name.len()
        )));
    }
    if name == DEFAULT_KEYSPACE {
        return Err(crate::Error::InvalidArgument(format!(
            "{DEFAULT_KEYSPACE:?} is the database's own keyspace; it always exists"
        )));
    }
    Ok(())
}
