//! [`Keyspace`]: the handle an application reads and writes one keyspace through, and the
//! [`Db`] methods that create, find and drop keyspaces.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{DEFAULT_KEYSPACE, KeyspaceOptions, KeyspaceTree};
use crate::iter::{KeyBounds, Range};
use crate::options::{ReadOptions, WriteOptions};
use crate::{CompactOptions, Db, DbIterator, Error, Metrics, Result, Snapshot};

/// One keyspace of a database (RocksDB's `ColumnFamilyHandle`, fjall's `PartitionHandle`):
/// reads and writes through it see only its keys. Cheap to clone; `Send + Sync`. The handle of
/// the default keyspace (`db.keyspace("default")`) reads and writes the database itself, so
/// code can treat every keyspace alike.
///
/// ```no_run
/// use sluice::{Db, KeyspaceOptions, Options, WriteBatch, WriteOptions};
/// let db = Db::open("/tmp/sluice-doc-ks", Options::default())?;
/// let users = db.create_keyspace("users", &KeyspaceOptions::default())?;
/// let emails = db.create_keyspace("emails", &KeyspaceOptions::default())?;
/// // One atomic write across both.
/// let mut batch = WriteBatch::new();
/// batch.put_in(&users, b"42", b"Ada");
/// batch.put_in(&emails, b"ada@example.com", b"42");
/// db.write(&WriteOptions::default(), batch)?;
/// assert_eq!(users.get(b"42")?, Some(b"Ada".to_vec()));
/// assert_eq!(db.get(b"42")?, None, "the default keyspace is another one");
/// # Ok::<(), sluice::Error>(())
/// ```
#[derive(Clone)]
pub struct Keyspace {
    id: u32,
    name: Arc<str>,
    /// The keyspace's tree as a database handle that owns no threads (the database owns
    /// them): reads and writes are the database's, on this tree.
    view: Arc<Db>,
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.name)
            .field("id", &self.id)
            .finish()
    }
}

impl Keyspace {
    fn new(db: &Db, tree: &KeyspaceTree) -> Keyspace {
        Keyspace {
            id: tree.id,
            name: Arc::from(tree.name.as_str()),
            view: Arc::new(Db::view_of(&db.journal, Arc::clone(&tree.tree))),
        }
    }

    /// The default keyspace of `db`: the database itself.
    pub(crate) fn default_of(db: &Db) -> Keyspace {
        Keyspace {
            id: crate::batch::DEFAULT_KEYSPACE_ID,
            name: Arc::from(DEFAULT_KEYSPACE),
            view: Arc::new(Db::view_of(&db.journal, Arc::clone(&db.journal.default))),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its id in the database (0 for the default keyspace; never reused, even after the
    /// keyspace is dropped).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The database open the handle belongs to.
    pub(crate) fn open_id(&self) -> &crate::db::open_id::OpenId {
        &self.view.tree.open_id
    }

    /// The tree, unless the keyspace was dropped or its database closed.
    pub(crate) fn db(&self) -> Result<&Db> {
        if self.view.tree.dropped.load(Ordering::Acquire) {
            return Err(Error::InvalidArgument(format!(
                "keyspace {:?} was dropped",
                self.name
            )));
        }
        if self.view.tree.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(&self.view)
    }

    /// As [`Db::put`], in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.db()?.put(key, value)
    }

    /// As [`Db::put_opt`], in this keyspace.
    pub fn put_opt(
        &self,
        opts: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.db()?.put_opt(opts, key, value)
    }

    /// As [`Db::delete`], in this keyspace.
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.db()?.delete(key)
    }

    /// As [`Db::delete_opt`], in this keyspace.
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        self.db()?.delete_opt(opts, key)
    }

