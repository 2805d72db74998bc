//! A file system that forwards every call to another and changes only how new files are
//! written (and, if it wants, notes removals): the shape of the rate limiter, the parallel
//! executor's per-directory writer threads and the worker's record of uploads. They share this
//! one forwarding implementation, so none of them can miss a method (each used to
//! forward by hand, and none forwarded [`FileSystem::hard_link`]: linking through one of them
//! fell back to the trait's `Unsupported`, and callers to copying).

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use super::{
    FileLock, FileMetadata, FileSystem, IoMode, LockMode, ReadFile, StoreRequests, WriteFence,
    WriteFile,
};

/// What a [`WrapWrites`] does to the files created through it.
pub trait WriteWrapper: Send + Sync + fmt::Debug {
    /// The writer of the new file at `path`, around `file`, the inner file system's writer.
    fn wrap(&self, path: &Path, file: Box<dyn WriteFile>) -> io::Result<Box<dyn WriteFile>>;

    /// Called once the file at `path` was removed. Does nothing by default.
    fn removed(&self, path: &Path) {
        let _ = path;
    }
}

/// `inner`, with the writers of new files wrapped by a [`WriteWrapper`]; every other call,
/// the defaulted ones included, goes to `inner` unchanged.
#[derive(Debug)]
pub struct WrapWrites<W> {
    inner: Arc<dyn FileSystem>,
    wrapper: W,
}

impl<W: WriteWrapper> WrapWrites<W> {
    /// `inner` with its new files' writers wrapped by `wrapper`.
    pub fn new(inner: Arc<dyn FileSystem>, wrapper: W) -> Self {
        WrapWrites { inner, wrapper }
    }

    /// The wrapper.
    pub fn wrapper(&self) -> &W {
        &self.wrapper
    }
}

impl<W: WriteWrapper> FileSystem for WrapWrites<W> {
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        self.inner.open_read(path, mode)
    }

    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        let file = self.inner.create(path, mode)?;
        self.wrapper.wrap(path, file)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.inner.remove(path)?;
        self.wrapper.removed(path);
        Ok(())
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.hard_link(from, to)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        self.inner.list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.sync_dir(dir)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMetadata> {
        self.inner.metadata(path)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path, mode)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        self.inner.exists(path)
    }

    fn is_remote(&self, path: &Path) -> bool {
        self.inner.is_remote(path)
    }

    fn write_fence(&self) -> Option<WriteFence> {
        self.inner.write_fence()
    }

    fn store_requests(&self) -> Option<StoreRequests> {
        self.inner.store_requests()
    }

    fn read_prefix(&self, path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
        self.inner.read_prefix(path, max_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use std::sync::Mutex;

    /// Records what it sees.
    #[derive(Debug, Default)]
    struct Seen(Mutex<Vec<String>>);

    impl WriteWrapper for Seen {
        fn wrap(&self, path: &Path, file: Box<dyn WriteFile>) -> io::Result<Box<dyn WriteFile>> {
            self.0
                .lock()
                .unwrap()
                .push(format!("create {}", path.display()));
            Ok(file)
        }

        fn removed(&self, path: &Path) {
            self.0
                .lock()
                .unwrap()
                .push(format!("remove {}", path.display()));
        }
    }

    #[test]
    fn every_call_reaches_the_inner_file_system_and_writes_are_wrapped() {
        let mem = Arc::new(MemFs::new());
        let fs = WrapWrites::new(mem.clone(), Seen::default());
        let dir = Path::new("/d");
        fs.create_dir_all(dir).unwrap();
        let mut f = fs.create(&dir.join("a"), IoMode::Buffered).unwrap();
        f.append(b"abc").unwrap();
        f.sync().unwrap();
        drop(f);
        fs.sync_dir(dir).unwrap();
        // Linking is the inner file system's to do, not refused as by the trait's default.
        fs.hard_link(&dir.join("a"), &dir.join("b")).unwrap();
        assert_eq!(fs.read_prefix(&dir.join("b"), 10).unwrap(), b"abc");
        assert!(fs.exists(&dir.join("b")).unwrap());
        fs.rename(&dir.join("b"), &dir.join("c")).unwrap();
        fs.remove(&dir.join("a")).unwrap();
        let mut names = mem.list_dir(dir).unwrap();
        names.sort();
        assert_eq!(names, vec![OsString::from("c")]);
        assert_eq!(
            *fs.wrapper().0.lock().unwrap(),
            vec!["create /d/a".to_string(), "remove /d/a".to_string()]
        );
    }
}
