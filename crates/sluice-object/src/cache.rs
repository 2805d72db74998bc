//! A bounded cache of whole objects on the local disk, so that reading a table in the bucket
//! costs one GET per object instead of one per block.
//!
//! Tables and blob files are immutable and read many times (a table's footer, index, filter
//! and properties at every open, its blocks by every read the block cache misses), so the
//! cache keeps whole objects: the first open of an object downloads it with one GET, and every
//! read after that is a local `pread`. A table [`ObjectFs`](crate::ObjectFs) uploads is put in
//! the cache as it is uploaded, so a compaction's outputs are read back from the disk.
//!
//! # Identity
//!
//! An entry is the bytes of one version of an object: its file is named by the object's path
//! and the entity tag the store gave that version (`NAME@ETAG`). An open looks the object up
//! with the size and tag of a HEAD it makes anyway, so an object replaced or deleted in the
//! bucket is never read from the cache: a replaced one is downloaded again (and then fails the
//! checks that compare it with the MANIFEST), a deleted one fails the open.
//!
//! # Bounds, crashes and errors
//!
//! The files add up to at most `capacity` bytes: committing an entry evicts the least recently
//! opened ones first (a reader that has an evicted file open keeps reading it, as an unlinked
//! file stays readable). An object larger than the capacity is not cached. The cache owns two
//! subdirectories of its directory, `objects/` (the entries) and `incoming/` (downloads and
//! copies being written), and holds a lock on `LOCK` there, so two processes never share one:
//! a crash leaves complete entries, and files in `incoming/` that the next
//! [`ObjectCache::open`] deletes. Entries found at open are trusted by size, oldest evicted
//! first by modification time; a damaged one fails its block checksums when read, naming the
//! table, and deleting the directory cures it (it holds nothing the bucket does not). The
//! cache is an optimisation: [`ObjectFs`](crate::ObjectFs) reads from the store whenever it
//! cannot use the cache, so a full or failing disk costs requests, never a read.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use sluice_sst::fs::{FileLock, LockMode, os_fs};

/// The cache (see the module docs).
#[derive(Debug)]
pub struct ObjectCache {
    objects: PathBuf,
    incoming: PathBuf,
    capacity: u64,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Names files in `incoming/` uniquely.
    next_incoming: AtomicU64,
    _lock: Box<dyn FileLock>,
}

#[derive(Debug, Default)]
struct State {
    /// File name -> entry.
    entries: HashMap<String, Entry>,
    bytes: u64,
    /// Advances at every use: the entry with the smallest `last_use` is evicted first.
    clock: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    size: u64,
    last_use: u64,
}

/// What the cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Opens served from the cache.
    pub hits: u64,
    /// Opens that found no entry for the object's current version.
    pub misses: u64,
    /// Bytes the entries hold now.
    pub bytes: u64,
    /// Entries now.
    pub entries: u64,
}

