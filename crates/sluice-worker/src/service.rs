//! The `CompactionWorker` gRPC service: `Execute`, `Health`, `Metrics`. Calls reach it only
//! after [`crate::auth`] has accepted their secret.
//!
//! `Execute`, in order: open the envelope and check the task ([`CheckedTask`]); wait for a
//! slot (`threads` tasks at once); run the job on a blocking thread ([`job::run`]); sleep for
//! the throttle; answer. Whatever happens after the slot is taken, a [`JobGuard`] makes sure a
//! task that does not answer successfully leaves no output behind: on an error, and also when
//! the request future is dropped because the host went away (its deadline passed, it was
//! killed), the guard cancels the job through its [`JobControl`] and deletes its outputs.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_exec::JobControl;
use sluice_rpc::PROTOCOL_VERSION;
use sluice_rpc::envelope::{open, seal};
use sluice_rpc::proto::compaction_worker_server::CompactionWorker;
use sluice_rpc::proto::{
    CompactionTask, Envelope, HealthRequest, HealthResponse, MessageKind, MetricsRequest,
    MetricsResponse, Origin, TaskResult,
};
use tonic::{Request, Response, Status};

use crate::error::WorkerError;
use crate::job::{self, JobEnv};
use crate::metrics::{Metrics, TaskFigures};
use crate::outputs::OutputSet;
use crate::state::{Slot, WorkerState};
use crate::task::CheckedTask;

/// The service behind the authenticator.
#[derive(Clone, Debug)]
pub(crate) struct WorkerService {
    pub state: Arc<WorkerState>,
}

#[tonic::async_trait]
impl CompactionWorker for WorkerService {
    async fn execute(&self, request: Request<Envelope>) -> Result<Response<Envelope>, Status> {
        let mut outcome = Outcome {
            metrics: &self.state.metrics,
            ok: false,
        };
        let (result, figures) = self.run_task(request.into_inner()).await?;
        outcome.ok = true;
        self.state.metrics.task_ok(figures);
        Ok(Response::new(seal(
            MessageKind::CompactionResult,
            Origin::Worker,
            &result,
        )))
    }

    async fn health(
        &self,
        _request: Request<HealthRequest>,
    ) -> Result<Response<HealthResponse>, Status> {
        let s = &self.state;
        Ok(Response::new(HealthResponse {
            version: PROTOCOL_VERSION,
            worker_id: s.worker_id.clone(),
            threads: u32::try_from(s.threads).unwrap_or(u32::MAX),
            tasks_running: u32::try_from(s.tasks_running()).unwrap_or(u32::MAX),
        }))
    }

    async fn metrics(
        &self,
        _request: Request<MetricsRequest>,
    ) -> Result<Response<MetricsResponse>, Status> {
        let s = &self.state;
        Ok(Response::new(s.metrics.snapshot(&s.decider)))
    }
}

impl WorkerService {
    async fn run_task(&self, envelope: Envelope) -> Result<(TaskResult, TaskFigures), Status> {
        let task: CompactionTask =
            open(&envelope, MessageKind::CompactionTask).map_err(|e| fail(None, e.into()))?;
        let job_id = task.job_id;
        let task = CheckedTask::from_wire(&task).map_err(|e| fail(Some(job_id), e))?;
        self.run_checked(task)
            .await
            .map_err(|e| fail(Some(job_id), e))
    }

    async fn run_checked(
        &self,
        task: CheckedTask,
    ) -> Result<(TaskResult, TaskFigures), WorkerError> {
        let job_id = task.job_id;
        if task.fence.is_some() && !self.state.remote {
            return Err(WorkerError::Invalid(
                "the host keeps its tables in a bucket (the task carries its claim on the \
                 prefix), and this worker reads directories: start it with --object-store"
                    .into(),
            ));
        }
        let permit = Arc::clone(&self.state.slots)
            .acquire_owned()
            .await
            .map_err(|_| WorkerError::Internal("the worker is shutting down".into()))?;
        let started = Instant::now();
        let control = Arc::new(JobControl::default());
        let database = self.state.database_roots(&task.database)?;
        let remote = self.state.remote;
        let database = crate::resolve::keyspace_roots(&database, task.keyspace, remote)?;
        let roots = match &task.output_root {
            Some(_) if remote => {
                return Err(WorkerError::Invalid(
                    "this worker writes its outputs into the bucket it reads from: an output \
                     directory (partitioned mode) needs a worker that shares it"
                        .into(),
                ));
            }
            Some(dir) => vec![crate::resolve::resolve_output_root(&database, dir)?],
            None => database.clone(),
        };
        // The task's uploads and deletions stop once the host's claim on the bucket's prefix
        // is taken by a later one (a copy of its database opened elsewhere).
        let objects = self.state.objects.as_ref().map(|fs| {
            let fs = match &task.fence {
                Some(epoch) => fs.fenced_by(epoch.clone()),
                None => fs.clone(),
            };
            Arc::new(fs) as Arc<dyn sluice_sst::fs::FileSystem>
        });
        let outputs = Arc::new(OutputSet::new(roots, task.outputs, objects));
        let mut guard = JobGuard {
            job_id,
            control: Arc::clone(&control),
            outputs: Arc::clone(&outputs),
            armed: true,
            failed: false,
        };
        let slot = Slot::new(Arc::clone(&self.state), permit, Arc::clone(&control));
        let state = Arc::clone(&self.state);
        // The executor blocks (file I/O, its own threads): it runs on tokio's blocking pool,
        // at most `threads` at once thanks to the slot it owns.
        let handle = tokio::task::spawn_blocking(move || {
            let env = JobEnv {
                roots: &database,
                storage: &state.storage,
                remote: state.remote,
                decider: &state.decider,
                compute_threads: state.compute_threads,
            };
            let report = job::run(&env, &task, Arc::clone(&control), &outputs);
            // Cancelled while it ran, the job was abandoned then: an upload that finished
            // after that is deleted now.
            if control.is_cancelled() {
                outputs.abandon();
            }
            (report, slot)
        });
        let (report, slot) = match handle.await {
            Ok((Ok(report), slot)) => (report, slot),
            Ok((Err(e), _)) => {
                guard.failed = true;
                return Err(e);
            }
            Err(e) => {
                guard.failed = true;
                let e = format!("task {job_id}: the job thread failed: {e}");
                return Err(WorkerError::Internal(e));
            }
        };
        let pause = throttle_pause(self.state.throttle, report.cpu_nanos);
        if !pause.is_zero() {
            let until = self.state.device_clock.reserve(pause);
            tokio::time::sleep_until(until.into()).await;
        }
        drop(slot);
        guard.armed = false;
        tracing::info!(
            job_id,
            outputs = report.result.files.len(),
            input_bytes = report.input_bytes,
            output_bytes = report.output_bytes,
            seconds = started.elapsed().as_secs_f64(),
            "task done"
        );
        let figures = TaskFigures {
            input_bytes: report.input_bytes,
            output_bytes: report.output_bytes,
            busy: started.elapsed(),
            cpu_nanos: report.cpu_nanos,
        };
        Ok((report.result, figures))
    }
}

