//! The version set: the current version, the counters that survive restarts, and recovery of
//! both from the MANIFEST.
//!
//! Thread safety: a `VersionSet` lives inside the database state mutex; every method requires
//! that lock (callers hold `&mut` or `&` through the guard). The MANIFEST writer is kept apart
//! (see `db::install`) so its fsync happens with the state lock released.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use sluice_sst::key::SeqNo;

use super::Version;
use super::edit::{NUM_LEVELS, VersionEdit};
use super::manifest::read_manifest;
use crate::filename::{manifest_file_name, read_current_file};
use crate::wal::DroppedRange;
use crate::{Error, Result};
use sluice_sst::fs::FileSystem;

/// Name recorded in the MANIFEST; a database written with another ordering cannot be opened.
pub const COMPARATOR_NAME: &str = "sluice.BytewiseComparator";

/// The current version plus the persistent counters.
#[derive(Debug)]
pub struct VersionSet {
    current: Arc<Version>,
    /// Older versions still referenced by iterators or compactions; their files stay on disk.
    older: Vec<Weak<Version>>,
    /// Next number handed out for a table, log or MANIFEST file.
    pub next_file_number: u64,
    /// Highest sequence number made durable in a table or logged in a WAL.
    pub last_sequence: SeqNo,
    /// WAL files numbered below this hold only data already in tables.
    pub log_number: u64,
    /// The MANIFEST currently written.
    pub manifest_number: u64,
    /// Per level, the largest key of the last compaction, so automatic compactions rotate
    /// through the key space.
    pub compact_pointers: [Vec<u8>; NUM_LEVELS],
    /// WALs at or above `log_number` the MANIFEST knows exist, with the bytes each is known to
    /// have been synced through (0 while it is being written).
    pub wals: BTreeMap<u64, u64>,
    /// How values are stored ([`VersionEdit::value_format`]); `None`: as the user gave them.
    pub value_format: Option<String>,
    /// The merge operator the tree's operands are written for ([`VersionEdit::merge_operator`]).
    pub merge_operator: Option<String>,
    /// The default keyspace's entries in WALs below this are in tables (at least
    /// `log_number`, which is the oldest WAL any keyspace needs).
    pub default_log_number: u64,
    /// The database's other keyspaces: id to name. Only the database directory's MANIFEST
    /// has any; a keyspace's own MANIFEST records its tree.
    pub keyspaces: BTreeMap<u32, String>,
    /// The id the next keyspace gets: ids of dropped keyspaces are never reused, so a WAL
    /// entry of a dropped keyspace cannot land in a new one.
    pub next_keyspace_id: u32,
    /// Per keyspace, the highest WAL boundary its own MANIFEST had made durable when this
    /// MANIFEST advanced the floor ([`VersionEdit::keyspace_log_numbers`]).
    pub keyspace_log_numbers: BTreeMap<u32, u64>,
}

impl VersionSet {
    /// An empty tree, for a new database.
    pub fn new_empty() -> Self {
        VersionSet {
            current: Arc::new(Version::default()),
            older: Vec::new(),
            next_file_number: 2,
            last_sequence: 0,
            log_number: 0,
            manifest_number: 1,
            compact_pointers: Default::default(),
            wals: BTreeMap::new(),
            value_format: None,
            merge_operator: None,
            default_log_number: 0,
            keyspaces: BTreeMap::new(),
            next_keyspace_id: 1,
            keyspace_log_numbers: BTreeMap::new(),
        }
    }

    /// Rebuilds the version set from `CURRENT` and the MANIFEST it names in `dir`. Also
    /// returns how many edits were replayed and the MANIFEST's torn last record, if one was
    /// dropped: the caller must check that nothing durable depended on it.
    /// Both files are read through `fs`.
    pub fn recover(fs: &dyn FileSystem, dir: &Path) -> Result<(Self, usize, Vec<DroppedRange>)> {
        let manifest_name = read_current_file(fs, dir)?;
        let manifest_path: PathBuf = dir.join(&manifest_name);
        let contents = read_manifest(fs, &manifest_path)?;
        let set = Self::from_manifest(&contents.edits, &manifest_path)?;
        Ok((set, contents.edits.len(), contents.dropped))
    }

