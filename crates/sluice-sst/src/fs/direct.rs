//! Direct I/O (`O_DIRECT`): reads and writes that bypass the page cache. Linux only: other
//! systems spell it differently (`F_NOCACHE` on macOS) or not at all, and there
//! [`super::OsFileSystem`] refuses [`super::IoMode::Direct`] with `Unsupported`.
//!
//! The kernel accepts a direct transfer only when the buffer address, the length and the file
//! offset are all multiples of the device's logical block size; [`DIRECT_IO_ALIGN`] (4 KiB)
//! covers every common device. Callers ask for arbitrary ranges, so:
//!
//! - a reader keeps a window of [`READAHEAD_BYTES`] (RocksDB's default
//!   `compaction_readahead_size`): a read outside it refills it with one aligned read starting
//!   at the read's page, and the asked-for bytes are copied out. Direct files are opened to
//!   stream (compaction inputs, read front to back in sub-task order), so without the window
//!   every sub-task would cost one small device round trip per input file;
//! - a writer collects appends in an aligned buffer and writes it out whole. `sync` writes the
//!   partial last page zero-padded, truncates the file back to its true length and keeps that
//!   page in the buffer, so later appends rewrite it complete (as RocksDB's direct writer does).
//!
//! Aligned memory comes from an ordinary `Vec` over-allocated by one alignment unit and used
//! from its first aligned address: no `unsafe` allocator calls.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

use parking_lot::Mutex;

use super::{DIRECT_IO_ALIGN, READAHEAD_BYTES, ReadFile, WriteFile};

/// Bytes a direct writer collects before writing: 1 MiB, a size at which the device, not the
/// system call, sets the pace.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

const ALIGN: u64 = DIRECT_IO_ALIGN as u64;

fn align_down(n: u64) -> u64 {
    n - n % ALIGN
}

fn align_up(n: u64) -> u64 {
    n.div_ceil(ALIGN) * ALIGN
}

/// A zeroed buffer whose usable part starts at an aligned address.
///
/// Invariant: `start + capacity <= storage.len()` and `storage[start..]` is aligned; `storage`
/// is never resized, so its address never changes.
struct AlignedBuf {
    storage: Vec<u8>,
    start: usize,
    capacity: usize,
}

impl AlignedBuf {
    /// A buffer of `capacity` bytes rounded up to the alignment.
    fn new(capacity: usize) -> Self {
        let capacity = align_up(capacity as u64) as usize;
        let storage = vec![0u8; capacity + DIRECT_IO_ALIGN];
        // Casting the address to an integer is only arithmetic; nothing is dereferenced.
        let misalignment = storage.as_ptr() as usize % DIRECT_IO_ALIGN;
        let start = (DIRECT_IO_ALIGN - misalignment) % DIRECT_IO_ALIGN;
        AlignedBuf {
            storage,
            start,
            capacity,
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.capacity]
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.start..self.start + self.capacity]
    }
}

fn open_direct(options: &mut OpenOptions, extra_flags: i32, path: &Path) -> io::Result<File> {
    options
        .custom_flags(libc::O_DIRECT | extra_flags)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::EINVAL) {
                io::Error::new(
                    io::ErrorKind::Unsupported,
                    "the file system does not support direct I/O (O_DIRECT)",
                )
            } else {
                e
            }
        })
}

