//! A file system that fails or corrupts chosen operations of the one beneath it, so tests can
//! check that every stage of the engine turns an I/O fault into a clean error.
//!
//! A [`Fault`] names an operation ([`FaultOp`]), the files it applies to (a substring of the
//! path, such as `".sst"`), how many matching operations to let through first and how many to
//! hit. Faults are armed and cleared while the engine runs. Everything else is passed to the
//! inner file system untouched, so the bytes on disk are real. Creating directories, metadata
//! and locks are never failed: the engine only ever reports their errors, which tests of
//! opening a database cover without injection.

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::{FileLock, FileMetadata, FileSystem, IoMode, LockMode, ReadFile, WriteFile};

/// A file operation a fault can hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultOp {
    /// Opening an existing file for reading.
    Open,
    /// Creating a file.
    Create,
    /// A positioned read.
    Read,
    /// An append.
    Write,
    /// A sync.
    Sync,
    /// Removing a file.
    Remove,
    /// Renaming a file; the path matched is the source.
    Rename,
    /// Linking a file under a second name; the path matched is the new name.
    Link,
    /// Syncing a directory; the path matched is the directory.
    SyncDir,
    /// Listing a directory; the path matched is the directory.
    List,
}

/// What happens to an operation a fault hits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// The operation fails with an I/O error and does nothing.
    Fail,
    /// The operation succeeds but one byte of the data read is flipped, as a device returning
    /// bad data would. Only reads can be corrupted; on other operations this acts as `Fail`.
    Corrupt,
    /// The process kills itself with SIGKILL before the operation runs: a crash at an exact
    /// point (after every earlier operation, before this one), for tests that run the engine
    /// in a child process and reopen what it left.
    Kill,
}

/// One armed fault; see the module docs.
#[derive(Clone, Debug)]
pub struct Fault {
    op: FaultOp,
    action: FaultAction,
    path_contains: String,
    skip: u64,
    count: u64,
}

impl Fault {
    /// Fails every `op` on any file (narrow it with the other methods).
    pub fn fail(op: FaultOp) -> Self {
        Fault {
            op,
            action: FaultAction::Fail,
            path_contains: String::new(),
            skip: 0,
            count: u64::MAX,
        }
    }

    /// Kills the process (SIGKILL) at the first `op` on any file (narrow it with the other
    /// methods).
    pub fn kill(op: FaultOp) -> Self {
        Fault {
            action: FaultAction::Kill,
            ..Fault::fail(op)
        }
    }

    /// Corrupts the data of every read of any file.
    pub fn corrupt_reads() -> Self {
        Fault {
            action: FaultAction::Corrupt,
            ..Fault::fail(FaultOp::Read)
        }
    }

    /// Applies only to files whose path contains `fragment`.
    pub fn on_paths_containing(mut self, fragment: &str) -> Self {
        self.path_contains = fragment.to_string();
        self
    }

    /// Lets the first `n` matching operations through.
    pub fn after(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// Hits `n` operations, then none.
    pub fn times(mut self, n: u64) -> Self {
        self.count = n;
        self
    }

    fn matches(&self, op: FaultOp, path: &Path) -> bool {
        self.op == op
            && (self.path_contains.is_empty()
                || path.to_string_lossy().contains(&self.path_contains))
    }
}

#[derive(Debug)]
struct ArmedFault {
    fault: Fault,
    seen: u64,
    hit: u64,
}

/// Faults and counters shared by the file system and the files it opened.
#[derive(Debug, Default)]
struct FaultState {
    faults: Mutex<Vec<ArmedFault>>,
    injected: AtomicU64,
}

impl FaultState {
    /// The action for this operation, if an armed fault hits it.
    fn check(&self, op: FaultOp, path: &Path) -> Option<FaultAction> {
        let mut faults = self.faults.lock();
        for armed in faults.iter_mut() {
            if !armed.fault.matches(op, path) {
                continue;
            }
            armed.seen += 1;
            if armed.seen > armed.fault.skip && armed.hit < armed.fault.count {
                armed.hit += 1;
                self.injected.fetch_add(1, Ordering::Relaxed);
                if armed.fault.action == FaultAction::Kill {
                    kill_self();
                }
                return Some(armed.fault.action);
            }
        }
        None
    }

