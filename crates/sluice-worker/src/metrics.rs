//! What the worker has done since it started, as the `Metrics` call reports it.
//!
//! Relaxed atomics: each counter is exact, but a reader may see one task's counters updated
//! one after the other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice_rpc::proto::MetricsResponse;

use crate::decision::Decider;

/// The worker's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    tasks_ok: AtomicU64,
    tasks_failed: AtomicU64,
    input_bytes: AtomicU64,
    output_bytes: AtomicU64,
    busy_nanos: AtomicU64,
    cpu_nanos: AtomicU64,
    rejected_calls: AtomicU64,
}

/// What one successful task adds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TaskFigures {
    pub input_bytes: u64,
    pub output_bytes: u64,
    /// From the slot being taken to the answer, throttle sleep included.
    pub busy: Duration,
    /// CPU time of the executor's threads (not inflated by the throttle).
    pub cpu_nanos: u64,
}

impl Metrics {
    /// Counts a task that succeeded.
    pub fn task_ok(&self, t: TaskFigures) {
        self.tasks_ok.fetch_add(1, Ordering::Relaxed);
        self.input_bytes.fetch_add(t.input_bytes, Ordering::Relaxed);
        self.output_bytes
            .fetch_add(t.output_bytes, Ordering::Relaxed);
        self.busy_nanos
            .fetch_add(t.busy.as_nanos() as u64, Ordering::Relaxed);
        self.cpu_nanos.fetch_add(t.cpu_nanos, Ordering::Relaxed);
    }

    /// Counts a task that failed, was refused, or whose host went away.
    pub fn task_failed(&self) {
        self.tasks_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a call refused for its credentials.
    pub fn call_rejected(&self) {
        self.rejected_calls.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters, with the decision counts of `decider`.
    pub fn snapshot(&self, decider: &Decider) -> MetricsResponse {
        let secs = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e9;
        MetricsResponse {
            tasks_ok: self.tasks_ok.load(Ordering::Relaxed),
            tasks_failed: self.tasks_failed.load(Ordering::Relaxed),
            input_bytes: self.input_bytes.load(Ordering::Relaxed),
            output_bytes: self.output_bytes.load(Ordering::Relaxed),
            busy_seconds: secs(&self.busy_nanos),
            cpu_seconds: secs(&self.cpu_nanos),
            pipelined_decisions: decider.pipelined(),
            sequential_decisions: decider.sequential(),
            rejected_calls: self.rejected_calls.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use sluice_exec::decide::DecisionConfig;

    use super::*;

    #[test]
    fn counts_add_up() {
        let m = Metrics::default();
        let t = TaskFigures {
            input_bytes: 100,
            output_bytes: 60,
            busy: Duration::from_millis(1500),
            cpu_nanos: 500_000_000,
        };
        m.task_ok(t);
        m.task_ok(t);
        m.task_failed();
        m.call_rejected();
        let s = m.snapshot(&Decider::new(None, DecisionConfig::worker()));
        assert_eq!((s.tasks_ok, s.tasks_failed, s.rejected_calls), (2, 1, 1));
        assert_eq!((s.input_bytes, s.output_bytes), (200, 120));
        assert!((s.busy_seconds - 3.0).abs() < 1e-9);
        assert!((s.cpu_seconds - 1.0).abs() < 1e-9);
        assert_eq!((s.pipelined_decisions, s.sequential_decisions), (0, 0));
    }
}
