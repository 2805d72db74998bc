//! The storage layer under tables: how a file is opened, read at an offset, appended to, synced
//! and removed.
//!
//! Table reads and writes, and the writes of the WAL and MANIFEST, go through a [`FileSystem`],
//! so two things need no change above it: compaction can switch to direct I/O
//! ([`IoMode::Direct`], RocksDB's `use_direct_io_for_flush_and_compaction`), and a test can put
//! a [`FaultInjectingFs`] under the whole engine to fail or corrupt one chosen read, write or
//! sync (Pebble's `vfs.FS` and `errorfs`, RocksDB's `FileSystem` and `FaultInjectionTestFS`). Errors here are plain
//! `io::Error`s; callers add the path with [`crate::IoContext`].

mod direct;
mod fault;
mod os;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

pub use direct::{DIRECT_IO_ALIGN, READAHEAD_BYTES};
pub use fault::{Fault, FaultAction, FaultInjectingFs, FaultOp};
pub use os::OsFileSystem;

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
}

/// Opens, creates and removes files.
pub trait FileSystem: Send + Sync + fmt::Debug {
    /// Opens an existing file for reading.
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>>;

    /// Creates a new file at `path`. Fails with [`io::ErrorKind::AlreadyExists`] if anything
    /// is there already, a symbolic link included (`O_CREAT | O_EXCL | O_NOFOLLOW`): every
    /// file Sluice writes takes a number never used before, so an existing file means
    /// something else owns the name, and writing through a link planted there could reach a
    /// file outside the database.
    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>>;

    /// Removes the file at `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
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
