//! Copying and linking whole files through a [`FileSystem`]: what checkpoints and backups are
//! made of.

use std::io;
use std::path::Path;

use super::{FileSystem, IoMode, ReadFile};
use crate::checksum::crc32c_extend;

/// Bytes moved per read and append while copying: large enough that the system calls do not
/// matter, small enough that a copy of any file needs little memory.
const COPY_CHUNK: u64 = 1 << 20;

/// How [`link_or_copy`] made a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A hard link: no bytes moved, both names share them.
    Linked,
    /// A synced copy.
    Copied(Copied),
}

/// What [`copy_file`] copied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Copied {
    /// Bytes copied.
    pub len: u64,
    /// CRC32C of those bytes (unmasked), computed as they passed: what a backup records
    /// to verify the copy later.
    pub crc32c: u32,
}

/// Copies the first `len` bytes of `from` (all of it with `None`) into a new file `to`, and
/// syncs it. Fails with [`io::ErrorKind::UnexpectedEof`] if `from`
/// is shorter than `len`, and with [`io::ErrorKind::AlreadyExists`] if `to` exists. The name
/// `to` is durable only after [`FileSystem::sync_dir`] of its parent.
pub fn copy_file(
    fs: &dyn FileSystem,
    from: &Path,
    to: &Path,
    len: Option<u64>,
) -> io::Result<Copied> {
    copy_file_between(fs, from, fs, to, len)
}

/// [`copy_file`] from a file on `from_fs` to a new file on `to_fs`.
pub fn copy_file_between(
    from_fs: &dyn FileSystem,
    from: &Path,
    to_fs: &dyn FileSystem,
    to: &Path,
    len: Option<u64>,
) -> io::Result<Copied> {
    let src = from_fs.open_read(from, IoMode::Buffered)?;
    let len = prefix_len(&*src, len)?;
    let mut dst = to_fs.create(to, IoMode::Buffered)?;
    let copied = read_chunks(&*src, len, |chunk| dst.append(chunk))?;
    dst.sync()?;
    Ok(copied)
}

/// The length and CRC32C of the first `len` bytes of `path` (all of it with `None`), read in
/// chunks: what [`copy_file`] would report for a copy of it.
pub fn file_crc32c(fs: &dyn FileSystem, path: &Path, len: Option<u64>) -> io::Result<Copied> {
    let file = fs.open_read(path, IoMode::Buffered)?;
    let len = prefix_len(&*file, len)?;
    read_chunks(&*file, len, |_| Ok(()))
}

/// The length and CRC32C of every byte of an open `file`: the checksum of exactly the bytes
/// whoever holds `file` reads, whatever its name leads to by now.
pub fn open_file_crc32c(file: &dyn ReadFile) -> io::Result<Copied> {
    read_chunks(file, file.size()?, |_| Ok(()))
}

/// `len`, or the whole file with `None`; [`io::ErrorKind::UnexpectedEof`] past its end.
fn prefix_len(file: &dyn ReadFile, len: Option<u64>) -> io::Result<u64> {
    let size = file.size()?;
    match len {
        Some(len) if len > size => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("{len} bytes to copy, but the file has {size}"),
        )),
        Some(len) => Ok(len),
        None => Ok(size),
    }
}

/// Reads the first `len` bytes of `file` a chunk at a time, hands each to `sink`, and returns
/// their length and CRC32C.
fn read_chunks(
    file: &dyn ReadFile,
    len: u64,
    mut sink: impl FnMut(&[u8]) -> io::Result<()>,
) -> io::Result<Copied> {
    let mut buf = Vec::new();
    let (mut offset, mut crc) = (0, 0);
    while offset < len {
        let n = (len - offset).min(COPY_CHUNK);
        // `n` is at most COPY_CHUNK, which fits in usize.
        buf.resize(n as usize, 0);
        file.read_exact_at(&mut buf, offset)?;
        crc = crc32c_extend(crc, &buf);
        sink(&buf)?;
        offset += n;
    }
    Ok(Copied { len, crc32c: crc })
}

/// Makes `to` hold the bytes of `from`: a hard link where the file system can make one, or
/// else a synced copy (another device, a file system without links). Only for files that never
/// change once written, such as tables: a link shares later changes, a copy does not.
pub fn link_or_copy(fs: &dyn FileSystem, from: &Path, to: &Path) -> io::Result<Placed> {
    match fs.hard_link(from, to) {
        Ok(()) => Ok(Placed::Linked),
        Err(e) if link_unavailable(&e) => copy_file(fs, from, to, None).map(Placed::Copied),
        Err(e) => Err(e),
    }
}

