//! Tables and blob files in an object store: [`ObjectFs`] is a [`FileSystem`] that keeps a
//! database's immutable files (`NNNNNN.sst`, `NNNNNN.blob`) as objects under a prefix of a
//! bucket, through the `object_store` crate (S3 and S3-compatible servers, or its local
//! backend), and everything else (WAL, MANIFEST, CURRENT, LOCK, OPTIONS, LOG) on the local
//! file system it wraps. The engine above it does not change: every file operation already
//! goes through a `FileSystem`.
//!
//! # Mapping
//!
//! A table or blob file at `ROOT/REL` (`ROOT` the database directory, `REL` its name, or
//! `keyspaces/ID/NAME` for another keyspace) is the object `PREFIX/REL`. Any other path,
//! and any table outside `ROOT` (a checkpoint's or a backup's), is local.
//!
//! # Durability
//!
//! An object file is written into memory and uploaded by [`WriteFile::sync`] (a single PUT,
//! or a multipart upload from [`MULTIPART_BYTES`] on): when `sync` returns the store has
//! acknowledged the whole object, and only then does the engine name the table in the
//! MANIFEST. An object's name needs no directory sync. A file dropped before `sync` leaves
//! nothing in the bucket.
//!
//! A single PUT is conditional (`If-None-Match: *` the first time, `If-Match` on the writer's
//! own last version after that): an object someone else put under the name since `create`
//! checked it fails the upload with [`io::ErrorKind::AlreadyExists`] instead of being
//! overwritten. `object_store` cannot make a multipart upload conditional, so a table of
//! [`MULTIPART_BYTES`] or more relies on `create`'s HEAD and on the fence checked before its
//! completion (`fence.rs`).
//!
//! # Costs
//!
//! Without a cache, a positioned read is one ranged GET, except that a read continuing where
//! an earlier one of the same open object ended fetches ahead, in windows doubling from
//! 64 KiB to 2 MiB, the next one in the background (`readahead.rs`): a compaction or scan
//! reading a table front to back makes about one request per 2 MiB and rarely waits for one,
//! a point lookup fetches only its block, and a read ending at the object's end (a table's
//! footer) fetches the last 256 KiB, so the index and properties read next at open are there.
//! The engine reads data blocks through its block cache.
//! With an [`ObjectCache`] ([`ObjectFs::with_cache`]), an object costs one GET when first
//! opened (none when this host uploaded it) and its reads are local. Every open makes a HEAD,
//! which is what keeps a replaced or deleted object from being read out of the cache. `create`
//! checks the name is free with a HEAD (the engine never reuses a number, so this is a guard,
//! not a lock).
//!
//! # One database per prefix
//!
//! A read-write open claims the prefix with a marker object (`SLUICE-OWNER`) created by a
//! conditional PUT and naming the database by an id kept in its directory; another database
//! opening on that prefix is refused before it writes or deletes anything there (`owner.rs`).
//! Each open that takes the database's lock reads the marker: one GET.
//!
//! Each read-write open also takes the next epoch of the prefix, and from then on checks before
//! every upload, deletion and copy there that no later open (of a copy of its directory) has
//! taken a newer one (`fence.rs`): a LIST each. At open that is a LIST, a GET of the newest
//! epoch, a PUT, a DELETE per older epoch and a synced rewrite of the directory's record of
//! its claim (at the first claim of a prefix also a HEAD per level above it, a second rewrite
//! and the marker's PUT and GET).

mod cache;
mod fence;
mod local_claim;
mod owner;
pub mod proxy;
mod readahead;
mod reader;
mod requests;
mod writer;

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::future::Future;
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use sluice_sst::fs::{
    FileLock, FileMetadata, FileSystem, IoMode, LockMode, ReadFile, StoreRequests, WriteFence,
    WriteFile,
};
use tokio::task::JoinHandle;

pub use cache::{CacheStats, ObjectCache};
pub use fence::EPOCHS;
pub use local_claim::LOCAL_ID;
pub use owner::MARKER;

/// The database's lock file, whose exclusive lock claims the prefix.
const LOCK: &str = "LOCK";

use reader::{ObjectReader, Source};
use requests::Requests;
use writer::ObjectWriter;

/// Objects at least this large are uploaded in parts (S3 allows a single PUT up to 5 GB, but
/// parts can be retried alone).
pub const MULTIPART_BYTES: usize = 32 << 20;

