//! The MANIFEST: a log (in the WAL's block format) of [`VersionEdit`] records.
//!
//! ```text
//! MANIFEST-NNNNNN = log records (docs/format/wal.md), each one encoded VersionEdit
//!   record 0      = the full state when the manifest was created (a "snapshot" edit)
//!   record 1..    = incremental edits, in the order they were applied
//! CURRENT         = "MANIFEST-NNNNNN\n", naming the live manifest
//! ```
//!
//! Replaying the records of the manifest named by `CURRENT`, in order, rebuilds the tree. A
//! new manifest is started on every open (and may be started when one grows too large), so
//! an existing manifest is never appended to after a crash: its torn tail can be dropped
//! without a following write ever landing after it. Every append is synced before it is
//! acknowledged, so only the last record can be torn, and only by being cut short: a complete
//! record that fails its checksum is damage, never a torn write. `docs/format/manifest.md` is
//! the full specification.
//!
//! Durability contract for callers: an edit is committed once [`ManifestWriter::append`]
//! returns `Ok`; only then may the files it deletes be removed. If `append` fails, the edit
//! may or may not be durable and may reappear after a restart, so the caller must neither
//! assume it applied nor delete anything it names; it must stop committing edits (the failure
//! is sticky) and reopen.

use std::path::{Path, PathBuf};

use sluice_sst::fs::{FileSystem, IoMode};
use sluice_sst::{Error, IoContext, Result};

use super::edit::VersionEdit;
use crate::filename::{
    current_file_name, manifest_file_name, read_current_file, set_current_file, sync_dir,
};
use crate::wal::{DroppedRange, LogReader, LogWriter};

/// Writes a new MANIFEST at `path` holding `snapshot` as its only record, synced, and
/// returns its writer (for appending further edits). Refuses to overwrite anything.
pub fn write_manifest_file(
    fs: &dyn FileSystem,
    path: PathBuf,
    snapshot: &VersionEdit,
) -> Result<LogWriter> {
    let mut log = LogWriter::create(fs, path)?;
    let mut record = Vec::new();
    snapshot.encode(&mut record);
    log.add_record(&record)?;
    log.sync()?;
    Ok(log)
}

/// Appends edits to the live manifest.
///
/// Not thread-safe (`&mut self`): the version set owns the writer and commits one edit at a
/// time. `append` does I/O and an `fdatasync`; callers should not hold the version-set lock
/// across it (see `LogAndApply` in LevelDB for the pattern).
#[derive(Debug)]
pub struct ManifestWriter {
    log: LogWriter,
    number: u64,
}

impl ManifestWriter {
    /// Starts `dir/MANIFEST-<manifest_number>` holding `snapshot` (the full current state) and
    /// switches `CURRENT` to it.
    ///
    /// Preconditions: `manifest_number` was allocated from `next_file_number` and `snapshot`
    /// records a `next_file_number` above it. Naming the live manifest is refused with
    /// [`Error::InvalidArgument`]; any other existing file of that name is never overwritten
    /// ([`Error::Io`], already exists): numbers are never reused, since open raises
    /// `next_file_number` above every number on disk.
    ///
    /// If this fails, `CURRENT` names either the old or the new manifest (both complete); the
    /// caller must not delete either and should treat the failure as sticky.
    ///
    /// The MANIFEST is written through `fs`, so tests can fail its writes and syncs.
    pub fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        manifest_number: u64,
        snapshot: &VersionEdit,
    ) -> Result<Self> {
        let path = manifest_file_name(dir, manifest_number);
        let current = current_file_name(dir);
        if fs.exists(&current).with_path(&current)? {
            let live = read_current_file(fs, dir)?;
            if path.file_name().is_some_and(|name| name == live.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "refusing to overwrite the live manifest {}",
                    path.display()
                )));
            }
        }
        let log = write_manifest_file(fs, path, snapshot)?;
        // If we crash here: CURRENT still names the old manifest, which is intact. The new file
        // is an orphan (possibly without a durable directory entry) that the next open deletes.
        sync_dir(fs, dir)?;
        // If we crash here: the same holds; the new manifest is now durable by name, which must
        // be true before CURRENT can point at it.
        set_current_file(fs, dir, manifest_number)?;
        // CURRENT durably names the new manifest; the old one is obsolete and may be deleted.
        Ok(ManifestWriter {
            log,
            number: manifest_number,
        })
    }

    /// Appends `edit` and syncs it. When this returns `Ok`, the edit survives any crash.
    ///
    /// On error the edit's durability is unknown (see the module documentation) and every
    /// later call fails: start a new manifest after reopening.
    pub fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        let mut record = Vec::new();
        edit.encode(&mut record);
        self.log.add_record(&record)?;
        // If we crash before the sync completes: the record may be absent, torn, or whole.
        // Absent or torn, recovery drops it as a tail that was never acknowledged; whole, it
        // is applied. Either way the tree is consistent, and nothing the edit made obsolete has
        // been deleted yet because this call has not returned.
        self.log.sync()
    }

    /// Bytes written so far (used to decide when to start a fresh manifest).
    pub fn file_size(&self) -> u64 {
        self.log.len()
    }

    /// This manifest's file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// This manifest's path.
    pub fn path(&self) -> &Path {
        self.log.path()
    }
}

