//! [`KeyspaceOptions`]: the settings of one keyspace's tree, and the [`Options`] its tree runs
//! with.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::BlobOptions;
use crate::options::{
    CompactionFilter, CompactionOptions, MemtableOptions, MergeOperator, Options, TableOptions,
};

/// The directory, under the database directory and under each data or owner directory, that
/// holds the keyspaces' trees: `keyspaces/<id>/`.
pub const KEYSPACES_DIR: &str = "keyspaces";

/// What a keyspace may set apart from the rest of the database (RocksDB's
/// `ColumnFamilyOptions`): its memtables, its tables, its compactions and what they do to
/// values. Everything else (the file system, the cache, workers, limits on keys and values)
/// is the database's.
///
/// Like RocksDB's column family options these are not stored: a keyspace is opened with what
/// [`Options::keyspaces`] gives for its name, or with the defaults. Whatever a keyspace's data
/// depends on is checked, as for the default keyspace: one created with a TTL refuses to open
/// without one, and a key with merge operands fails to read without an operator.
#[derive(Clone, Debug, Default)]
pub struct KeyspaceOptions {
    /// How big its memtables grow and how many are kept.
    pub memtable: MemtableOptions,
    /// How its tables are written (block size, compression, filters, prefix extractor).
    pub table: TableOptions,
    /// When and how it compacts.
    pub compaction: CompactionOptions,
    /// As [`Options::compaction_filter`], for this keyspace.
    pub compaction_filter: Option<Arc<dyn CompactionFilter>>,
    /// As [`Options::merge_operator`], for this keyspace.
    pub merge_operator: Option<Arc<dyn MergeOperator>>,
    /// As [`Options::ttl`], for this keyspace.
    pub ttl: Option<Duration>,
    /// As [`Options::blob`], for this keyspace.
    pub blob: BlobOptions,
}

impl KeyspaceOptions {
    /// The default keyspace's settings in `options`.
    pub fn of_default(options: &Options) -> Self {
        KeyspaceOptions {
            memtable: options.memtable.clone(),
            table: options.table.clone(),
            compaction: options.compaction.clone(),
            compaction_filter: options.compaction_filter.clone(),
            merge_operator: options.merge_operator.clone(),
            ttl: options.ttl,
            blob: options.blob.clone(),
        }
    }

    /// The options keyspace `id`'s tree runs with: the database's, with these settings, and
    /// every table directory moved to its `keyspaces/<id>/` subdirectory (keyspaces number
    /// their files apart, so they must not share a directory).
    pub(crate) fn tree_options(&self, database: &Options, id: u32) -> Options {
        let mut tree = database.clone();
        tree.memtable = self.memtable.clone();
        tree.table = self.table.clone();
        tree.compaction = self.compaction.clone();
        tree.compaction_filter = self.compaction_filter.clone();
        tree.merge_operator = self.merge_operator.clone();
        tree.ttl = self.ttl;
        tree.blob = self.blob.clone();
        tree.keyspaces = Default::default();
        for dir in &mut tree.data_dirs {
            *dir = keyspace_dir(dir, id);
        }
        if let Some(p) = &mut tree.partitions {
            for owner in &mut p.owners {
                owner.dir = keyspace_dir(&owner.dir, id);
            }
        }
        tree
    }
}

/// Where keyspace `id` keeps its files under `dir` (the database directory, or a data or
/// owner directory).
pub fn keyspace_dir(dir: &Path, id: u32) -> PathBuf {
    dir.join(KEYSPACES_DIR).join(id.to_string())
}

/// The keyspace id a `keyspaces/` entry names, if it is one.
pub(crate) fn parse_keyspace_dir(name: &std::ffi::OsStr) -> Option<u32> {
    let name = name.to_str()?;
    // No sign, no leading zeros: exactly what `keyspace_dir` writes.
    if name.starts_with('0') && name != "0" {
        return None;
    }
    name.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| name.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_keeps_its_files_apart_and_takes_its_own_settings() {
        let database = Options {
            data_dirs: vec![PathBuf::from("/d1")],
            ..Options::default()
        };
        let mut ks = KeyspaceOptions::of_default(&database);
        ks.table.block_size = 16 << 10;
        ks.memtable.write_buffer_size = 1 << 20;
        let tree = ks.tree_options(&database, 7);
        assert_eq!(tree.data_dirs, vec![PathBuf::from("/d1/keyspaces/7")]);
        assert_eq!(tree.table.block_size, 16 << 10);
        assert_eq!(tree.memtable.write_buffer_size, 1 << 20);
        assert_eq!(tree.max_key_size, database.max_key_size);
    }

    #[test]
    fn only_canonical_ids_are_keyspace_directories() {
        for (name, id) in [("1", Some(1)), ("42", Some(42)), ("007", None), ("x", None)] {
            assert_eq!(parse_keyspace_dir(std::ffi::OsStr::new(name)), id, "{name}");
        }
        assert_eq!(
            parse_keyspace_dir(std::ffi::OsStr::new("99999999999")),
            None
        );
        assert_eq!(
            keyspace_dir(Path::new("/db"), 3),
            PathBuf::from("/db/keyspaces/3")
        );
    }
}
