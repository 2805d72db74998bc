//! Incremental backups (RocksDB's `BackupEngine`): each backup is a full, restorable copy of
//! the database as of one moment, and tables already stored by an earlier backup are not
//! copied again.
//!
//! ```text
//! BACKUP_DIR/
//!   LOCK                                   held while a process changes the backup directory
//!   shared/NNNNNN_<digest>_<size>.sst      tables, shared by every backup that holds them
//!   shared/NNNNNN_<digest>_<size>.blob     blob files, shared the same way
//!   private/<id>-<name>                    each backup's WALs and MANIFEST
//!   meta/<id>                              a backup's description (meta.rs), written last
//! ```
//!
//! A backup exists once its `meta/<id>` does: that file is written to a temporary name,
//! synced and renamed after every file it names is synced, so a crash during `create` leaves
//! no backup, only files that the next change of the directory collects. Tables are copied,
//! never linked: a backup must survive damage to the database's own files. A table is known
//! to be stored already by its number, size and entry digest (the count and hash sum of all
//! its entries, from its properties block, written with it): opening each table is all an
//! incremental backup costs for tables it does not copy. A table too old to have a digest is
//! named by the CRC32C of all its bytes instead. A blob file is known by its footer (records
//! and value bytes) and the CRC32C of its first 64 KiB, which cost one short read however
//! large the file. Every file's full CRC32C is recorded, and
//! `verify` and `restore` check it.

mod meta;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::{
    Copied, FileLock, FileSystem, IoMode, LockMode, Storage, copy_file, copy_file_between,
    file_crc32c,
};

pub use meta::{BackupFile, BackupMeta};

use sluice_sst::table::{Table, TableReadOptions};

use crate::db::checkpoint::{LiveTable, create_empty_dir, sync_parent};
use crate::filename::{FileType, create_dir_all_durably, set_current_file, sync_dir};
use crate::version::manifest::write_manifest_file;
use crate::{Db, Error, IoContext, Result};

/// A backup directory, open for making, listing, checking, restoring and deleting backups.
/// One process at a time may open it for changes ([`BackupEngine::open`]); any number may
/// open it read-only while none changes it.
#[derive(Debug)]
pub struct BackupEngine {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    read_only: bool,
    _lock: Box<dyn FileLock>,
}

/// What [`BackupEngine::create`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupReport {
    /// The new backup.
    pub meta: BackupMeta,
    /// Tables copied into `shared/`.
    pub tables_copied: usize,
    /// Tables an earlier backup had stored already.
    pub tables_shared: usize,
    /// Bytes copied, WALs and MANIFEST included.
    pub bytes_copied: u64,
}

/// What [`BackupEngine::verify`] checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VerifyBackupReport {
    /// Files read whole and found to have their recorded size and CRC32C.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
}

impl BackupEngine {
    /// Opens (creating it if needed) the backup directory `dir` for changes, on `fs`. Files
    /// left by a backup that never finished are deleted. Fails with [`Error::Busy`] while
    /// another engine has it open.
    pub fn open(dir: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<BackupEngine> {
        let dir = dir.as_ref().to_path_buf();
        for sub in ["shared", "private", "meta"] {
            let path = dir.join(sub);
            fs.create_dir_all(&path).with_path(&path)?;
        }
        sync_dir(&*fs, &dir)?;
        sync_parent(&*fs, &dir)?;
        let engine = Self::lock(dir, fs, LockMode::Exclusive)?;
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// Opens the backup directory `dir` to list, verify and restore backups, changing
    /// nothing.
    pub fn open_read_only(dir: impl AsRef<Path>, fs: Arc<dyn FileSystem>) -> Result<BackupEngine> {
        Self::lock(dir.as_ref().to_path_buf(), fs, LockMode::Shared)
    }

    fn lock(dir: PathBuf, fs: Arc<dyn FileSystem>, mode: LockMode) -> Result<BackupEngine> {
        let path = dir.join("LOCK");
        let lock = fs.lock(&path, mode).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock => Error::Busy(format!(
                "backup directory {} is in use by another backup engine",
                dir.display()
            )),
            std::io::ErrorKind::NotFound => Error::InvalidArgument(format!(
                "no backup directory at {} (it has no LOCK file)",
                dir.display()
            )),
            _ => Error::io(&path, e),
        })?;
        Ok(BackupEngine {
            dir,
            fs,
            read_only: mode == LockMode::Shared,
            _lock: lock,
        })
    }