/// The size of each part of a multipart upload.
const PART_BYTES: usize = 16 << 20;

/// A [`FileSystem`] keeping tables and blob files in an object store (see the crate docs).
#[derive(Clone)]
pub struct ObjectFs {
    inner: Arc<Inner>,
    /// The epoch this file system took the prefix by at its last claim, or writes for
    /// ([`ObjectFs::fenced_by`]); shared with its clones and the writers it creates.
    fence: Arc<parking_lot::Mutex<fence::Fence>>,
}

struct Inner {
    local: Arc<dyn FileSystem>,
    store: Arc<dyn ObjectStore>,
    /// The database directory: object files are named relative to it.
    root: PathBuf,
    prefix: ObjectPath,
    cache: Option<ObjectCache>,
    /// Shared with the store's tasks: a background read counts its bytes when they arrive.
    requests: Arc<Requests>,
    /// Runs the store's futures; callers block on them from the engine's threads (or from
    /// another runtime's, which is why they do not `block_on` this one). `None` once dropped.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Inner {
    /// Without blocking: dropping a runtime inside another one's task would panic.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for ObjectFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectFs")
            .field("store", &self.inner.store.to_string())
            .field("root", &self.inner.root)
            .field("prefix", &self.inner.prefix.as_ref())
            .finish()
    }
}

impl ObjectFs {
    /// Keeps the tables and blob files of the database in `root` as objects under `prefix` of
    /// `store`, and every other file on `local`.
    pub fn new(
        local: Arc<dyn FileSystem>,
        store: Arc<dyn ObjectStore>,
        root: &Path,
        prefix: &str,
    ) -> io::Result<ObjectFs> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-object")
            .enable_all()
            .build()?;
        Ok(ObjectFs {
            inner: Arc::new(Inner {
                local,
                store,
                root: root.to_path_buf(),
                prefix: ObjectPath::from(prefix),
                cache: None,
                requests: Arc::default(),
                runtime: Some(runtime),
            }),
            fence: Arc::default(),
        })
    }

    /// Reads objects through `cache`, and puts the objects this file system uploads in it.
    /// Fails with [`io::ErrorKind::InvalidInput`] once the file system has been cloned (a
    /// clone shares the file system, which has no cache to share).
    pub fn with_cache(mut self, cache: ObjectCache) -> io::Result<ObjectFs> {
        let inner = Arc::get_mut(&mut self.inner).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a cache is set before the object file system is cloned",
            )
        })?;
        inner.cache = Some(cache);
        Ok(self)
    }

    /// This file system, writing for the holder of `epoch` (a worker's, for its host): its
    /// uploads, deletions and copies fail once a later claim has taken the prefix from that
    /// epoch, as the holder's own do (`fence.rs`). Shares everything else with `self`.
    pub fn fenced_by(&self, epoch: WriteFence) -> ObjectFs {
        ObjectFs {
            inner: Arc::clone(&self.inner),
            fence: Arc::new(parking_lot::Mutex::new(fence::Fence::Holding(epoch))),
        }
    }

    /// What the cache did so far (`None` without one).
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.inner.cache.as_ref().map(ObjectCache::stats)
    }

    /// [`ObjectFs::new`] for a store named by URL: `s3://bucket/prefix` (endpoint, region and
    /// credentials from the `AWS_*` environment variables, as `object_store` reads them;
    /// `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint) or `file:///dir` (its local backend).
    pub fn from_url(local: Arc<dyn FileSystem>, url: &str, root: &Path) -> io::Result<ObjectFs> {
        let bad = |e: String| io::Error::new(io::ErrorKind::InvalidInput, e);
        let parsed = url::Url::parse(url).map_err(|e| bad(format!("{url}: {e}")))?;
        let store: Arc<dyn ObjectStore> = match parsed.scheme() {
            "s3" => {
                let bucket = parsed
                    .host_str()
                    .ok_or_else(|| bad(format!("{url}: no bucket")))?;
                Arc::new(
                    object_store::aws::AmazonS3Builder::from_env()
                        .with_bucket_name(bucket)
                        .build()
                        .map_err(|e| bad(format!("{url}: {e}")))?,
                )
            }
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| bad(format!("{url}: not a local path")))?;
                std::fs::create_dir_all(&dir)?;
                Arc::new(
                    object_store::local::LocalFileSystem::new_with_prefix(&dir)
                        .map_err(|e| bad(format!("{url}: {e}")))?,
                )
            }
            other => return Err(bad(format!("{url}: unsupported scheme {other:?}"))),
        };
        let prefix = match parsed.scheme() {
            "s3" => parsed.path().trim_matches('/').to_string(),
            _ => String::new(),
        };
        ObjectFs::new(local, store, root, &prefix)
    }
}

