//! A version: the immutable set of live table files, level by level.
//!
//! Invariants (checked by [`Version::check_invariants`] after every edit in debug builds):
//! - L0 files are ordered newest first (by largest sequence number, then file number); they
//!   may overlap each other.
//! - In L1..L6 files are ordered by smallest key and no two files of one level overlap.
//! - Every blob file a table references is in the version, and only those
//!   ([`super::blob_files`]).
//!
//! Versions are shared through `Arc` by readers and compactions, so a file stays readable as
//! long as any version that lists it is alive.

use std::collections::BTreeSet;
use std::sync::Arc;

use sluice_sst::key::{SeqNo, compare_internal, user_key};
use sluice_sst::range_del::{RangeTombstone, Tombstones};

use super::blob_files::{BlobFileState, BlobFiles};
use super::edit::{FileMetaData, NUM_LEVELS, VersionEdit};
use super::range_map::RangeMap;
use crate::{Error, Result};

/// The live files of the tree at one point in time.
#[derive(Clone, Debug, Default)]
pub struct Version {
    files: [Vec<Arc<FileMetaData>>; NUM_LEVELS],
    /// Partitioned mode's range map; `None` when the database is not partitioned.
    range_map: Option<Arc<RangeMap>>,
    /// How many sublevels L0 forms ([`super::l0_sublevels`]), kept here because every write
    /// asks for it and L0 only changes when a version is built.
    l0_sublevels: usize,
    /// The flushed range tombstones, by sequence number, and their fragments for lookups.
    range_tombstones: Arc<Vec<RangeTombstone>>,
    tombstones: Arc<Tombstones>,
    /// The blob files the tables reference, and how much of each they reference.
    blob_files: Arc<BlobFiles>,
}

/// Smallest user key of a file.
pub fn smallest_user_key(f: &FileMetaData) -> &[u8] {
    user_key(&f.smallest)
}

/// Largest user key of a file.
pub fn largest_user_key(f: &FileMetaData) -> &[u8] {
    user_key(&f.largest)
}

/// True when `f` holds keys in the user-key range `[lo, hi]` (`None` = unbounded).
pub fn file_overlaps(f: &FileMetaData, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
    let before = hi.is_some_and(|hi| smallest_user_key(f) > hi);
    let after = lo.is_some_and(|lo| largest_user_key(f) < lo);
    !before && !after
}

impl Version {
    /// The files of `level`, in the level's order.
    pub fn files(&self, level: usize) -> &[Arc<FileMetaData>] {
        &self.files[level]
    }

    /// The flushed range tombstones, by sequence number.
    pub fn range_tombstones(&self) -> &[RangeTombstone] {
        &self.range_tombstones
    }

    /// The flushed range tombstones, fragmented; `None` when there are none.
    pub fn tombstones(&self) -> Option<&Arc<Tombstones>> {
        (!self.tombstones.is_empty()).then_some(&self.tombstones)
    }

    /// The sequence numbers of the range tombstones nothing needs any more: no snapshot is
    /// older than the tombstone (`oldest_snapshot`), and every file holding keys of its range
    /// had what it covers dropped ([`FileMetaData::range_clean_seq`]). Memtables hold nothing
    /// older: a tombstone is in the version once its memtable, and every older one, flushed.
    pub fn unneeded_tombstones(&self, oldest_snapshot: Option<SeqNo>) -> Vec<SeqNo> {
        self.range_tombstones
            .iter()
            .filter(|t| oldest_snapshot.is_none_or(|s| s >= t.seq))
            .filter(|t| {
                self.files.iter().flatten().all(|f| {
                    let outside = smallest_user_key(f) >= t.end.as_slice()
                        || largest_user_key(f) < t.start.as_slice();
                    outside || f.range_clean_seq >= t.seq
                })
            })
            .map(|t| t.seq)
            .collect()
    }

    /// The newest flushed sequence number this version knows of: its files' newest entry or
    /// its newest range tombstone. Every range tombstone at or below it is in this version,
    /// as one not yet flushed is newer than all flushed data.
    pub fn flushed_seq(&self) -> SeqNo {
        let files = self.live_files().map(|f| f.largest_seq);
        let tombstones = self.range_tombstones.iter().map(|t| t.seq);
        files.chain(tombstones).max().unwrap_or(0)
    }

    /// The blob files live tables reference, by number.
    pub fn blob_files(&self) -> &BlobFiles {
        &self.blob_files
    }

    /// Blob file `number`, if the version holds it.
    pub fn blob_file(&self, number: u64) -> Option<&BlobFileState> {
        self.blob_files.get(&number)
    }

    /// Partitioned mode's range map, if the database is partitioned.
    pub fn range_map(&self) -> Option<&Arc<RangeMap>> {
        self.range_map.as_ref()
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files[level].len()
    }

