//! Compaction-load balancing (the MStore paper, section 2.3): each owner compacts its own ranges,
//! so skewed writes leave one owner with a compaction backlog while the others idle, and the
//! busiest owner becomes "the shortest stave of the barrel". When an owner's backlog is far
//! above the others', idle owners take shares of its compactions: the work moves, the data
//! stays (outputs still go to the range owner's directory).

use super::stats::PartitionStats;
use crate::version::range_map::OwnerId;

/// When idle owners help a busy one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadBalanceOptions {
    /// An owner gets help when its pending compaction bytes are at least this many times the
    /// average of the other owners'.
    pub backlog_ratio: f64,
    /// Compactions smaller than this run on their owner alone: splitting costs a round trip
    /// and extra output files.
    pub min_compaction_bytes: u64,
}

impl Default for LoadBalanceOptions {
    fn default() -> Self {
        LoadBalanceOptions {
            backlog_ratio: 2.0,
            min_compaction_bytes: 4 << 20,
        }
    }
}

/// Most compactions a helper may be running already. One, not zero: an owner of cold ranges
/// runs small compactions of its own most of the time, and waiting until it ran none missed
/// nearly every chance to help (measured in the mstore experiment: 2 of 66 placements).
pub const MAX_HELPER_COMPACTIONS: usize = 1;

/// The owners that should take shares of a compaction of `input_bytes` owned by `owner`:
/// `owner` first, then every owner running at most [`MAX_HELPER_COMPACTIONS`] (`running[o]`;
/// none when `running` is too short to have an entry for `o`)
/// whose backlog is at most `1 / backlog_ratio` of `owner`'s, when `owner`'s backlog is at
/// least `backlog_ratio` times the others' average. Just `[owner]` otherwise.
pub(crate) fn sharing_owners(
    owner: OwnerId,
    input_bytes: u64,
    stats: &PartitionStats,
    running: &[usize],
    options: &LoadBalanceOptions,
) -> Vec<OwnerId> {
    let alone = vec![owner];
    if input_bytes < options.min_compaction_bytes || stats.owners.len() < 2 {
        return alone;
    }
    let pending = |o: OwnerId| {
        stats
            .owners
            .get(o as usize)
            .map_or(0, |s| s.pending_compaction_bytes)
    };
    let own = pending(owner);
    let others: Vec<u64> = stats
        .owners
        .iter()
        .filter(|s| s.owner != owner)
        .map(|s| s.pending_compaction_bytes)
        .collect();
    let average = others.iter().sum::<u64>() as f64 / others.len().max(1) as f64;
    if (own as f64) < options.backlog_ratio * average || own == 0 {
        return alone;
    }
    let helpers = stats.owners.iter().map(|s| s.owner).filter(|&o| {
        // An owner missing from `running` has never compacted: it runs nothing.
        let running = running.get(o as usize).copied().unwrap_or(0);
        o != owner
            && running <= MAX_HELPER_COMPACTIONS
            && pending(o) as f64 * options.backlog_ratio <= own as f64
    });
    alone.into_iter().chain(helpers).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::stats::OwnerStats;

    fn stats(pending: &[u64]) -> PartitionStats {
        PartitionStats {
            ranges: Vec::new(),
            owners: pending
                .iter()
                .enumerate()
                .map(|(o, &p)| OwnerStats {
                    owner: o as OwnerId,
                    pending_compaction_bytes: p,
                    ..OwnerStats::default()
                })
                .collect(),
        }
    }

    const BIG: u64 = 64 << 20;

    #[test]
    fn a_backlogged_owner_gets_the_lightly_loaded_ones() {
        let s = stats(&[100 << 20, 10 << 20, 0]);
        let opts = LoadBalanceOptions::default();
        assert_eq!(sharing_owners(0, BIG, &s, &[1, 0, 1], &opts), vec![0, 1, 2]);
        // An owner running two compactions already does not help.
        assert_eq!(sharing_owners(0, BIG, &s, &[1, 2, 0], &opts), vec![0, 2]);
        // Nor does one with more than half the backlogged owner's backlog.
        let s = stats(&[100 << 20, 60 << 20, 0]);
        assert_eq!(sharing_owners(0, BIG, &s, &[1, 0, 0], &opts), vec![0, 2]);
        // The others are not the busy one: they compact alone.
        assert_eq!(sharing_owners(2, BIG, &s, &[0, 0, 0], &opts), vec![2]);
        // An owner that never compacted (no entry in `running`) is idle, not busy.
        let s = stats(&[100 << 20, 0]);
        assert_eq!(sharing_owners(0, BIG, &s, &[1], &opts), vec![0, 1]);
    }

    #[test]
    fn even_backlogs_and_small_compactions_run_alone() {
        let opts = LoadBalanceOptions::default();
        let even = stats(&[30 << 20, 20 << 20]);
        assert_eq!(sharing_owners(0, BIG, &even, &[1, 0], &opts), vec![0]);
        let skewed = stats(&[100 << 20, 0]);
        assert_eq!(sharing_owners(0, 1 << 20, &skewed, &[1, 0], &opts), vec![0]);
        assert_eq!(
            sharing_owners(0, BIG, &stats(&[0, 0]), &[1, 0], &opts),
            vec![0]
        );
        assert_eq!(sharing_owners(0, BIG, &stats(&[BIG]), &[1], &opts), vec![0]);
    }
}
