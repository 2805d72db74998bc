//! Reading an object: ranged GETs, or `pread`s of its copy in the cache.

use std::fmt;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange};
use parking_lot::Mutex;
use sluice_sst::fs::ReadFile;
use tokio::task::JoinHandle;

use crate::Inner;
use crate::readahead::{Miss, ReadAhead};
use crate::requests::Requests;

/// An object read by ranged GETs (with read-ahead for sequential readers), or from its copy
/// in the cache.
pub(crate) struct ObjectReader {
    inner: Arc<Inner>,
    location: ObjectPath,
    size: u64,
    source: Source,
    ahead: Mutex<ReadAhead<InFlight>>,
}

/// Where an [`ObjectReader`] reads.
pub(crate) enum Source {
    /// Ranged GETs of the version with this entity tag (any version without one).
    Store { etag: Option<String> },
    /// The cache's copy of the version the open saw.
    Cached(File),
}

/// A ranged GET running on the store's runtime: its answer's entity tag and bytes. Dropping it
/// cancels the request (a background read-ahead nobody will read).
pub(crate) struct InFlight(JoinHandle<object_store::Result<(Option<String>, Bytes)>>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl fmt::Debug for InFlight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("InFlight")
    }
}

impl ObjectReader {
    /// A reader of the `size` bytes of `location`, from `source`.
    pub(crate) fn new(inner: Arc<Inner>, location: ObjectPath, size: u64, source: Source) -> Self {
        ObjectReader {
            inner,
            location,
            size,
            source,
            ahead: Mutex::new(ReadAhead::default()),
        }
    }

    /// The entity tag every read must see: the version the open saw.
    fn expected_tag(&self) -> Option<String> {
        match &self.source {
            Source::Store { etag } => etag.clone(),
            Source::Cached(_) => None,
        }
    }

    /// Starts one ranged GET of `range`, of the version the open saw: a replaced object fails
    /// the read instead of mixing two versions' bytes in one table. The store refuses the GET
    /// (`If-Match`, 412) where it supports that, and [`ObjectReader::finish`] checks the tag
    /// the answer carries too.
    fn start(&self, range: Range<u64>) -> io::Result<InFlight> {
        let (store, location) = (Arc::clone(&self.inner.store), self.location.clone());
        let options = GetOptions {
            range: Some(GetRange::Bounded(range)),
            if_match: self.expected_tag(),
            ..GetOptions::default()
        };
        let requests = Arc::clone(&self.inner.requests);
        let get = self.inner.spawn(async move {
            let got = store.get_opts(&location, options).await?;
            let tag = got.meta.e_tag.clone();
            let bytes = got.bytes().await?;
            // Counted here, so that a background read nobody waits for counts too.
            Requests::count(&requests.bytes_downloaded, bytes.len() as u64);
            Ok((tag, bytes))
        })?;
        Requests::count(&self.inner.requests.gets, 1);
        Ok(InFlight(get))
    }

    /// Waits for the GET of `range` and checks its answer.
    fn finish(&self, range: Range<u64>, get: &mut InFlight) -> io::Result<Bytes> {
        let replaced = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the object was replaced since it was opened",
                    self.location
                ),
            )
        };
        let (tag, bytes) = match self.inner.join(&mut get.0) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(replaced()),
            other => other?,
        };
        let expected = self.expected_tag();
        if expected.is_some() && tag.is_some() && tag != expected {
            return Err(replaced());
        }
        let len = range.end - range.start;
        if bytes.len() as u64 != len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{}: asked for {len} bytes at {}, the store sent {}",
                    self.location,
                    range.start,
                    bytes.len()
                ),
            ));
        }
        Ok(bytes)
    }

    /// One ranged GET of `range`, waited for.
    fn get(&self, range: Range<u64>) -> io::Result<Bytes> {
        let mut get = self.start(range.clone())?;
        self.finish(range, &mut get)
    }

    /// Serves a read the read-ahead's streams did not hold: waits for the background fetch
    /// that holds it, or fetches now, then keeps the bytes and starts fetching the next window.
    fn read_missed(&self, buf: &mut [u8], offset: u64, miss: Miss<InFlight>) -> io::Result<()> {
        let (fetch, bytes, head) = match miss {
            Miss::Wait {
                fetch,
                mut pending,
                head,
            } => match self.finish(fetch.range.clone(), &mut pending) {
                Ok(bytes) => (fetch, bytes, head),
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(e),
                // A background fetch that failed (its retries ran out while nobody waited):
                // the read tries once more on its own before it fails.
                Err(e) => {
                    tracing::debug!(object = %self.location, error = %e, "read-ahead failed; reading again");
                    let end = offset + buf.len() as u64;
                    buf.copy_from_slice(&self.get(offset..end)?);
                    return Ok(());
                }
            },
            Miss::Fetch(fetch) => {
                let bytes = self.get(fetch.range.clone())?;
                (fetch, bytes, Bytes::new())
            }
        };
        let (head_buf, rest) = buf.split_at_mut(head.len());
        head_buf.copy_from_slice(&head);
        let from =
            usize::try_from(offset + head.len() as u64 - fetch.range.start).unwrap_or(usize::MAX);
        let wanted = bytes
            .get(from..from.saturating_add(rest.len()))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "{}: the store sent {} bytes for {:?}",
                        self.location,
                        bytes.len(),
                        fetch.range
                    ),
                )
            })?;
        rest.copy_from_slice(wanted);
        let next = self.ahead.lock().keep(fetch, bytes, self.size);
        if let Some((stream, range)) = next {
            // Best effort: a fetch that cannot start leaves the next read to fetch for itself.
            if let Ok(get) = self.start(range.clone()) {
                self.ahead.lock().ahead(stream, range, get);
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ObjectReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectReader({}, {} bytes)", self.location, self.size)
    }
}

impl ReadFile for ObjectReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|end| end > self.size)
        {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        if buf.is_empty() {
            return Ok(());
        }
        if let Source::Cached(file) = &self.source {
            return std::os::unix::fs::FileExt::read_exact_at(file, buf, offset);
        }
        let miss = self.ahead.lock().read(buf, offset, self.size);
        match miss {
            None => Ok(()),
            Some(miss) => self.read_missed(buf, offset, miss),
        }
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }
}