    /// Backs `db` up as of now: copies the tables no earlier backup stored, the WALs and a
    /// MANIFEST, and records the new backup. The database keeps serving reads and writes.
    pub fn create(&self, db: &Db) -> Result<BackupReport> {
        self.check_writable()?;
        let fs = &*self.fs;
        let existing = self.list()?;
        let id = existing.last().map_or(1, |m| m.id + 1);
        let stored: BTreeMap<&str, &BackupFile> = existing
            .iter()
            .flat_map(|m| &m.files)
            .map(|f| (f.stored.as_str(), f))
            .collect();
        // The database's own file system reads its files; this engine's writes the copies.
        let db_fs_handle = Arc::clone(&db.options().fs);
        let db_fs = &*db_fs_handle;
        let live = db.live_files()?;
        let mut files = Vec::new();
        let (mut tables_copied, mut tables_shared, mut bytes_copied) = (0, 0, 0);
        let mut back_up_tables = |tables: &[LiveTable], under: &str| -> Result<()> {
            for table in tables {
                let (name, ext) = (table.file_name(), table.kind_extension());
                let name = format!("{under}{name}");
                let id = match table.kind {
                    FileType::Blob => blob_content_id(&db_fs_handle, &table.path, table.number)?,
                    _ => content_id(&db_fs_handle, &table.path, table.number)?,
                };
                let stored_name = format!("shared/{:06}_{id}_{}.{ext}", table.number, table.size);
                let file = match stored.get(stored_name.as_str()) {
                    Some(known) if known.size == table.size => {
                        // The stored copy must be of the bytes the MANIFEST pinned.
                        table.check_copied(&Copied {
                            len: known.size,
                            crc32c: known.crc32c,
                        })?;
                        tables_shared += 1;
                        BackupFile {
                            name,
                            ..(*known).clone()
                        }
                    }
                    _ => {
                        let to = self.dir.join(&stored_name);
                        let copied =
                            copy_file_between(db_fs, &table.path, fs, &to, None).with_path(&to)?;
                        if let Err(e) = table.check_copied(&copied) {
                            // Not a copy of the pinned table: no backup may share it.
                            let _ = fs.remove(&to);
                            return Err(e);
                        }
                        tables_copied += 1;
                        bytes_copied += copied.len;
                        BackupFile {
                            stored: stored_name,
                            name,
                            size: copied.len,
                            crc32c: copied.crc32c,
                        }
                    }
                };
                files.push(file);
            }
            Ok(())
        };
        back_up_tables(&live.tables, "")?;
        for tree in &live.keyspaces {
            back_up_tables(&tree.tables, &format!("keyspaces/{}/", tree.id))?;
        }
        for wal in &live.wals {
            let name = format!("{:06}.log", wal.number);
            let stored_name = format!("private/{id}-{name}");
            let to = self.dir.join(&stored_name);
            let copied =
                copy_file_between(db_fs, &wal.path, fs, &to, Some(wal.len)).with_path(&to)?;
            bytes_copied += copied.len;
            files.push(BackupFile {
                stored: stored_name,
                name,
                size: copied.len,
                crc32c: copied.crc32c,
            });
        }
        // Each keyspace's MANIFEST and the CURRENT naming it: restored before the database's
        // CURRENT, which the restore writes last.
        let mut write_private = |name: String,
                                 stored_name: String,
                                 write: &dyn Fn(&Path) -> Result<()>|
         -> Result<()> {
            let path = self.dir.join(&stored_name);
            write(&path)?;
            let written = file_crc32c(fs, &path, None).with_path(&path)?;
            bytes_copied += written.len;
            files.push(BackupFile {
                stored: stored_name,
                name,
                size: written.len,
                crc32c: written.crc32c,
            });
            Ok(())
        };
        for tree in &live.keyspaces {
            let manifest = format!("MANIFEST-{:06}", tree.manifest_number);
            write_private(
                format!("keyspaces/{}/{manifest}", tree.id),
                format!("private/{id}-ks{}-{manifest}", tree.id),
                &|path| {
                    write_manifest_file(fs, path.to_path_buf(), &tree.snapshot)
                        .map(drop)
                        .map_err(Error::from)
                },
            )?;
            write_private(
                format!("keyspaces/{}/CURRENT", tree.id),
                format!("private/{id}-ks{}-CURRENT", tree.id),
                &|path| write_small_file(fs, path, format!("{manifest}\n").as_bytes()),
            )?;
        }
        let name = format!("MANIFEST-{:06}", live.manifest_number);
        write_private(name.clone(), format!("private/{id}-{name}"), &|path| {
            write_manifest_file(fs, path.to_path_buf(), &live.snapshot)
                .map(drop)
                .map_err(Error::from)
        })?;
        let meta = BackupMeta {
            id,
            created_unix_secs: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            sequence: live.sequence,
            manifest_number: live.manifest_number,
            files,
        };
        drop(live);
        for sub in ["shared", "private"] {
            sync_dir(fs, &self.dir.join(sub))?;
        }
        self.write_meta(&meta)?;
        Ok(BackupReport {
            meta,
            tables_copied,
            tables_shared,
            bytes_copied,
        })
    }