    /// L0 files per range of the range map (ranges never share a file), in map order; `None`
    /// when the database is not partitioned.
    pub fn l0_files_per_range(&self) -> Option<Vec<usize>> {
        let map = self.range_map.as_ref()?;
        let mut counts = vec![0; map.len()];
        for f in &self.files[0] {
            if let Some(c) = counts.get_mut(map.index_of(smallest_user_key(f))) {
                *c += 1;
            }
        }
        Some(counts)
    }

    /// How deep L0 is, for the compaction score and the write stalls: the number of L0
    /// sublevels, which bounds the L0 files one key's read visits; in partitioned mode the
    /// most L0 files any one range holds. Not the file count: a flush cut into pieces (one per
    /// range, or at the base level's boundaries) adds several files but one layer, and must
    /// not make L0 look as many times deeper.
    pub fn l0_depth(&self) -> usize {
        match self.l0_files_per_range() {
            Some(counts) => counts.into_iter().max().unwrap_or(0),
            None => self.l0_sublevels,
        }
    }

    /// Total bytes of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files[level].iter().map(|f| f.file_size).sum()
    }

    /// Every live file number.
    pub fn live_files(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.files.iter().flatten()
    }

    /// The deepest level holding any file, if the tree is not empty.
    pub fn deepest_nonempty_level(&self) -> Option<usize> {
        (0..NUM_LEVELS).rev().find(|&l| !self.files[l].is_empty())
    }

    /// Files of `level` overlapping the user-key range `[lo, hi]`. For L0 the range grows to
    /// cover every file it touches, transitively (L0 files overlap each other, and a
    /// compaction must take all versions of a key or none).
    pub fn overlapping_files(
        &self,
        level: usize,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Arc<FileMetaData>> {
        let mut lo = lo.map(<[u8]>::to_vec);
        let mut hi = hi.map(<[u8]>::to_vec);
        if level > 0 {
            return self.files[level]
                .iter()
                .filter(|f| file_overlaps(f, lo.as_deref(), hi.as_deref()))
                .cloned()
                .collect();
        }
        loop {
            let picked: Vec<_> = self.files[0]
                .iter()
                .filter(|f| file_overlaps(f, lo.as_deref(), hi.as_deref()))
                .cloned()
                .collect();
            let mut grew = false;
            for f in &picked {
                if lo.as_deref().is_some_and(|l| smallest_user_key(f) < l) {
                    lo = Some(smallest_user_key(f).to_vec());
                    grew = true;
                }
                if hi.as_deref().is_some_and(|h| largest_user_key(f) > h) {
                    hi = Some(largest_user_key(f).to_vec());
                    grew = true;
                }
            }
            if !grew {
                return picked;
            }
        }
    }

    /// The index of the first file of `level` (L1+) whose largest user key is `>= key`.
    pub fn find_file(&self, level: usize, key: &[u8]) -> usize {
        self.files[level].partition_point(|f| largest_user_key(f) < key)
    }

    /// The files a point lookup of `key` must consult, newest data first: every L0 file whose
    /// range holds the key, then at most one file per deeper level.
    pub fn files_for_get<'a>(
        &'a self,
        key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMetaData>> {
        let l0 = self.files[0]
            .iter()
            .filter(move |f| smallest_user_key(f) <= key && key <= largest_user_key(f));
        let deeper = (1..NUM_LEVELS).filter_map(move |level| {
            let files = &self.files[level];
            files
                .get(self.find_file(level, key))
                .filter(|f| smallest_user_key(f) <= key)
        });
        l0.chain(deeper)
    }

    /// The version that results from applying `edit` to this one.
    ///
    /// Fails with `Corruption` if the edit deletes a file that is not live or adds one twice,
    /// which would mean the MANIFEST is damaged.
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version> {
        let mut next = self.clone();
        if let Some(map) = &edit.range_map {
            next.range_map = Some(Arc::new(map.clone()));
        }
        let mut removed = Vec::new();
        for &(level, number) in &edit.deleted_files {
            let files = &mut next.files[level];
            let before = files.len();
            files.retain(|f| match f.number == number {
                true => {
                    removed.push(Arc::clone(f));
                    false
                }
                false => true,
            });
            if files.len() == before {
                return Err(Error::corruption(
                    "MANIFEST",
                    0,
                    format!("version edit deletes file {number} which is not live in L{level}"),
                ));
            }
        }
        let live: BTreeSet<u64> = next.live_files().map(|f| f.number).collect();
        for (level, file) in &edit.new_files {
            if live.contains(&file.number) {
                return Err(Error::corruption(
                    "MANIFEST",
                    0,
                    format!("version edit adds file {} twice", file.number),
                ));
            }
            next.files[*level].push(Arc::new(file.clone()));
        }
        let touches_blobs = !edit.new_blob_files.is_empty()
            || removed.iter().any(|f| !f.blob_refs.is_empty())
            || edit.new_files.iter().any(|(_, f)| !f.blob_refs.is_empty());
        if touches_blobs {
            let blob_files = Arc::make_mut(&mut next.blob_files);
            super::blob_files::apply(blob_files, &edit.new_blob_files, &removed, &edit.new_files)?;
        }
        next.files[0].sort_by(|a, b| {
            b.largest_seq
                .cmp(&a.largest_seq)
                .then(b.number.cmp(&a.number))
        });
        for level in 1..NUM_LEVELS {
            next.files[level].sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
        }
        next.l0_sublevels = super::l0_sublevels::l0_sublevels(&next.files[0]).len();
        if !edit.range_tombstones.is_empty() || !edit.dropped_tombstones.is_empty() {
            // Added first, then dropped: one edit may do both (a flush whose tombstone has
            // nothing under it).
            let mut list: Vec<RangeTombstone> = next.range_tombstones.to_vec();
            for t in &edit.range_tombstones {
                if !list.iter().any(|have| have.seq == t.seq) {
                    list.push(t.clone());
                }
            }
            list.retain(|t| !edit.dropped_tombstones.contains(&t.seq));
            list.sort_by_key(|t| t.seq);
            next.tombstones = Arc::new(Tombstones::new(&list));
            next.range_tombstones = Arc::new(list);
        }
        Ok(next)
    }

    /// Checks the ordering invariants; returns a description of the first violation.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        // L0 is kept newest first, and of two overlapping L0 files the newer holds only newer
        // sequence numbers: reads stop at the first L0 file that has the key.
        let l0 = &self.files[0];
        for (i, newer) in l0.iter().enumerate() {
            for older in &l0[i + 1..] {
                if newer.largest_seq < older.largest_seq {
                    return Err(format!(
                        "L0: file {} is listed before older file {}",
                        newer.number, older.number
                    ));
                }
                let overlap = user_ranges_overlap(newer, older);
                if overlap && newer.smallest_seq <= older.largest_seq {
                    return Err(format!(
                        "L0: overlapping files {} and {} share sequence numbers",
                        newer.number, older.number
                    ));
                }
            }
        }
        for level in 1..NUM_LEVELS {
            for pair in self.files[level].windows(2) {
                if compare_internal(&pair[0].largest, &pair[1].smallest).is_ge() {
                    return Err(format!(
                        "L{level}: files {} and {} overlap",
                        pair[0].number, pair[1].number
                    ));
                }
            }
        }
        for f in self.live_files() {
            if compare_internal(&f.smallest, &f.largest).is_gt() {
                return Err(format!("file {}: smallest key above largest", f.number));
            }
        }
        if let Some(map) = &self.range_map {
            let files = (0..NUM_LEVELS).flat_map(|l| self.files[l].iter().map(move |f| (l, &**f)));
            super::range_checks::check_tables(map, files)?;
        }
        Ok(())
    }
}