/// Reads the aligned range starting at `start` into `into` (aligned, a whole number of pages)
/// until `want` bytes are in or the file ends; returns the bytes read.
fn read_pages(file: &File, into: &mut [u8], start: u64, want: usize) -> io::Result<usize> {
    let mut filled = 0;
    while filled < want {
        let Some(rest) = into.get_mut(filled..) else {
            break;
        };
        match file.read_at(rest, start + filled as u64) {
            Ok(0) => break,
            Ok(n) => {
                filled += n;
                // Only the end of the file cuts a direct read short of a page, and the next
                // read would start unaligned: stop here.
                if n % DIRECT_IO_ALIGN != 0 {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn end_of_file() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "direct read reached the end of the file",
    )
}

/// The bytes of the file at `start..start + len`, held in an aligned buffer.
struct Window {
    buf: AlignedBuf,
    start: u64,
    len: usize,
}

impl Window {
    /// The window's bytes for `offset..offset + n`, if it holds all of them.
    fn get(&self, offset: u64, n: usize) -> Option<&[u8]> {
        let skip = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        let end = skip.checked_add(n)?;
        if end > self.len {
            return None;
        }
        self.buf.as_slice().get(skip..end)
    }
}

/// A file read with `O_DIRECT` through a readahead window (see the module docs).
pub(super) struct DirectReadFile {
    file: File,
    /// Allocated on the first read that fits it.
    window: Mutex<Option<Window>>,
}

impl std::fmt::Debug for DirectReadFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectReadFile")
            .field("file", &self.file)
            .finish()
    }
}

impl DirectReadFile {
    pub(super) fn open(path: &Path) -> io::Result<Self> {
        let file = open_direct(OpenOptions::new().read(true), 0, path)?;
        Ok(DirectReadFile {
            file,
            window: Mutex::new(None),
        })
    }

    /// A read too large for the window: straight into a scratch buffer of its own.
    fn read_unbuffered(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let start = align_down(offset);
        let want = (end - start) as usize;
        let mut scratch = AlignedBuf::new((align_up(end) - start) as usize);
        let filled = read_pages(&self.file, scratch.as_mut_slice(), start, want)?;
        let skip = (offset - start) as usize;
        match scratch.as_slice().get(skip..skip + buf.len()) {
            Some(bytes) if filled >= want => {
                buf.copy_from_slice(bytes);
                Ok(())
            }
            _ => Err(end_of_file()),
        }
    }
}

impl ReadFile for DirectReadFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        // Nothing to read succeeds wherever it is, as a buffered `pread` of 0 bytes does.
        if buf.is_empty() {
            return Ok(());
        }
        let start = align_down(offset);
        if (offset - start) as usize + buf.len() > READAHEAD_BYTES {
            return self.read_unbuffered(buf, offset);
        }
        let mut slot = self.window.lock();
        if let Some(bytes) = slot.as_ref().and_then(|w| w.get(offset, buf.len())) {
            buf.copy_from_slice(bytes);
            return Ok(());
        }
        let window = slot.get_or_insert_with(|| Window {
            buf: AlignedBuf::new(READAHEAD_BYTES),
            start: 0,
            len: 0,
        });
        // Invalidate first: if the read fails the window must not claim stale bytes.
        window.len = 0;
        window.len = read_pages(
            &self.file,
            window.buf.as_mut_slice(),
            start,
            READAHEAD_BYTES,
        )?;
        window.start = start;
        let bytes = window.get(offset, buf.len()).ok_or_else(end_of_file)?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
}

/// A file written with `O_DIRECT`, see the module docs.
///
/// Invariant: `file_offset` is aligned and is where `buf[0]` belongs; the file's logical
/// length is `file_offset + buffered`.
pub(super) struct DirectWriteFile {
    file: File,
    buf: AlignedBuf,
    buffered: usize,
    file_offset: u64,
}

impl std::fmt::Debug for DirectWriteFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectWriteFile")
            .field("file", &self.file)
            .field("len", &(self.file_offset + self.buffered as u64))
            .finish()
    }
}

impl DirectWriteFile {
    pub(super) fn create(path: &Path) -> io::Result<Self> {
        let file = open_direct(&mut super::os::new_file_options(), libc::O_NOFOLLOW, path)?;
        Ok(DirectWriteFile {
            file,
            buf: AlignedBuf::new(WRITE_BUFFER_BYTES),
            buffered: 0,
            file_offset: 0,
        })
    }

    /// Writes the full buffer and starts an empty one after it.
    fn write_full_buffer(&mut self) -> io::Result<()> {
        self.file
            .write_all_at(self.buf.as_slice(), self.file_offset)?;
        self.file_offset += self.buf.capacity as u64;
        self.buffered = 0;
        Ok(())
    }
}

impl WriteFile for DirectWriteFile {
    fn append(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let free = &mut self.buf.as_mut_slice()[self.buffered..];
            let n = free.len().min(data.len());
            let (now, later) = data.split_at(n);
            free[..n].copy_from_slice(now);
            self.buffered += n;
            data = later;
            if self.buffered == self.buf.capacity {
                self.write_full_buffer()?;
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.buffered > 0 {
            let padded = align_up(self.buffered as u64) as usize;
            let bytes = self.buf.as_mut_slice();
            bytes[self.buffered..padded].fill(0);
            self.file.write_all_at(&bytes[..padded], self.file_offset)?;
            self.file.set_len(self.file_offset + self.buffered as u64)?;
            // Keep the partial last page: the next append completes it in place.
            let whole = align_down(self.buffered as u64) as usize;
            bytes.copy_within(whole..self.buffered, 0);
            self.file_offset += whole as u64;
            self.buffered -= whole;
        }
        self.file.sync_all()
    }
}
