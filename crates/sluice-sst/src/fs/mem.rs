//! An in-memory file system that remembers what a power failure would keep, so a test can
//! "crash" the engine at any moment without a process or a disk (Pebble's
//! `vfs.NewCrashableMem`, LevelDB's fault-injection `Env`).
//!
//! Model, per the durability contract of [`FileSystem`]:
//! - a file's bytes are what it has been appended; the first `synced` of them are durable
//!   ([`WriteFile::sync`] raises `synced` to the length). Readers see every byte at once, as
//!   the page cache would;
//! - a directory has its *live* entries (what listing and lookups see) and its *durable*
//!   entries, a copy of the live ones taken at its last [`FileSystem::sync_dir`]. Creating,
//!   renaming and removing change only the live entries;
//! - [`MemFs::crash_clone`] builds a new file system from the durable state only: starting at
//!   the root, every directory's durable entries, every file cut to its synced length. A name
//!   whose directory was not synced since it appeared is gone; a removed or renamed-away name
//!   whose directory was not synced since is back.
//!
//! Locks are held in the file system, so two opens in one process conflict as two processes'
//! `flock`s do; a crash clone starts with none. [`IoMode::Direct`] is accepted and behaves as
//! buffered (there is no page cache to bypass), so `probe_direct_io` passes. Symbolic links do
//! not exist; `..` is resolved by name, and relative paths are taken from the root.
//!
//! Thread-safety: one mutex guards the directory tree and the lock table; each file's bytes
//! have their own mutex, taken after the tree's (never before), so open files are read and
//! written without the tree lock.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileMetadata, FileSystem, IoMode, LockMode, ReadFile, WriteFile};

/// A file's bytes and how many of them are durable. Invariant: `synced <= bytes.len()`
/// (files are only appended to, so the synced bytes are always a prefix).
#[derive(Debug, Default)]
struct FileData {
    bytes: Vec<u8>,
    synced: usize,
}

type FileRef = Arc<Mutex<FileData>>;

/// Index of a directory in [`Tree::dirs`]; the root is 0. Directories are never freed (tests
/// create a handful).
type DirId = usize;

#[derive(Clone, Debug)]
enum Node {
    File(FileRef),
    Dir(DirId),
}

#[derive(Debug, Default)]
struct Dir {
    live: BTreeMap<OsString, Node>,
    /// The live entries as of the last `sync_dir`.
    durable: BTreeMap<OsString, Node>,
}

#[derive(Debug, Default)]
struct Held {
    shared: usize,
    exclusive: bool,
}

#[derive(Debug)]
struct Tree {
    dirs: Vec<Dir>,
    /// Locks held, by normalised path.
    locks: HashMap<PathBuf, Held>,
}

impl Tree {
    fn new() -> Self {
        Tree {
            dirs: vec![Dir::default()],
            locks: HashMap::new(),
        }
    }

    fn dir(&self, id: DirId) -> io::Result<&Dir> {
        self.dirs
            .get(id)
            .ok_or_else(|| io::Error::other("memfs: dangling directory id"))
    }

    fn dir_mut(&mut self, id: DirId) -> io::Result<&mut Dir> {
        self.dirs
            .get_mut(id)
            .ok_or_else(|| io::Error::other("memfs: dangling directory id"))
    }

    /// A second handle on the file `name` of directory `dir` (for a rename or a link): a
    /// directory there is `on_dir()`'s error, nothing there `NotFound`.
    fn file_node(
        &self,
        dir: usize,
        name: &std::ffi::OsStr,
        on_dir: impl FnOnce() -> io::Error,
    ) -> io::Result<Node> {
        match self.dir(dir)?.live.get(name) {
            Some(Node::File(file)) => Ok(Node::File(Arc::clone(file))),
            Some(Node::Dir(_)) => Err(on_dir()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    /// The node at `names` (from the root), through live entries.
    fn lookup(&self, names: &[&OsStr]) -> io::Result<Node> {
        let mut node = Node::Dir(0);
        for name in names {
            let Node::Dir(id) = node else {
                return Err(io::ErrorKind::NotADirectory.into());
            };
            node = self
                .dir(id)?
                .live
                .get(*name)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        }
        Ok(node)
    }

    fn lookup_dir(&self, names: &[&OsStr]) -> io::Result<DirId> {
        match self.lookup(names)? {
            Node::Dir(id) => Ok(id),
            Node::File(_) => Err(io::ErrorKind::NotADirectory.into()),
        }
    }

    /// The parent directory of `names` and the last name; the root has neither.
    fn parent<'a>(&self, names: &[&'a OsStr]) -> io::Result<(DirId, &'a OsStr)> {
        let (last, parent) = names
            .split_last()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "memfs: the root"))?;
        Ok((self.lookup_dir(parent)?, last))
    }
}

/// Splits `path` into names from the root, resolving `.` and `..` by name.
fn names(path: &Path) -> io::Result<Vec<&OsStr>> {
    let mut names = Vec::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "memfs: path prefixes are not supported",
                ));
            }
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                names.pop();
            }
            Component::Normal(name) => names.push(name),
        }
    }
    Ok(names)
}