impl Inner {
    /// The object a path names, if it is a table or blob file under the root.
    fn object(&self, path: &Path) -> Option<ObjectPath> {
        let ext = path.extension()?.to_str()?;
        if ext != "sst" && ext != "blob" {
            return None;
        }
        self.object_dir(path)
    }

    /// The object path a local path under the root stands for (a directory's is the prefix
    /// of the objects in it).
    fn object_dir(&self, path: &Path) -> Option<ObjectPath> {
        let rel = path.strip_prefix(&self.root).ok()?;
        let mut location = self.prefix.clone();
        for part in rel.components() {
            match part {
                Component::Normal(name) => location = location.join(name.to_str()?),
                _ => return None,
            }
        }
        Some(location)
    }

    /// Runs `fut` on this store's runtime and waits for it, from any thread.
    fn wait<T: Send + 'static>(
        &self,
        fut: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> io::Result<T> {
        self.join(&mut self.spawn(fut)?)
    }

    /// Starts `fut` on this store's runtime.
    fn spawn<T: Send + 'static>(
        &self,
        fut: impl Future<Output = object_store::Result<T>> + Send + 'static,
    ) -> io::Result<JoinHandle<object_store::Result<T>>> {
        match &self.runtime {
            Some(runtime) => Ok(runtime.spawn(fut)),
            None => Err(io::Error::other("the object store is shut down")),
        }
    }

    /// Waits for a future [`Inner::spawn`] started, from any thread.
    fn join<T>(&self, handle: &mut JoinHandle<object_store::Result<T>>) -> io::Result<T> {
        // Unconstrained: from inside a tokio task, the task's cooperative budget would make the
        // handle return `Pending` forever once spent.
        match futures::executor::block_on(tokio::task::unconstrained(handle)) {
            Ok(result) => result.map_err(to_io),
            Err(e) => Err(io::Error::other(format!("object store task failed: {e}"))),
        }
    }

    fn head(&self, location: &ObjectPath) -> io::Result<ObjectMeta> {
        Requests::count(&self.requests.heads, 1);
        let (store, location) = (Arc::clone(&self.store), location.clone());
        self.wait(async move { store.head(&location).await })
    }

    /// The object at `location` as a local file of the cache, downloading it (one GET,
    /// streamed to disk) when the cache has no entry for its current version. `None` without a
    /// cache, for an object larger than it or without an entity tag to tell its versions
    /// apart, and when the download or the disk fails: the object is then read from the
    /// store, as without a cache, so the cache never fails a read.
    fn cached(&self, location: &ObjectPath, meta: &ObjectMeta) -> Option<(File, u64)> {
        let cache = self.cache.as_ref()?;
        let etag = meta.e_tag.as_deref().filter(|t| !t.is_empty())?;
        if let Some(file) = cache.get(location.as_ref(), etag, meta.size) {
            return Some((file, meta.size));
        }
        if meta.size > cache.capacity() {
            return None;
        }
        let incoming = cache.incoming().ok()?;
        Requests::count(&self.requests.gets, 1);
        let (store, at) = (Arc::clone(&self.store), location.clone());
        let downloaded = self.wait(async move {
            Ok(async move {
                let mut incoming = incoming;
                let got = store.get(&at).await.map_err(to_io)?;
                let meta = got.meta.clone();
                let mut stream = got.into_stream();
                let mut written = 0;
                while let Some(chunk) = stream.try_next().await.map_err(to_io)? {
                    incoming.file.write_all(&chunk)?;
                    written += chunk.len() as u64;
                }
                Ok::<_, io::Error>((incoming, meta, written))
            }
            .await)
        });
        let (incoming, got, written) = downloaded.ok()?.ok()?;
        Requests::count(&self.requests.bytes_downloaded, written);
        // The object may have changed since the HEAD: the GET's own size and tag name what it
        // returned.
        if written != got.size {
            return None;
        }
        let etag = got.e_tag.as_deref().unwrap_or_default();
        let file = cache.commit(incoming, location.as_ref(), etag).ok()??;
        Some((file, got.size))
    }

    /// Drops `location` from the cache, if there is one.
    fn uncache(&self, location: &ObjectPath) {
        if let Some(cache) = &self.cache {
            cache.remove(location.as_ref());
        }
    }
}

