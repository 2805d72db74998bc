//! Opening, creating and dropping keyspaces' trees.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::journal::Journal;
use super::open::{
    Parts, TreeLink, check_merge_operator, check_value_format, new_tree, reconcile_partitions,
};
use super::open_tree::{RecoveringTree, remove_tree};
use super::recover::RecoveryReport;
use crate::filename::create_dir_all_durably;
use crate::keyspace::options::keyspace_dir;
use crate::keyspace::{DEFAULT_KEYSPACE, KeyspaceOptions, KeyspaceTree, check_name};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::edit::VersionEdit;
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::{Error, Result};

/// A keyspace's tree, recovered, waiting for its database's handle to exist.
pub(crate) struct TreeParts {
    id: u32,
    name: String,
    dir: PathBuf,
    options: Options,
    table_cache: Arc<TableCache>,
    parts: Parts,
}

impl TreeParts {
    pub(crate) fn from_recovery(tree: &mut RecoveringTree, parts: Parts) -> TreeParts {
        TreeParts {
            id: tree.id,
            name: tree.name.clone(),
            dir: tree.dir.clone(),
            options: tree.options.clone(),
            table_cache: Arc::clone(&tree.table_cache),
            parts,
        }
    }
}

impl Journal {
    /// Builds each keyspace's tree into the journal, served by the database's background
    /// threads.
    pub(crate) fn attach_trees(&self, trees: Vec<TreeParts>) -> Result<()> {
        for tree in trees {
            let (id, name) = (tree.id, tree.name.clone());
            let attached = self.attach(tree)?;
            // What the open found of a crash's leftovers, in every keyspace.
            self.default.recovery.lock().orphans_deleted += attached.orphans_deleted;
            tracing::debug!(keyspace = name, id, "opened keyspace");
            self.keyspaces.write().insert(id, attached.tree);
        }
        Ok(())
    }

    /// Builds the tree of keyspace `(id, name)`, which a secondary instance's follower found
    /// (`parts` holds what it read), into the journal.
    pub(crate) fn attach_followed(
        &self,
        (id, name): (u32, &str),
        dir: PathBuf,
        options: Options,
        table_cache: Arc<TableCache>,
        parts: Parts,
    ) -> Result<()> {
        let attached = self.attach(TreeParts {
            id,
            name: name.to_string(),
            dir,
            options,
            table_cache,
            parts,
        })?;
        tracing::debug!(keyspace = name, id, "following keyspace");
        self.keyspaces.write().insert(id, attached.tree);
        Ok(())
    }

    fn attach(&self, tree: TreeParts) -> Result<Attached> {
        let db = &self.default;
        let link = TreeLink {
            id: tree.id,
            visible_seq: Arc::clone(&self.visible_seq),
            snapshots: Arc::clone(&self.snapshots),
            open_id: self.open_id.clone(),
            bg_work: Arc::clone(&self.bg_work),
            remote: db.remote.clone(),
            read_only: db.read_only,
        };
        let inner = Arc::new(new_tree(
            &tree.dir,
            tree.options,
            tree.table_cache,
            tree.parts,
            link,
        )?);
        let orphans_deleted = match inner.read_only {
            true => 0,
            false => inner.delete_obsolete_files(),
        };
        // It may have work already (frozen memtables, a deep L0).
        self.bg_work.notify_all();
        Ok(Attached {
            tree: Arc::new(KeyspaceTree {
                id: tree.id,
                name: tree.name,
                tree: inner,
            }),
            orphans_deleted,
        })
    }

