//! The objects a task uploaded: a file system over the worker's object store that records each
//! output whose upload the store acknowledged, so that [`super::OutputSet::abandon`] deletes
//! exactly those. An object under a reserved number that this task did not upload (its
//! conditional upload failed, because something else is there) is never deleted by it.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use sluice_sst::fs::{WrapWrites, WriteFile, WriteWrapper};

/// The paths uploaded and not deleted since, shared by the file system and its files.
pub(crate) type Uploaded = Arc<Mutex<BTreeSet<PathBuf>>>;

/// Takes every recorded path out of `uploaded`.
pub(crate) fn take_all(uploaded: &Uploaded) -> BTreeSet<PathBuf> {
    std::mem::take(&mut *uploaded.lock().unwrap_or_else(PoisonError::into_inner))
}

/// A file system with every acknowledged upload recorded (see the module docs).
pub(crate) type RecordingFs = WrapWrites<RecordUploads>;

/// Records each new file's path once its upload (a sync) is acknowledged, and forgets it once
/// it is removed.
#[derive(Debug, Default)]
pub(crate) struct RecordUploads {
    pub uploaded: Uploaded,
}

impl WriteWrapper for RecordUploads {
    fn wrap(&self, path: &Path, file: Box<dyn WriteFile>) -> io::Result<Box<dyn WriteFile>> {
        Ok(Box::new(RecordingFile {
            inner: file,
            path: path.to_path_buf(),
            uploaded: Arc::clone(&self.uploaded),
        }))
    }

    fn removed(&self, path: &Path) {
        self.uploaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(path);
    }
}

/// An output being written; recorded once a sync (the upload) succeeds.
struct RecordingFile {
    inner: Box<dyn WriteFile>,
    path: PathBuf,
    uploaded: Uploaded,
}

impl fmt::Debug for RecordingFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RecordingFile({})", self.path.display())
    }
}

impl RecordingFile {
    fn record(&self) {
        self.uploaded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(self.path.clone());
    }
}

impl WriteFile for RecordingFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.append(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()?;
        self.record();
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }

    fn sync_data(&mut self) -> io::Result<()> {
        self.inner.sync_data()?;
        self.record();
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        self.inner.finish()?;
        self.record();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use sluice_sst::fs::{FileSystem, IoMode, MemFs};

    use super::*;

    #[test]
    fn only_acknowledged_uploads_are_recorded_and_deletions_forget_them() {
        let uploaded = Uploaded::default();
        let fs = RecordingFs::new(
            Arc::new(MemFs::new()),
            RecordUploads {
                uploaded: Arc::clone(&uploaded),
            },
        );
        let (a, b) = (Path::new("/a.sst"), Path::new("/b.sst"));
        let mut fa = fs.create(a, IoMode::Buffered).unwrap();
        fa.append(b"x").unwrap();
        let _unsynced = fs.create(b, IoMode::Buffered).unwrap();
        assert!(uploaded.lock().unwrap().is_empty());
        fa.sync().unwrap();
        assert_eq!(*uploaded.lock().unwrap(), BTreeSet::from([a.to_path_buf()]));
        fs.remove(a).unwrap();
        assert!(take_all(&uploaded).is_empty());
    }
}
