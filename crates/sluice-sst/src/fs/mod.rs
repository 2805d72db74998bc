//! The storage layer: how a file is opened, read at an offset, appended to, synced, renamed and
//! removed, how a directory is listed, created and synced, and how a database is locked.
//!
//! Every file operation of the engine goes through a [`FileSystem`] (tables, WAL, MANIFEST,
//! CURRENT, LOCK, directory listings and syncs), so three things need no change above it:
//! compaction can switch to direct I/O ([`IoMode::Direct`], RocksDB's
//! `use_direct_io_for_flush_and_compaction`); a test can put a [`FaultInjectingFs`] under the
//! whole engine to fail or corrupt one chosen operation (Pebble's `vfs.FS` and `errorfs`,
//! RocksDB's `FileSystem` and `FaultInjectionTestFS`); and a test can run the engine on a
//! [`MemFs`] and take [`MemFs::crash_clone`] at any moment to see what a power failure would
//! leave (Pebble's `vfs.NewCrashableMem`, LevelDB's fault-injection `Env`). Errors here are
//! plain `io::Error`s; callers add the path with [`crate::IoContext`].
//!
//! The durability model every implementation follows, and [`MemFs`] enforces: bytes appended to
//! a file survive a power failure once [`WriteFile::sync`] (or `sync_data`) returns; a name
//! created, renamed or removed in a directory survives once [`FileSystem::sync_dir`] of that
//! directory returns. Until then either may be lost, independently of each other.

mod copy;
#[cfg(target_os = "linux")]
mod direct;
mod fault;
#[cfg(target_os = "linux")]
mod mapped;
mod mem;
mod os;
mod os_lock;
mod wrap;

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// Alignment of direct-I/O buffers, lengths and offsets.
pub const DIRECT_IO_ALIGN: usize = 4096;

/// Bytes a direct reader fetches when a read misses its window; a read larger than this goes
/// to the device on its own.
pub const READAHEAD_BYTES: usize = 2 << 20;

pub use copy::{
    Copied, Placed, copy_file, copy_file_between, file_crc32c, link_or_copy, open_file_crc32c,
};
pub use fault::{Fault, FaultAction, FaultInjectingFs, FaultOp};
pub use mem::MemFs;
pub use os::OsFileSystem;
pub use wrap::{WrapWrites, WriteWrapper};

/// How a file's bytes travel between the process and the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// Through the page cache: reads may be served from memory, writes are absorbed until
    /// `sync`.
    #[default]
    Buffered,
    /// `O_DIRECT`: every read and write goes to the device, in [`DIRECT_IO_ALIGN`]-aligned
    /// pieces. Compaction streams data it will not read again; this keeps it out of the page
    /// cache and makes its I/O cost real, which is what a pipelined executor overlaps.
    Direct,
    /// Appends are copied into a shared memory mapping of the file, reserved a window at a
    /// time: no system call per append, and every appended byte is in the page cache at once,
    /// so it survives a crash of the process. Until the writer is dropped the file ends in
    /// zeros past the appended bytes (a crash leaves them). Meant for logs, whose readers take
    /// an all-zero tail as the end; reads are as [`IoMode::Buffered`]. Linux only: elsewhere,
    /// and where blocks cannot be reserved (`fallocate`), the file is written buffered.
    Mapped,
}

/// A file opened for positioned reads. Shared by many threads: reads take `&self`.
pub trait ReadFile: Send + Sync + fmt::Debug {
    /// Fills `buf` with the bytes at `offset..offset + buf.len()`. Reaching the end of the file
    /// first is an error of kind [`io::ErrorKind::UnexpectedEof`].
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// The file's current size in bytes.
    fn size(&self) -> io::Result<u64>;
}

/// A file being written from start to end by one owner.
///
/// Appended bytes may sit in a buffer until [`WriteFile::sync`]; a file dropped without `sync`
/// may be incomplete on disk (writers of tables delete such files).
pub trait WriteFile: Send + fmt::Debug {
    /// Appends `data` at the end of the file.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;