/// What [`read_manifest`] found.
#[derive(Debug)]
pub struct ManifestContents {
    /// Every complete edit, in order.
    pub edits: Vec<VersionEdit>,
    /// A torn last record, if one was dropped.
    pub dropped: Vec<DroppedRange>,
    /// The offset just past the last complete edit: where a reader following the MANIFEST
    /// as it grows resumes ([`read_manifest_from`]).
    pub valid_len: u64,
}

/// Reads every edit of the manifest at `path`, in order.
///
/// A last record the file ends inside (an append that crashed before its sync, so was never
/// acknowledged) is dropped, and returned in [`ManifestContents::dropped`]; the caller must
/// still check that nothing durable depended on it (see `db::open`). Damage followed by valid
/// records, a complete record that fails its checksum, or a record whose checksum is valid
/// but which does not decode, is [`Error::Corruption`] naming the file and the record's
/// offset. A manifest with no complete record is also corruption: the first record is synced
/// before `CURRENT` can name the file. The file is read through `fs`.
pub fn read_manifest(fs: &dyn FileSystem, path: &Path) -> Result<ManifestContents> {
    let file = fs.open_read(path, IoMode::Buffered).with_path(path)?;
    let contents = read_edits(LogReader::manifest(file, PathBuf::from(path)), path)?;
    if contents.edits.is_empty() {
        return Err(Error::corruption(
            path,
            0,
            "manifest holds no complete edit",
        ));
    }
    Ok(contents)
}

/// Reads the edits of the manifest at `path` from offset `from` on: the end of an edit an
/// earlier read returned ([`ManifestContents::valid_len`]), or 0. A secondary instance follows
/// a primary's MANIFEST this way while the primary appends to it: a last record cut short is
/// an append still under way, dropped now and read whole by the next call. Damage is judged
/// as by [`read_manifest`], and none of the edits may be missing: an empty answer is a
/// MANIFEST that did not grow.
pub fn read_manifest_from(fs: &dyn FileSystem, path: &Path, from: u64) -> Result<ManifestContents> {
    let file = fs.open_read(path, IoMode::Buffered).with_path(path)?;
    let reader = LogReader::manifest(file, PathBuf::from(path))
        .following()
        .resume_at(from)?;
    read_edits(reader, path)
}

