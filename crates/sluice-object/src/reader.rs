//! Reading an object: ranged GETs, or `pread`s of its copy in the cache.

use std::fmt;
use std::fs::File;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange};
use parking_lot::Mutex;
use sluice_sst::fs::ReadFile;

use crate::Inner;
use crate::readahead::ReadAhead;
use crate::requests::Requests;

/// An object read by ranged GETs (with read-ahead for sequential readers), or from its copy
/// in the cache.
pub(crate) struct ObjectReader {
    inner: Arc<Inner>,
    location: ObjectPath,
    size: u64,
    source: Source,
    ahead: Mutex<ReadAhead>,
}

/// Where an [`ObjectReader`] reads.
pub(crate) enum Source {
    /// Ranged GETs of the version with this entity tag (any version without one).
    Store { etag: Option<String> },
    /// The cache's copy of the version the open saw.
    Cached(File),
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
}

impl ObjectReader {
    /// One ranged GET of `range`, of the version the open saw: a replaced object fails the
    /// read instead of mixing two versions' bytes in one table. The store refuses the GET
    /// (`If-Match`, 412) where it supports that, and the tag the answer carries is checked
    /// here too.
    fn get(&self, range: std::ops::Range<u64>) -> io::Result<Bytes> {
        let (store, location) = (Arc::clone(&self.inner.store), self.location.clone());
        let expected = match &self.source {
            Source::Store { etag } => etag.clone(),
            Source::Cached(_) => None,
        };
        let len = range.end - range.start;
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: expected.clone(),
            ..GetOptions::default()
        };
        Requests::count(&self.inner.requests.gets, 1);
        let fetched = self.inner.wait(async move {
            let got = store.get_opts(&location, options).await?;
            let tag = got.meta.e_tag.clone();
            Ok((tag, got.bytes().await?))
        });
        let replaced = || {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{}: the object was replaced since it was opened",
                    self.location
                ),
            )
        };
        let (tag, bytes): (Option<String>, Bytes) = match fetched {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(replaced()),
            other => other?,
        };
        if expected.is_some() && tag.is_some() && tag != expected {
            return Err(replaced());
        }
        Requests::count(&self.inner.requests.bytes_downloaded, bytes.len() as u64);
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
        if self.ahead.lock().copy(buf, offset) {
            return Ok(());
        }
        let fetch = self.ahead.lock().plan(offset, buf.len() as u64, self.size);
        let bytes = self.get(fetch.range.clone())?;
        let from = usize::try_from(offset - fetch.range.start).unwrap_or(usize::MAX);
        let wanted = bytes
            .get(from..from.saturating_add(buf.len()))
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
        buf.copy_from_slice(wanted);
        self.ahead.lock().keep(fetch, bytes);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.size)
    }
}