    /// Writes out everything appended and makes it durable (`fsync`). Appending may continue
    /// afterwards.
    fn sync(&mut self) -> io::Result<()>;

    /// Hands everything appended to the operating system without waiting for the device, so
    /// it survives a crash of this process (not of the machine): what a log's unsynced group
    /// commit promises. The default does nothing, which is right for writers that keep no
    /// buffer; a direct-I/O writer keeps its unaligned tail until `sync`, so logs, which
    /// need this, are written buffered.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// [`WriteFile::sync`], except that metadata not needed to read the data back may stay
    /// unsynced (`fdatasync`): what a log pays on every synced write.
    fn sync_data(&mut self) -> io::Result<()> {
        self.sync()
    }

    /// [`WriteFile::sync`], and the file ends at the last appended byte: a file that reserves
    /// space ahead of its appends ([`IoMode::Mapped`]) gives the rest back first. Appending
    /// may continue afterwards. What a log calls when it is closed, so that its size on disk
    /// is its length.
    fn finish(&mut self) -> io::Result<()> {
        self.sync()
    }
}

/// What [`FileSystem::metadata`] reports of a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMetadata {
    /// Bytes in the file as this process sees them (synced or not); 0 for a directory.
    pub len: u64,
    /// The path is a directory.
    pub is_dir: bool,
    /// The name itself is a symbolic link (`len` and `is_dir` describe what it leads to). A
    /// database never makes one, so a live table that is one was put there by someone else.
    pub is_symlink: bool,
}

/// Requests a file system made to an object store since it was made (failed ones included),
/// the bytes the successful ones moved, and what its local cache of objects saved
/// ([`FileSystem::store_requests`]). A multipart upload counts every request it makes: its
/// start, each part and its completion. Serialized as the JSON of `sluice::Metrics` reports
/// it (`object_store`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct StoreRequests {
    /// GETs, ranged or whole.
    pub gets: u64,
    /// PUTs, and the requests of multipart uploads.
    pub puts: u64,
    /// HEADs.
    pub heads: u64,
    /// LISTs (one per page of results).
    pub lists: u64,
    /// DELETEs.
    pub deletes: u64,
    /// Server-side copies.
    pub copies: u64,
    /// Bytes the GETs returned.
    pub bytes_downloaded: u64,
    /// Bytes the PUTs sent.
    pub bytes_uploaded: u64,
    /// Opens the local cache served.
    pub cache_hits: u64,
    /// Opens the local cache could not serve (each a GET of the whole object, or ranged GETs
    /// for one too large to cache).
    pub cache_misses: u64,
}

/// The epoch by which a database claimed an object-store prefix ([`FileSystem::write_fence`]):
/// a writer holding it may write and delete there only while no later claim has taken a
/// newer epoch (`sluice_object`'s `fence.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteFence {
    /// The epoch's number: claims take them in increasing order.
    pub epoch: u64,
    /// The store's entity tag for the epoch's object, when it gives one: a deleted epoch made
    /// again under the same number is another object.
    pub e_tag: Option<String>,
}

impl StoreRequests {
    /// Requests of every kind.
    pub fn requests(&self) -> u64 {
        self.gets + self.puts + self.heads + self.lists + self.deletes + self.copies
    }

    /// Share of object opens the cache served (0.0 before any open, or without a cache).
    pub fn cache_hit_ratio(&self) -> f64 {
        match self.cache_hits + self.cache_misses {
            0 => 0.0,
            opens => self.cache_hits as f64 / opens as f64,
        }
    }

    /// What happened between `earlier` and these figures (of one file system).
    pub fn since(&self, earlier: &StoreRequests) -> StoreRequests {
        StoreRequests {
            gets: self.gets.saturating_sub(earlier.gets),
            puts: self.puts.saturating_sub(earlier.puts),
            heads: self.heads.saturating_sub(earlier.heads),
            lists: self.lists.saturating_sub(earlier.lists),
            deletes: self.deletes.saturating_sub(earlier.deletes),
            copies: self.copies.saturating_sub(earlier.copies),
            bytes_downloaded: self
                .bytes_downloaded
                .saturating_sub(earlier.bytes_downloaded),
            bytes_uploaded: self.bytes_uploaded.saturating_sub(earlier.bytes_uploaded),
            cache_hits: self.cache_hits.saturating_sub(earlier.cache_hits),
            cache_misses: self.cache_misses.saturating_sub(earlier.cache_misses),
        }
    }
}

