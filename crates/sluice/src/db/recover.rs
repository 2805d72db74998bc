//! What an open reads before it may write anything: the MANIFEST's state checked against the
//! directories, and the WALs read back into memtables.
//!
//! Nothing here writes to the database, so a read-only open uses it unchanged. The checks are
//! what makes dropping a torn MANIFEST record safe: an edit whose append was cut short was
//! never acknowledged, so nothing it made obsolete has been deleted. If a table the recovered
//! state names is missing, or a WAL it tracks, later edits *were* acknowledged and acted on,
//! and open fails with [`Error::Corruption`] rather than hand back an older state.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice_sst::fs::{FileSystem, IoMode};
use sluice_sst::key::{MAX_SEQ, SeqNo};

use crate::batch::WriteBatch;
use crate::filename::{FileType, log_file_name, parse_file_name};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::set::VersionSet;
use crate::wal::{DroppedRange, LogReader};
use crate::{Error, IoContext, Result};

/// What opening the database read from its MANIFEST and WALs, and what it did not apply.
#[derive(Clone, Debug, Default)]
pub struct RecoveryReport {
    /// The MANIFEST `CURRENT` named (empty for a new database).
    pub manifest: PathBuf,
    /// Edits replayed from it.
    pub manifest_edits: usize,
    /// WAL files read.
    pub wal_files: usize,
    /// WAL records (write batches) replayed.
    pub wal_records: u64,
    /// Table and temporary files no version referenced, deleted by the open (a read-only
    /// open deletes none).
    pub orphans_deleted: usize,
    /// Regions of the MANIFEST or a WAL that were not applied: torn tails of appends never
    /// acknowledged as durable, or what `SkipAnyCorruptedRecords` skipped.
    pub dropped: Vec<DroppedRange>,
}

impl RecoveryReport {
    /// Total bytes in [`RecoveryReport::dropped`].
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped.iter().map(|d| d.bytes).sum()
    }
}

/// One WAL to replay and what is known of how far it was synced.
#[derive(Debug)]
pub(crate) struct WalFile {
    pub number: u64,
    pub path: PathBuf,
    /// Synced length the MANIFEST records (0 if untracked or still open at the crash).
    pub synced_through: u64,
    /// A newer, non-empty WAL exists: this one was synced whole before that one got records.
    pub whole_file_synced: bool,
}

/// Raises `versions.next_file_number` above every numbered file in `dirs`, so that a number
/// an unfinished job used (or a MANIFEST record that was lost named) is never handed out
/// again: reusing it would overwrite a file that may hold the only copy of some data.
pub(crate) fn raise_next_file_number(
    fs: &dyn FileSystem,
    versions: &mut VersionSet,
    dirs: &[PathBuf],
) -> Result<()> {
    for dir in dirs {
        for (_, number) in numbered_files(fs, dir)? {
            if number < MAX_SEQ {
                versions.next_file_number = versions.next_file_number.max(number + 1);
            }
        }
    }
    Ok(())
}

