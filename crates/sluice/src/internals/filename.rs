//! Names of the files in a database directory, and the atomic switch of `CURRENT`.
//!
//! ```text
//! 000123.log        write-ahead log number 123
//! 000123.sst        table number 123
//! MANIFEST-000123   manifest number 123
//! 000123.dbtmp      temporary file (used to write CURRENT atomically)
//! CURRENT           "MANIFEST-000123\n": names the live manifest
//! LOCK              held (flock) by the process that has the database open
//! ```
//!
//! Numbers come from one counter (`next_file_number` in the manifest), so no two files share a
//! number. They are printed with at least six digits; parsing accepts any number of digits.
//! See `docs/format/manifest.md`.

use std::path::{Path, PathBuf};

use sluice_sst::fs::{FileSystem, IoMode};
use sluice_sst::{Error, IoContext, Result};

/// What a file in the database directory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FileType {
    /// `NNNNNN.log`: a write-ahead log.
    Log,
    /// `NNNNNN.sst`: a table.
    Table,
    /// `NNNNNN.blob`: a blob file (values kept out of the tables).
    Blob,
    /// `MANIFEST-NNNNNN`: a manifest.
    Manifest,
    /// `CURRENT`: names the live manifest.
    Current,
    /// `LOCK`: the database lock file.
    Lock,
    /// `NNNNNN.dbtmp`: a temporary file, garbage if found at open.
    Temp,
}

/// Name of the file holding `CURRENT`.
pub const CURRENT: &str = "CURRENT";
/// Name of the lock file.
pub const LOCK: &str = "LOCK";
const MANIFEST_PREFIX: &str = "MANIFEST-";

/// `dir/NNNNNN.sst`.
pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// `dir/NNNNNN.blob`.
pub fn blob_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob"))
}

/// `dir/NNNNNN.log`.
pub fn log_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// `dir/MANIFEST-NNNNNN`.
pub fn manifest_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{MANIFEST_PREFIX}{number:06}"))
}

/// `dir/CURRENT`.
pub fn current_file_name(dir: &Path) -> PathBuf {
    dir.join(CURRENT)
}

/// `dir/LOCK`.
pub fn lock_file_name(dir: &Path) -> PathBuf {
    dir.join(LOCK)
}

/// `dir/NNNNNN.dbtmp`.
pub fn temp_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.dbtmp"))
}

/// Classifies a file name (not a path) from a database directory; `None` for names Sluice
/// does not own.
pub fn parse_file_name(name: &str) -> Option<(FileType, u64)> {
    match name {
        CURRENT => return Some((FileType::Current, 0)),
        LOCK => return Some((FileType::Lock, 0)),
        _ => {}
    }
    if let Some(digits) = name.strip_prefix(MANIFEST_PREFIX) {
        return Some((FileType::Manifest, parse_number(digits)?));
    }
    let (digits, ext) = name.split_once('.')?;
    let kind = match ext {
        "log" => FileType::Log,
        "sst" => FileType::Table,
        "blob" => FileType::Blob,
        "dbtmp" => FileType::Temp,
        _ => return None,
    };
    Some((kind, parse_number(digits)?))
}

/// Decimal digits only: `u64::from_str` alone would also accept a leading `+`.
fn parse_number(digits: &str) -> Option<u64> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Atomically points `CURRENT` at `MANIFEST-<manifest_number>`, through `fs`.
///
/// Precondition: that manifest is complete and synced (its first record is the full state),
/// and its directory entry is durable.
pub fn set_current_file(fs: &dyn FileSystem, dir: &Path, manifest_number: u64) -> Result<()> {
    let contents = format!("{MANIFEST_PREFIX}{manifest_number:06}\n");
    let tmp = temp_file_name(dir, manifest_number);
    // The temporary's number is the manifest's, fresh, so nothing should be there; a leftover
    // of a failed earlier attempt with this number is ours to replace (`create` refuses to
    // write over anything).
    match fs.remove(&tmp) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(Error::io(&tmp, e)),
        _ => {}
    }
    let mut file = fs.create(&tmp, IoMode::Buffered).with_path(&tmp)?;
    file.append(contents.as_bytes()).with_path(&tmp)?;
    file.sync().with_path(&tmp)?;
    drop(file);
    // If we crash here: CURRENT still names the previous manifest, which is intact; the
    // .dbtmp file is garbage that the next open deletes.
    fs.rename(&tmp, &current_file_name(dir)).with_path(&tmp)?;
    // If we crash here: the rename may or may not be durable, so CURRENT names either the old
    // or the new manifest, and both are complete. The new one is not yet guaranteed, which is
    // why the caller must not delete the old manifest before this function returns.
    sync_dir(fs, dir)?;
    // From here on, CURRENT names the new manifest even after a power failure.
    Ok(())
}

/// Reads `CURRENT` through `fs` and returns the manifest file name it holds (e.g.
/// `MANIFEST-000005`), checking that it is exactly one well-formed manifest name followed by a
/// newline.
pub fn read_current_file(fs: &dyn FileSystem, dir: &Path) -> Result<String> {
    let path = current_file_name(dir);
    // A valid CURRENT is about 30 bytes; bound the read so garbage cannot exhaust memory.
    let contents = fs.read_prefix(&path, 256).with_path(&path)?;
    let corrupt = |reason: &str| Error::corruption(&path, 0, format!("CURRENT {reason}"));
    let text = std::str::from_utf8(&contents).map_err(|_| corrupt("is not UTF-8"))?;
    let name = text
        .strip_suffix('\n')
        .ok_or_else(|| corrupt("does not end with a newline"))?;
    match parse_file_name(name) {
        Some((FileType::Manifest, _)) => Ok(name.to_string()),
        _ => Err(corrupt(&format!(
            "holds {name:?}, not a manifest file name"
        ))),
    }
}

