//! Partitioned mode: where a compaction runs. Every compaction lies in one range
//! ([`crate::partition`]); it runs on that range's owner (its worker, through the offload
//! machinery, or the host) and writes into the owner's directory. With compaction-load
//! balancing, lightly loaded owners take shares of a backlogged owner's compaction
//! ([`crate::partition::load`]): the work moves, the outputs still go to the owner.

use parking_lot::MutexGuard;

use super::Compaction;
use super::offload::options::Split;
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
        let mut taking_part = vec![false; off.options().workers.len() + 1];
        for o in &owners {
            let worker = partitions
                .owners
                .get(*o as usize)
                .and_then(|p| p.worker.as_ref());
            if let Some(t) = taking_part.get_mut(side_of(off, worker)) {
                *t = true;
            }
        }
        let measured = match off.options().split {
            Split::Dynamic => off.bandwidths(),
            Split::Static { .. } => Vec::new(),
        };
        let weights = share_weights(&taking_part, &measured);
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

/// The weight of each side's share (host first): 0 for the sides not `taking_part`; for the
/// others their `measured` bandwidth (the dynamic split, TStore's ratio from each side's
/// recent bandwidth), or, for a side not measured yet (or the static split, which passes
/// nothing measured), the average of the measured sides that take part, or 1 when none is.
fn share_weights(taking_part: &[bool], measured: &[Option<f64>]) -> Vec<f64> {
    let known: Vec<f64> = taking_part
        .iter()
        .zip(measured)
        .filter_map(|(&t, m)| m.filter(|b| t && b.is_finite() && *b > 0.0))
        .collect();
    let default = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    taking_part
        .iter()
        .enumerate()
        .map(|(side, &t)| {
            let m = measured.get(side).copied().flatten();
            match (t, m) {
                (false, _) => 0.0,
                (true, Some(b)) if b.is_finite() && b > 0.0 => b,
                (true, _) => default,
            }
        })
        .collect()
}

/// The offload side of an owner's worker: 0 (the host) without one.
fn side_of(off: &Offloader, worker: Option<&String>) -> usize {
    worker
        .and_then(|w| off.options().workers.iter().position(|a| a == w))
        .map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::share_weights;

    #[test]
    fn shares_follow_measured_bandwidth_among_the_sides_taking_part() {
        // Host out; worker 1 at 100 MB/s and worker 2 at 50 MB/s take part.
        let w = share_weights(
            &[false, true, true],
            &[Some(300.0), Some(100.0), Some(50.0)],
        );
        assert_eq!(w, vec![0.0, 100.0, 50.0]);
        // A side not measured yet counts as the average of the measured ones taking part.
        let w = share_weights(
            &[false, true, true, true],
            &[None, Some(90.0), None, Some(30.0)],
        );
        assert_eq!(w, vec![0.0, 90.0, 60.0, 30.0]);
        // Nothing measured (or the static split): equal shares.
        assert_eq!(
            share_weights(&[true, false, true], &[]),
            vec![1.0, 0.0, 1.0]
        );
        // A bandwidth that is not a positive number is ignored.
        let w = share_weights(&[false, true, true], &[None, Some(f64::NAN), Some(0.0)]);
        assert_eq!(w, vec![0.0, 1.0, 1.0]);
    }
}