/// How [`FileSystem::lock`] locks a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// One holder at a time, and no shared holders: a read-write open.
    Exclusive,
    /// Any number of shared holders, and no exclusive one: a read-only open.
    Shared,
}

/// A held advisory lock on a file; dropping it releases the lock.
pub trait FileLock: Send + Sync + fmt::Debug {}

/// Files and directories: opening, creating, renaming, removing, listing, syncing, locking.
///
/// Object-safe: the engine holds an `Arc<dyn FileSystem>`. Paths are used as given; names are
/// compared byte for byte. Each method's doc says what is durable when it returns (see the
/// module docs for the model).
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Opens an existing file for reading. Durability: none (reads only). Reads see every byte
    /// appended so far, synced or not, as the page cache would.
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>>;

    /// Creates a new file at `path`. Fails with [`io::ErrorKind::AlreadyExists`] if anything
    /// is there already, a symbolic link included (`O_CREAT | O_EXCL | O_NOFOLLOW`): every
    /// file Sluice writes takes a number never used before, so an existing file means
    /// something else owns the name, and writing through a link planted there could reach a
    /// file outside the database.
    ///
    /// Durability: the new name is durable only after [`FileSystem::sync_dir`] of the parent;
    /// the file's bytes only after [`WriteFile::sync`].
    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>>;

    /// Removes the file at `path` (not a directory). Durability: the removal may be undone by
    /// a crash until [`FileSystem::sync_dir`] of the parent returns; files opened before stay
    /// readable through their handles.
    fn remove(&self, path: &Path) -> io::Result<()>;

    /// Removes the empty directory `dir`. Durability as [`FileSystem::remove`].
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;

    /// Renames `from` to `to`, atomically replacing any file at `to` (`rename(2)`): a reader
    /// of `to` sees the old file or the new one, never neither. Durability: after a crash
    /// before [`FileSystem::sync_dir`] of both parents, `to` may still name the old file (and
    /// `from` still exist); after it, only the new state.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Makes `to` a second name of the file at `from` (`link(2)`): both names share the same
    /// bytes, and removing either leaves the other intact. Fails with
    /// [`io::ErrorKind::AlreadyExists`] if anything is at `to`, and with
    /// [`io::ErrorKind::Unsupported`] (the default) where a file system cannot link, or
    /// with `CrossesDevices` when `to` is on another device: callers then copy. Durability:
    /// the new name is durable only after [`FileSystem::sync_dir`] of its parent.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let _ = (from, to);
        Err(io::ErrorKind::Unsupported.into())
    }

    /// The names (not paths) of the entries of directory `dir`, in no particular order,
    /// without `.` and `..`. [`io::ErrorKind::NotFound`] if `dir` does not exist. Durability:
    /// none; lists what this process sees, durable or not.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>>;

    /// Creates `dir` and any missing ancestors; nothing happens if it exists. Durability: each
    /// new directory's name is durable only after [`FileSystem::sync_dir`] of its parent.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;

    /// Makes every name created, renamed or removed in directory `dir` durable (`fsync` of the
    /// directory). The bytes of the files those names point at are not synced by this.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;

    /// Size and kind of `path`, following symbolic links. [`io::ErrorKind::NotFound`] if
    /// nothing is there. Durability: none.
    fn metadata(&self, path: &Path) -> io::Result<FileMetadata>;

    /// Takes an advisory lock on the file at `path`, without waiting: fails with
    /// [`io::ErrorKind::WouldBlock`] if another holder (another process, or another call in
    /// this one) holds a conflicting lock. [`LockMode::Exclusive`] creates the file if missing
    /// (with no durability promise: the lock file's content and name carry nothing);
    /// [`LockMode::Shared`] fails with [`io::ErrorKind::NotFound`] instead, so a reader creates
    /// nothing. The lock lasts until the returned guard is dropped.
    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>>;

    /// True if anything is at `path` (a file or a directory); `Err` only for errors other than
    /// [`io::ErrorKind::NotFound`].
    fn exists(&self, path: &Path) -> io::Result<bool> {
        match self.metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether `path` names an object in a remote store rather than a local file: no link,
    /// inode or directory entry stands behind it, only a name and bytes (false, the default,
    /// for a local file system). Wrappers answer for what they wrap.
    fn is_remote(&self, path: &Path) -> bool {
        let _ = path;
        false
    }

    /// What this file system asked of a remote object store, if it keeps files in one
    /// (`None`, the default, for a local one). Wrappers report what they wrap.
    fn store_requests(&self) -> Option<StoreRequests> {
        None
    }

    /// What a writer on another machine (a compaction worker) must check before it writes or
    /// deletes where this file system does: the epoch by which it claimed a remote store's
    /// prefix, if it did (`None`, the default, for a local file system, where the database's
    /// `LOCK` keeps out a second writer). Wrappers answer for what they wrap.
    fn write_fence(&self) -> Option<WriteFence> {
        None
    }

    /// The first `max_bytes` bytes of the file at `path` (all of it if shorter): for small
    /// files such as `CURRENT`, bounded so that garbage cannot exhaust memory.
    fn read_prefix(&self, path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
        let file = self.open_read(path, IoMode::Buffered)?;
        let len = file.size()?.min(max_bytes);
        let len = usize::try_from(len).map_err(io::Error::other)?;
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }
}