    /// Every backup, oldest first.
    pub fn list(&self) -> Result<Vec<BackupMeta>> {
        let mut metas: Vec<BackupMeta> = self
            .meta_ids()?
            .into_iter()
            .map(|id| self.read_meta(id))
            .collect::<Result<_>>()?;
        metas.sort_by_key(|m| m.id);
        Ok(metas)
    }

    /// Reads every file of backup `id` and checks its size and CRC32C.
    pub fn verify(&self, id: u64) -> Result<VerifyBackupReport> {
        let meta = self.read_meta(id)?;
        let mut report = VerifyBackupReport::default();
        for file in &meta.files {
            let path = self.dir.join(&file.stored);
            let found = file_crc32c(&*self.fs, &path, None).with_path(&path)?;
            check_copy(&path, file, found.len, found.crc32c)?;
            report.files += 1;
            report.bytes += found.len;
        }
        Ok(report)
    }

    /// Restores backup `id` into `dir` (which must not exist, or be empty), on the engine's
    /// file system: every file copied and checked against its recorded CRC32C, `CURRENT`
    /// written last. The result opens as a database.
    pub fn restore(&self, id: u64, dir: impl AsRef<Path>) -> Result<VerifyBackupReport> {
        let meta = self.read_meta(id)?;
        let fs = &*self.fs;
        let dir = dir.as_ref();
        create_empty_dir(fs, dir, "restore")?;
        let mut report = VerifyBackupReport::default();
        let mut tree_dirs = BTreeSet::new();
        for file in &meta.files {
            let from = self.dir.join(&file.stored);
            let to = dir.join(&file.name);
            if let Some(parent) = to.parent().filter(|p| *p != dir)
                && tree_dirs.insert(parent.to_path_buf())
            {
                create_dir_all_durably(fs, parent)?;
            }
            let copied = copy_file(fs, &from, &to, None).with_path(&to)?;
            check_copy(&from, file, copied.len, copied.crc32c)?;
            report.files += 1;
            report.bytes += copied.len;
        }
        for tree_dir in &tree_dirs {
            sync_dir(fs, tree_dir)?;
        }
        sync_dir(fs, dir)?;
        set_current_file(fs, dir, meta.manifest_number)?;
        sync_parent(fs, dir)?;
        Ok(report)
    }

    /// Deletes backup `id`, and every stored file no other backup needs.
    pub fn delete(&self, id: u64) -> Result<()> {
        self.check_writable()?;
        self.read_meta(id)?;
        let path = self.meta_path(id);
        self.fs.remove(&path).with_path(&path)?;
        sync_dir(&*self.fs, &self.dir.join("meta"))?;
        self.collect_garbage()
    }

    /// Deletes all but the newest `keep` backups; returns how many it deleted.
    pub fn purge_old(&self, keep: usize) -> Result<usize> {
        let ids = self.meta_ids()?;
        let old = ids.len().saturating_sub(keep);
        for &id in &ids[..old] {
            self.delete(id)?;
        }
        Ok(old)
    }

    /// Deletes stored files no backup names, and unfinished descriptions.
    fn collect_garbage(&self) -> Result<()> {
        let fs = &*self.fs;
        let mut needed = BTreeSet::new();
        for meta in self.list()? {
            needed.extend(meta.files.into_iter().map(|f| f.stored));
        }
        for sub in ["shared", "private", "meta"] {
            let dir = self.dir.join(sub);
            for name in fs.list_dir(&dir).with_path(&dir)? {
                let Some(name) = name.to_str() else { continue };
                let garbage = match sub {
                    "meta" => name.ends_with(".tmp"),
                    _ => !needed.contains(&format!("{sub}/{name}")),
                };
                if garbage {
                    let path = dir.join(name);
                    fs.remove(&path).with_path(&path)?;
                }
            }
            sync_dir(fs, &dir)?;
        }
        Ok(())
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join("meta").join(id.to_string())
    }