    /// As [`Db::merge`], in this keyspace, with its merge operator.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.db()?.merge(key, operand)
    }

    /// As [`Db::merge_opt`], in this keyspace.
    pub fn merge_opt(
        &self,
        opts: &WriteOptions,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.db()?.merge_opt(opts, key, operand)
    }

    /// As [`Db::delete_range`], in this keyspace.
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.db()?.delete_range(start, end)
    }

    /// As [`Db::delete_range_opt`], in this keyspace.
    pub fn delete_range_opt(
        &self,
        opts: &WriteOptions,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.db()?.delete_range_opt(opts, start, end)
    }

    /// As [`Db::get`], in this keyspace.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.db()?.get(key)
    }

    /// As [`Db::get_opt`], in this keyspace. A snapshot from [`Db::snapshot`] (or from any
    /// keyspace) is one point in time across all keyspaces.
    pub fn get_opt(
        &self,
        opts: &ReadOptions<'_>,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<u8>>> {
        self.db()?.get_opt(opts, key)
    }

    /// As [`Db::multi_get`], in this keyspace.
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions<'_>,
        keys: impl IntoIterator<Item = K>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        match self.db() {
            Ok(db) => db.multi_get(opts, keys),
            Err(e) => keys.into_iter().map(|_| Err(e.duplicate())).collect(),
        }
    }

    /// Pins the current state of the whole database, as [`Db::snapshot`]; the snapshot's own
    /// reads go to this keyspace.
    pub fn snapshot(&self) -> Snapshot {
        let tree = &self.view.tree;
        let pin = tree
            .snapshots
            .acquire_current(&tree.visible_seq, &tree.open_id);
        Snapshot::new(pin, self.clone())
    }

    /// As [`Db::raw_iter`], in this keyspace.
    pub fn raw_iter(&self, opts: &ReadOptions<'_>) -> Result<DbIterator> {
        self.db()?.raw_iter(opts)
    }

    /// As [`Db::iter`], in this keyspace.
    pub fn iter(&self) -> Range {
        self.range(..)
    }

    /// As [`Db::range`], in this keyspace.
    pub fn range(&self, range: impl KeyBounds) -> Range {
        self.range_opt(&ReadOptions::default(), range)
    }

    /// As [`Db::range_opt`], in this keyspace.
    pub fn range_opt(&self, opts: &ReadOptions<'_>, range: impl KeyBounds) -> Range {
        match self.db() {
            Ok(db) => db.range_opt(opts, range),
            Err(e) => Range::new(Err(e)),
        }
    }

    /// As [`Db::prefix`], in this keyspace (with its prefix extractor).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Range {
        self.prefix_opt(&ReadOptions::default(), prefix)
    }

    /// As [`Db::prefix_opt`], in this keyspace.
    pub fn prefix_opt(&self, opts: &ReadOptions<'_>, prefix: impl AsRef<[u8]>) -> Range {
        match self.db() {
            Ok(db) => db.prefix_opt(opts, prefix),
            Err(e) => Range::new(Err(e)),
        }
    }

    /// As [`Db::flush`]: freezes this keyspace's memtable and waits until it is in L0.
    pub fn flush(&self) -> Result<()> {
        self.db()?.flush()
    }

    /// As [`Db::set_options`], for this keyspace's options.
    pub fn set_options(&self, changes: &[(&str, &str)]) -> Result<()> {
        self.db()?.set_options(changes)
    }

    /// As [`Db::current_options`], this keyspace's.
    pub fn current_options(&self) -> Result<std::sync::Arc<crate::Options>> {
        Ok(self.db()?.current_options())
    }

    /// As [`Db::compact_range`], in this keyspace.
    pub fn compact_range(&self, start: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db()?.compact_range(start, end)
    }

    /// As [`Db::compact_range_with`], in this keyspace.
    pub fn compact_range_with(
        &self,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        opts: &CompactOptions,
    ) -> Result<()> {
        self.db()?.compact_range_with(start, end, opts)
    }

    /// As [`Db::ingest`], into this keyspace.
    pub fn ingest(
        &self,
        files: &[impl AsRef<std::path::Path>],
        opts: &crate::IngestOptions,
    ) -> Result<crate::ingest::IngestReport> {
        self.db()?.ingest(files, opts)
    }

    /// As [`Db::metrics`], for this keyspace's tree.
    pub fn metrics(&self) -> Result<Metrics> {
        Ok(self.db()?.metrics())
    }

    /// Its range map in partitioned mode (see [`Db::range_map`]), or `None`. Each keyspace
    /// has its own: the storage balancer splits and moves each keyspace's ranges by its own
    /// figures.
    pub fn range_map(&self) -> Result<Option<Arc<crate::partition::RangeMap>>> {
        Ok(self.db()?.range_map())
    }

    /// As [`Db::partition_stats`], for this keyspace's map and tables.
    pub fn partition_stats(&self) -> Result<Option<crate::partition::stats::PartitionStats>> {
        Ok(self.db()?.partition_stats())
    }

    /// Moves range `range` of this keyspace's map to owner `to`, in this keyspace only
    /// ([`Db::move_range`] moves a range's keys in every keyspace).
    pub fn move_range(&self, range: usize, to: crate::partition::OwnerId) -> Result<()> {
        let db = self.db()?;
        db.tree.check_writable()?;
        db.tree.move_range(range, to)
    }

    /// Cuts range `range` of this keyspace's map in two at `at`, in this keyspace only
    /// ([`Db::split_range`] cuts every keyspace's map).
    pub fn split_range(&self, range: usize, at: &[u8]) -> Result<()> {
        let db = self.db()?;
        db.tree.check_writable()?;
        db.tree.split_range(range, at, true).map(|_| ())
    }

    /// The options its tree was opened with ([`Keyspace::current_options`]: with what
    /// [`Keyspace::set_options`] changed since).
    pub fn options(&self) -> &crate::Options {
        &self.view.tree.options
    }
}

