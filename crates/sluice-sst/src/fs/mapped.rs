//! A file appended to through a shared memory mapping ([`IoMode::Mapped`](super::IoMode)): the
//! write-ahead log's file on Linux.
//!
//! A log that promises to survive a crash of the process must put each unsynced commit in the
//! kernel before acknowledging it. Through `write(2)` that is one system call per commit, which
//! profiles of fillrandom showed to be a third of the writing thread's time. Through a shared
//! mapping it is a `memcpy`: the bytes are in the page cache the moment they are copied, so a
//! SIGKILL loses none of them, and `fdatasync` makes them durable like written ones. Large
//! appends, where one system call is cheap beside the bytes, are `pwrite`s into the same
//! window instead, which spares faulting their pages in.
//!
//! The file grows a [`WINDOW_BYTES`] window at a time: `fallocate` reserves the window's blocks
//! (so a full disk is an error from `append`, not a SIGBUS in the middle of a `memcpy`) and
//! extends the file, and the window is mapped. Until the writer is dropped, the file ends in
//! zeros past the appended bytes: a crash leaves them there, and the log reader takes an
//! all-zero tail after the last record as the clean end of the log (what `fallocate`'s
//! preallocation in RocksDB's and LevelDB's writers leaves too). `finish`, and dropping the
//! writer, cut the file to the bytes appended.
//!
//! Invariants: `window`, when mapped, covers file bytes `window_start..window_start +
//! WINDOW_BYTES`, all inside the file (`allocated` is its size), and `appended` lies in that
//! range (its end included: the next append maps the next window). Nothing else maps,
//! truncates or writes the file while the writer lives: it was created by this writer
//! (`O_EXCL`), and the database's LOCK keeps other engines out.
//!
//! What a mapping cannot turn into an error: a page written back and evicted while partly
//! filled must be read back before the next copy into it, and a read error there is a SIGBUS.
//! The pages written are the file's newest, so they are resident in all but extreme memory
//! pressure; `write(2)` would report that error instead, which is the one thing this trades.

use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::ptr::NonNull;

use nix::fcntl::{FallocateFlags, fallocate};
use nix::sys::mman::{MapFlags, MmapAdvise, ProtFlags, madvise, mmap, munmap};

use super::WriteFile;
use super::os::{BYTES_PER_SYNC, new_file_options, request_writeback};

/// Bytes mapped, and reserved on disk, at a time. A multiple of the page size and of the log's
/// 32 KiB block, and small enough that the zeros a crash leaves cost the reader nothing.
pub(super) const WINDOW_BYTES: usize = 4 << 20;

/// Bytes of the window faulted in at a time: large enough that one call replaces many page
/// faults, small enough that the append paying for it is not held up long (populating a
/// whole 4 MiB window at once put 4 ms on one append in a thousand, 256 KiB 140 us on one
/// in a hundred).
const POPULATE_BYTES: usize = 64 << 10;

/// Appends of at least this many bytes are written with `pwrite` rather than copied into the
/// mapping: the system call costs less than faulting their pages in, which for a fresh page
/// of a reserved block means reading it as zeros first. Profiles of 32 KiB values showed the
/// faults at a tenth of all CPU; 4 KiB values are faster through the mapping.
const WRITE_THRESHOLD_BYTES: usize = 16 << 10;

/// The smallest page size `madvise` ranges must be aligned to; [`MappedWriteFile::populated`]
/// stays a multiple of it.
const PAGE_BYTES: usize = 4096;

/// See the module documentation.
#[derive(Debug)]
pub(super) struct MappedWriteFile {
    file: File,
    /// The mapped window, [`WINDOW_BYTES`] long; `None` only until the first one is mapped or
    /// after mapping one failed.
    window: Option<NonNull<u8>>,
    /// File offset of the window's first byte.
    window_start: u64,
    /// Bytes appended so far: the log's length.
    appended: u64,
    /// The file's size: every window reserved so far.
    allocated: u64,
    /// Bytes before this offset have been handed to writeback.
    writeback_to: u64,
    /// Bytes of the window, from its start, faulted in for writing ([`Self::populate`]).
    populated: usize,
}

