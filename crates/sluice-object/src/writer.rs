//! Writing an object: held in memory, uploaded whole (and conditionally) by `sync`, and put in
//! the cache from memory.

use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, PutResult, UpdateVersion};
use parking_lot::Mutex;
use sluice_sst::fs::WriteFile;

use crate::fence::Fence;
use crate::requests::Requests;
use crate::{Inner, MULTIPART_BYTES, PART_BYTES};

/// An object being written: held in memory, uploaded whole by `sync`.
pub(crate) struct ObjectWriter {
    inner: Arc<Inner>,
    /// The file system's fence: checked before the upload, and before a multipart one's
    /// completion.
    fence: Arc<Mutex<Fence>>,
    location: ObjectPath,
    buf: Vec<u8>,
    /// The length uploaded by the last `sync`, if any.
    uploaded: Option<usize>,
    /// The entity tag of this writer's last upload: a later upload replaces that version only.
    etag: Option<String>,
}

impl ObjectWriter {
    /// A writer of the new object `location`, nothing uploaded yet.
    pub(crate) fn new(inner: Arc<Inner>, fence: Arc<Mutex<Fence>>, location: ObjectPath) -> Self {
        ObjectWriter {
            inner,
            fence,
            location,
            buf: Vec::new(),
            uploaded: None,
            etag: None,
        }
    }
}

impl fmt::Debug for ObjectWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ObjectWriter({}, {} bytes)",
            self.location,
            self.buf.len()
        )
    }
}

impl ObjectWriter {
    /// A single PUT, conditional: see the crate docs.
    fn put_whole(&self, data: Bytes) -> io::Result<PutResult> {
        let (store, location) = (Arc::clone(&self.inner.store), self.location.clone());
        let mode = match (&self.etag, self.uploaded) {
            (Some(e_tag), _) => PutMode::Update(UpdateVersion {
                e_tag: Some(e_tag.clone()),
                version: None,
            }),
            // Uploaded before, with no tag from the store to make the replacement conditional.
            (None, Some(_)) => PutMode::Overwrite,
            (None, None) => PutMode::Create,
        };
        self.inner.wait(async move {
            let put = |mode| PutOptions {
                mode,
                ..PutOptions::default()
            };
            let payload = PutPayload::from(data);
            let replacing = matches!(mode, PutMode::Update(_));
            match store.put_opts(&location, payload.clone(), put(mode)).await {
                // `object_store`'s local backend cannot replace a version conditionally; it
                // serves one machine, where the LOCK file keeps out a second writer. A first
                // upload is always conditional: a store that cannot make it so fails it.
                Err(object_store::Error::NotImplemented { .. }) if replacing => {
                    store
                        .put_opts(&location, payload, put(PutMode::Overwrite))
                        .await
                }
                other => other,
            }
        })
    }

    /// A multipart upload: its parts, then, the fence checked again (the parts may have taken
    /// seconds), its completion. `object_store` cannot make it conditional.
    fn put_in_parts(&self, data: Bytes) -> io::Result<PutResult> {
        let (store, location) = (Arc::clone(&self.inner.store), self.location.clone());
        let mut upload = self.inner.wait(async move {
            let mut upload = store.put_multipart(&location).await?;
            let parts: Vec<_> = (0..data.len())
                .step_by(PART_BYTES)
                .map(|at| {
                    let part = data.slice(at..data.len().min(at + PART_BYTES));
                    upload.put_part(PutPayload::from(part))
                })
                .collect();
            match futures::future::try_join_all(parts).await {
                Ok(_) => Ok(upload),
                Err(e) => {
                    // The parts uploaded so far are the store's to drop; the error is the part's.
                    let _ = upload.abort().await;
                    Err(e)
                }
            }
        })?;
        if let Err(fenced) = self.inner.check_fence(&self.fence) {
            let _ = self.inner.wait(async move { upload.abort().await });
            return Err(fenced);
        }
        self.inner.wait(async move { upload.complete().await })
    }
}

impl WriteFile for ObjectWriter {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.uploaded == Some(self.buf.len()) {
            return Ok(());
        }
        self.inner.check_fence(&self.fence)?;
        // Lent to the upload and taken back (without a copy once the upload has let go).
        let data = Bytes::from(std::mem::take(&mut self.buf));
        let lent = data.clone();
        let uploaded = if data.len() < MULTIPART_BYTES {
            self.put_whole(data)
        } else {
            self.put_in_parts(data)
        };
        self.buf = Vec::from(lent);
        let len = self.buf.len();
        // A multipart upload is its start, its parts and its completion.
        let requests = match len < MULTIPART_BYTES {
            true => 1,
            false => 2 + len.div_ceil(PART_BYTES) as u64,
        };
        Requests::count(&self.inner.requests.puts, requests);
        let put = uploaded?;
        Requests::count(&self.inner.requests.bytes_uploaded, len as u64);
        self.uploaded = Some(len);
        self.etag.clone_from(&put.e_tag);
        // What was just uploaded is what the next reads of this object want (a flush's or a
        // compaction's outputs are read back at once). Without the store's tag for the new
        // version, or when the disk refuses the copy, the object is read from the store
        // instead: the cache holds nothing the bucket does not.
        if let (Some(cache), Some(etag)) = (&self.inner.cache, put.e_tag.as_deref()) {
            let _ = cache.incoming().and_then(|mut incoming| {
                incoming.file.write_all(&self.buf)?;
                cache.commit(incoming, self.location.as_ref(), etag)
            });
        }
        Ok(())
    }
}