    /// The version set the `edits` of the MANIFEST at `manifest_path` (all of them, from its
    /// first) describe.
    pub fn from_manifest(edits: &[VersionEdit], manifest_path: &Path) -> Result<Self> {
        let mut set = VersionSet::new_empty();
        for edit in edits {
            set.replay(edit, manifest_path)?;
        }
        if !edits.iter().any(|e| e.next_file_number.is_some()) {
            return Err(Error::corruption(
                manifest_path,
                0,
                "MANIFEST records no next file number",
            ));
        }
        let max_file = set
            .current
            .live_files()
            .map(|f| f.number)
            .max()
            .unwrap_or(0);
        let name = manifest_path.file_name().and_then(|n| n.to_str());
        set.manifest_number = name.and_then(manifest_number_of).unwrap_or(0);
        let highest = max_file.max(set.manifest_number).max(set.next_file_number);
        if highest >= sluice_sst::key::MAX_SEQ {
            return Err(Error::corruption(
                manifest_path,
                0,
                format!("file number {highest} is out of range"),
            ));
        }
        set.next_file_number = set.next_file_number.max(max_file + 1);
        set.next_file_number = set.next_file_number.max(set.manifest_number + 1);
        Ok(set)
    }

    /// Applies one more edit read from the MANIFEST at `manifest_path`, as recovery does: to
    /// rebuild the set, and for a secondary instance to follow its primary's appends.
    pub fn replay(&mut self, edit: &VersionEdit, manifest_path: &Path) -> Result<()> {
        if let Some(name) = &edit.comparator
            && name != COMPARATOR_NAME
        {
            return Err(Error::InvalidArgument(format!(
                "database was written with comparator {name}, this build uses {COMPARATOR_NAME}"
            )));
        }
        let version = self.current.apply(edit).map_err(|e| match e {
            Error::Corruption { offset, reason, .. } => Error::Corruption {
                file: manifest_path.to_path_buf(),
                offset,
                reason,
            },
            other => other,
        })?;
        self.current = Arc::new(version);
        self.absorb_counters(edit);
        if edit.value_format.is_some() {
            self.value_format.clone_from(&edit.value_format);
        }
        if edit.merge_operator.is_some() {
            self.merge_operator.clone_from(&edit.merge_operator);
        }
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level] = key.clone();
        }
        Ok(())
    }

    /// Takes `other`'s current version and counters (a secondary instance's readers move to
    /// the state its follower rebuilt), keeping the replaced version's files live while
    /// something still reads it.
    pub fn adopt(&mut self, other: &VersionSet) {
        let old = std::mem::replace(&mut self.current, Arc::clone(&other.current));
        self.older.retain(|w| w.strong_count() > 0);
        if !Arc::ptr_eq(&old, &self.current) && Arc::strong_count(&old) > 1 {
            self.older.push(Arc::downgrade(&old));
        }
        self.next_file_number = other.next_file_number;
        self.last_sequence = other.last_sequence;
        self.log_number = other.log_number;
        self.manifest_number = other.manifest_number;
        self.compact_pointers.clone_from(&other.compact_pointers);
        self.wals.clone_from(&other.wals);
        self.value_format.clone_from(&other.value_format);
        self.merge_operator.clone_from(&other.merge_operator);
        self.default_log_number = other.default_log_number;
        self.keyspaces.clone_from(&other.keyspaces);
        self.next_keyspace_id = other.next_keyspace_id;
        self.keyspace_log_numbers
            .clone_from(&other.keyspace_log_numbers);
    }

    /// Takes the counters an edit records. They only move forward: numbers handed out while
    /// the edit was being written to the MANIFEST (with the state lock released) must not be
    /// handed out again.
    fn absorb_counters(&mut self, edit: &VersionEdit) {
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        if let Some(l) = edit.log_number {
            self.log_number = self.log_number.max(l);
        }
        let default_log = edit.default_log_number.or(edit.log_number);
        if let Some(l) = default_log {
            self.default_log_number = self.default_log_number.max(l);
        }
        track_wals(&mut self.wals, &edit.wals, self.log_number);
        for (id, name) in &edit.keyspaces_created {
            self.keyspaces.insert(*id, name.clone());
            self.next_keyspace_id = self.next_keyspace_id.max(id.saturating_add(1));
        }
        for &(id, n) in &edit.keyspace_log_numbers {
            let recorded = self.keyspace_log_numbers.entry(id).or_default();
            *recorded = (*recorded).max(n);
        }
        for id in &edit.keyspaces_dropped {
            self.keyspaces.remove(id);
            self.keyspace_log_numbers.remove(id);
        }
        if let Some(id) = edit.next_keyspace_id {
            self.next_keyspace_id = self.next_keyspace_id.max(id);
        }
    }

    /// The current version.
    pub fn current(&self) -> &Arc<Version> {
        &self.current
    }

    /// Reserves a new file number.
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Stamps `edit` with the counters (and, in partitioned mode, the settled forwarding
    /// entries) and computes the version it produces, without installing it. The caller writes the edit to the MANIFEST and then calls [`VersionSet::install`].
    ///
    /// With `check_invariants` (or in a debug build) the new version's invariants are checked
    /// first ([`Version::check_invariants`]).
    pub fn prepare(
        &self,
        edit: &mut VersionEdit,
        last_sequence: SeqNo,
        check_invariants: bool,
    ) -> Result<Version> {
        edit.next_file_number = Some(self.next_file_number);
        // An edit may raise the sequence number itself (an ingest gives its tables one).
        let own = edit.last_sequence.unwrap_or(0);
        edit.last_sequence = Some(last_sequence.max(self.last_sequence).max(own));
        let mut version = self.current.apply(edit)?;
        // Partitioned mode: forwarding entries follow the tables, so the edit that leaves a
        // range's data with a former owner records the entry, and the one that removes the
        // last such table ends it.
        if let Some(settled) = super::range_checks::settle_forwarding(&version) {
            tracing::info!(range_map = %settled, "forwarding entries changed");
            edit.range_map = Some(settled);
            version = self.current.apply(edit)?;
        }
        if (check_invariants || cfg!(debug_assertions))
            && let Err(violation) = version.check_invariants()
        {
            return Err(Error::corruption(
                manifest_file_name(Path::new(""), self.manifest_number),
                0,
                format!("edit would break a version invariant: {violation}"),
            ));
        }
        Ok(version)
    }

    /// Makes `version` (computed from `edit` by [`VersionSet::prepare`]) current.
    pub fn install(&mut self, version: Version, edit: &VersionEdit) {
        self.absorb_counters(edit);
        for (level, key) in &edit.compact_pointers {
            self.compact_pointers[*level] = key.clone();
        }
        let old = std::mem::replace(&mut self.current, Arc::new(version));
        self.older.retain(|w| w.strong_count() > 0);
        if Arc::strong_count(&old) > 1 {
            self.older.push(Arc::downgrade(&old));
        }
    }

    /// An edit describing the whole current state, written first into a new MANIFEST.
    pub fn snapshot_edit(&self) -> VersionEdit {
        self.snapshot_edit_for(&self.current, &VersionEdit::default())
    }

    /// An edit describing `version` in full, with counters taken from `edit` where it sets
    /// them (it is the edit that produced `version`) and from this set otherwise.
    pub fn snapshot_edit_for(&self, version: &Version, edit: &VersionEdit) -> VersionEdit {
        let mut snapshot = VersionEdit {
            comparator: Some(COMPARATOR_NAME.to_string()),
            value_format: self.value_format.clone(),
            merge_operator: self.merge_operator.clone(),
            range_tombstones: version.range_tombstones().to_vec(),
            log_number: Some(edit.log_number.unwrap_or(self.log_number)),
            next_file_number: Some(edit.next_file_number.unwrap_or(self.next_file_number)),
            last_sequence: Some(edit.last_sequence.unwrap_or(self.last_sequence)),
            keyspaces_created: self.keyspaces_after(edit).into_iter().collect(),
            ..VersionEdit::default()
        };
        // Written only where they say something, so a database that never had a keyspace
        // keeps a MANIFEST older builds read.
        let default_log = edit
            .default_log_number
            .or(edit.log_number)
            .unwrap_or(0)
            .max(self.default_log_number);
        if Some(default_log) != snapshot.log_number {
            snapshot.default_log_number = Some(default_log);
        }
        let mut recorded = self.keyspace_log_numbers.clone();
        for &(id, n) in &edit.keyspace_log_numbers {
            let r = recorded.entry(id).or_default();
            *r = (*r).max(n);
        }
        snapshot.keyspace_log_numbers = recorded
            .into_iter()
            .filter(|(id, _)| snapshot.keyspaces_created.iter().any(|(k, _)| k == id))
            .collect();
        let next_keyspace_id = edit
            .next_keyspace_id
            .unwrap_or(0)
            .max(self.next_keyspace_id);
        if next_keyspace_id > 1 {
            snapshot.next_keyspace_id = Some(next_keyspace_id);
        }
        let mut pointers = self.compact_pointers.clone();
        for (level, key) in &edit.compact_pointers {
            pointers[*level] = key.clone();
        }
        for (level, key) in pointers.into_iter().enumerate() {
            if !key.is_empty() {
                snapshot.compact_pointers.push((level, key));
            }
        }
        for level in 0..NUM_LEVELS {
            for f in version.files(level) {
                snapshot.new_files.push((level, (**f).clone()));
            }
        }
        snapshot.new_blob_files = version
            .blob_files()
            .values()
            .map(|b| (*b.meta).clone())
            .collect();
        snapshot.range_map = version.range_map().map(|m| (**m).clone());
        let mut wals = self.wals.clone();
        track_wals(
            &mut wals,
            &edit.wals,
            snapshot.log_number.unwrap_or_default(),
        );
        snapshot.wals = wals.into_iter().collect();
        snapshot
    }

    /// The keyspaces once `edit` is applied.
    fn keyspaces_after(&self, edit: &VersionEdit) -> BTreeMap<u32, String> {
        let mut keyspaces = self.keyspaces.clone();
        keyspaces.extend(edit.keyspaces_created.iter().cloned());
        for id in &edit.keyspaces_dropped {
            keyspaces.remove(id);
        }
        keyspaces
    }

    /// Numbers of every table and blob file of the current or any still-referenced older
    /// version (one number space holds both).
    pub fn live_file_numbers(&mut self) -> std::collections::BTreeSet<u64> {
        self.older.retain(|w| w.strong_count() > 0);
        let mut live = std::collections::BTreeSet::new();
        let current = Arc::clone(&self.current);
        for v in std::iter::once(current).chain(self.older.iter().filter_map(Weak::upgrade)) {
            live.extend(v.live_files().map(|f| f.number));
            live.extend(v.blob_files().keys());
        }
        live
    }
}

