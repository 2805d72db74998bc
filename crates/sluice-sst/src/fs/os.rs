//! The operating system's files: `pread` for reads, a write buffer in front of `write` for
//! appends, `fsync` for sync, `rename(2)`, `fcntl` record locks. Direct-I/O files are in
//! `super::direct` and mapped log files in `super::mapped` (Linux only).
//!
//! Portability: everything here builds on any Unix. Linux-only calls (`O_DIRECT`,
//! `sync_file_range`) are behind `cfg(target_os = "linux")`; elsewhere direct I/O is refused
//! with [`io::ErrorKind::Unsupported`] (so `probe_direct_io` reports it at open) and the
//! writeback hint is skipped (only a hint: `sync` still makes everything durable).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

#[cfg(target_os = "linux")]
use super::direct::{DirectReadFile, DirectWriteFile};
#[cfg(target_os = "linux")]
use super::mapped::MappedWriteFile;
use super::{FileLock, FileMetadata, FileSystem, IoMode, LockMode, ReadFile, WriteFile};

/// Size of the buffer in front of a buffered file being written: large enough that a table's
/// 4 KiB blocks cost one `write` per 64 of them.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// A file being written asks the kernel to start writing back every this many bytes (Pebble's
/// `BytesPerSync` default; RocksDB's `bytes_per_sync`). Without it a 64 MiB table is still
/// all dirty when it is synced, and that one `fsync` stalls the whole compaction pipeline
/// behind its writer; with it the final `fsync` finds little left to do.
pub const BYTES_PER_SYNC: u64 = 512 * 1024;

/// Files of the local file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

impl FileSystem for OsFileSystem {
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        Ok(match mode {
            IoMode::Buffered | IoMode::Mapped => Box::new(BufferedReadFile(File::open(path)?)),
            #[cfg(target_os = "linux")]
            IoMode::Direct => Box::new(DirectReadFile::open(path)?),
            #[cfg(not(target_os = "linux"))]
            IoMode::Direct => return Err(direct_unsupported()),
        })
    }

    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        Ok(match mode {
            IoMode::Buffered => create_buffered(path)?,
            #[cfg(target_os = "linux")]
            IoMode::Mapped => match MappedWriteFile::create(path)? {
                Some(mapped) => Box::new(mapped),
                None => {
                    // Created, but its blocks cannot be reserved: write it buffered instead.
                    self.remove(path)?;
                    create_buffered(path)?
                }
            },
            #[cfg(not(target_os = "linux"))]
            IoMode::Mapped => create_buffered(path)?,
            #[cfg(target_os = "linux")]
            IoMode::Direct => Box::new(DirectWriteFile::create(path)?),
            #[cfg(not(target_os = "linux"))]
            IoMode::Direct => return Err(direct_unsupported()),
        })
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        std::fs::remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect()
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        std::fs::create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMetadata> {
        let own = std::fs::symlink_metadata(path)?;
        let is_symlink = own.file_type().is_symlink();
        let meta = if is_symlink {
            std::fs::metadata(path)?
        } else {
            own
        };
        Ok(FileMetadata {
            len: if meta.is_dir() { 0 } else { meta.len() },
            is_dir: meta.is_dir(),
            is_symlink,
        })
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
        super::os_lock::lock(path, mode)
    }
}

fn create_buffered(path: &Path) -> io::Result<Box<dyn WriteFile>> {
    Ok(Box::new(BufferedWriteFile::new(
        new_file_options().open(path)?,
    )))
}

#[cfg(not(target_os = "linux"))]
fn direct_unsupported() -> io::Error {
    io::Error::new(
        io::ErrorKind::Unsupported,
        "direct I/O (O_DIRECT) is only supported on Linux",
    )
}

/// Options that create a file only where nothing exists, not even a symbolic link
/// (see [`FileSystem::create`]).
pub(super) fn new_file_options() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    // O_EXCL alone already refuses a link at the name; O_NOFOLLOW says so in the flags.
    options
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW);
    options
}

/// A file read with `pread`, through the page cache.
#[derive(Debug)]
struct BufferedReadFile(File);

impl ReadFile for BufferedReadFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
}

/// A file appended to through a write buffer and the page cache.
#[derive(Debug)]
struct BufferedWriteFile {
    file: BufWriter<File>,
    /// Bytes appended so far.
    appended: u64,
    /// Bytes before this offset have been handed to writeback.
    writeback_to: u64,
    /// Writeback requests made, for the test that exercises them.
    writebacks: u64,
}

impl BufferedWriteFile {
    fn new(file: File) -> Self {
        BufferedWriteFile {
            file: BufWriter::with_capacity(WRITE_BUFFER_BYTES, file),
            appended: 0,
            writeback_to: 0,
            writebacks: 0,
        }
    }

    /// Starts writeback of what reached the page cache since the last call, once that is
    /// [`BYTES_PER_SYNC`] or more. Only a hint: it neither waits nor makes anything durable
    /// (`sync` does), so a failure is ignored.
    fn start_writeback(&mut self) {
        let in_kernel = self.appended - self.file.buffer().len() as u64;
        if in_kernel < self.writeback_to + BYTES_PER_SYNC {
            return;
        }
        request_writeback(self.file.get_ref(), self.writeback_to, in_kernel);
        self.writeback_to = in_kernel;
        self.writebacks += 1;
    }
}

/// Asks the kernel to start writing back `file`'s bytes in `from..to` (`sync_file_range` with
/// `SYNC_FILE_RANGE_WRITE`). A hint: it neither waits nor makes anything durable.
#[cfg(target_os = "linux")]
pub(super) fn request_writeback(file: &File, from: u64, to: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(from), i64::try_from(to - from)) else {
        return;
    };
    #[expect(
        unsafe_code,
        reason = "sync_file_range has no safe wrapper in std or nix"
    )]
    // SAFETY: the descriptor belongs to `file`, borrowed for the whole call, so it stays open;
    // the call takes no pointers, so it cannot touch our memory. Exercised by
    // `a_long_append_starts_writeback_as_it_goes_and_keeps_every_byte`.
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}

/// Elsewhere there is no portable writeback hint; the final `sync` does all the work.
#[cfg(not(target_os = "linux"))]
fn request_writeback(_file: &File, _from: u64, _to: u64) {}

impl WriteFile for BufferedWriteFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.file.write_all(data)?;
        self.appended += data.len() as u64;
        self.start_writeback();
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_all()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.get_ref().sync_data()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    #[test]
    fn a_long_append_starts_writeback_as_it_goes_and_keeps_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let mut w = BufferedWriteFile::new(File::create(&path).unwrap());
        let data: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
        for chunk in data.chunks(4096 + 17) {
            w.append(chunk).unwrap();
        }
        w.sync().unwrap();
        // 3 MiB in 512 KiB steps, less what the write buffer still held each time.
        assert!(w.writebacks >= 4, "{} writebacks", w.writebacks);
        assert!(w.writeback_to <= w.appended);
        drop(w);
        let mut back = Vec::new();
        File::open(&path).unwrap().read_to_end(&mut back).unwrap();
        assert!(back == data, "the file differs from what was appended");
    }
}
