//! A task's output files: numbering from the host's reserved block, temporary names while they
//! are written, the rename that publishes them, and deleting them after any failure.
//!
//! Invariants, all under [`OutputSet`]'s one mutex:
//! - numbers are handed out in order from `first..first + count` and never past it: asking for
//!   one more fails the job ([`OutputSet::allocate`]);
//! - output `i` goes to root `i % roots.len()`, so several roots act as S-PPCP data dirs;
//! - a file is written as `NNNNNN.dbtmp` and becomes `NNNNNN.sst` only in
//!   [`OutputSet::commit`], after the executor has finished every file; the host never sees a
//!   `.sst` that is not complete and synced;
//! - once [`OutputSet::abandon`] has run, nothing more is handed out or renamed, and every
//!   temporary file and every `.sst` this set renamed is gone (an `.sst` this set did not
//!   create is never deleted).
//!
//! Crash ordering: a worker that dies before a rename leaves only `.dbtmp` files, which the
//! host deletes as garbage when it opens the database (and ignores before: it installs only the
//! names the worker reported). A worker that dies after some renames but before answering
//! leaves `.sst` files under reserved numbers the host never installed; the host's obsolete
//! file collection deletes them as it deletes any unreferenced table.
//!
//! Objects ([`OutputSet::new`] with a file system of objects) are written under their `.sst`
//! names from the start, through [`OutputSet::storage`], which records every acknowledged
//! upload (`uploads.rs`): an object appears whole when its upload is acknowledged, or not at
//! all, and an upload below `sluice_object::MULTIPART_BYTES` is conditional, so it never
//! replaces one that exists (a larger one relies on the check at its creation). `commit` then
//! renames nothing; `abandon` deletes the objects this set uploaded, and only those, and may
//! run again once the job has stopped, for an upload that finished after the first. A worker
//! that dies leaves complete objects under reserved numbers, which the host's collection
//! deletes (it lists the bucket beside its directories).

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use sluice_sst::compact::OutputFile;
use sluice_sst::fs::{FileSystem, Storage};
use sluice_sst::{Error, IoContext, Result};

use crate::task::OutputBlock;

/// `NNNNNN.sst`: a table's name, as the host names them.
pub(crate) fn table_name(number: u64) -> String {
    format!("{number:06}.sst")
}

/// `NNNNNN.dbtmp`: the name an output has while it is written.
pub(crate) fn temp_name(number: u64) -> String {
    format!("{number:06}.dbtmp")
}

/// An output published by [`OutputSet::commit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Published {
    pub number: u64,
    /// `NNNNNN.sst`, relative to `root`.
    pub name: String,
    pub root: PathBuf,
}

#[derive(Debug, Default)]
struct State {
    /// `(number, root index)` of every number handed out, in order.
    handed: Vec<(u64, usize)>,
    /// How many of `handed` (a prefix) have been renamed to `.sst`.
    renamed: usize,
    /// Set by `commit` or `abandon`: nothing more is handed out.
    closed: bool,
    /// Set by `abandon`.
    abandoned: bool,
}

/// The outputs of one task. Shared between the job thread (which allocates and commits) and the
/// request handler (which abandons when the host goes away).
#[derive(Debug)]
pub(crate) struct OutputSet {
    /// Canonical roots, non-empty.
    roots: Vec<PathBuf>,
    block: OutputBlock,
    state: Mutex<State>,
    /// Where outputs go when they are objects (see the module docs); `None` for local files.
    objects: Option<Arc<RecordingFs>>,
}

impl OutputSet {
    /// Outputs numbered from `block`, dealt over `roots` (non-empty): local files, or objects
    /// of `objects` named by paths under the roots.
    pub fn new(
        roots: Vec<PathBuf>,
        block: OutputBlock,
        objects: Option<Arc<dyn FileSystem>>,
    ) -> Self {
        debug_assert!(!roots.is_empty());
        OutputSet {
            roots,
            block,
            state: Mutex::default(),
            objects: objects
                .map(|inner| Arc::new(RecordingFs::new(inner, RecordUploads::default()))),
        }
    }

