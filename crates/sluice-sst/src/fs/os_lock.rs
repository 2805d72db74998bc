//! Advisory file locks between processes and within one: POSIX record locks (`fcntl`) plus a
//! table of what this process holds.
//!
//! Why not `flock`: an `flock` belongs to the open file description, and a child process
//! created by `fork` shares every description of its parent until it calls `exec` (which closes
//! them, as they are close-on-exec). A thread that spawns a process while another thread
//! closes a database leaves that database's lock held, for a moment, by a process that has
//! nothing to do with it, and reopening fails as if another process had it open. POSIX record
//! locks belong to the process and are never inherited by a child, so that cannot happen.
//!
//! What that costs, and how it is paid (RocksDB's `PosixFileSystem::LockFile` does the same):
//!
//! - record locks never conflict within one process, so the table [`HELD`] makes a second
//!   exclusive lock, or a shared one beside an exclusive one, fail here as it would in
//!   another process;
//! - closing *any* descriptor of a file releases every record lock the process has on it, so
//!   the file is opened once per process while it is locked (the table keeps that descriptor
//!   and shares it between shared holders), and a file already in the table is never opened
//!   again: it is found by `stat`, which opens nothing.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, fcntl};
use parking_lot::Mutex;

use super::{FileLock, LockMode};

/// A file by identity: `(device, inode)`.
type FileId = (u64, u64);

/// Who in this process holds a locked file, and the one descriptor the record lock lives on.
#[derive(Debug)]
struct Held {
    /// The descriptor the record lock was taken on, and any other this process opened on the
    /// file while it was held; dropping them releases the lock.
    files: Vec<File>,
    exclusive: bool,
    /// Shared holders (0 when `exclusive`).
    shared: usize,
}

/// Every file this process holds a lock on.
static HELD: Mutex<Option<HashMap<FileId, Held>>> = Mutex::new(None);

/// Locks `path` as `mode` says; `WouldBlock` if another holder, in this process or another,
/// has a conflicting lock. An exclusive lock creates the file if it is missing; a shared one
/// needs it to exist (`NotFound`).
pub(super) fn lock(path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
    let mut guard = HELD.lock();
    let held = guard.get_or_insert_with(HashMap::new);
    if let Some(id) = existing_id(path)?
        && let Some(h) = held.get_mut(&id)
    {
        return match mode {
            LockMode::Shared if !h.exclusive => {
                h.shared += 1;
                Ok(Box::new(OsFileLock(id)))
            }
            _ => Err(would_block()),
        };
    }
    let file = match mode {
        LockMode::Exclusive => File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)?,
        LockMode::Shared => File::open(path)?,
    };
    let meta = file.metadata()?;
    let id = (meta.dev(), meta.ino());
    if let Some(h) = held.get_mut(&id) {
        // Created (or renamed into place) between the `stat` and the open, and already held
        // by us: closing `file` now would release our lock, so it is closed with the others.
        h.files.push(file);
        return Err(would_block());
    }
    set_record_lock(&file, mode)?;
    held.insert(
        id,
        Held {
            files: vec![file],
            exclusive: mode == LockMode::Exclusive,
            shared: usize::from(mode == LockMode::Shared),
        },
    );
    Ok(Box::new(OsFileLock(id)))
}

/// The identity of the file at `path`, or `None` if there is none.
fn existing_id(path: &Path) -> io::Result<Option<FileId>> {
    match std::fs::metadata(path) {
        Ok(meta) => Ok(Some((meta.dev(), meta.ino()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Takes a record lock on the whole of `file` without waiting.
fn set_record_lock(file: &File, mode: LockMode) -> io::Result<()> {
    let kind = match mode {
        LockMode::Exclusive => libc::F_WRLCK,
        LockMode::Shared => libc::F_RDLCK,
    };
    // Start 0 and length 0: the whole file, however long it grows.
    let region = libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    };
    match fcntl(file, FcntlArg::F_SETLK(&region)) {
        Ok(_) => Ok(()),
        Err(Errno::EAGAIN | Errno::EACCES) => Err(would_block()),
        Err(e) => Err(e.into()),
    }
}

fn would_block() -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "the file is locked by another holder",
    )
}

/// A held lock; dropping the last holder of a file closes its descriptor, which releases it.
#[derive(Debug)]
struct OsFileLock(FileId);

impl FileLock for OsFileLock {}

impl Drop for OsFileLock {
    fn drop(&mut self) {
        let mut guard = HELD.lock();
        let Some(held) = guard.as_mut() else {
            return;
        };
        if let Some(h) = held.get_mut(&self.0) {
            h.shared = h.shared.saturating_sub(1);
            if h.exclusive || h.shared == 0 {
                held.remove(&self.0);
            }
        }
    }
}