impl Db {
    /// Creates keyspace `name` with `options` and returns it (RocksDB's
    /// `CreateColumnFamily`). Durable when it returns.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if it exists, the name is empty, longer than
    /// [`super::MAX_KEYSPACE_NAME_BYTES`] or `"default"`, or the options are invalid.
    pub fn create_keyspace(&self, name: &str, options: &KeyspaceOptions) -> Result<Keyspace> {
        self.journal
            .create_keyspace(name, options)
            .map(|tree| Keyspace::new(self, &tree))
    }

    /// The keyspace `name`, or `None` if the database has none of that name. `"default"` is
    /// the database itself: its handle reads and writes what calls on the `Db` do.
    pub fn keyspace(&self, name: &str) -> Option<Keyspace> {
        if name == DEFAULT_KEYSPACE {
            return Some(self.default_keyspace().clone());
        }
        let tree = self.journal.trees().into_iter().find(|t| t.name == name)?;
        Some(Keyspace::new(self, &tree))
    }

    /// The names of the keyspaces of the database in `path`, `"default"` first, read from its
    /// MANIFEST through `fs` without opening it (RocksDB's `ListColumnFamilies`): what
    /// [`crate::Options::keyspaces`] should give options for before it is opened.
    ///
    /// # Errors
    /// As reading the MANIFEST at open: [`Error::Corruption`] naming the file and offset, or
    /// an I/O error when there is no database.
    pub fn list_keyspaces(
        path: impl AsRef<std::path::Path>,
        fs: &dyn crate::fs::FileSystem,
    ) -> Result<Vec<String>> {
        let (versions, _, _) = crate::version::set::VersionSet::recover(fs, path.as_ref())?;
        let mut names = vec![DEFAULT_KEYSPACE.to_string()];
        names.extend(versions.keyspaces.into_values());
        Ok(names)
    }

    /// Each keyspace of the database in `path`, `"default"` first, with the name of the merge
    /// operator its operands were written for (`None`: none recorded), read from the
    /// MANIFESTs through `fs` without opening the database: what [`crate::Options::merge_operator`]
    /// and each [`crate::KeyspaceOptions::merge_operator`] must be ([`Db::open`] refuses
    /// another).
    ///
    /// # Errors
    /// As [`Db::list_keyspaces`].
    pub fn list_merge_operators(
        path: impl AsRef<std::path::Path>,
        fs: &dyn crate::fs::FileSystem,
    ) -> Result<Vec<(String, Option<String>)>> {
        use crate::version::set::VersionSet;
        let path = path.as_ref();
        let (versions, _, _) = VersionSet::recover(fs, path)?;
        let mut operators = vec![(DEFAULT_KEYSPACE.to_string(), versions.merge_operator)];
        for (&id, name) in &versions.keyspaces {
            let dir = crate::keyspace::options::keyspace_dir(path, id);
            let (tree, _, _) = VersionSet::recover(fs, &dir)?;
            operators.push((name.clone(), tree.merge_operator));
        }
        Ok(operators)
    }

    /// The names of the database's keyspaces, `"default"` first.
    pub fn keyspace_names(&self) -> Vec<String> {
        let mut names = vec![DEFAULT_KEYSPACE.to_string()];
        names.extend(self.journal.trees().iter().map(|t| t.name.clone()));
        names
    }

    /// Drops keyspace `name` and deletes its files (RocksDB's `DropColumnFamily`); its
    /// handles fail from then on. Durable when it returns.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if there is no such keyspace.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        self.journal.drop_keyspace(name)
    }
}