/// An `object_store` error as an `io::Error` of the matching kind.
fn to_io(e: object_store::Error) -> io::Error {
    let kind = match &e {
        object_store::Error::NotFound { .. } => io::ErrorKind::NotFound,
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            io::ErrorKind::AlreadyExists
        }
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => io::ErrorKind::PermissionDenied,
        _ => io::ErrorKind::Other,
    };
    io::Error::new(kind, e)
}

impl FileSystem for ObjectFs {
    fn open_read(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn ReadFile>> {
        let Some(location) = self.inner.object(path) else {
            return self.inner.local.open_read(path, mode);
        };
        let meta = self.inner.head(&location)?;
        let (source, size) = match self.inner.cached(&location, &meta) {
            Some((file, size)) => (Source::Cached(file), size),
            None => (
                Source::Store {
                    etag: meta.e_tag.clone(),
                },
                meta.size,
            ),
        };
        Ok(Box::new(ObjectReader::new(
            Arc::clone(&self.inner),
            location,
            size,
            source,
        )))
    }

    fn create(&self, path: &Path, mode: IoMode) -> io::Result<Box<dyn WriteFile>> {
        let Some(location) = self.inner.object(path) else {
            return self.inner.local.create(path, mode);
        };
        match self.inner.head(&location) {
            Ok(_) => return Err(io::ErrorKind::AlreadyExists.into()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(Box::new(ObjectWriter::new(
            Arc::clone(&self.inner),
            Arc::clone(&self.fence),
            location,
        )))
    }

    /// Removing the database's own `LOCK` (the last step of `Db::destroy`) releases the
    /// prefix first.
    fn remove(&self, path: &Path) -> io::Result<()> {
        let Some(location) = self.inner.object(path) else {
            if path == self.inner.root.join(LOCK) {
                // Under the lock again: an open that got in since the caller let it go keeps
                // the prefix (this fails `WouldBlock`), and none gets in while it is released.
                let _held = self.inner.local.lock(path, LockMode::Exclusive)?;
                self.inner.release(&self.fence)?;
            }
            return self.inner.local.remove(path);
        };
        // S3 deletes a missing key without complaint; a missing file is NotFound here (and
        // costs no LIST: a failed share's reserved numbers are mostly never uploaded).
        self.inner.head(&location)?;
        self.inner.check_fence(&self.fence)?;
        self.inner.uncache(&location);
        Requests::count(&self.inner.requests.deletes, 1);
        let store = Arc::clone(&self.inner.store);
        self.inner
            .wait(async move { store.delete(&location).await })
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        self.inner.local.remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        match (self.inner.object(from), self.inner.object(to)) {
            (None, None) => self.inner.local.rename(from, to),
            (Some(from), Some(to)) => {
                self.inner.check_fence(&self.fence)?;
                self.inner.uncache(&from);
                self.inner.uncache(&to);
                Requests::count(&self.inner.requests.copies, 1);
                let (store, source) = (Arc::clone(&self.inner.store), from.clone());
                self.inner
                    .wait(async move { store.copy(&source, &to).await })?;
                Requests::count(&self.inner.requests.deletes, 1);
                let store = Arc::clone(&self.inner.store);
                self.inner.wait(async move { store.delete(&from).await })
            }
            _ => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{} -> {}: between the object store and a local directory",
                    from.display(),
                    to.display()
                ),
            )),
        }
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        match (self.inner.object(from), self.inner.object(to)) {
            (None, None) => self.inner.local.hard_link(from, to),
            // A server-side copy stands for the link: objects are immutable, so the two names
            // hold the same bytes for good.
            (Some(from), Some(to)) => {
                self.inner.check_fence(&self.fence)?;
                match self.inner.head(&to) {
                    Ok(_) => return Err(io::ErrorKind::AlreadyExists.into()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                Requests::count(&self.inner.requests.copies, 1);
                let store = Arc::clone(&self.inner.store);
                self.inner.wait(async move { store.copy(&from, &to).await })
            }
            _ => Err(io::ErrorKind::Unsupported.into()),
        }
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        let mut names = self.inner.local.list_dir(dir)?;
        if let Some(location) = self.inner.object_dir(dir) {
            let store = Arc::clone(&self.inner.store);
            let listed = self.inner.wait(async move {
                store
                    .list_with_delimiter(Some(&location))
                    .await
                    .map(|l| l.objects)
            })?;
            self.inner.requests.count_listing(listed.len());
            // The owner marker is the prefix's, not a file of the database directory (nor are
            // the epochs, which are in a directory of their own and not listed here).
            let marker = self.inner.prefix.clone().join(MARKER);
            names.extend(
                listed
                    .iter()
                    .filter(|o| o.location != marker)
                    .filter_map(|o| o.location.filename())
                    .map(OsString::from),
            );
        }
        Ok(names)
    }

    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        self.inner.local.create_dir_all(dir)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // Objects need no directory sync: an acknowledged PUT is durable under its name.
        self.inner.local.sync_dir(dir)
    }

    fn metadata(&self, path: &Path) -> io::Result<FileMetadata> {
        let Some(location) = self.inner.object(path) else {
            return self.inner.local.metadata(path);
        };
        Ok(FileMetadata {
            len: self.inner.head(&location)?.size,
            is_dir: false,
            is_symlink: false,
        })
    }

    /// Takes the lock on the local file; the database's own `LOCK` also claims the prefix
    /// (exclusive) or checks that another database does not own it (shared): see `owner.rs`.
    fn lock(&self, path: &Path, mode: LockMode) -> io::Result<Box<dyn FileLock>> {
        let lock = self.inner.local.lock(path, mode)?;
        if path != self.inner.root.join(LOCK) {
            return Ok(lock);
        }
        self.inner.claim(mode == LockMode::Exclusive, &self.fence)?;
        Ok(lock)
    }

    fn is_remote(&self, path: &Path) -> bool {
        self.inner.object(path).is_some()
    }

    fn write_fence(&self) -> Option<WriteFence> {
        self.fence.lock().epoch().cloned()
    }

    fn store_requests(&self) -> Option<StoreRequests> {
        let cache = self.cache_stats().unwrap_or_default();
        Some(StoreRequests {
            cache_hits: cache.hits,
            cache_misses: cache.misses,
            ..self.inner.requests.snapshot()
        })
    }
}

/// Deletes every object under the prefix of `fs` (a database's tables and blob files, its
/// owner marker, and anything else there, under nested prefixes too); returns how many. For
/// tools that remove a database they made: it fails with
/// [`io::ErrorKind::PermissionDenied`], deleting nothing, unless the prefix is empty or its
/// owner marker names the database of `fs`.
pub fn remove_objects(fs: &ObjectFs) -> io::Result<usize> {
    let names = list_all(fs)?;
    if names.is_empty() {
        return Ok(0);
    }
    fs.inner.check_owned()?;
    fs.inner.check_fence(&fs.fence)?;
    for name in &names {
        let (store, location) = (Arc::clone(&fs.inner.store), ObjectPath::from(name.as_str()));
        Requests::count(&fs.inner.requests.deletes, 1);
        fs.inner
            .wait(async move { store.delete(&location).await })?;
    }
    Ok(names.len())
}

/// Lists the database's objects under the prefix of `fs`: every object but the owner marker
/// and the epochs (for tests and tools).
pub fn list_objects(fs: &ObjectFs) -> io::Result<Vec<String>> {
    let marker = fs.inner.prefix.clone().join(MARKER).to_string();
    let epochs = fs.inner.prefix.clone().join(EPOCHS);
    let mut names = list_all(fs)?;
    names.retain(|n| *n != marker && !ObjectPath::from(n.as_str()).prefix_matches(&epochs));
    Ok(names)
}

/// Every object under the prefix of `fs`.
fn list_all(fs: &ObjectFs) -> io::Result<Vec<String>> {
    let store = Arc::clone(&fs.inner.store);
    let prefix = fs.inner.prefix.clone();
    let names: Vec<String> = fs.inner.wait(async move {
        store
            .list(Some(&prefix))
            .map_ok(|m| m.location.to_string())
            .try_collect()
            .await
    })?;
    fs.inner.requests.count_listing(names.len());
    Ok(names)
}