// SAFETY: the mapping behind `window` is owned by this writer alone (no copy of the pointer
// leaves it), so moving the writer to another thread moves sole access with it.
#[expect(unsafe_code, reason = "a raw mapping pointer is not Send by default")]
unsafe impl Send for MappedWriteFile {}

impl MappedWriteFile {
    /// Creates the file at `path` (which must not exist) and reserves its first window. Returns
    /// `Ok(None)` where the file system cannot reserve blocks (`fallocate` unsupported): a
    /// mapping there could fault with SIGBUS on a full disk, so the caller writes it buffered.
    pub(super) fn create(path: &Path) -> io::Result<Option<Self>> {
        let file = new_file_options().read(true).open(path)?;
        let mut mapped = MappedWriteFile {
            file,
            window: None,
            window_start: 0,
            appended: 0,
            allocated: 0,
            writeback_to: 0,
            populated: 0,
        };
        match mapped.map_window() {
            Ok(()) => Ok(Some(mapped)),
            Err(e) if e.kind() == io::ErrorKind::Unsupported => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Maps the window holding offset `appended`, reserving its blocks first (and extending
    /// the file over it), in place of the current window, whose dirty pages stay in the page
    /// cache to be written back as usual. Windows start at multiples of [`WINDOW_BYTES`], which
    /// every page size divides, as `mmap` requires of the offset. On failure no window is
    /// mapped, and a retry maps the same one (`fallocate` of reserved blocks is harmless).
    fn map_window(&mut self) -> io::Result<()> {
        use nix::errno::Errno;
        let start = self.appended - self.appended % WINDOW_BYTES as u64;
        let offset = i64::try_from(start).map_err(io::Error::other)?;
        fallocate(
            self.file.as_fd(),
            FallocateFlags::empty(),
            offset,
            WINDOW_BYTES as i64,
        )
        .map_err(|e| {
            if matches!(e, Errno::EOPNOTSUPP | Errno::ENOSYS) {
                io::Error::from(io::ErrorKind::Unsupported)
            } else {
                io::Error::from(e)
            }
        })?;
        self.unmap();
        let size = NonZeroUsize::new(WINDOW_BYTES).ok_or_else(|| io::Error::other("window"))?;
        #[expect(unsafe_code, reason = "mapping a file has no safe interface")]
        // SAFETY: a fresh mapping chosen by the kernel (no address hint, no MAP_FIXED), so it
        // cannot overlap memory Rust already uses. The window lies inside the file, which
        // `fallocate` has just extended over it with reserved blocks, so touching any of its
        // bytes neither faults past the end (SIGBUS) nor needs an allocation that could fail.
        // Exercised by every test of this module.
        let ptr = unsafe {
            mmap(
                None,
                size,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                self.file.as_fd(),
                offset,
            )
        }?;
        self.window = Some(ptr.cast());
        self.window_start = start;
        self.populated = 0;
        self.allocated = self.allocated.max(start + WINDOW_BYTES as u64);
        Ok(())
    }

    fn unmap(&mut self) {
        if let Some(window) = self.window.take() {
            #[expect(unsafe_code, reason = "unmapping has no safe interface")]
            // SAFETY: `window` came from `mmap` with length WINDOW_BYTES and was taken out of
            // `self.window`, so no reference into the mapping outlives this call.
            let unmapped = unsafe { munmap(window.cast(), WINDOW_BYTES) };
            // munmap fails only on arguments mmap itself returned; nothing to recover.
            debug_assert!(unmapped.is_ok(), "{unmapped:?}");
        }
    }

    /// Faults the window's pages up to byte `end` in for writing, [`POPULATE_BYTES`] at a
    /// time, in one call each, rather than one page fault per 4 KiB page as the copies reach
    /// them: with 4 KiB values those faults were a tenth of the writing thread's time. The
    /// pages become dirty zeros, which is what the reserved blocks read as anyway. Only an
    /// optimisation: a kernel without MADV_POPULATE_WRITE (before 5.14) refuses it, and the
    /// copies fault as before.
    fn populate(&mut self, window: NonNull<u8>, end: usize) {
        while self.populated < end {
            let len = POPULATE_BYTES.min(WINDOW_BYTES - self.populated);
            #[expect(unsafe_code, reason = "madvise has no safe interface")]
            // SAFETY: `populated + len <= WINDOW_BYTES`, so the range lies inside the live
            // mapping, and populating it changes none of its bytes.
            let _ = unsafe {
                madvise(
                    window.add(self.populated).cast(),
                    len,
                    MmapAdvise::MADV_POPULATE_WRITE,
                )
            };
            self.populated += len;
        }
    }

    /// Starts writeback of the windows left behind since the last call, once they hold
    /// [`BYTES_PER_SYNC`] or more, so a later `fdatasync` finds at most about a window left to
    /// do. Only unmapped pages: writing back a page that is still mapped makes the kernel
    /// write-protect it first (`folio_mkclean`), which flushes the TLB of every CPU the
    /// process runs on; with 4 KiB values that was a sixth of all CPU time in overwrite.
    fn start_writeback(&mut self) {
        let behind = self.window_start;
        if behind >= self.writeback_to + BYTES_PER_SYNC {
            request_writeback(&self.file, self.writeback_to, behind);
            self.writeback_to = behind;
        }
    }
}

impl WriteFile for MappedWriteFile {
    fn append(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            if self.window.is_none() || self.appended == self.window_start + WINDOW_BYTES as u64 {
                self.map_window()?;
            }
            let Some(window) = self.window else {
                return Err(io::Error::other("log window not mapped"));
            };
            // Below WINDOW_BYTES: `appended` is inside the window just checked or mapped.
            let at = (self.appended - self.window_start) as usize;
            let n = data.len().min(WINDOW_BYTES - at);
            if n >= WRITE_THRESHOLD_BYTES {
                // Inside the window, which the file already extends over: like a copy into
                // the mapping, the bytes are in the page cache when this returns.
                self.file.write_all_at(&data[..n], self.appended)?;
                self.populated = self.populated.max((at + n) / PAGE_BYTES * PAGE_BYTES);
            } else {
                self.populate(window, at + n);
                #[expect(
                    unsafe_code,
                    reason = "copying into a mapping goes through a raw pointer"
                )]
                // SAFETY: `at + n <= WINDOW_BYTES`, so the destination lies inside the live
                // mapping; the source is a Rust slice of at least `n` bytes and cannot overlap
                // a mapping this writer alone created.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), window.as_ptr().add(at), n);
                }
            }
            self.appended += n as u64;
            data = &data[n..];
        }
        self.start_writeback();
        Ok(())
    }

    /// Nothing to do: appended bytes are in the page cache already.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// `fsync` of the file. On Linux it writes back the pages dirtied through the mapping as
    /// well as written ones (they are the same page-cache pages), which `msync` would do only
    /// for the window still mapped.
    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_all()
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Unmaps the window, cuts the file to the bytes appended and `fsync`s it with its new
    /// size. A later append maps the window holding the end again.
    fn finish(&mut self) -> io::Result<()> {
        self.unmap();
        self.file.set_len(self.appended)?;
        self.allocated = self.appended;
        self.file.sync_all()
    }
}