/// True if the user-key ranges of `a` and `b` overlap.
pub fn user_ranges_overlap(a: &FileMetaData, b: &FileMetaData) -> bool {
    smallest_user_key(a) <= largest_user_key(b) && smallest_user_key(b) <= largest_user_key(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(number: u64, lo: &str, hi: &str, seq: u64) -> FileMetaData {
        crate::version::testing::table(number, lo, hi, 100, seq)
    }

    fn version_with(files: Vec<(usize, FileMetaData)>) -> Version {
        let mut edit = VersionEdit::default();
        for (level, f) in files {
            edit.new_files.push((level, f));
        }
        Version::default().apply(&edit).unwrap()
    }

    #[test]
    fn l0_overlap_expands_transitively() {
        let v = version_with(vec![
            (0, meta(1, "a", "c", 1)),
            (0, meta(2, "b", "f", 2)),
            (0, meta(3, "e", "g", 3)),
            (0, meta(4, "x", "z", 4)),
        ]);
        let picked = v.overlapping_files(0, Some(b"a"), Some(b"a"));
        let mut numbers: Vec<u64> = picked.iter().map(|f| f.number).collect();
        numbers.sort();
        assert_eq!(numbers, vec![1, 2, 3]);
    }

    #[test]
    fn get_visits_l0_newest_first_then_one_file_per_level() {
        let v = version_with(vec![
            (0, meta(1, "a", "m", 5)),
            (0, meta(2, "a", "z", 9)),
            (1, meta(3, "a", "f", 1)),
            (1, meta(4, "g", "p", 1)),
            (2, meta(5, "q", "z", 1)),
        ]);
        let order: Vec<u64> = v.files_for_get(b"h").map(|f| f.number).collect();
        assert_eq!(order, vec![2, 1, 4]);
        let order: Vec<u64> = v.files_for_get(b"r").map(|f| f.number).collect();
        assert_eq!(order, vec![2, 5]);
    }

    #[test]
    fn overlap_in_l1_is_reported_and_bad_deletes_are_corruption() {
        let v = version_with(vec![(1, meta(1, "a", "m", 1)), (1, meta(2, "k", "z", 1))]);
        assert!(v.check_invariants().unwrap_err().contains("overlap"));
        let mut edit = VersionEdit::default();
        edit.deleted_files.insert((3, 99));
        assert!(v.apply(&edit).unwrap_err().is_corruption());
    }
}
