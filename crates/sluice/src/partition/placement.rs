//! Partitioned mode's placement policy: where a compaction runs and where its outputs go.
//!
//! Every compaction lies in one range ([`crate::partition`]); its outputs go to that range's
//! owner's directory, and it runs on that owner (its worker, through the offload machinery,
//! or the host). With compaction-load balancing, lightly loaded owners take shares of a
//! backlogged owner's compaction ([`crate::partition::load`]): the work moves, the outputs
//! still go to the owner.
//!
//! The engine asks a [`Placement`] and does not know which one it has: [`Unpartitioned`]
//! deals outputs over the data directories and leaves the choice of sides to the offload
//! options; [`ByRange`] is partitioned mode.

use parking_lot::Mutex;

use super::load::sharing_owners;
use super::options::PartitionOptions;
use super::stats::partition_stats;
use super::{OwnerId, owner_dir_index};
use crate::compaction::Compaction;
use crate::compaction::remote::{RemoteExecutors, Sharing};
use crate::options::Options;
use crate::table_cache::TableCache;

/// Where a compaction runs and writes.
pub(crate) trait Placement: Send + Sync {
    /// Where `c` goes, and the owners it keeps busy until the returned value is dropped.
    fn place<'a>(&'a self, c: &Compaction, ctx: &PlaceContext<'_>) -> Placed<'a>;
}

/// What a placement may consult.
pub(crate) struct PlaceContext<'a> {
    pub options: &'a Options,
    pub table_cache: &'a TableCache,
    /// The compaction workers, if any, and their names.
    pub remote: Option<(&'a dyn RemoteExecutors, &'a [String])>,
}

/// A placement decision.
pub(crate) struct Placed<'a> {
    /// The table directory outputs go to; `None`: dealt over the data directories.
    pub output_dir: Option<u32>,
    /// Who computes the compaction.
    pub sides: Sides,
    /// Releases the owners when dropped.
    _busy: Option<OwnersBusy<'a>>,
}

/// Who computes a compaction.
pub(crate) enum Sides {
    /// Whoever the offload options say: the workers for a big compaction, else the host.
    Default,
    /// This host's compaction thread only.
    Host,
    /// Over the given sides, through the compaction workers.
    Shared(Sharing),
}

/// Not partitioned: no constraint.
pub(crate) struct Unpartitioned;

impl Placement for Unpartitioned {
    fn place<'a>(&'a self, _: &Compaction, _: &PlaceContext<'_>) -> Placed<'a> {
        Placed {
            output_dir: None,
            sides: Sides::Default,
            _busy: None,
        }
    }
}

/// Partitioned mode: a compaction runs on its range's owner(s) and writes into the owner's
/// directory.
pub(crate) struct ByRange {
    partitions: PartitionOptions,
    /// Compactions running per owner, for compaction-load balancing.
    busy: Mutex<Vec<usize>>,
}

impl ByRange {
    pub fn new(partitions: PartitionOptions) -> Self {
        ByRange {
            partitions,
            busy: Mutex::new(Vec::new()),
        }
    }

    /// The owners sharing `c`, `owner`'s compaction: just `owner`, or with load balancing
    /// the lightly loaded owners too.
    fn owners(&self, c: &Compaction, owner: OwnerId, options: &Options) -> Vec<OwnerId> {
        let stats = partition_stats(&c.version, options, self.partitions.owners.len());
        let owners = match (&self.partitions.load_balance, stats) {
            (Some(lb), Some(stats)) => {
                let running = self.busy.lock().clone();
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
        owners
    }

    fn mark_busy(&self, owners: Vec<OwnerId>) -> OwnersBusy<'_> {
        let mut busy = self.busy.lock();
        for o in &owners {
            let o = *o as usize;
            if busy.len() <= o {
                busy.resize(o + 1, 0);
            }
            busy[o] += 1;
        }
        OwnersBusy {
            busy: &self.busy,
            owners,
        }
    }

    /// The sides computing a compaction of `owners`, writing into `owner`'s directory.
    fn sides(&self, owner: OwnerId, owners: &[OwnerId], ctx: &PlaceContext<'_>) -> Sides {
        let Some((remote, workers)) = ctx.remote else {
            return Sides::Host;
        };
        let mut taking_part = vec![false; workers.len() + 1];
        for o in owners {
            let worker = self
                .partitions
                .owners
                .get(*o as usize)
                .and_then(|p| p.worker.as_ref());
            if let Some(t) = taking_part.get_mut(side_of(workers, worker)) {
                *t = true;
            }
        }
        let measured = remote.share_bandwidths();
        let weights = share_weights(&taking_part, &measured);
        if weights.iter().skip(1).all(|w| *w == 0.0) {
            return Sides::Host;
        }
        match ctx.table_cache.dirs().get(owner_dir_index(owner) as usize) {
            Some(root) => Sides::Shared(Sharing {
                weights,
                output_root: root.clone(),
            }),
            None => Sides::Host,
        }
    }
}

impl Placement for ByRange {
    fn place<'a>(&'a self, c: &Compaction, ctx: &PlaceContext<'_>) -> Placed<'a> {
        let Some((_, owner)) = c.range() else {
            return Unpartitioned.place(c, ctx);
        };
        let owners = self.owners(c, owner, ctx.options);
        let sides = self.sides(owner, &owners, ctx);
        Placed {
            output_dir: Some(owner_dir_index(owner)),
            sides,
            _busy: Some(self.mark_busy(owners)),
        }
    }
}

/// The owners a compaction occupies, released when dropped so that load balancing sees them
/// idle again.
struct OwnersBusy<'a> {
    busy: &'a Mutex<Vec<usize>>,
    owners: Vec<OwnerId>,
}

impl Drop for OwnersBusy<'_> {
    fn drop(&mut self) {
        let mut busy = self.busy.lock();
        for o in &self.owners {
            if let Some(n) = busy.get_mut(*o as usize) {
                *n = n.saturating_sub(1);
            }
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
fn side_of(workers: &[String], worker: Option<&String>) -> usize {
    worker
        .and_then(|w| workers.iter().position(|a| a == w))
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