impl Drop for MappedWriteFile {
    /// Unmaps the window and cuts the file to the bytes appended. A failed truncation leaves a
    /// zero tail, which readers take as the end of the log, so it is ignored.
    fn drop(&mut self) {
        self.unmap();
        if self.allocated > self.appended {
            let _ = self.file.set_len(self.appended);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn read(path: &Path) -> Vec<u8> {
        let mut back = Vec::new();
        File::open(path).unwrap().read_to_end(&mut back).unwrap();
        back
    }

    #[test]
    fn appends_across_windows_read_back_exactly_once_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.log");
        let Some(mut w) = MappedWriteFile::create(&path).unwrap() else {
            return; // This file system cannot reserve blocks; the buffered file is used.
        };
        let data: Vec<u8> = (0..2 * WINDOW_BYTES + 12345)
            .map(|i| (i % 251) as u8)
            .collect();
        // Odd-sized pieces, so some straddle a window boundary.
        for chunk in data.chunks(100_003) {
            w.append(chunk).unwrap();
        }
        assert_eq!(w.allocated, 3 * WINDOW_BYTES as u64);
        w.sync_data().unwrap();
        drop(w);
        assert!(
            read(&path) == data,
            "the file differs from what was appended"
        );
    }

    #[test]
    fn appended_bytes_are_in_the_file_before_any_sync_and_a_crash_leaves_a_zero_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000002.log");
        let Some(mut w) = MappedWriteFile::create(&path).unwrap() else {
            return;
        };
        w.append(b"acknowledged").unwrap();
        w.flush().unwrap();
        // Another reader of the file (a restarted process after a SIGKILL) sees the bytes at
        // once, followed by the rest of the reserved window as zeros.
        let seen = read(&path);
        assert_eq!(seen.len(), WINDOW_BYTES);
        assert_eq!(&seen[..12], b"acknowledged");
        assert!(seen[12..].iter().all(|&b| b == 0));
        drop(w);
        assert_eq!(read(&path), b"acknowledged");
    }