/// The file system and I/O mode a reader or writer of tables uses.
#[derive(Clone, Debug)]
pub struct Storage {
    /// Where files live.
    pub fs: Arc<dyn FileSystem>,
    /// How their bytes move.
    pub mode: IoMode,
}

impl Storage {
    /// `fs` with `mode`.
    pub fn new(fs: Arc<dyn FileSystem>, mode: IoMode) -> Self {
        Storage { fs, mode }
    }

    /// Opens `path` for reading in this storage's mode.
    pub fn open_read(&self, path: &Path) -> io::Result<Box<dyn ReadFile>> {
        self.fs.open_read(path, self.mode)
    }

    /// Creates `path` for writing in this storage's mode.
    pub fn create(&self, path: &Path) -> io::Result<Box<dyn WriteFile>> {
        self.fs.create(path, self.mode)
    }
}

impl Default for Storage {
    /// The operating system's files, buffered.
    fn default() -> Self {
        Storage::new(os_fs(), IoMode::Buffered)
    }
}

/// The process-wide [`OsFileSystem`].
pub fn os_fs() -> Arc<dyn FileSystem> {
    static OS: OnceLock<Arc<dyn FileSystem>> = OnceLock::new();
    Arc::clone(OS.get_or_init(|| Arc::new(OsFileSystem)))
}

/// Checks that `dir` accepts [`IoMode::Direct`] files by creating, writing, reading and
/// removing a probe file there. Filesystems such as tmpfs refuse `O_DIRECT`; finding out when
/// the database opens gives a clear error instead of a failed compaction later.
pub fn probe_direct_io(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    let path = dir.join(".direct-io-probe");
    let result = (|| {
        let mut file = fs.create(&path, IoMode::Direct)?;
        file.append(b"direct i/o probe")?;
        file.sync()?;
        drop(file);
        let file = fs.open_read(&path, IoMode::Direct)?;
        let mut back = [0u8; 16];
        file.read_exact_at(&mut back, 0)?;
        if &back != b"direct i/o probe" {
            return Err(io::Error::other("direct read returned other bytes"));
        }
        Ok(())
    })();
    let _ = fs.remove(&path);
    result
}

#[cfg(test)]
mod tests;
