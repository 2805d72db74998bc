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
//! # Bounds and crashes
//!
//! The files add up to at most `capacity` bytes: inserting evicts the least recently opened
//! entries first (a reader that has an evicted file open keeps reading it, as an unlinked file
//! stays readable). An object larger than the capacity is not cached. A file is written under a
//! temporary name and renamed into place, so a crash leaves a complete entry or a `.tmp` file,
//! which the next [`ObjectCache::open`] deletes. A cache directory serves one process at a
//! time (its index lives in memory). Entries found at open are trusted by size; a
//! damaged one fails its block checksums when read, naming the table, and deleting the cache
//! directory cures it (it holds nothing the bucket does not).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The cache (see the module docs).
#[derive(Debug)]
pub struct ObjectCache {
    dir: PathBuf,
    capacity: u64,
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    /// Names temporary files uniquely, for concurrent inserts of one object.
    next_tmp: AtomicU64,
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

impl ObjectCache {
    /// A cache in `dir` (created if missing) of at most `capacity` bytes, holding the entries
    /// a previous run left there, and none of its temporary files.
    pub fn open(dir: &Path, capacity: u64) -> io::Result<ObjectCache> {
        std::fs::create_dir_all(dir)?;
        let mut state = State::default();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.ends_with(".tmp") {
                std::fs::remove_file(&path)?;
                continue;
            }
            let meta = entry.metadata()?;
            if meta.is_file() {
                state.bytes += meta.len();
                state.entries.insert(
                    name,
                    Entry {
                        size: meta.len(),
                        last_use: 0,
                    },
                );
            }
        }
        let cache = ObjectCache {
            dir: dir.to_path_buf(),
            capacity,
            state: Mutex::new(state),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            next_tmp: AtomicU64::new(0),
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
            .and_then(|()| File::open(self.dir.join(&name)).ok());
        match found {
            Some(file) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(file)
            }
            None => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Keeps `bytes` as version `etag` of `object`, evicting older entries to make room, and
    /// returns the entry's file (`None` when the object is larger than the whole cache).
    pub fn insert(&self, object: &str, etag: &str, bytes: &[u8]) -> io::Result<Option<File>> {
        let size = bytes.len() as u64;
        if size > self.capacity {
            return Ok(None);
        }
        let name = file_name(object, etag);
        let path = self.dir.join(&name);
        let tmp = self.dir.join(format!(
            "{}.tmp",
            self.next_tmp.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        drop(file);
        let mut state = self.state.lock();
        // Room first, so the directory never holds more than the capacity for long.
        self.evict(&mut state, size)?;
        std::fs::rename(&tmp, &path)?;
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

    /// Forgets every version of `object` (it was deleted or renamed in the bucket).
    pub fn remove(&self, object: &str) -> io::Result<()> {
        let prefix = format!("{}@", escape(object));
        let mut state = self.state.lock();
        let names: Vec<String> = state
            .entries
            .keys()
            .filter(|n| n.starts_with(&prefix))
            .cloned()
            .collect();
        for name in names {
            self.remove_entry(&mut state, &name)?;
        }
        Ok(())
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

    fn remove_entry(&self, state: &mut State, name: &str) -> io::Result<()> {
        if let Some(entry) = state.entries.remove(name) {
            state.bytes -= entry.size;
            match std::fs::remove_file(self.dir.join(name)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }
}

/// The file name of version `etag` of `object`: both escaped so that the name is one path
/// component and no two (object, tag) pairs share it.
fn file_name(object: &str, etag: &str) -> String {
    format!("{}@{}", escape(object), escape(etag))
}

/// `s` with `%`, `/`, `@` and quotes percent-encoded.
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
    use std::os::unix::fs::FileExt;

    use super::*;

    fn read(file: &File, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        file.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    #[test]
    fn an_entry_is_one_version_of_one_object() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::open(dir.path(), 1 << 20).unwrap();
        assert!(cache.get("db/000001.sst", "\"e1\"", 3).is_none());
        let file = cache.insert("db/000001.sst", "\"e1\"", b"abc").unwrap();
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
        cache.remove("db/000001.sst").unwrap();
        assert!(cache.get("db/000001.sst", "\"e1\"", 3).is_none());
        assert_eq!(cache.stats().bytes, 0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn the_least_recently_opened_entries_make_room() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ObjectCache::open(dir.path(), 10).unwrap();
        cache.insert("a", "1", &[1; 4]).unwrap();
        cache.insert("b", "1", &[2; 4]).unwrap();
        assert!(cache.get("a", "1", 4).is_some());
        // 4 + 4 + 4 > 10: `b`, opened least recently, goes.
        cache.insert("c", "1", &[3; 4]).unwrap();
        assert!(cache.get("b", "1", 4).is_none());
        assert!(cache.get("a", "1", 4).is_some());
        assert!(cache.get("c", "1", 4).is_some());
        assert_eq!(cache.stats().bytes, 8);
        // Larger than the whole cache: not kept, nothing evicted.
        assert!(cache.insert("d", "1", &[4; 11]).unwrap().is_none());
        assert_eq!(cache.stats().entries, 2);
    }

    #[test]
    fn a_reopened_cache_keeps_its_entries_and_drops_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cache = ObjectCache::open(dir.path(), 100).unwrap();
            cache.insert("db/000007.sst", "x", b"table").unwrap();
        }
        std::fs::write(dir.path().join("3.tmp"), b"torn").unwrap();
        let cache = ObjectCache::open(dir.path(), 100).unwrap();
        assert_eq!(
            read(&cache.get("db/000007.sst", "x", 5).unwrap(), 5),
            b"table"
        );
        assert!(!dir.path().join("3.tmp").exists());
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
    }
}
