//! S-PPCP's I/O threads: with tables spread over several data directories (one per device), each
//! directory gets a reader and a writer of its own, so the devices work at the same time.
//!
//! - Reading: [`read_by_dir`] runs one reader per directory holding inputs. Each reads its
//!   share of every sub-task ([`read_sub_task_part`]) in plan order; a gather thread zips the
//!   shares back into whole sub-tasks ([`assemble_sub_task`]) for the compute stage.
//! - Writing: [`DirWriters`] wraps the writers of a file system's new files
//!   ([`WrapWrites`]) so that their appends and syncs go to the writer thread of the file's
//!   directory. The single writer stage still decides every
//!   file cut; only the I/O moves, so the files are the same bytes.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, bounded};
use parking_lot::Mutex;
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::subtask::{PartialRead, assemble_sub_task, read_sub_task_part};
use sluice_sst::compact::{CompactionSpec, StepTimes};
#[cfg(doc)]
use sluice_sst::fs::WrapWrites;
use sluice_sst::fs::{WriteFile, WriteWrapper};
use sluice_sst::profile::thread_cpu_time;

use super::Shared;
use super::parallel::{ReadMsg, timed};
use crate::Result;

/// The distinct directories holding `spec`'s inputs, in a fixed order.
pub(super) fn input_dirs(spec: &CompactionSpec) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = spec
        .inputs
        .iter()
        .flatten()
        .filter_map(|t| t.path().parent().map(Path::to_path_buf))
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

type PartMsg = Result<(usize, PartialRead)>;

/// Reads every sub-task with one reader per directory in `dirs` and sends whole sub-tasks to
/// `tx`, in plan order. Spawns its threads in `scope`; they stop when `tx` closes or on error.
pub(super) fn read_by_dir<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    spec: &'env CompactionSpec,
    plan: &'env CompactionPlan,
    shared: &'env Shared,
    dirs: Vec<PathBuf>,
    depth: usize,
    tx: Sender<ReadMsg>,
) {
    let mut parts = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let (part_tx, part_rx) = bounded::<PartMsg>(depth);
        parts.push(part_rx);
        scope.spawn(move || read_dir_stage(spec, plan, shared, &dir, part_tx));
    }
    scope.spawn(move || gather(parts, tx));
}

/// One directory's reader: its share of every sub-task, in order.
fn read_dir_stage(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    dir: &Path,
    tx: Sender<PartMsg>,
) {
    let start = Instant::now();
    let mut idle = 0u64;
    let here = |t: &sluice_sst::table::Table| t.path().parent() == Some(dir);
    let times = StepTimes::default();
    shared.with_cpu(|| {
        for st in &plan.sub_tasks {
            let msg = read_sub_task_part(spec, st, &times, &here).map(|p| (st.index, p));
            times.drain_into(&shared.times);
            let failed = msg.is_err();
            if timed(&mut idle, || tx.send(msg)).is_err() || failed {
                return;
            }
        }
    });
    shared.record_stage("read", start.elapsed(), idle);
}

