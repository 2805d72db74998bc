//! [`Db::destroy`]: deletes a closed database's files (RocksDB's `DestroyDB`).
//!
//! Only files Sluice names are deleted (tables, blob files, WALs, MANIFESTs, `CURRENT`, the
//! temporary files of a write, `OPTIONS`, `STATS`, the `LOG` and its rotated copies, `LOCK`),
//! in the database directory, every data and owner directory, and their `keyspaces/<id>/`
//! subdirectories; a directory is removed once nothing is left in it. Anything else (a file
//! the user put there, `repair`'s `lost/`) stays, and so does the directory holding it, so
//! pointing `destroy` at the wrong directory deletes nothing that is not a database's.

use std::path::Path;

use sluice_sst::fs::FileSystem;

use super::open::{Access, lock_directory};
use super::records::{OPTIONS_FILE, STATS_FILE};
use crate::filename::parse_file_name;
use crate::info_log::{LOG_FILE, OLD_LOG_PREFIX};
use crate::keyspace::options::KEYSPACES_DIR;
use crate::{Db, Error, Options, Result};

impl Db {
    /// Deletes the database in `path`, which must not be open: every file Sluice made there,
    /// in its data and owner directories (`options.data_dirs`, `options.partitions`) and in
    /// every keyspace's directory, then each directory left empty (see the module docs). A
    /// path that does not exist is already destroyed.
    ///
    /// ```no_run
    /// sluice::Db::destroy("/tmp/old-db", &sluice::Options::default())?;
    /// # Ok::<(), sluice::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Busy`] when a process has the database open (nothing is deleted then); the
    /// file system's error naming the file otherwise.
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
        let dir = path.as_ref();
        let fs = &*options.fs;
        if !fs.exists(dir).map_err(|e| Error::io(dir, e))? {
            return Ok(());
        }
        // Held while deleting: no open can start meanwhile. The lock file goes last.
        let lock = lock_directory(fs, dir, Access::ReadWrite)?;
        for table_dir in options.table_dirs(dir) {
            if !fs
                .exists(&table_dir)
                .map_err(|e| Error::io(&table_dir, e))?
            {
                continue;
            }
            let keyspaces = table_dir.join(KEYSPACES_DIR);
            if fs
                .exists(&keyspaces)
                .map_err(|e| Error::io(&keyspaces, e))?
            {
                for name in list(fs, &keyspaces)? {
                    let keyspace = keyspaces.join(&name);
                    if name.to_str().is_some_and(|n| n.parse::<u32>().is_ok()) {
                        remove_files(fs, &keyspace)?;
                        remove_if_empty(fs, &keyspace)?;
                    }
                }
                remove_if_empty(fs, &keyspaces)?;
            }
            if table_dir != dir {
                remove_files(fs, &table_dir)?;
                remove_if_empty(fs, &table_dir)?;
            }
        }
        remove_files(fs, dir)?;
        drop(lock);
        let lock_file = crate::filename::lock_file_name(dir);
        if fs
            .exists(&lock_file)
            .map_err(|e| Error::io(&lock_file, e))?
        {
            fs.remove(&lock_file)
                .map_err(|e| Error::io(&lock_file, e))?;
        }
        remove_if_empty(fs, dir)
    }
}

fn list(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    fs.list_dir(dir).map_err(|e| Error::io(dir, e))
}

/// Whether `name` is a file Sluice writes in a database or table directory (the lock file is
/// left to the caller).
fn is_sluice_file(name: &str) -> bool {
    let records = [OPTIONS_FILE, STATS_FILE, LOG_FILE];
    let written_atomically = records.iter().any(|r| name == format!("{r}.new"));
    parse_file_name(name).is_some_and(|(kind, _)| kind != crate::filename::FileType::Lock)
        || records.contains(&name)
        || written_atomically
        || name.starts_with(OLD_LOG_PREFIX)
}

/// Removes Sluice's files in `dir`.
fn remove_files(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    for name in list(fs, dir)? {
        if name.to_str().is_some_and(is_sluice_file) {
            let path = dir.join(&name);
            fs.remove(&path).map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// Removes `dir` if nothing is left in it.
fn remove_if_empty(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if list(fs, dir)?.is_empty() {
        fs.remove_dir(dir).map_err(|e| Error::io(dir, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sluices_own_files_are_recognised() {
        for name in [
            "000012.sst",
            "000013.log",
            "000014.blob",
            "MANIFEST-000002",
            "CURRENT",
            "000015.dbtmp",
            "OPTIONS",
            "OPTIONS.new",
            "STATS",
            "LOG",
            "LOG.old.1700000000000000",
        ] {
            assert!(is_sluice_file(name), "{name}");
        }
        for name in ["LOCK", "notes.txt", "lost", "sst", "MANIFEST", "12.sst.bak"] {
            assert!(!is_sluice_file(name), "{name}");
        }
    }
}