/// Errors that mean "cannot link here", not "something is wrong".
fn link_unavailable(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::Unsupported
            | io::ErrorKind::CrossesDevices
            // EPERM: file systems such as some FUSE and network mounts refuse link(2).
            | io::ErrorKind::PermissionDenied
            // EMLINK: the source already has the most links its file system allows.
            | io::ErrorKind::TooManyLinks
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

    use std::ffi::OsString;
    use std::sync::Arc;

    use super::*;
    use crate::fs::{
        Fault, FaultInjectingFs, FaultOp, FileLock, FileMetadata, LockMode, MemFs, OsFileSystem,
        ReadFile, WriteFile,
    };

    fn write(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) {
        let mut f = fs.create(path, IoMode::Buffered).unwrap();
        f.append(bytes).unwrap();
        f.sync().unwrap();
    }

    fn read(fs: &dyn FileSystem, path: &Path) -> Vec<u8> {
        fs.read_prefix(path, u64::MAX).unwrap()
    }

    #[test]
    fn copy_takes_a_prefix_across_chunks_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let bytes: Vec<u8> = (0..(COPY_CHUNK as usize * 2 + 17))
            .map(|i| i as u8)
            .collect();
        let (from, to) = (dir.path().join("a"), dir.path().join("b"));
        write(&fs, &from, &bytes);
        let copied = copy_file(&fs, &from, &to, Some(COPY_CHUNK + 5)).unwrap();
        let prefix = &bytes[..COPY_CHUNK as usize + 5];
        assert_eq!(copied.len, COPY_CHUNK + 5);
        assert_eq!(copied.crc32c, crate::checksum::crc32c(prefix));
        assert_eq!(file_crc32c(&fs, &to, None).unwrap(), copied);
        assert_eq!(
            file_crc32c(&fs, &from, Some(COPY_CHUNK + 5)).unwrap(),
            copied
        );
        assert_eq!(read(&fs, &to), prefix);
        let again = copy_file(&fs, &from, &to, None).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        let c = dir.path().join("c");
        let short = copy_file(&fs, &from, &c, Some(bytes.len() as u64 + 1)).unwrap_err();
        assert_eq!(short.kind(), io::ErrorKind::UnexpectedEof);
        assert!(!fs.exists(&c).unwrap(), "a refused copy creates nothing");
    }

    #[test]
    fn links_share_bytes_and_survive_removal_of_the_source() {
        for fs in [
            Arc::new(MemFs::new()) as Arc<dyn FileSystem>,
            Arc::new(OsFileSystem),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let (from, to) = (dir.path().join("a"), dir.path().join("b"));
            fs.create_dir_all(dir.path()).unwrap();
            write(&*fs, &from, b"table bytes");
            assert_eq!(link_or_copy(&*fs, &from, &to).unwrap(), Placed::Linked);
            fs.remove(&from).unwrap();
            assert_eq!(read(&*fs, &to), b"table bytes");
            let exists = fs.hard_link(&to, &to).unwrap_err();
            assert_eq!(exists.kind(), io::ErrorKind::AlreadyExists);
        }
    }

    /// A file system that keeps the trait's default `hard_link`: it cannot link.
    #[derive(Debug)]
    struct NoLinks(MemFs);

    impl FileSystem for NoLinks {
        fn open_read(&self, p: &Path, m: IoMode) -> io::Result<Box<dyn ReadFile>> {
            self.0.open_read(p, m)
        }
        fn create(&self, p: &Path, m: IoMode) -> io::Result<Box<dyn WriteFile>> {
            self.0.create(p, m)
        }
        fn remove(&self, p: &Path) -> io::Result<()> {
            self.0.remove(p)
        }
        fn remove_dir(&self, d: &Path) -> io::Result<()> {
            self.0.remove_dir(d)
        }
        fn rename(&self, a: &Path, b: &Path) -> io::Result<()> {
            self.0.rename(a, b)
        }
        fn list_dir(&self, d: &Path) -> io::Result<Vec<OsString>> {
            self.0.list_dir(d)
        }
        fn create_dir_all(&self, d: &Path) -> io::Result<()> {
            self.0.create_dir_all(d)
        }
        fn sync_dir(&self, d: &Path) -> io::Result<()> {
            self.0.sync_dir(d)
        }
        fn metadata(&self, p: &Path) -> io::Result<FileMetadata> {
            self.0.metadata(p)
        }
        fn lock(&self, p: &Path, m: LockMode) -> io::Result<Box<dyn FileLock>> {
            self.0.lock(p, m)
        }
    }

    #[test]
    fn a_file_system_that_cannot_link_gets_a_copy() {
        let (from, to) = (Path::new("/a"), Path::new("/b"));
        let fs = NoLinks(MemFs::new());
        write(&fs, from, b"0123456789");
        let copied = Copied {
            len: 10,
            crc32c: crate::checksum::crc32c(b"0123456789"),
        };
        assert_eq!(link_or_copy(&fs, from, to).unwrap(), Placed::Copied(copied));
        assert_eq!(read(&fs, to), b"0123456789");
    }

    #[test]
    fn a_failing_link_is_an_error_not_a_copy() {
        let fs = FaultInjectingFs::new(Arc::new(MemFs::new()));
        let (from, to) = (Path::new("/a"), Path::new("/b"));
        write(&*fs, from, b"0123456789");
        fs.inject(Fault::fail(FaultOp::Link));
        assert!(link_or_copy(&*fs, from, to).is_err());
        assert!(!fs.exists(to).unwrap());
    }
}