/// Zips the directory readers' shares of each sub-task into the whole sub-task.
fn gather(parts: Vec<Receiver<PartMsg>>, tx: Sender<ReadMsg>) {
    loop {
        let mut shares = Vec::with_capacity(parts.len());
        let mut index = None;
        for rx in &parts {
            // A closed share means its reader stopped after an error it already sent.
            let Ok(msg) = rx.recv() else { return };
            match msg {
                Ok((i, share)) => {
                    index = Some(i);
                    shares.push(share);
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
        let Some(index) = index else { return };
        if tx.send(Ok((index, assemble_sub_task(shares)))).is_err() {
            return;
        }
    }
}

/// Bytes a threaded file collects before handing them to its directory's writer.
const HANDOFF_BYTES: usize = 256 << 10;

type Job = Box<dyn FnOnce() + Send>;

/// A directory's writer thread: its queue and its handle.
type Writer = (Sender<Job>, JoinHandle<()>);

/// How long one writer thread ran, waited and computed.
struct WriterReport {
    elapsed: std::time::Duration,
    idle_nanos: u64,
    cpu_nanos: u64,
}

/// Hands the writes of each new file to one thread per directory; see the module docs.
/// [`DirWriters::finish`] (or dropping it) waits for every queued write.
pub(super) struct DirWriters {
    writers: Mutex<HashMap<PathBuf, Writer>>,
    reports: Arc<Mutex<Vec<WriterReport>>>,
}

impl std::fmt::Debug for DirWriters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWriters")
            .field("dirs", &self.writers.lock().len())
            .finish()
    }
}

impl DirWriters {
    /// No writer threads yet: each starts with the first file of its directory.
    pub fn new() -> Self {
        DirWriters {
            writers: Mutex::new(HashMap::new()),
            reports: Arc::default(),
        }
    }

    /// The queue of the writer thread for `dir`, started on first use.
    fn queue_for(&self, dir: &Path) -> io::Result<Sender<Job>> {
        let mut writers = self.writers.lock();
        if let Some((tx, _)) = writers.get(dir) {
            return Ok(tx.clone());
        }
        let (tx, rx) = bounded::<Job>(8);
        let reports = Arc::clone(&self.reports);
        let handle = std::thread::Builder::new()
            .name("sluice-dir-writer".into())
            .spawn(move || {
                let start = Instant::now();
                let cpu_start = thread_cpu_time();
                let mut idle_nanos = 0u64;
                while let Ok(job) = timed(&mut idle_nanos, || rx.recv()) {
                    job();
                }
                reports.lock().push(WriterReport {
                    elapsed: start.elapsed(),
                    idle_nanos,
                    cpu_nanos: thread_cpu_time().saturating_sub(cpu_start).as_nanos() as u64,
                });
            })?;
        writers.insert(dir.to_path_buf(), (tx.clone(), handle));
        Ok(tx)
    }

    /// Waits for the writer threads to finish their queues (every file written through this
    /// file system must be gone) and records their time in `shared` as stage "dir writer".
    pub fn finish(&self, shared: &Shared) {
        self.stop_writers();
        for r in self.reports.lock().drain(..) {
            shared.record_stage("dir writer", r.elapsed, r.idle_nanos);
            shared
                .cpu_nanos
                .fetch_add(r.cpu_nanos, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn stop_writers(&self) {
        let writers: Vec<_> = self.writers.lock().drain().collect();
        for (_, (tx, handle)) in writers {
            drop(tx);
            let _ = handle.join();
        }
    }
}

impl Drop for DirWriters {
    fn drop(&mut self) {
        self.stop_writers();
    }
}

impl WriteWrapper for DirWriters {
    fn wrap(&self, path: &Path, file: Box<dyn WriteFile>) -> io::Result<Box<dyn WriteFile>> {
        let queue = self.queue_for(path.parent().unwrap_or(Path::new("")))?;
        Ok(Box::new(ThreadedFile {
            state: Arc::new(Mutex::new(FileState { file, error: None })),
            queue,
            pending: Vec::with_capacity(HANDOFF_BYTES),
        }))
    }
}

/// The file and the first error its writer thread met.
struct FileState {
    file: Box<dyn WriteFile>,
    error: Option<(io::ErrorKind, String)>,
}

impl FileState {
    fn check(&self) -> io::Result<()> {
        match &self.error {
            Some((kind, msg)) => Err(io::Error::new(*kind, msg.clone())),
            None => Ok(()),
        }
    }

    fn record(&mut self, result: io::Result<()>) {
        if let (Err(e), None) = (result, &self.error) {
            self.error = Some((e.kind(), e.to_string()));
        }
    }
}

/// A file whose bytes are written by its directory's writer thread, in the order appended.
struct ThreadedFile {
    state: Arc<Mutex<FileState>>,
    queue: Sender<Job>,
    pending: Vec<u8>,
}

impl std::fmt::Debug for ThreadedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadedFile")
            .field("pending", &self.pending.len())
            .finish()
    }
}

fn writer_gone() -> io::Error {
    io::Error::other("the directory's writer thread has stopped")
}

impl ThreadedFile {
    /// Hands the pending bytes to the writer thread.
    fn hand_off(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::replace(&mut self.pending, Vec::with_capacity(HANDOFF_BYTES));
        let state = Arc::clone(&self.state);
        self.queue
            .send(Box::new(move || {
                let mut s = state.lock();
                if s.error.is_none() {
                    let result = s.file.append(&bytes);
                    s.record(result);
                }
            }))
            .map_err(|_| writer_gone())
    }
}

impl WriteFile for ThreadedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.state.lock().check()?;
        self.pending.extend_from_slice(data);
        if self.pending.len() >= HANDOFF_BYTES {
            self.hand_off()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.hand_off()?;
        let (done_tx, done_rx) = bounded::<()>(1);
        let state = Arc::clone(&self.state);
        self.queue
            .send(Box::new(move || {
                let mut s = state.lock();
                if s.error.is_none() {
                    let result = s.file.sync();
                    s.record(result);
                }
                let _ = done_tx.send(());
            }))
            .map_err(|_| writer_gone())?;
        done_rx.recv().map_err(|_| writer_gone())?;
        self.state.lock().check()
    }
}