/// A file being written into the cache: deleted when dropped unless
/// [`ObjectCache::commit`]ted.
#[derive(Debug)]
pub struct Incoming {
    /// Where the bytes go.
    pub file: File,
    path: PathBuf,
    committed: bool,
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl ObjectCache {
    /// A cache in `dir` (created if missing) of at most `capacity` bytes, holding the entries
    /// a previous run left there. Fails with [`io::ErrorKind::WouldBlock`] while another
    /// process has the directory.
    pub fn open(dir: &Path, capacity: u64) -> io::Result<ObjectCache> {
        let (objects, incoming) = (dir.join("objects"), dir.join("incoming"));
        std::fs::create_dir_all(&objects)?;
        std::fs::create_dir_all(&incoming)?;
        let lock = os_fs().lock(&dir.join("LOCK"), LockMode::Exclusive)?;
        for entry in std::fs::read_dir(&incoming)? {
            std::fs::remove_file(entry?.path())?;
        }
        // Entries oldest first, so that the clock orders them as their files' ages do.
        let mut found = Vec::new();
        for entry in std::fs::read_dir(&objects)? {
            let entry = entry?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let meta = entry.metadata()?;
            if meta.is_file() && is_entry_name(&name) {
                found.push((meta.modified().ok(), name, meta.len()));
            }
        }
        found.sort();
        let mut state = State::default();
        for (_, name, size) in found {
            state.clock += 1;
            state.bytes += size;
            let last_use = state.clock;
            state.entries.insert(name, Entry { size, last_use });
        }
        let cache = ObjectCache {
            objects,
            incoming,
            capacity,
            state: Mutex::new(state),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            next_incoming: AtomicU64::new(0),
            _lock: lock,
        };
        cache.evict(&mut cache.state.lock(), 0)?;
        Ok(cache)
    }

    /// The most bytes the cache holds.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The cached bytes of version `etag` of `object`, if they are there and `size` long.
    pub fn get(&self, object: &str, etag: &str, size: u64) -> Option<File> {
        let name = file_name(object, etag);
        let mut state = self.state.lock();
        state.clock += 1;
        let clock = state.clock;
        let found = state
            .entries
            .get_mut(&name)
            .filter(|e| e.size == size)
            .map(|e| e.last_use = clock)
            .and_then(|()| File::open(self.objects.join(&name)).ok());
        let counter = match found {
            Some(_) => &self.hits,
            None => &self.misses,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// A new file to write an object's bytes into, for [`ObjectCache::commit`].
    pub fn incoming(&self) -> io::Result<Incoming> {
        let n = self.next_incoming.fetch_add(1, Ordering::Relaxed);
        let path = self.incoming.join(format!("{n}.tmp"));
        Ok(Incoming {
            file: File::create(&path)?,
            path,
            committed: false,
        })
    }

    /// Keeps what was written to `incoming` as version `etag` of `object`, evicting older
    /// entries to make room, and returns the entry's file (`None` when the object is larger
    /// than the whole cache, or has no tag to tell its versions apart).
    pub fn commit(
        &self,
        mut incoming: Incoming,
        object: &str,
        etag: &str,
    ) -> io::Result<Option<File>> {
        let size = incoming.file.metadata()?.len();
        if size > self.capacity || etag.is_empty() {
            return Ok(None);
        }
        let name = file_name(object, etag);
        let path = self.objects.join(&name);
        let mut state = self.state.lock();
        // Room first, so the directory never holds more than the capacity for long (a copy of
        // this version already there is replaced, so it makes room too).
        let replaced = state.entries.get(&name).map_or(0, |e| e.size);
        self.evict(&mut state, size.saturating_sub(replaced))?;
        std::fs::rename(&incoming.path, &path)?;
        incoming.committed = true;
        state.clock += 1;
        let entry = Entry {
            size,
            last_use: state.clock,
        };
        if let Some(old) = state.entries.insert(name, entry) {
            state.bytes -= old.size;
        }
        state.bytes += size;
        File::open(&path).map(Some)
    }

    /// Forgets every version of `object` (it was deleted or renamed in the bucket). A file
    /// that cannot be deleted stays, still counted: keyed by version, it is never served for
    /// another object or version, only wasting space until evicted.
    pub fn remove(&self, object: &str) {
        let prefix = format!("{}@", escape(object));
        let mut state = self.state.lock();
        let names: Vec<String> = state
            .entries
            .keys()
            .filter(|n| n.starts_with(&prefix))
            .cloned()
            .collect();
        for name in names {
            let _ = self.remove_entry(&mut state, &name);
        }
    }

    /// Counters and the current size.
    pub fn stats(&self) -> CacheStats {
        let state = self.state.lock();
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bytes: state.bytes,
            entries: state.entries.len() as u64,
        }
    }

    /// Evicts least recently used entries until `incoming` more bytes fit.
    fn evict(&self, state: &mut State, incoming: u64) -> io::Result<()> {
        while state.bytes + incoming > self.capacity {
            let Some(oldest) = state
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_use)
                .map(|(n, _)| n.clone())
            else {
                break;
            };
            self.remove_entry(state, &oldest)?;
        }
        Ok(())
    }

    /// Deletes an entry's file, then forgets it (a file that cannot be deleted stays counted).
    fn remove_entry(&self, state: &mut State, name: &str) -> io::Result<()> {
        match std::fs::remove_file(self.objects.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        if let Some(entry) = state.entries.remove(name) {
            state.bytes -= entry.size;
        }
        Ok(())
    }
}

/// The file name of version `etag` of `object`: both escaped so that the name is one path
/// component and no two (object, tag) pairs share it.
fn file_name(object: &str, etag: &str) -> String {
    format!("{}@{}", escape(object), escape(etag))
}

/// Whether `name` is one [`file_name`] makes: an escaped object, `@`, an escaped tag.
fn is_entry_name(name: &str) -> bool {
    name.matches('@').count() == 1 && !name.starts_with('@') && !name.ends_with('@')
}

/// `s` with `%`, `/`, `@`, quotes and NUL percent-encoded.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' | '/' | '@' | '"' | '\0' => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    use super::*;

    fn read(file: &File, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        file.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    fn insert(cache: &ObjectCache, object: &str, etag: &str, bytes: &[u8]) -> Option<File> {
        let mut incoming = cache.incoming().unwrap();
        incoming.file.write_all(bytes).unwrap();
        cache.commit(incoming, object, etag).unwrap()
    }

    #[test]
    fn an_entry_is_one_version_of_one_object() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::open(dir.path(), 1 << 20).unwrap();
        assert!(cache.get("db/000001.sst", "\"e1\"", 3).is_none());
        let file = insert(&cache, "db/000001.sst", "\"e1\"", b"abc");
        assert_eq!(read(&file.unwrap(), 3), b"abc");
        assert_eq!(
            read(&cache.get("db/000001.sst", "\"e1\"", 3).unwrap(), 3),
            b"abc"
        );
        // Another version, another size, another object: misses.
        assert!(cache.get("db/000001.sst", "\"e2\"", 3).is_none());
        assert!(cache.get("db/000001.sst", "\"e1\"", 4).is_none());
        assert!(cache.get("db/000002.sst", "\"e1\"", 3).is_none());
        let stats = cache.stats();
        assert_eq!((stats.hits, stats.misses), (1, 4));
        assert_eq!((stats.bytes, stats.entries), (3, 1));
        cache.remove("db/000001.sst");
        assert!(cache.get("db/000001.sst", "\"e1\"", 3).is_none());
        assert_eq!(cache.stats().bytes, 0);
        let objects = dir.path().join("objects");
        assert_eq!(std::fs::read_dir(objects).unwrap().count(), 0);
    }

    #[test]
    fn no_tag_no_entry_and_an_abandoned_download_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::open(dir.path(), 1 << 20).unwrap();
        // Without a tag, versions of one size could not be told apart.
        assert!(insert(&cache, "db/000001.sst", "", b"abc").is_none());
        assert_eq!(cache.stats().entries, 0);
        let mut incoming = cache.incoming().unwrap();
        incoming.file.write_all(b"half").unwrap();
        drop(incoming);
        let incoming = dir.path().join("incoming");
        assert_eq!(std::fs::read_dir(incoming).unwrap().count(), 0);
    }