    /// Where the executor writes the outputs: `base`, or for objects the same store through
    /// the file system that records this set's uploads.
    pub fn storage(&self, base: &Storage) -> Storage {
        match &self.objects {
            Some(fs) => Storage::new(Arc::clone(fs) as Arc<dyn FileSystem>, base.mode),
            None => base.clone(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state as consistent as any prefix of the
        // operations; cleaning up from it is still right.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn root(&self, index: usize) -> &Path {
        let i = index % self.roots.len().max(1);
        self.roots.get(i).map_or(Path::new("."), PathBuf::as_path)
    }

    /// The next output's number and temporary path: the executor's `new_output`. Fails with
    /// [`Error::InvalidArgument`] once the reserved block is used up, and with
    /// [`Error::Cancelled`] after [`OutputSet::abandon`].
    pub fn allocate(&self) -> Result<(u64, PathBuf)> {
        let mut st = self.lock();
        if st.abandoned {
            return Err(Error::Cancelled);
        }
        if st.closed {
            return Err(Error::InvalidArgument(
                "the outputs were already published".into(),
            ));
        }
        let index = st.handed.len();
        if index >= self.block.count as usize {
            return Err(Error::InvalidArgument(format!(
                "the task needs more than the {} output numbers reserved from {}",
                self.block.count, self.block.first
            )));
        }
        let number = self.block.first + index as u64;
        st.handed.push((number, index % self.roots.len()));
        let name = match self.objects {
            Some(_) => table_name(number),
            None => temp_name(number),
        };
        Ok((number, self.root(index).join(name)))
    }

    /// Publishes `files` (the executor's outputs, which must be exactly the numbers handed
    /// out, in order): renames each `.dbtmp` to `.sst`, then fsyncs every root that received
    /// one, so the renames are durable before the host is told. Fails without renaming
    /// anything more if the set was abandoned or a `.sst` of a reserved number already exists
    /// (it would be overwritten). On failure the caller abandons the set.
    pub fn commit(&self, files: &[OutputFile]) -> Result<Vec<Published>> {
        let mut st = self.lock();
        if st.abandoned {
            return Err(Error::Cancelled);
        }
        st.closed = true;
        let numbers: Vec<u64> = files.iter().map(|f| f.number).collect();
        let handed: Vec<u64> = st.handed.iter().map(|&(n, _)| n).collect();
        if numbers != handed {
            return Err(Error::InvalidArgument(format!(
                "the executor reported outputs {numbers:?}, the worker handed out {handed:?}"
            )));
        }
        if self.objects.is_some() {
            // Uploaded under their names already: published as they are.
            st.renamed = st.handed.len();
            let published = st.handed.iter().map(|&(number, root_index)| Published {
                number,
                name: table_name(number),
                root: self.root(root_index).to_path_buf(),
            });
            return Ok(published.collect());
        }
        let mut published = Vec::with_capacity(files.len());
        let mut synced = vec![false; self.roots.len()];
        for (i, &(number, root_index)) in st.handed.clone().iter().enumerate() {
            let root = self.root(root_index);
            let (tmp, name) = (root.join(temp_name(number)), table_name(number));
            let dest = root.join(&name);
            if std::fs::symlink_metadata(&dest).is_ok() {
                return Err(Error::io(
                    &dest,
                    std::io::Error::new(ErrorKind::AlreadyExists, "a reserved output exists"),
                ));
            }
            std::fs::rename(&tmp, &dest).with_path(&tmp)?;
            st.renamed = i + 1;
            if let Some(s) = synced.get_mut(root_index) {
                *s = true;
            }
            published.push(Published {
                number,
                name,
                root: root.to_path_buf(),
            });
        }
        for (i, _) in synced.iter().enumerate().filter(|(_, s)| **s) {
            // If we crash before this, a rename may be lost: the host then finds no file
            // where the (unsent) reply would have named one. Nothing is reported until here.
            sync_dir(self.root(i))?;
        }
        Ok(published)
    }

    /// Stops handing out numbers and deletes every temporary file and every renamed `.sst`
    /// of this set, or every object it uploaded. Idempotent; a file already gone is not an
    /// error, and a deletion that fails is logged and left to the host's garbage collection.
    pub fn abandon(&self) {
        let mut st = self.lock();
        st.abandoned = true;
        st.closed = true;
        if let Some(fs) = &self.objects {
            for path in take_all(&fs.wrapper().uploaded) {
                remove_object_quietly(fs.as_ref(), &path);
            }
            return;
        }
        for (i, &(number, root_index)) in st.handed.iter().enumerate() {
            let root = self.root(root_index);
            remove_quietly(&root.join(temp_name(number)));
            if i < st.renamed {
                remove_quietly(&root.join(table_name(number)));
            }
        }
        st.renamed = 0;
    }
}

fn remove_quietly(path: &Path) {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(path = %path.display(), error = %e, "cannot delete an output"),
    }
}

fn remove_object_quietly(fs: &dyn FileSystem, path: &Path) {
    match fs.remove(path) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(object = %path.display(), error = %e, "cannot delete an output"),
    }
}

/// Makes the directory entries of `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).with_path(dir)
}

mod uploads;

use uploads::{RecordUploads, RecordingFs, take_all};

#[cfg(test)]
mod tests;