/// Logs a failed task and makes its status.
fn fail(job_id: Option<u64>, e: WorkerError) -> Status {
    tracing::warn!(job_id, code = ?e.code(), error = %e, "task failed");
    e.into()
}

/// How long to sleep after a task that used `cpu_nanos` of CPU, to emulate a device CPU
/// `throttle` times slower: `(throttle - 1) x cpu time` (0 for `throttle <= 1`).
pub(crate) fn throttle_pause(throttle: f64, cpu_nanos: u64) -> Duration {
    let secs = (throttle - 1.0) * cpu_nanos as f64 / 1e9;
    if secs > 0.0 {
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::ZERO)
    } else {
        Duration::ZERO
    }
}

/// Counts an `Execute` call as failed unless it was marked ok, including when its future is
/// dropped.
struct Outcome<'a> {
    metrics: &'a Metrics,
    ok: bool,
}

impl Drop for Outcome<'_> {
    fn drop(&mut self) {
        if !self.ok {
            self.metrics.task_failed();
        }
    }
}

/// Armed from the moment a task takes its slot until it has answered successfully. Dropped
/// armed (an error, or the request future dropped), it cancels the job and deletes its
/// outputs, temporary or published. The deletion runs inline: a few `unlink`s, waiting at most
/// for a concurrent [`OutputSet::commit`] to finish its renames.
struct JobGuard {
    job_id: u64,
    control: Arc<JobControl>,
    outputs: Arc<OutputSet>,
    armed: bool,
    /// The job failed (already logged); an armed drop without it means the host went away,
    /// while the job ran or during the throttle sleep after it.
    failed: bool,
}

impl Drop for JobGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if !self.failed {
            tracing::warn!(
                job_id = self.job_id,
                "the host went away before the task answered; cancelling it and deleting its outputs"
            );
        }
        self.control.cancel();
        self.outputs.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::OutputBlock;

    #[test]
    fn throttle_sleeps_the_extra_cpu_time() {
        assert_eq!(throttle_pause(1.0, 5_000_000_000), Duration::ZERO);
        assert_eq!(
            throttle_pause(2.0, 1_500_000_000),
            Duration::from_millis(1500)
        );
        assert_eq!(throttle_pause(3.0, 1_000_000), Duration::from_millis(2));
        assert_eq!(throttle_pause(0.5, 1_000_000), Duration::ZERO);
        assert_eq!(throttle_pause(f64::NAN, 1_000_000), Duration::ZERO);
    }

    #[test]
    fn a_dropped_guard_cancels_and_deletes_until_disarmed() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let block = OutputBlock {
            first: 40,
            count: 2,
        };
        let make = || {
            let outputs = Arc::new(OutputSet::new(vec![root.clone()], block, None));
            let (_, path) = outputs.allocate().unwrap();
            std::fs::write(&path, b"partial").unwrap();
            let control = Arc::new(JobControl::default());
            let guard = JobGuard {
                job_id: 1,
                control: Arc::clone(&control),
                outputs: Arc::clone(&outputs),
                armed: true,
                failed: false,
            };
            (guard, control, outputs, path)
        };
        let (guard, control, outputs, path) = make();
        drop(guard);
        assert!(control.is_cancelled());
        assert!(!path.exists());
        assert!(matches!(
            outputs.allocate(),
            Err(sluice_sst::Error::Cancelled)
        ));

        let (mut guard, control, _outputs, path) = make();
        guard.armed = false;
        drop(guard);
        assert!(!control.is_cancelled());
        assert!(path.exists());
    }
}