/// The in-memory, crashable file system; see the module docs. Clones share the same files.
#[derive(Clone)]
pub struct MemFs {
    tree: Arc<Mutex<Tree>>,
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemFs")
            .field("dirs", &self.tree.lock().dirs.len())
            .finish()
    }
}

impl Default for MemFs {
    fn default() -> Self {
        Self::new()
    }
}

impl MemFs {
    /// An empty file system: only the root directory `/`, durable.
    pub fn new() -> Self {
        MemFs {
            tree: Arc::new(Mutex::new(Tree::new())),
        }
    }

    /// What a power failure now would leave: a new, independent file system holding only
    /// durable names and synced bytes (see the module docs), with no locks held.
    pub fn crash_clone(&self) -> MemFs {
        self.clone_keeping(&mut |synced, _len| synced)
    }

    /// As [`MemFs::crash_clone`], except that each file keeps a prefix of its unsynced bytes
    /// of a length drawn from `seed`: writeback that happened to reach the device before the
    /// power failed, in order, as it would for a file appended in one stream.
    pub fn crash_clone_keeping_some(&self, seed: u64) -> MemFs {
        let mut state = seed;
        self.clone_keeping(&mut |synced, len| {
            let unsynced = (len - synced) as u64;
            synced + (splitmix64(&mut state) % (unsynced + 1)) as usize
        })
    }

    /// `keep(synced, len)` says how many bytes of each durable file to keep (at least
    /// `synced`, at most `len`).
    fn clone_keeping(&self, keep: &mut dyn FnMut(usize, usize) -> usize) -> MemFs {
        let tree = self.tree.lock();
        let mut new = Tree::new();
        copy_durable(&tree, 0, &mut new, 0, keep);
        MemFs {
            tree: Arc::new(Mutex::new(new)),
        }
    }
}

/// Copies the durable entries of `from`'s directory `src` into `to`'s directory `dst`, as both
/// its live and durable entries, recursively. Directories cannot be renamed, so the durable
/// tree has no cycles.
fn copy_durable(
    from: &Tree,
    src: DirId,
    to: &mut Tree,
    dst: DirId,
    keep: &mut dyn FnMut(usize, usize) -> usize,
) {
    let Some(dir) = from.dirs.get(src) else {
        return;
    };
    for (name, node) in &dir.durable {
        let copy = match node {
            Node::File(file) => {
                let data = file.lock();
                let len = keep(data.synced, data.bytes.len()).clamp(data.synced, data.bytes.len());
                Node::File(Arc::new(Mutex::new(FileData {
                    bytes: data.bytes.get(..len).unwrap_or_default().to_vec(),
                    synced: len,
                })))
            }
            Node::Dir(child) => {
                to.dirs.push(Dir::default());
                let id = to.dirs.len() - 1;
                copy_durable(from, *child, to, id, keep);
                Node::Dir(id)
            }
        };
        if let Some(d) = to.dirs.get_mut(dst) {
            d.live.insert(name.clone(), copy.clone());
            d.durable.insert(name.clone(), copy);
        }
    }
}