    #[test]
    fn the_least_recently_opened_entries_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::open(dir.path(), 10).unwrap();
        insert(&cache, "a", "1", &[1; 4]);
        insert(&cache, "b", "1", &[2; 4]);
        assert!(cache.get("a", "1", 4).is_some());
        // 4 + 4 + 4 > 10: `b`, opened least recently, goes.
        insert(&cache, "c", "1", &[3; 4]);
        assert!(cache.get("b", "1", 4).is_none());
        assert!(cache.get("a", "1", 4).is_some());
        assert!(cache.get("c", "1", 4).is_some());
        assert_eq!(cache.stats().bytes, 8);
        // The same version again replaces its copy: nothing else is evicted.
        insert(&cache, "c", "1", &[3; 4]);
        assert_eq!(cache.stats().entries, 2);
        // Larger than the whole cache: not kept, nothing evicted.
        assert!(insert(&cache, "d", "1", &[4; 11]).is_none());
        assert_eq!(cache.stats().entries, 2);
    }

    #[test]
    fn a_reopened_cache_keeps_its_entries_and_only_its_own_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("someone-elses.tmp"), b"keep").unwrap();
        {
            let cache = ObjectCache::open(dir.path(), 100).unwrap();
            insert(&cache, "db/000007.sst", "x", b"table");
            // One process at a time.
            let second = ObjectCache::open(dir.path(), 100).unwrap_err();
            assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        }
        // A download a crash interrupted, and a file that is not an entry.
        std::fs::write(dir.path().join("incoming/3.tmp"), b"torn").unwrap();
        std::fs::write(dir.path().join("objects/stray"), b"?").unwrap();
        let cache = ObjectCache::open(dir.path(), 100).unwrap();
        assert_eq!(
            read(&cache.get("db/000007.sst", "x", 5).unwrap(), 5),
            b"table"
        );
        assert!(!dir.path().join("incoming/3.tmp").exists());
        assert_eq!(cache.stats().entries, 1);
        assert!(dir.path().join("objects/stray").exists());
        assert!(dir.path().join("someone-elses.tmp").exists());
        // Reopened smaller than what it holds: evicted down to the new bound.
        drop(cache);
        let cache = ObjectCache::open(dir.path(), 4).unwrap();
        assert_eq!(cache.stats().entries, 0);
    }

    #[test]
    fn names_are_one_component_and_unambiguous() {
        assert_eq!(file_name("a/b", "\"t\""), "a%2Fb@%22t%22");
        assert_ne!(file_name("a@b", "c"), file_name("a", "b@c"));
        assert_ne!(file_name("a%2Fb", "c"), file_name("a/b", "c"));
        assert!(is_entry_name(&file_name("a@b/c", "\"x@y\"")));
        assert!(!is_entry_name("stray") && !is_entry_name("a@b@c"));
    }
}
