//! One round of a catch-up (see the module docs of [`super`]): the MANIFESTs, the files they
//! list, the WALs, and the MANIFESTs again.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sluice_sst::fs::IoMode;

use super::tree::FollowedTree;
use super::{FollowState, Manifests, Round};
use crate::batch::{DEFAULT_KEYSPACE_ID, WriteBatch};
use crate::filename::{FileType, log_file_name};
use crate::keyspace::options::keyspace_dir;
use crate::table_cache::TableCache;
use crate::wal::{LogReader, WalRecoveryMode};
use crate::{Error, Result};

impl FollowState {
    /// One round.
    pub(super) fn round(&mut self, dir: &Path) -> Result<Round> {
        if let Manifests::Again(why) = self.follow_manifests(dir)? {
            return Ok(Round::Again(why));
        }
        let trees = std::iter::once(&self.default).chain(self.keyspaces.values());
        let mut missing = None;
        for followed in trees {
            match followed.table_cache.hold(followed.versions.current()) {
                Ok(()) => {}
                Err(e) => {
                    let e = Error::from(e);
                    if !is_not_found(&e) {
                        return Err(e);
                    }
                    missing = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = missing {
            // Deleted by an edit not read yet, or lost: the MANIFEST tells which.
            return match self.follow_manifests(dir)? {
                Manifests::Again(why) => Ok(Round::Again(why)),
                Manifests::Grew => Ok(Round::Again(e.to_string())),
                Manifests::Unchanged => Err(missing_file(e)),
            };
        }
        if let Some(why) = self.read_wals(dir)? {
            return Ok(Round::Again(why));
        }
        Ok(match self.follow_manifests(dir)? {
            Manifests::Unchanged => Round::Settled,
            Manifests::Grew => Round::Again("the MANIFEST grew while the WALs were read".into()),
            Manifests::Again(why) => Round::Again(why),
        })
    }

    /// Follows the database's MANIFEST, then those of the keyspaces it names: new keyspaces
    /// are followed from their first edit, dropped ones forgotten.
    fn follow_manifests(&mut self, dir: &Path) -> Result<Manifests> {
        let mut grew = match again_if_deleted(self.default.follow_manifest())? {
            Ok(grew) => grew,
            Err(why) => return Ok(Manifests::Again(why)),
        };
        let named = self.default.versions.keyspaces.clone();
        let followed = self.keyspaces.len();
        self.keyspaces.retain(|id, _| named.contains_key(id));
        grew |= self.keyspaces.len() != followed;
        for (&id, name) in &named {
            if !self.keyspaces.contains_key(&id) {
                let tree = self.new_keyspace(dir, id, name)?;
                self.keyspaces.insert(id, tree);
                grew = true;
            }
        }
        for tree in self.keyspaces.values_mut() {
            match again_if_deleted(tree.follow_manifest())? {
                Ok(g) => grew |= g,
                Err(why) => return Ok(Manifests::Again(why)),
            }
        }
        Ok(if grew {
            Manifests::Grew
        } else {
            Manifests::Unchanged
        })
    }

    /// A keyspace to follow, with the options [`crate::Options::keyspaces`] gives its name.
    fn new_keyspace(&self, dir: &Path, id: u32, name: &str) -> Result<FollowedTree> {
        let db = &self.default.options;
        let keyspace = db.keyspaces.get(name).cloned().unwrap_or_default();
        let options = keyspace.tree_options(db, id);
        options.validate().map_err(|e| {
            Error::InvalidArgument(format!("the options of keyspace {name:?}: {e}"))
        })?;
        let tree_dir = keyspace_dir(dir, id);
        let table_cache = TableCache::new(
            options.table_dirs(&tree_dir),
            &options,
            self.block_cache.clone(),
        );
        Ok(FollowedTree::new(
            name,
            tree_dir,
            options,
            Arc::new(table_cache.holding_files()),
        ))
    }

    /// Reads every WAL still needed from where it was left; `Some(why)` if the primary
    /// deleted one first, or wrote to a keyspace the MANIFEST did not name yet.
    fn read_wals(&mut self, dir: &Path) -> Result<Option<String>> {
        let floors = self.wal_floors();
        let from = floors.values().copied().min().unwrap_or(0);
        let mut listed: Vec<u64> = super::numbered_files(&*self.default.options.fs, dir)?
            .into_iter()
            .filter(|&(kind, n)| kind == FileType::Log && n >= from)
            .map(|(_, n)| n)
            .collect();
        listed.sort_unstable();
        if let Some(gone) = self
            .wals
            .range(from..)
            .map(|(&n, _)| n)
            .find(|n| listed.binary_search(n).is_err())
        {
            return Ok(Some(format!(
                "WAL #{gone:06} was deleted before it was read whole"
            )));
        }
        self.wals.retain(|&n, _| n >= from);
        for &number in &listed {
            let newest = Some(&number) == listed.last();
            match self.read_wal(dir, number, newest, &floors) {
                Ok(None) => {}
                Ok(Some(why)) => return Ok(Some(why)),
                Err(e @ Error::Corruption { .. }) => {
                    // The newest WAL may be mid-write; an older one may have been left torn by
                    // a crash of the primary, which a newer MANIFEST then says it replayed.
                    return match self.follow_manifests(dir)? {
                        Manifests::Unchanged if !newest => Err(e),
                        _ => Ok(Some(e.to_string())),
                    };
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Per tree, the WAL its entries are read from: those in older WALs are in its tables.
    /// That is its MANIFEST's boundary, or the database's floor if that is higher: the primary
    /// deletes the WALs below the floor, which no tree needs (a keyspace whose memtable is
    /// empty keeps an older boundary).
    pub(super) fn wal_floors(&self) -> BTreeMap<u32, u64> {
        let db = &self.default.versions;
        let floor = db.log_number;
        let own = db.default_log_number.max(floor);
        let mut floors = BTreeMap::from([(DEFAULT_KEYSPACE_ID, own)]);
        for (&id, tree) in &self.keyspaces {
            floors.insert(id, tree.versions.log_number.max(floor));
        }
        floors
    }

    /// Reads WAL `number` from where it was left into each tree's memtables. The `newest` is
    /// still being written: it is followed, stopping at whatever is not whole yet. An older
    /// one is complete, and is judged as recovery judges it (the recovery mode, and the length
    /// the MANIFEST says was synced).
    fn read_wal(
        &mut self,
        dir: &Path,
        number: u64,
        newest: bool,
        floors: &BTreeMap<u32, u64>,
    ) -> Result<Option<String>> {
        let path = log_file_name(dir, number);
        let file = match self.default.options.fs.open_read(&path, IoMode::Buffered) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Some(format!(
                    "WAL #{number:06} was deleted before it was read"
                )));
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        let at = self.wals.get(&number).copied().unwrap_or(0);
        let reader = match newest {
            true => LogReader::wal(
                file,
                path.clone(),
                WalRecoveryMode::TolerateCorruptedTailRecords,
                number,
            )
            .following(),
            false => {
                let mode = self.default.options.wal_recovery_mode;
                let synced = self.default.versions.wals.get(&number).copied();
                LogReader::wal(file, path.clone(), mode, number).synced_through(synced.unwrap_or(0))
            }
        };
        let mut reader = reader.resume_at(at)?;
        self.wals.insert(number, at);
        let next_keyspace_id = self.default.versions.next_keyspace_id;
        while let Some(record) = reader.read_record()? {
            let offset = reader.last_record_offset();
            let batch = WriteBatch::from_wal_record(record, &path, offset)?;
            for entry in batch.iter() {
                let id = entry?.keyspace;
                if floors.contains_key(&id) || id < next_keyspace_id {
                    continue; // a keyspace followed, or one dropped
                }
                // Created since the MANIFEST was read, or never: read it again to know.
                return match self.follow_manifests(dir)? {
                    Manifests::Unchanged => Err(Error::corruption(
                        &path,
                        offset,
                        format!(
                            "write batch has an entry of keyspace id {id}, which the \
                             primary's MANIFEST never created"
                        ),
                    )),
                    _ => Ok(Some(format!(
                        "WAL #{number:06} writes keyspace id {id}, created after the MANIFEST \
                         was read"
                    ))),
                };
            }
            // A batch never straddles two memtables, as in recovery.
            self.default.start_batch(number);
            for tree in self.keyspaces.values_mut() {
                tree.start_batch(number);
            }
            let mut seq = batch.sequence();
            for entry in batch.iter() {
                let entry = entry?;
                let tree = match entry.keyspace {
                    DEFAULT_KEYSPACE_ID => Some(&mut self.default),
                    id => self.keyspaces.get_mut(&id),
                };
                let floor = floors.get(&entry.keyspace).copied().unwrap_or(u64::MAX);
                if let Some(tree) = tree.filter(|_| number >= floor) {
                    tree.memtable_for(number)
                        .add(seq, entry.kind, entry.key, entry.value);
                }
                seq += 1;
            }
            self.wal_seq = self.wal_seq.max(seq.saturating_sub(1));
            self.wals.insert(number, reader.valid_len());
        }
        Ok(None)
    }
}

/// `Ok(Err(why))` for an error that says the primary deleted a file being read.
fn again_if_deleted<T>(result: Result<T>) -> Result<std::result::Result<T, String>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(e) if is_not_found(&e) => Ok(Err(e.to_string())),
        Err(e) => Err(e),
    }
}

/// An open that failed because the file is not there.
fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// A file the latest MANIFEST lists is not there: lost, not yet to be caught up with.
fn missing_file(e: Error) -> Error {
    match e {
        Error::Io { path, source } => Error::corruption(
            &path,
            0,
            format!("the primary's latest MANIFEST lists this file, but it is missing ({source})"),
        ),
        other => other,
    }
}