fn read_edits(mut reader: LogReader, path: &Path) -> Result<ManifestContents> {
    let mut edits = Vec::new();
    while let Some(record) = reader.read_record()? {
        edits.push(VersionEdit::decode(
            &record,
            path,
            reader.last_record_offset(),
        )?);
    }
    Ok(ManifestContents {
        edits,
        dropped: reader.dropped().to_vec(),
        valid_len: reader.valid_len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filename::log_file_name;
    use crate::version::edit::FileMetaData;
    use sluice_sst::fs::os_fs;
    use sluice_sst::key::{ValueKind, make_internal_key};

    fn snapshot(next_file: u64) -> VersionEdit {
        VersionEdit {
            comparator: Some("sluice.BytewiseComparator".into()),
            log_number: Some(3),
            next_file_number: Some(next_file),
            last_sequence: Some(0),
            ..VersionEdit::default()
        }
    }

    fn flush_edit(number: u64) -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(number),
            last_sequence: Some(number * 10),
            ..VersionEdit::default()
        };
        e.add_file(
            0,
            FileMetaData {
                number,
                file_size: 1000,
                smallest: make_internal_key(b"a", number * 10 - 5, ValueKind::Value),
                largest: make_internal_key(b"z", number * 10, ValueKind::Value),
                smallest_seq: number * 10 - 5,
                largest_seq: number * 10,
                ..FileMetaData::default()
            },
        );
        e
    }

    /// A manifest with a snapshot and three edits; returns it and each record's offset.
    fn write_manifest(dir: &Path) -> (ManifestWriter, Vec<VersionEdit>, Vec<u64>) {
        let mut w = ManifestWriter::create(&*os_fs(), dir, 2, &snapshot(10)).unwrap();
        let mut edits = vec![snapshot(10)];
        let mut offsets = vec![0];
        for n in 4..7 {
            offsets.push(w.file_size());
            w.append(&flush_edit(n)).unwrap();
            edits.push(flush_edit(n));
        }
        (w, edits, offsets)
    }

    #[test]
    fn create_append_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let (w, edits, _) = write_manifest(dir.path());
        assert_eq!(
            read_current_file(&*os_fs(), dir.path()).unwrap(),
            "MANIFEST-000002"
        );
        assert_eq!(w.number(), 2);
        assert_eq!(std::fs::metadata(w.path()).unwrap().len(), w.file_size());
        assert_eq!(read_manifest(&*os_fs(), w.path()).unwrap().edits, edits);
    }

    #[test]
    fn switching_manifests_moves_current() {
        let dir = tempfile::tempdir().unwrap();
        let (old, edits, _) = write_manifest(dir.path());
        let new = ManifestWriter::create(&*os_fs(), dir.path(), 11, &snapshot(12)).unwrap();
        assert_eq!(
            read_current_file(&*os_fs(), dir.path()).unwrap(),
            "MANIFEST-000011"
        );
        assert_eq!(
            read_manifest(&*os_fs(), new.path()).unwrap().edits,
            vec![snapshot(12)]
        );
        assert_eq!(
            read_manifest(&*os_fs(), old.path()).unwrap().edits,
            edits,
            "the old manifest is untouched"
        );
    }

    #[test]
    fn an_existing_manifest_is_never_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let (w, edits, _) = write_manifest(dir.path());
        let err = ManifestWriter::create(&*os_fs(), dir.path(), 2, &snapshot(99)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert_eq!(read_manifest(&*os_fs(), w.path()).unwrap().edits, edits);

        let orphan = manifest_file_name(dir.path(), 7);
        std::fs::write(&orphan, b"half-written garbage").unwrap();
        let err = ManifestWriter::create(&*os_fs(), dir.path(), 7, &snapshot(8)).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{err}"
        );
        assert_eq!(std::fs::read(&orphan).unwrap(), b"half-written garbage");
        assert_eq!(
            read_current_file(&*os_fs(), dir.path()).unwrap(),
            "MANIFEST-000002"
        );
    }

    #[test]
    fn cut_short_last_edit_is_dropped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let (w, edits, offsets) = write_manifest(dir.path());
        let bytes = std::fs::read(w.path()).unwrap();
        let last = *offsets.last().unwrap();
        for cut in last + 1..w.file_size() {
            std::fs::write(w.path(), &bytes[..cut as usize]).unwrap();
            let contents = read_manifest(&*os_fs(), w.path()).unwrap();
            assert_eq!(contents.edits, edits[..edits.len() - 1], "cut at {cut}");
            assert_eq!(contents.dropped.len(), 1, "cut at {cut}");
            assert_eq!(
                (contents.dropped[0].offset, contents.dropped[0].bytes),
                (last, cut - last)
            );
        }
    }

    #[test]
    fn never_written_zero_tail_is_dropped() {
        // The file grew but no byte of the last record reached the disk.
        let dir = tempfile::tempdir().unwrap();
        let (w, edits, offsets) = write_manifest(dir.path());
        let mut bytes = std::fs::read(w.path()).unwrap();
        let last = *offsets.last().unwrap() as usize;
        bytes[last..].fill(0);
        std::fs::write(w.path(), &bytes).unwrap();
        assert_eq!(
            read_manifest(&*os_fs(), w.path()).unwrap().edits,
            edits[..edits.len() - 1]
        );
    }

    #[test]
    fn damaged_complete_last_edit_is_corruption_not_a_torn_tail() {
        // A bad checksum on a record whose bytes are all there is damage: a crash during an
        // append leaves the record cut short, never complete and wrong.
        let dir = tempfile::tempdir().unwrap();
        let (w, _, offsets) = write_manifest(dir.path());
        let bytes = std::fs::read(w.path()).unwrap();
        let last = *offsets.last().unwrap();
        let end = bytes.len() as u64;
        // Checksum bytes, the type byte, and payload bytes up to the last one; a flip in the
        // length field can make the record run past the end, which is a cut-short record.
        let targets = (last..last + 4)
            .chain([last + 6])
            .chain(last + crate::wal::format::HEADER_SIZE as u64..end);
        for at in targets {
            let mut damaged = bytes.clone();
            damaged[at as usize] ^= 0x21;
            std::fs::write(w.path(), &damaged).unwrap();
            match read_manifest(&*os_fs(), w.path()) {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!((file.as_path(), offset), (w.path(), last), "flip at {at}");
                }
                other => panic!("flip at {at}: expected corruption, got {other:?}"),
            }
        }
    }

    #[test]
    fn damage_before_the_last_edit_is_corruption_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (w, _, offsets) = write_manifest(dir.path());
        let mut bytes = std::fs::read(w.path()).unwrap();
        bytes[offsets[2] as usize + 9] ^= 0x10;
        std::fs::write(w.path(), &bytes).unwrap();
        match read_manifest(&*os_fs(), w.path()) {
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!((file.as_path(), offset), (w.path(), offsets[2]));
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn checksummed_but_undecodable_edit_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = manifest_file_name(dir.path(), 5);
        let mut log = LogWriter::create(&*os_fs(), path.clone()).unwrap();
        let mut good = Vec::new();
        snapshot(6).encode(&mut good);
        log.add_record(&good).unwrap();
        let second = log.len();
        log.add_record(&[99, 1]).unwrap(); // unknown tag 99
        log.sync().unwrap();
        match read_manifest(&*os_fs(), &path) {
            Err(Error::Corruption {
                file,
                offset,
                reason,
            }) => {
                assert_eq!((file, offset), (path, second));
                assert!(reason.contains("unknown tag 99"), "{reason}");
            }
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn empty_or_missing_manifest_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = manifest_file_name(dir.path(), 9);
        assert!(matches!(
            read_manifest(&*os_fs(), &path),
            Err(Error::Io { .. })
        ));
        std::fs::File::create(&path).unwrap();
        assert!(read_manifest(&*os_fs(), &path).unwrap_err().is_corruption());
        // A log file is not confused with a manifest: its records do not decode as edits.
        let log_path = log_file_name(dir.path(), 1);
        let mut log = LogWriter::create(&*os_fs(), log_path.clone()).unwrap();
        log.add_record(&[0xff; 20]).unwrap();
        log.sync().unwrap();
        assert!(
            read_manifest(&*os_fs(), &log_path)
                .unwrap_err()
                .is_corruption()
        );
    }
}
