//! Partitioned mode: where a compaction runs. Every compaction lies in one range
//! ([`crate::partition`]); it runs on that range's owner (its worker, through the offload
//! machinery, or the host) and writes into the owner's directory. With compaction-load
//! balancing, lightly loaded owners take shares of a backlogged owner's compaction
//! ([`crate::partition::load`]): the work moves, the outputs still go to the owner.

use parking_lot::MutexGuard;

use super::Compaction;
use super::offload::{Offloader, Placement};
use crate::db::DbInner;
use crate::partition::load::sharing_owners;
use crate::partition::{OwnerId, owner_dir_index};

/// How a partitioned compaction runs.
pub(crate) enum Where {
    /// On this host's compaction thread only.
    Host,
    /// Over the sides of the placement, through the offloader.
    Shared(Placement),
}

/// The owners a compaction occupies, released when dropped so that load balancing sees them
/// idle again.
pub(crate) struct OwnersBusy<'a> {
    inner: &'a DbInner,
    owners: Vec<OwnerId>,
}

impl Drop for OwnersBusy<'_> {
    fn drop(&mut self) {
        let mut busy = self.inner.owners_busy.lock();
        for o in &self.owners {
            if let Some(n) = busy.get_mut(*o as usize) {
                *n = n.saturating_sub(1);
            }
        }
    }
}

impl DbInner {
    /// Where partitioned compaction `c` runs, and the owners it keeps busy meanwhile; `None`
    /// when the database is not partitioned.
    pub(crate) fn place(&self, c: &Compaction) -> Option<(Where, OwnersBusy<'_>)> {
        let (_, owner) = c.range()?;
        let partitions = self.options.partitions.as_ref()?;
        let owners = match (&partitions.load_balance, self.partition_stats()) {
            (Some(lb), Some(stats)) => {
                let running = self.owners_busy.lock().clone();
                let owners = sharing_owners(owner, c.input_bytes(), &stats, &running, lb);
                if owners.len() == 1 {
                    let pending: Vec<u64> = stats
                        .owners
                        .iter()
                        .map(|o| o.pending_compaction_bytes)
                        .collect();
                    tracing::debug!(
                        owner,
                        input_bytes = c.input_bytes(),
                        ?pending,
                        ?running,
                        "compaction-load balancing: no owner helps"
                    );
                }
                owners
            }
            _ => vec![owner],
        };
        if owners.len() > 1 {
            tracing::info!(owner, helpers = ?&owners[1..], "compaction-load balancing: lightly loaded owners share a backlogged owner's compaction");
        }
        let guard = self.mark_busy(owners.clone());
        let Some(off) = self.offloader.as_ref() else {
            return Some((Where::Host, guard));
        };
        let mut weights = vec![0.0; off.options().workers.len() + 1];
        for o in &owners {
            let worker = partitions
                .owners
                .get(*o as usize)
                .and_then(|p| p.worker.as_ref());
            let side = side_of(off, worker);
            if let Some(w) = weights.get_mut(side) {
                *w = 1.0;
            }
        }
        if weights.iter().skip(1).all(|w| *w == 0.0) {
            return Some((Where::Host, guard));
        }
        let output_root = self
            .table_cache
            .dirs()
            .get(owner_dir_index(owner) as usize)?
            .clone();
        Some((
            Where::Shared(Placement {
                weights,
                output_root,
            }),
            guard,
        ))
    }

    fn mark_busy(&self, owners: Vec<OwnerId>) -> OwnersBusy<'_> {
        let mut busy: MutexGuard<'_, Vec<usize>> = self.owners_busy.lock();
        for o in &owners {
            let o = *o as usize;
            if busy.len() <= o {
                busy.resize(o + 1, 0);
            }
            busy[o] += 1;
        }
        OwnersBusy {
            inner: self,
            owners,
        }
    }
}

/// The offload side of an owner's worker: 0 (the host) without one.
fn side_of(off: &Offloader, worker: Option<&String>) -> usize {
    worker
        .and_then(|w| off.options().workers.iter().position(|a| a == w))
        .map_or(0, |i| i + 1)
}
