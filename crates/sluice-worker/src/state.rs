//! What every call of a serving worker shares: its settings, its task slots, the jobs running,
//! the decision component and the counters.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sluice_exec::JobControl;
use sluice_rpc::auth::Secret;
use sluice_sst::fs::{IoMode, Storage};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{Root, WorkerConfig};
use crate::decision::Decider;
use crate::error::WorkerError;
use crate::metrics::Metrics;

/// The emulated device CPU of a throttled worker. Tasks that run at once pay their throttle
/// pauses one after another, so the worker does `1 / throttle` of a core's work however many
/// tasks it runs: with a pause per task, two tasks sleeping side by side would make the
/// device twice as fast as it claims to be.
#[derive(Debug, Default)]
pub(crate) struct DeviceClock {
    busy_until: Mutex<Option<Instant>>,
}

impl DeviceClock {
    /// Reserves `pause` of the device after the pauses reserved before; returns when it ends.
    pub fn reserve(&self, pause: Duration) -> Instant {
        let mut busy = self
            .busy_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let end = busy.map_or(now, |b| b.max(now)) + pause;
        *busy = Some(end);
        end
    }
}

/// The state of one serving worker.
#[derive(Debug)]
pub(crate) struct WorkerState {
    /// Canonical roots, non-empty ([`WorkerConfig::validate`]).
    pub roots: Vec<Root>,
    /// Where tasks' files are read and written: the local file system, or `objects`.
    pub storage: Storage,
    /// The bucket, when tasks' files are objects ([`WorkerConfig::object_fs`]): a task's
    /// outputs are written through a view of it fenced by the host's claim.
    pub objects: Option<sluice_object::ObjectFs>,
    /// Whether they are objects in a bucket: paths under the root then name objects, and no
    /// directory of the host's is reachable.
    pub remote: bool,
    pub secret: Secret,
    /// `threads` permits: a task holds one from before it opens its inputs until it answers
    /// (throttle sleep included) or, if the host went away, until its job thread has stopped.
    pub slots: Arc<Semaphore>,
    pub threads: usize,
    pub throttle: f64,
    /// When the emulated device CPU has paid off every throttle pause reserved so far.
    pub device_clock: DeviceClock,
    pub compute_threads: usize,
    pub decider: Decider,
    pub metrics: Metrics,
    /// `<bound address>/<pid>`.
    pub worker_id: String,
    /// Jobs holding a slot, by a worker-local id, so shutdown can cancel them.
    jobs: Mutex<HashMap<u64, Arc<JobControl>>>,
    next_job: AtomicU64,
}

impl WorkerState {
    /// The roots of database `name`, in the order given: where its tasks' inputs are looked
    /// for and their outputs dealt. A database the worker does not serve is refused, naming
    /// the ones it does.
    pub fn database_roots(&self, name: &str) -> Result<Vec<PathBuf>, WorkerError> {
        let roots: Vec<PathBuf> = self
            .roots
            .iter()
            .filter(|r| r.database == name)
            .map(|r| r.dir.clone())
            .collect();
        if roots.is_empty() {
            let mut served: Vec<&str> = self.roots.iter().map(|r| r.database.as_str()).collect();
            served.dedup();
            return Err(WorkerError::Invalid(format!(
                "this worker serves no database named {name:?}; it serves {served:?} (start it \
                 with --root {name}=DIR, or name one of those in the host's options)"
            )));
        }
        Ok(roots)
    }

    /// State for `config`, whose roots were canonicalized by [`WorkerConfig::validate`] as
    /// `roots`; `bound` is the address actually listened on.
    pub fn new(
        config: &WorkerConfig,
        roots: Vec<Root>,
        objects: Option<sluice_object::ObjectFs>,
        bound: SocketAddr,
    ) -> Self {
        let storage = match &objects {
            Some(fs) => Storage::new(Arc::new(fs.clone()), IoMode::Buffered),
            None => Storage::default(),
        };
        WorkerState {
            roots,
            storage,
            objects,
            remote: config.object_store.is_some(),
            secret: config.secret.clone(),
            slots: Arc::new(Semaphore::new(config.threads)),
            threads: config.threads,
            throttle: config.throttle,
            device_clock: DeviceClock::default(),
            compute_threads: config.compute_threads,
            decider: Decider::new(config.mode, config.decision),
            metrics: Metrics::default(),
            worker_id: format!("{bound}/{}", std::process::id()),
            jobs: Mutex::default(),
            next_job: AtomicU64::new(0),
        }
    }

    /// Tasks holding a slot now.
    pub fn tasks_running(&self) -> usize {
        self.jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Cancels every running job: each stops before its next output block and deletes its
    /// outputs.
    pub fn cancel_all(&self) {
        for control in self
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            control.cancel();
        }
    }
}

/// A task's slot: its semaphore permit and its entry in the running jobs, both released when
/// dropped. Moved into the job thread, so a job whose host went away keeps its slot until it
/// has actually stopped.
#[derive(Debug)]
pub(crate) struct Slot {
    state: Arc<WorkerState>,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    /// Registers `control` as running under `permit`.
    pub fn new(
        state: Arc<WorkerState>,
        permit: OwnedSemaphorePermit,
        control: Arc<JobControl>,
    ) -> Self {
        let id = state.next_job.fetch_add(1, Ordering::Relaxed);
        state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, control);
        Slot {
            state,
            id,
            _permit: permit,
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.state
            .jobs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_pauses_queue_behind_each_other() {
        let clock = DeviceClock::default();
        let start = Instant::now();
        let first = clock.reserve(Duration::from_millis(100));
        let second = clock.reserve(Duration::from_millis(100));
        assert!(first >= start + Duration::from_millis(100));
        assert!(second >= first + Duration::from_millis(100));
        // Once the device has caught up, a pause starts from now again.
        std::thread::sleep(second.saturating_duration_since(Instant::now()));
        let later = clock.reserve(Duration::from_millis(10));
        assert!(later >= second + Duration::from_millis(10));
        assert!(later <= Instant::now() + Duration::from_millis(10));
    }

    #[tokio::test]
    async fn slots_register_and_cancel_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let secret = Secret::new("0123456789abcdef0123").unwrap();
        let mut config = WorkerConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            vec![Root::unnamed(dir.path())],
            secret,
        );
        config.threads = 2;
        let roots = config.validate().unwrap();
        let state = Arc::new(WorkerState::new(
            &config,
            roots,
            None,
            "127.0.0.1:9".parse().unwrap(),
        ));
        assert!(state.worker_id.starts_with("127.0.0.1:9/"));
        let control = Arc::new(JobControl::default());
        let permit = state.slots.clone().acquire_owned().await.unwrap();
        let slot = Slot::new(Arc::clone(&state), permit, Arc::clone(&control));
        assert_eq!(state.tasks_running(), 1);
        assert_eq!(state.slots.available_permits(), 1);
        state.cancel_all();
        assert!(control.is_cancelled());
        drop(slot);
        assert_eq!(state.tasks_running(), 0);
        assert_eq!(state.slots.available_permits(), 2);
    }
}
