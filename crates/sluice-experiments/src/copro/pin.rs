//! Which core each side of the experiment runs on, and pinning the host to its core.
//!
//! The CoPro paper runs the host and the device on separate CPUs. Here the host is this process
//! and each device a `sluice worker`; [`CpuPlan`] gives the host the first CPU this process may
//! use and the workers the others in turn: worker `i` gets the `(1 + i % (n - 1))`-th of `n`.
//! With more workers than other CPUs, workers share cores, never the host's: a device's
//! compaction must not take CPU from the host's writers, or balancing work across devices
//! would be measured as a slower host. A machine with one usable CPU pins nothing.
//!
//! [`HostPin`] pins the *calling thread* (`sched_setaffinity` on pid 0 acts on one thread) and
//! every thread it creates afterwards, which inherit its mask: the database opened after the
//! pin (its flush, compaction and offload-runtime threads) and the workload's client threads.
//! Threads that existed before (a test harness's other threads) are not pinned. The mask the
//! thread had is restored when the guard drops, also on an error path.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde::Serialize;
use sluice::{Error, Result};

/// The core of each side; `None` where nothing is pinned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuPlan {
    /// CPUs this process may use, ascending.
    pub allowed: Vec<usize>,
    /// The host's core.
    pub host: Option<usize>,
    /// Worker `i`'s core.
    pub workers: Vec<Option<usize>>,
}

impl CpuPlan {
    /// The plan for `workers` workers over the `allowed` CPUs (ascending): host on the first,
    /// worker `i` on the `(1 + i % (len - 1))`-th; nothing pinned with fewer than two CPUs.
    pub fn new(allowed: Vec<usize>, workers: usize) -> CpuPlan {
        if allowed.len() < 2 {
            return CpuPlan {
                allowed,
                host: None,
                workers: vec![None; workers],
            };
        }
        let others = allowed.len() - 1;
        CpuPlan {
            host: allowed.first().copied(),
            workers: (0..workers)
                .map(|i| allowed.get(1 + i % others).copied())
                .collect(),
            allowed,
        }
    }

    /// The plan over the CPUs the calling thread may use now.
    pub fn for_this_process(workers: usize) -> CpuPlan {
        CpuPlan::new(allowed_cpus().unwrap_or_default(), workers)
    }

    /// True when some worker shares a core with the host or another worker.
    pub fn shared(&self) -> bool {
        let mut used: Vec<usize> = self
            .host
            .iter()
            .chain(self.workers.iter().flatten())
            .copied()
            .collect();
        let n = used.len();
        used.sort_unstable();
        used.dedup();
        used.len() < n
    }
}

/// The CPUs the calling thread may run on, ascending.
pub fn allowed_cpus() -> Result<Vec<usize>> {
    let set = sched_getaffinity(Pid::from_raw(0)).map_err(errno("sched_getaffinity"))?;
    Ok((0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect())
}

fn errno(call: &'static str) -> impl Fn(nix::errno::Errno) -> Error {
    move |e| Error::io(format!("<{call}>"), std::io::Error::from(e))
}

/// The calling thread pinned to one core until dropped; then its previous mask is back.
#[derive(Debug)]
pub struct HostPin {
    previous: Option<CpuSet>,
}

impl HostPin {
    /// Pins the calling thread to `cpu`; `None` pins nothing (the guard restores nothing).
    pub fn pin(cpu: Option<usize>) -> Result<HostPin> {
        let Some(cpu) = cpu else {
            return Ok(HostPin { previous: None });
        };
        let previous = sched_getaffinity(Pid::from_raw(0)).map_err(errno("sched_getaffinity"))?;
        let mut set = CpuSet::new();
        set.set(cpu).map_err(errno("CpuSet::set"))?;
        sched_setaffinity(Pid::from_raw(0), &set).map_err(errno("sched_setaffinity"))?;
        Ok(HostPin {
            previous: Some(previous),
        })
    }
}

impl Drop for HostPin {
    fn drop(&mut self) {
        if let Some(previous) = self.previous.take()
            && let Err(e) = sched_setaffinity(Pid::from_raw(0), &previous)
        {
            tracing::warn!(error = %e, "could not restore the host thread's CPU mask");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_first_then_workers_wrapping() {
        let plan = CpuPlan::new(vec![0, 1], 1);
        assert_eq!((plan.host, plan.workers.clone()), (Some(0), vec![Some(1)]));
        assert!(!plan.shared());
        let plan = CpuPlan::new(vec![2, 5, 7], 3);
        assert_eq!(plan.host, Some(2));
        assert_eq!(plan.workers, vec![Some(5), Some(7), Some(5)]);
        assert!(plan.shared());
        let plan = CpuPlan::new(vec![3], 2);
        assert_eq!((plan.host, plan.workers), (None, vec![None, None]));
    }

    #[test]
    fn pinning_restores_the_previous_mask() {
        // On a thread of its own, so the test harness's threads are not affected.
        std::thread::spawn(|| {
            let before = allowed_cpus().unwrap();
            assert!(!before.is_empty());
            {
                let _pin = HostPin::pin(before.last().copied()).unwrap();
                assert_eq!(allowed_cpus().unwrap(), vec![*before.last().unwrap()]);
                // A thread created now inherits the pin.
                let child = std::thread::spawn(|| allowed_cpus().unwrap())
                    .join()
                    .unwrap();
                assert_eq!(child.len(), 1);
            }
            assert_eq!(allowed_cpus().unwrap(), before);
            let _none = HostPin::pin(None).unwrap();
            assert_eq!(allowed_cpus().unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