/// A small deterministic generator (SplitMix64), so crash clones need no RNG dependency.
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl FileSystem for MemFs {
    fn open_read(&self, path: &Path, _mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        match self.tree.lock().lookup(&names(path)?)? {
            Node::File(file) => Ok(Box::new(MemFile(file))),
            Node::Dir(_) => Err(io::ErrorKind::IsADirectory.into()),
        }
    }

    fn create(&self, path: &Path, _mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        let names = names(path)?;
        let mut tree = self.tree.lock();
        let (parent, name) = tree.parent(&names)?;
        let dir = tree.dir_mut(parent)?;
        if dir.live.contains_key(name) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        let file = FileRef::default();
        dir.live
            .insert(name.to_os_string(), Node::File(Arc::clone(&file)));
        Ok(Box::new(MemFile(file)))
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let names = names(path)?;
        let mut tree = self.tree.lock();
        let (parent, name) = tree.parent(&names)?;
        let dir = tree.dir_mut(parent)?;
        match dir.live.get(name) {
            Some(Node::File(_)) => {
                dir.live.remove(name);
                Ok(())
            }
            Some(Node::Dir(_)) => Err(io::ErrorKind::IsADirectory.into()),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let names = names(path)?;
        let mut tree = self.tree.lock();
        let (parent, name) = tree.parent(&names)?;
        let child = match tree.dir(parent)?.live.get(name) {
            Some(Node::Dir(child)) => *child,
            Some(Node::File(_)) => return Err(io::ErrorKind::NotADirectory.into()),
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        if !tree.dir(child)?.live.is_empty() {
            return Err(io::ErrorKind::DirectoryNotEmpty.into());
        }
        tree.dir_mut(parent)?.live.remove(name);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_names, to_names) = (names(from)?, names(to)?);
        let mut tree = self.tree.lock();
        let (from_dir, from_name) = tree.parent(&from_names)?;
        let (to_dir, to_name) = tree.parent(&to_names)?;
        let node = tree.file_node(from_dir, from_name, || {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "memfs: directories cannot be renamed",
            )
        })?;
        if let Some(Node::Dir(_)) = tree.dir(to_dir)?.live.get(to_name) {
            return Err(io::ErrorKind::IsADirectory.into());
        }
        tree.dir_mut(from_dir)?.live.remove(from_name);
        tree.dir_mut(to_dir)?
            .live
            .insert(to_name.to_os_string(), node);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let (from_names, to_names) = (names(from)?, names(to)?);
        let mut tree = self.tree.lock();
        let (from_dir, from_name) = tree.parent(&from_names)?;
        let (to_dir, to_name) = tree.parent(&to_names)?;
        let node = tree.file_node(from_dir, from_name, || io::ErrorKind::IsADirectory.into())?;
        let dir = tree.dir_mut(to_dir)?;
        if dir.live.contains_key(to_name) {
            return Err(io::ErrorKind::AlreadyExists.into());
        }
        dir.live.insert(to_name.to_os_string(), node);
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let tree = self.tree.lock();
        let id = tree.lookup_dir(&names(dir)?)?;
        Ok(tree.dir(id)?.live.keys().cloned().collect())
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let names = names(dir)?;
        let mut tree = self.tree.lock();
        let mut id = 0;
        for name in names {
            let existing = tree.dir(id)?.live.get(name).cloned();
            id = match existing {
                Some(Node::Dir(child)) => child,
                Some(Node::File(_)) => return Err(io::ErrorKind::NotADirectory.into()),
                None => {
                    tree.dirs.push(Dir::default());
                    let child = tree.dirs.len() - 1;
                    tree.dir_mut(id)?
                        .live
                        .insert(name.to_os_string(), Node::Dir(child));
                    child
                }
            };
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut tree = self.tree.lock();
        let id = tree.lookup_dir(&names(dir)?)?;
        let d = tree.dir_mut(id)?;
        d.durable = d.live.clone();
        Ok(())
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMetadata> {
        Ok(match self.tree.lock().lookup(&names(path)?)? {
            Node::File(file) => FileMetadata {
                len: file.lock().bytes.len() as u64,
                is_dir: false,
                is_symlink: false,
            },
            Node::Dir(_) => FileMetadata {
                len: 0,
                is_dir: true,
                is_symlink: false,
            },
        })
    }

    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
        let names = names(path)?;
        let key: PathBuf = names.iter().collect();
        let mut tree = self.tree.lock();
        let (parent, name) = tree.parent(&names)?;
        let dir = tree.dir_mut(parent)?;
        match (dir.live.get(name), mode) {
            (Some(Node::Dir(_)), _) => return Err(io::ErrorKind::IsADirectory.into()),
            (None, LockMode::Shared) => return Err(io::ErrorKind::NotFound.into()),
            (None, LockMode::Exclusive) => {
                dir.live
                    .insert(name.to_os_string(), Node::File(FileRef::default()));
            }
            (Some(Node::File(_)), _) => {}
        }
        let held = tree.locks.entry(key.clone()).or_default();
        let free = match mode {
            LockMode::Exclusive => !held.exclusive && held.shared == 0,
            LockMode::Shared => !held.exclusive,
        };
        if !free {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the file is locked by another holder",
            ));
        }
        match mode {
            LockMode::Exclusive => held.exclusive = true,
            LockMode::Shared => held.shared += 1,
        }
        Ok(Box::new(MemLock {
            tree: Arc::clone(&self.tree),
            key,
            mode,
        }))
    }
}

/// A lock in [`Tree::locks`], released on drop.
struct MemLock {
    tree: Arc<Mutex<Tree>>,
    key: PathBuf,
    mode: LockMode,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock")
            .field("path", &self.key)
            .field("mode", &self.mode)
            .finish()
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut tree = self.tree.lock();
        if let Some(held) = tree.locks.get_mut(&self.key) {
            match self.mode {
                LockMode::Exclusive => held.exclusive = false,
                LockMode::Shared => held.shared = held.shared.saturating_sub(1),
            }
            if !held.exclusive && held.shared == 0 {
                tree.locks.remove(&self.key);
            }
        }
    }
}

/// An open file, for reading or writing: the same bytes either way.
#[derive(Debug)]
struct MemFile(FileRef);

impl ReadFile for MemFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let data = self.0.lock();
        let src = usize::try_from(offset)
            .ok()
            .and_then(|start| data.bytes.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        buf.copy_from_slice(src);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.0.lock().bytes.len() as u64)
    }
}

impl WriteFile for MemFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.lock().bytes.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut data = self.0.lock();
        data.synced = data.bytes.len();
        Ok(())
    }
}

#[cfg(test)]
#[path = "mem_tests.rs"]
mod tests;