    fn meta_ids(&self) -> Result<Vec<u64>> {
        let dir = self.dir.join("meta");
        let mut ids: Vec<u64> = self
            .fs
            .list_dir(&dir)
            .with_path(&dir)?
            .iter()
            .filter_map(|n| n.to_str()?.parse().ok())
            .collect();
        ids.sort_unstable();
        Ok(ids)
    }

    fn read_meta(&self, id: u64) -> Result<BackupMeta> {
        let path = self.meta_path(id);
        if !self.fs.exists(&path).with_path(&path)? {
            return Err(Error::InvalidArgument(format!(
                "no backup {id} in {}",
                self.dir.display()
            )));
        }
        // A description of a million files is about 100 MB; anything longer is not one.
        let bytes = self.fs.read_prefix(&path, 1 << 30).with_path(&path)?;
        let meta = BackupMeta::decode(&bytes).map_err(|reason| {
            Error::corruption(&path, 0, format!("backup description {reason}"))
        })?;
        if meta.id != id {
            return Err(Error::corruption(
                &path,
                0,
                format!("backup description names backup {}", meta.id),
            ));
        }
        Ok(meta)
    }

    fn write_meta(&self, meta: &BackupMeta) -> Result<()> {
        let fs = &*self.fs;
        let path = self.meta_path(meta.id);
        let tmp = path.with_extension("tmp");
        let mut file = fs.create(&tmp, IoMode::Buffered).with_path(&tmp)?;
        file.append(meta.encode().as_bytes()).with_path(&tmp)?;
        file.sync().with_path(&tmp)?;
        drop(file);
        fs.rename(&tmp, &path).with_path(&path)?;
        sync_dir(fs, &self.dir.join("meta"))?;
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly(self.dir.clone()));
        }
        Ok(())
    }
}

/// Writes `bytes` to a new file at `path`, synced.
fn write_small_file(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = fs.create(path, IoMode::Buffered).with_path(path)?;
    file.append(bytes).with_path(path)?;
    file.sync().with_path(path)?;
    Ok(())
}

/// What names a table's content in `shared/`: `d` and its entry digest (entries and hash
/// sum, from its properties), or, for a table written before digests were recorded, `c` and
/// the CRC32C of all its bytes.
fn content_id(fs: &Arc<dyn FileSystem>, path: &Path, number: u64) -> Result<String> {
    let table = Table::open(
        path,
        number,
        TableReadOptions {
            cache: None,
            verify_checksums: true,
            storage: Storage::new(Arc::clone(fs), IoMode::Buffered),
            load_filter: false,
            ..TableReadOptions::default()
        },
    )?;
    Ok(match table.properties().digest() {
        Some(d) => format!("d{:x}-{:016x}", d.entries, d.sum),
        None => format!(
            "c{:08x}",
            file_crc32c(&**fs, path, None).with_path(path)?.crc32c
        ),
    })
}

/// What names blob file `number` at `path` among stored files: its footer's record count and
/// value bytes, and the CRC32C of its first 64 KiB (header and first records), checked as the
/// file opens.
fn blob_content_id(fs: &Arc<dyn FileSystem>, path: &Path, number: u64) -> Result<String> {
    let storage = Storage::new(Arc::clone(fs), IoMode::Buffered);
    let blob = sluice_sst::blob::BlobFile::open(&storage, path, number)?;
    let head = file_crc32c(&**fs, path, Some(blob.size().min(64 << 10))).with_path(path)?;
    Ok(format!(
        "b{:x}-{:x}-{:08x}",
        blob.records(),
        blob.value_bytes(),
        head.crc32c
    ))
}

/// Fails unless a copy of `file` (or a read of it at `path`) found its recorded size and CRC.
fn check_copy(path: &Path, file: &BackupFile, len: u64, crc: u32) -> Result<()> {
    if len != file.size {
        return Err(Error::corruption(
            path,
            len.min(file.size),
            format!(
                "backup file has {len} bytes, its backup recorded {}",
                file.size
            ),
        ));
    }
    if crc != file.crc32c {
        return Err(Error::corruption(
            path,
            0,
            format!(
                "backup file's CRC32C is {crc:08x}, its backup recorded {:08x}",
                file.crc32c
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