/// Adds an edit's WAL records to `wals` (a length only grows) and forgets WALs below
/// `log_number`, whose data is in tables.
fn track_wals(wals: &mut BTreeMap<u64, u64>, recorded: &[(u64, u64)], log_number: u64) {
    for &(number, synced) in recorded {
        let known = wals.entry(number).or_default();
        *known = (*known).max(synced);
    }
    wals.retain(|&n, _| n >= log_number);
}

fn manifest_number_of(name: &str) -> Option<u64> {
    name.strip_prefix("MANIFEST-")?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::edit::FileMetaData;

    fn file(number: u64) -> FileMetaData {
        crate::version::testing::table(number, "a", "b", 10, 1)
    }

    #[test]
    fn prepare_then_install_advances_counters_and_keeps_old_versions_live() {
        let mut set = VersionSet::new_empty();
        let n = set.new_file_number();
        let mut edit = VersionEdit::default();
        edit.new_files.push((0, file(n)));
        let v = set.prepare(&mut edit, 7, true).unwrap();
        let pinned = Arc::clone(set.current());
        set.install(v, &edit);
        assert_eq!(set.last_sequence, 7);
        assert_eq!(set.current().num_files(0), 1);
        let mut del = VersionEdit::default();
        del.deleted_files.insert((0, n));
        let v = set.prepare(&mut del, 7, true).unwrap();
        let with_file = Arc::clone(set.current());
        set.install(v, &del);
        assert!(
            set.live_file_numbers().contains(&n),
            "old version still pins the file"
        );
        drop(with_file);
        drop(pinned);
        assert!(!set.live_file_numbers().contains(&n));
    }

    #[test]
    fn snapshot_edit_rebuilds_the_same_version() {
        let mut set = VersionSet::new_empty();
        let mut edit = VersionEdit::default();
        edit.new_files.push((2, file(5)));
        let v = set.prepare(&mut edit, 3, true).unwrap();
        set.install(v, &edit);
        let snap = set.snapshot_edit();
        let rebuilt = Version::default().apply(&snap).unwrap();
        assert_eq!(rebuilt.files(2)[0].number, 5);
        assert_eq!(snap.last_sequence, Some(3));
    }

    #[test]
    fn wals_are_tracked_until_the_log_number_passes_them() {
        let mut set = VersionSet::new_empty();
        let apply = |set: &mut VersionSet, mut edit: VersionEdit| {
            let v = set.prepare(&mut edit, 1, true).unwrap();
            set.install(v, &edit);
        };
        apply(
            &mut set,
            VersionEdit {
                log_number: Some(3),
                wals: vec![(3, 0)],
                ..VersionEdit::default()
            },
        );
        // A switch: WAL 3 closed at 900 bytes, WAL 7 created. A stale, smaller length
        // never shrinks what is known.
        apply(
            &mut set,
            VersionEdit {
                wals: vec![(3, 900), (7, 0), (3, 10)],
                ..VersionEdit::default()
            },
        );
        assert_eq!(set.wals, BTreeMap::from([(3, 900), (7, 0)]));
        assert_eq!(set.snapshot_edit().wals, vec![(3, 900), (7, 0)]);
        // The flush of WAL 3's memtable: its data is in a table now.
        apply(
            &mut set,
            VersionEdit {
                log_number: Some(7),
                ..VersionEdit::default()
            },
        );
        assert_eq!(set.wals, BTreeMap::from([(7, 0)]));
        let rebuilt = set.snapshot_edit();
        assert_eq!((rebuilt.log_number, rebuilt.wals), (Some(7), vec![(7, 0)]));
    }
}