    #[test]
    fn finish_ends_the_file_at_the_last_byte_and_appending_may_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000004.log");
        let Some(mut w) = MappedWriteFile::create(&path).unwrap() else {
            return;
        };
        let first = vec![1; WINDOW_BYTES + 10];
        w.append(&first).unwrap();
        w.finish().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), first.len() as u64);
        // The window holding the end is mapped again: offset 10 of the second window.
        w.append(b"after").unwrap();
        drop(w);
        let back = read(&path);
        assert_eq!(back.len(), first.len() + 5);
        assert!(back[..first.len()] == first[..] && &back[first.len()..] == b"after");
    }

    #[test]
    fn small_and_large_appends_interleave_in_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000004.log");
        let Some(mut w) = MappedWriteFile::create(&path).unwrap() else {
            return;
        };
        // Sizes on both sides of the pwrite threshold, some straddling pages and windows.
        let mut data = Vec::new();
        let mut i = 0u32;
        while data.len() < 2 * WINDOW_BYTES + 5000 {
            let len = [100, WRITE_THRESHOLD_BYTES, 7, 40_000, 4095, 70_001][i as usize % 6];
            let piece: Vec<u8> = (0..len).map(|j| (j as u32 ^ i) as u8).collect();
            w.append(&piece).unwrap();
            data.extend_from_slice(&piece);
            i += 1;
        }
        assert_eq!(w.populated % PAGE_BYTES, 0);
        drop(w);
        assert!(
            read(&path) == data,
            "the file differs from what was appended"
        );
    }

    #[test]
    fn long_appends_start_writeback_of_the_windows_left_behind() {
        let dir = tempfile::tempdir().unwrap();
        let Some(mut w) = MappedWriteFile::create(&dir.path().join("000003.log")).unwrap() else {
            return;
        };
        // Inside the first window nothing is handed to writeback: its pages are mapped.
        w.append(&vec![7; 3 << 20]).unwrap();
        assert_eq!(w.writeback_to, 0);
        // The large append was written, not faulted in; a small one faults in the chunk it
        // starts, whole.
        w.append(&[7; 5]).unwrap();
        assert_eq!(w.populated, (3 << 20) + POPULATE_BYTES);
        // Once appends move on to the next windows, the ones behind are.
        w.append(&vec![7; WINDOW_BYTES + (3 << 20) - 5]).unwrap();
        assert_eq!(w.writeback_to, 2 * WINDOW_BYTES as u64);
    }
}