/// `(type, number)` of every Sluice file in `dir` (none if the directory does not exist yet),
/// listed through `fs`.
pub(crate) fn numbered_files(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<(FileType, u64)>> {
    let names = match fs.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    Ok(names
        .iter()
        .filter_map(|name| name.to_str().and_then(parse_file_name))
        .collect())
}

/// Fails unless every table of the recovered version is on disk. When one is not, says
/// whether the database's table directories were given wrongly (a data or owner directory
/// missing, or given in another order than the database was created with) or the file is gone.
pub(crate) fn check_tables_exist(
    versions: &VersionSet,
    table_cache: &TableCache,
    options: &Options,
) -> Result<()> {
    let fs = &*options.fs;
    let exists = |path: &Path| fs.exists(path).with_path(path);
    let dirs = table_cache.dirs();
    let name_of = |i: usize| match (&options.partitions, i) {
        (_, 0) => "the database directory".to_string(),
        (Some(_), i) => format!("owner {}'s directory", i - 1),
        (None, i) => format!("data directory {}", i - 1),
    };
    for f in versions.current().live_files() {
        let index = f.dir_index as usize;
        let Some(dir) = dirs.get(index) else {
            return Err(Error::InvalidArgument(format!(
                "table {} is in {}, but only {} table directories are given; pass the \
                 database's data or owner directories, in the order it was created with",
                f.number,
                name_of(index),
                dirs.len()
            )));
        };
        let path = table_cache.table_path(f.dir_index, f.number);
        if exists(&path)? {
            continue;
        }
        let mut other = None;
        for i in (0..dirs.len()).filter(|&i| i != index) {
            if exists(&table_cache.table_path(i as u32, f.number))? {
                other = Some(i);
                break;
            }
        }
        if let Some(other) = other {
            return Err(Error::InvalidArgument(format!(
                "table {} belongs in {} ({}) but is in {} ({}): the table directories are given \
                 in another order than the database was created with",
                f.number,
                name_of(index),
                dir.display(),
                name_of(other),
                dirs[other].display()
            )));
        }
        let listed = versions
            .current()
            .live_files()
            .filter(|g| g.dir_index == f.dir_index)
            .collect::<Vec<_>>();
        let mut none_there = true;
        for g in &listed {
            none_there &= !exists(&table_cache.table_path(g.dir_index, g.number))?;
        }
        let is_dir = fs.metadata(dir).is_ok_and(|m| m.is_dir);
        // A missing directory, or one with none of several tables (open creates a data
        // directory that does not exist yet): most likely the wrong directory was given.
        if index > 0 && (!is_dir || (none_there && listed.len() > 1)) {
            return Err(Error::InvalidArgument(format!(
                "{} {} holds none of the {} tables the MANIFEST lists there: is it the \
                 directory the database was created with?",
                name_of(index),
                dir.display(),
                listed.len()
            )));
        }
        return Err(Error::corruption(
            &path,
            0,
            "table file listed in the MANIFEST is missing",
        ));
    }
    // A blob file holds acknowledged values: one missing fails the open, as a table does.
    for blob in versions.current().blob_files().values() {
        let path = table_cache.blob_path(blob.meta.dir_index, blob.meta.number);
        if !exists(&path)? {
            return Err(Error::corruption(
                &path,
                0,
                "blob file listed in the MANIFEST is missing",
            ));
        }
    }
    Ok(())
}

/// The WALs to replay, oldest first: every WAL file at or above `log_number`. `tracked` is
/// what the MANIFEST knows of them (number to synced length); fails if one of those is missing.
/// The directory is listed through `fs`.
pub(crate) fn wals_to_replay(
    fs: &dyn FileSystem,
    dir: &Path,
    log_number: u64,
    tracked: &BTreeMap<u64, u64>,
) -> Result<Vec<WalFile>> {
    let mut numbers: Vec<u64> = numbered_files(fs, dir)?
        .into_iter()
        .filter(|&(kind, n)| kind == FileType::Log && n >= log_number)
        .map(|(_, n)| n)
        .collect();
    numbers.sort_unstable();
    // Numbers at or above 2^56 are not ours (sequence and file numbers share that bound).
    if let Some(&huge) = numbers.iter().find(|&&n| n >= MAX_SEQ) {
        return Err(Error::corruption(
            log_file_name(dir, huge),
            0,
            "WAL file number is out of range",
        ));
    }
    if let Some((&missing, &synced)) = tracked
        .iter()
        .find(|&(n, _)| numbers.binary_search(n).is_err())
    {
        return Err(Error::corruption(
            log_file_name(dir, missing),
            0,
            format!(
                "WAL listed in the MANIFEST (synced through {synced} bytes) is missing: its \
                 writes are lost"
            ),
        ));
    }
    let mut wals = Vec::with_capacity(numbers.len());
    let mut newer_has_records = false;
    for &number in numbers.iter().rev() {
        let path = log_file_name(dir, number);
        let len = fs.metadata(&path).with_path(&path)?.len;
        wals.push(WalFile {
            number,
            synced_through: tracked.get(&number).copied().unwrap_or(0),
            whole_file_synced: newer_has_records,
            path,
        });
        newer_has_records |= len > 0;
    }
    wals.reverse();
    Ok(wals)
}

/// Where replay puts one keyspace's entries.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ReplayTarget {
    /// The keyspace's entries in WALs numbered below this are in its tables: skipped.
    pub skip_below: u64,
    /// Its memtables are handed on at this size.
    pub write_buffer_size: usize,
}