    /// Creates keyspace `name` (see the module docs of [`crate::keyspace`] for the order of
    /// the durable steps) and returns its tree.
    pub(crate) fn create_keyspace(
        &self,
        name: &str,
        options: &KeyspaceOptions,
    ) -> Result<Arc<KeyspaceTree>> {
        check_name(name)?;
        let db = &*self.default;
        db.check_writable()?;
        let _admin = self.keyspace_admin.lock();
        if self.trees().iter().any(|t| t.name == name) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {name:?} already exists"
            )));
        }
        let id = db.state.lock().versions.next_keyspace_id;
        let tree_options = options.tree_options(&db.options, id);
        tree_options.validate()?;
        let fs = &*db.options.fs;
        let dir = keyspace_dir(&db.dir, id);
        // Leftovers of a create that crashed before the MANIFEST named it.
        for d in tree_options.table_dirs(&dir) {
            remove_tree(fs, &d)?;
            create_dir_all_durably(fs, &d)?;
        }
        let mut versions = VersionSet::new_empty();
        check_value_format(&mut versions, false, &tree_options, &dir)?;
        check_merge_operator(&mut versions, &tree_options, (&dir, Some(name)), true)?;
        // Partitioned mode: the tree starts with the options' range map, as a new database
        // does.
        if let Some(map) = reconcile_partitions(&versions, &tree_options)? {
            let mut edit = VersionEdit {
                range_map: Some(map),
                ..VersionEdit::default()
            };
            let version = versions.prepare(&mut edit, 0, true)?;
            versions.install(version, &edit);
        }
        let manifest_number = versions.new_file_number();
        versions.manifest_number = manifest_number;
        let manifest =
            ManifestWriter::create(fs, &dir, manifest_number, &versions.snapshot_edit())?;
        db.log_and_apply(VersionEdit {
            keyspaces_created: vec![(id, name.to_string())],
            // Its MANIFEST's boundary: recovery holds it to one from now on.
            keyspace_log_numbers: vec![(id, 0)],
            next_keyspace_id: Some(id + 1),
            ..VersionEdit::default()
        })?;
        // Its writes can only be in this WAL or later ones.
        let current_wal = self.current_wal.load(Ordering::Acquire);
        let table_cache = Arc::new(TableCache::new(
            tree_options.table_dirs(&dir),
            &tree_options,
            db.table_cache.block_cache().cloned(),
        ));
        let parts = Parts {
            mem: MemTable::for_write_buffer(current_wal, tree_options.memtable.write_buffer_size),
            imm: Default::default(),
            versions,
            last_seq: 0,
            wal: None,
            manifest: Some(manifest),
            report: RecoveryReport::default(),
        };
        let tree = self
            .attach(TreeParts {
                id,
                name: name.to_string(),
                dir,
                options: tree_options,
                table_cache,
                parts,
            })?
            .tree;
        if let Some(log) = db.events.log() {
            tree.tree.events.set_log(log);
        }
        self.keyspaces.write().insert(id, Arc::clone(&tree));
        tracing::info!(keyspace = name, id, "created keyspace");
        Ok(tree)
    }

    /// Drops keyspace `name`: the database's MANIFEST records it, then its files are deleted.
    pub(crate) fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.default.check_writable()?;
        if name == DEFAULT_KEYSPACE {
            return Err(Error::InvalidArgument(format!(
                "{name:?} is the database's own keyspace: it cannot be dropped"
            )));
        }
        let _admin = self.keyspace_admin.lock();
        let tree = self
            .trees()
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no keyspace {name:?}")))?;
        // No write is between its checks and its memtable inserts while the tree goes: later
        // batches naming it are refused, and replay skips what the WAL holds of it.
        let group = self.commit.join_barrier();
        self.keyspaces.write().remove(&tree.id);
        self.commit.finish(group, &Ok(()));
        tree.tree.dropped.store(true, Ordering::Release);
        tree.tree.stop_background_work();
        self.default.log_and_apply(VersionEdit {
            keyspaces_dropped: vec![tree.id],
            ..VersionEdit::default()
        })?;
        for d in tree.tree.table_cache.dirs() {
            if let Err(e) = remove_tree(&*self.default.options.fs, d) {
                // Garbage, deleted by the next open.
                tracing::warn!(error = %e, "could not delete a dropped keyspace's files");
            }
        }
        tracing::info!(keyspace = name, id = tree.id, "dropped keyspace");
        self.advance_wal_floor()
    }
}

/// A tree just built, and the orphan files its first collection deleted.
struct Attached {
    tree: Arc<KeyspaceTree>,
    orphans_deleted: usize,
}