    /// `Err` when a fault hits this operation (corruption does not apply to it).
    fn fail_if_hit(&self, op: FaultOp, path: &Path) -> io::Result<()> {
        match self.check(op, path) {
            Some(_) => Err(injected_error(op, path)),
            None => Ok(()),
        }
    }
}

/// Ends the process as `kill -9` would: no destructor, no buffered write, no atexit handler.
fn kill_self() -> ! {
    // Raising SIGKILL cannot fail for a running process; abort is the fallback all the same.
    let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    std::process::abort()
}

fn injected_error(op: FaultOp, path: &Path) -> io::Error {
    io::Error::other(format!("injected fault: {op:?} of {}", path.display()))
}

/// The fault-injecting file system; see the module docs.
pub struct FaultInjectingFs {
    inner: Arc<dyn FileSystem>,
    state: Arc<FaultState>,
}

impl fmt::Debug for FaultInjectingFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FaultInjectingFs")
            .field("inner", &self.inner)
            .field("injected", &self.injected())
            .finish()
    }
}

impl FaultInjectingFs {
    /// Wraps `inner` with no fault armed.
    pub fn new(inner: Arc<dyn FileSystem>) -> Arc<Self> {
        Arc::new(FaultInjectingFs {
            inner,
            state: Arc::default(),
        })
    }

    /// Arms `fault` (in addition to those already armed; the first one that hits wins).
    pub fn inject(&self, fault: Fault) {
        self.state.faults.lock().push(ArmedFault {
            fault,
            seen: 0,
            hit: 0,
        });
    }

    /// Disarms every fault.
    pub fn clear(&self) {
        self.state.faults.lock().clear();
    }

    /// Operations hit by a fault so far.
    pub fn injected(&self) -> u64 {
        self.state.injected.load(Ordering::Relaxed)
    }
}

impl FileSystem for FaultInjectingFs {
    fn store_requests(&self) -> Option<super::StoreRequests> {
        self.inner.store_requests()
    }

    fn is_remote(&self, path: &Path) -> bool {
        self.inner.is_remote(path)
    }

    fn write_fence(&self) -> Option<super::WriteFence> {
        self.inner.write_fence()
    }

    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        self.state.fail_if_hit(FaultOp::Open, path)?;
        Ok(Box::new(FaultReadFile {
            inner: self.inner.open_read(path, mode)?,
            path: path.to_path_buf(),
            state: Arc::clone(&self.state),
        }))
    }

    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        self.state.fail_if_hit(FaultOp::Create, path)?;
        Ok(Box::new(FaultWriteFile {
            inner: self.inner.create(path, mode)?,
            path: path.to_path_buf(),
            state: Arc::clone(&self.state),
        }))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Remove, path)?;
        self.inner.remove(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Remove, dir)?;
        self.inner.remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Rename, from)?;
        self.inner.rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Link, to)?;
        self.inner.hard_link(from, to)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        self.state.fail_if_hit(FaultOp::List, dir)?;
        self.inner.list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::SyncDir, dir)?;
        self.inner.sync_dir(dir)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMetadata> {
        self.inner.metadata(path)
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path, mode)
    }
}

#[derive(Debug)]
struct FaultReadFile {
    inner: Box<dyn ReadFile>,
    path: PathBuf,
    state: Arc<FaultState>,
}

impl ReadFile for FaultReadFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        match self.state.check(FaultOp::Read, &self.path) {
            // `Kill` never gets here: the check killed the process.
            Some(FaultAction::Fail | FaultAction::Kill) => {
                Err(injected_error(FaultOp::Read, &self.path))
            }
            Some(FaultAction::Corrupt) => {
                self.inner.read_exact_at(buf, offset)?;
                if let Some(byte) = buf.get_mut(buf.len() / 2) {
                    *byte ^= 0x40;
                }
                Ok(())
            }
            None => self.inner.read_exact_at(buf, offset),
        }
    }

    fn size(&self) -> io::Result<u64> {
        self.inner.size()
    }
}

#[derive(Debug)]
struct FaultWriteFile {
    inner: Box<dyn WriteFile>,
    path: PathBuf,
    state: Arc<FaultState>,
}

impl WriteFile for FaultWriteFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Write, &self.path)?;
        self.inner.append(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Sync, &self.path)?;
        self.inner.sync()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Sync, &self.path)?;
        self.inner.sync_data()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.state.fail_if_hit(FaultOp::Sync, &self.path)?;
        self.inner.finish()
    }
}
