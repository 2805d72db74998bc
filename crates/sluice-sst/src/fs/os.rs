//! The operating system's files: `pread` for reads, a write buffer in front of `write` for
//! appends, `fsync` for sync. Direct-I/O files are in [`super::direct`].

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::direct::{DirectReadFile, DirectWriteFile};
use super::{FileSystem, IoMode, ReadFile, WriteFile};

/// Size of the buffer in front of a buffered file being written: large enough that a table's
/// 4 KiB blocks cost one `write` per 64 of them.
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// Files of the local file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsFileSystem;

impl FileSystem for OsFileSystem {
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        Ok(match mode {
            IoMode::Buffered => Box::new(BufferedReadFile(File::open(path)?)),
            IoMode::Direct => Box::new(DirectReadFile::open(path)?),
        })
    }

    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        Ok(match mode {
            IoMode::Buffered => Box::new(BufferedWriteFile(BufWriter::with_capacity(
                WRITE_BUFFER_BYTES,
                File::create(path)?,
            ))),
            IoMode::Direct => Box::new(DirectWriteFile::create(path)?),
        })
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }
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
struct BufferedWriteFile(BufWriter<File>);

impl WriteFile for BufferedWriteFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write_all(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.flush()?;
        self.0.get_ref().sync_all()
    }
}