/// Reads `wals` into memtables, oldest first, one series per keyspace of `targets` (by id).
/// Whenever a keyspace's memtable reaches its write buffer size it is handed to `full` (which
/// writes it to L0, or keeps it); the last ones are returned, with the highest sequence number
/// seen (at least `last_seq`). An entry of a keyspace not in `targets` was dropped if its id is
/// below `next_keyspace_id`, and is skipped; above, the WAL is corrupt.
pub(crate) fn replay_wals(
    wals: &[WalFile],
    options: &Options,
    mut last_seq: SeqNo,
    report: &mut RecoveryReport,
    targets: &BTreeMap<u32, ReplayTarget>,
    next_keyspace_id: u32,
    mut full: impl FnMut(u32, MemTable) -> Result<()>,
) -> Result<(BTreeMap<u32, MemTable>, SeqNo)> {
    let first_wal = wals.first().map_or(0, |w| w.number);
    let mut mems: BTreeMap<u32, MemTable> = targets
        .iter()
        .map(|(&id, t)| {
            (
                id,
                MemTable::for_write_buffer(first_wal, t.write_buffer_size),
            )
        })
        .collect();
    for wal in wals {
        let file = options
            .fs
            .open_read(&wal.path, IoMode::Buffered)
            .with_path(&wal.path)?;
        let mut reader = LogReader::wal(
            file,
            wal.path.clone(),
            options.wal_recovery_mode,
            wal.number,
        )
        .synced_through(wal.synced_through);
        if wal.whole_file_synced {
            reader = reader.whole_file_synced();
        }
        while let Some(record) = reader.read_record()? {
            let offset = reader.last_record_offset();
            let batch = WriteBatch::from_wal_record(record, &wal.path, offset)?;
            let mut seq = batch.sequence();
            for entry in batch.iter() {
                let entry = entry?;
                let this_seq = seq;
                seq += 1;
                let (Some(target), Some(mem)) =
                    (targets.get(&entry.keyspace), mems.get_mut(&entry.keyspace))
                else {
                    if entry.keyspace < next_keyspace_id {
                        continue; // a dropped keyspace's
                    }
                    return Err(Error::corruption(
                        &wal.path,
                        offset,
                        format!(
                            "write batch has an entry of keyspace id {}, which the MANIFEST \
                             never created",
                            entry.keyspace
                        ),
                    ));
                };
                if wal.number < target.skip_below {
                    continue;
                }
                mem.add(this_seq, entry.kind, entry.key, entry.value);
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            // Between batches, so a batch never straddles two memtables.
            for (id, mem) in &mut mems {
                let Some(target) = targets.get(id) else {
                    continue;
                };
                if mem.approximate_bytes() >= target.write_buffer_size {
                    let fresh = MemTable::for_write_buffer(wal.number, target.write_buffer_size);
                    full(*id, std::mem::replace(mem, fresh))?;
                }
            }
        }
        report.wal_files += 1;
        report.wal_records += reader.records();
        report.dropped.extend_from_slice(reader.dropped());
    }
    Ok((mems, last_seq))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

    use sluice_sst::key::ValueKind;

    use super::*;
    use crate::wal::LogWriter;

    /// A WAL (number 7) of one batch: a put in the default keyspace, then one in keyspace 5.
    fn wal_with_keyspace_5(dir: &Path, fs: &dyn FileSystem) -> Vec<WalFile> {
        let mut batch = WriteBatch::new();
        batch.put(b"a", b"default");
        batch.add(5, ValueKind::Value, b"b", b"five");
        batch.set_sequence(10);
        let mut wal = LogWriter::create_wal(fs, log_file_name(dir, 7), 7).unwrap();
        wal.add_record(batch.data()).unwrap();
        wal.finish().unwrap();
        wals_to_replay(fs, dir, 0, &BTreeMap::new()).unwrap()
    }

    fn replay(
        wals: &[WalFile],
        targets: &BTreeMap<u32, ReplayTarget>,
        next_keyspace_id: u32,
    ) -> Result<BTreeMap<u32, usize>> {
        let mut report = RecoveryReport::default();
        let (mems, last) = replay_wals(
            wals,
            &Options::default(),
            0,
            &mut report,
            targets,
            next_keyspace_id,
            |_, _| Ok(()),
        )?;
        assert_eq!(
            last, 11,
            "every entry takes its sequence number, skipped or not"
        );
        Ok(mems.iter().map(|(&id, m)| (id, m.len())).collect())
    }

    #[test]
    fn each_keyspace_gets_its_entries_and_a_dropped_keyspaces_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = sluice_sst::fs::OsFileSystem;
        let wals = wal_with_keyspace_5(dir.path(), &fs);
        let target = |skip_below| ReplayTarget {
            skip_below,
            write_buffer_size: 1 << 20,
        };
        let both = BTreeMap::from([(0, target(0)), (5, target(0))]);
        assert_eq!(
            replay(&wals, &both, 6).unwrap(),
            BTreeMap::from([(0, 1), (5, 1)])
        );
        // Keyspace 5 has WAL 7's entries in its tables already.
        let flushed = BTreeMap::from([(0, target(0)), (5, target(8))]);
        assert_eq!(
            replay(&wals, &flushed, 6).unwrap(),
            BTreeMap::from([(0, 1), (5, 0)])
        );
        // Keyspace 5 was dropped: its entry is skipped.
        let dropped = BTreeMap::from([(0, target(0))]);
        assert_eq!(
            replay(&wals, &dropped, 6).unwrap(),
            BTreeMap::from([(0, 1)])
        );
    }

    #[test]
    fn an_entry_of_a_keyspace_never_created_is_corruption_naming_the_wal() {
        let dir = tempfile::tempdir().unwrap();
        let fs = sluice_sst::fs::OsFileSystem;
        let wals = wal_with_keyspace_5(dir.path(), &fs);
        let only_default = BTreeMap::from([(
            0,
            ReplayTarget {
                skip_below: 0,
                write_buffer_size: 1 << 20,
            },
        )]);
        match replay(&wals, &only_default, 3) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!(file, log_file_name(dir.path(), 7));
                assert_eq!(offset, 0);
                assert!(reason.contains("keyspace id 5"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }
}