/// `fsync`s a directory through `fs`, so that entries created, renamed or removed in it are
/// durable.
pub fn sync_dir(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    fs.sync_dir(dir).with_path(dir)
}

/// Creates `dir` and its missing ancestors, and makes each new directory's name durable by
/// syncing its parent: otherwise a power failure could take back a directory into which
/// synced files were already written (Pebble's `mkdirAllAndSyncParents`).
pub fn create_dir_all_durably(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.as_os_str().is_empty() || fs.exists(d).with_path(d)? {
            break;
        }
        missing.push(d);
        at = d.parent();
    }
    if missing.is_empty() {
        return Ok(());
    }
    fs.create_dir_all(dir).with_path(dir)?;
    // Outermost first, so each sync makes a name durable inside an already durable parent.
    for d in missing.iter().rev() {
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(fs, parent)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sluice_sst::fs::{MemFs, OsFileSystem};

    proptest! {
        #[test]
        fn any_number_round_trips(n: u64) {
            let dir = Path::new("/db");
            for (path, kind) in [
                (table_file_name(dir, n), FileType::Table),
                (blob_file_name(dir, n), FileType::Blob),
                (log_file_name(dir, n), FileType::Log),
                (manifest_file_name(dir, n), FileType::Manifest),
                (temp_file_name(dir, n), FileType::Temp),
            ] {
                let name = path.file_name().unwrap().to_str().unwrap().to_string();
                prop_assert_eq!(parse_file_name(&name), Some((kind, n)));
            }
        }

        #[test]
        fn arbitrary_names_never_panic(name in "\\PC{0,24}") {
            if let Some((kind, n)) = parse_file_name(&name) {
                // Whatever parses names a Sluice file: CURRENT/LOCK or digits we can print.
                prop_assert!(matches!(kind, FileType::Current | FileType::Lock) || name.contains(&n.to_string()));
            }
        }
    }

    #[test]
    fn names_and_parse_round_trip() {
        let dir = Path::new("/db");
        let cases = [
            (table_file_name(dir, 7), FileType::Table, 7),
            (log_file_name(dir, 123_456), FileType::Log, 123_456),
            (manifest_file_name(dir, 5), FileType::Manifest, 5),
            (temp_file_name(dir, 9), FileType::Temp, 9),
            (
                table_file_name(dir, 12_345_678),
                FileType::Table,
                12_345_678,
            ),
            (current_file_name(dir), FileType::Current, 0),
            (lock_file_name(dir), FileType::Lock, 0),
        ];
        for (path, kind, number) in cases {
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_file_name(name), Some((kind, number)), "{name}");
        }
        assert_eq!(table_file_name(dir, 7), Path::new("/db/000007.sst"));
        assert_eq!(manifest_file_name(dir, 5), Path::new("/db/MANIFEST-000005"));
    }

    #[test]
    fn foreign_names_are_rejected() {
        for name in [
            "",
            "MANIFEST-",
            "MANIFEST-+1",
            "MANIFEST-1x",
            "12a.log",
            "+1.log",
            ".log",
            "1.log.bak",
            "x.sst",
            "CURRENTX",
            "LOCK.old",
            "000001.txt",
            "99999999999999999999999.sst",
        ] {
            assert_eq!(parse_file_name(name), None, "{name:?}");
        }
    }

    #[test]
    fn current_switches_atomically_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        set_current_file(&OsFileSystem, dir.path(), 3).unwrap();
        assert_eq!(
            read_current_file(&OsFileSystem, dir.path()).unwrap(),
            "MANIFEST-000003"
        );
        set_current_file(&OsFileSystem, dir.path(), 1_000_001).unwrap();
        assert_eq!(
            read_current_file(&OsFileSystem, dir.path()).unwrap(),
            "MANIFEST-1000001"
        );
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["CURRENT"]);
    }

    #[test]
    fn malformed_current_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_current_file(&OsFileSystem, dir.path()),
            Err(Error::Io { .. })
        ));
        for contents in [
            &b""[..],
            b"MANIFEST-000003",
            b"MANIFEST-000003\n\n",
            b"MANIFEST-\n",
            b"000003.log\n",
            b"\xff\xfe\n",
            &[b'M'; 1000],
        ] {
            std::fs::write(current_file_name(dir.path()), contents).unwrap();
            let err = read_current_file(&OsFileSystem, dir.path()).unwrap_err();
            assert!(err.is_corruption(), "{contents:?}: {err}");
        }
    }

    #[test]
    fn new_directories_survive_a_crash_once_created_durably() {
        let fs = MemFs::new();
        create_dir_all_durably(&fs, Path::new("/data/dbs/one")).unwrap();
        let crashed = fs.crash_clone();
        assert!(crashed.metadata(Path::new("/data/dbs/one")).unwrap().is_dir);
        // Plain creation leaves the new names at the mercy of a crash.
        fs.create_dir_all(Path::new("/data/dbs/two")).unwrap();
        assert!(!fs.crash_clone().exists(Path::new("/data/dbs/two")).unwrap());
        create_dir_all_durably(&fs, Path::new("/data/dbs/one")).unwrap();
    }

    #[test]
    fn current_survives_a_crash_only_once_switched() {
        let fs = MemFs::new();
        create_dir_all_durably(&fs, Path::new("/db")).unwrap();
        set_current_file(&fs, Path::new("/db"), 3).unwrap();
        let crashed = fs.crash_clone();
        assert_eq!(
            read_current_file(&crashed, Path::new("/db")).unwrap(),
            "MANIFEST-000003"
        );
    }
}
