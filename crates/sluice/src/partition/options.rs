//! `Options::partitions`: the owners, and the range map a new database starts with.

use std::path::PathBuf;

use super::balance::BalanceOptions;
use super::load::LoadBalanceOptions;
use crate::version::range_map::{OwnerId, RangeMap};
use crate::{Error, Result};

/// One owner of key ranges: a data directory, standing for one near-data-processing device's
/// storage, and the worker that compacts the ranges it owns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionOwner {
    /// Where the owner's tables live. Must differ from every other owner's and from the
    /// database directory.
    pub dir: PathBuf,
    /// The address of the worker that runs this owner's compactions; it must be one of
    /// `Options::offload`'s workers and serve `dir` and the other owners' directories (it
    /// reads their tables when a range moves or a compaction is shared). `None`: the host
    /// compacts this owner's ranges itself.
    pub worker: Option<String>,
}

/// Partitioned mode's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct PartitionOptions {
    /// The owners; owner `i` is `owners[i]`. Owners may be added at the end when reopening,
    /// never removed or reordered (the MANIFEST names them by index).
    pub owners: Vec<PartitionOwner>,
    /// Where the ranges of a new database start: `n` strictly increasing user keys make `n + 1`
    /// ranges, the first starting at the empty key. Used only when the database is created;
    /// from then on the MANIFEST's range map is authoritative (it changes as ranges move).
    pub boundaries: Vec<Vec<u8>>,
    /// The owner of each initial range. Empty: consecutive blocks of ranges, as even as
    /// possible, in owner order (owner 0 takes the first block).
    pub initial_owners: Vec<OwnerId>,
    /// Storage balancing: when and how ranges move between owners. `None` turns it off
    /// (the MStore paper's MStore-basic); ranges then move only by `Db::move_range`.
    pub balance: Option<BalanceOptions>,
    /// Compaction-load balancing: when idle owners take shares of a backlogged owner's
    /// compactions. `None` turns it off (MStore-basic).
    pub load_balance: Option<LoadBalanceOptions>,
}

impl Default for PartitionOptions {
    /// No owners (set at least one), one range, both balancers on with their defaults.
    fn default() -> Self {
        PartitionOptions {
            owners: Vec::new(),
            boundaries: Vec::new(),
            initial_owners: Vec::new(),
            balance: Some(BalanceOptions::default()),
            load_balance: Some(LoadBalanceOptions::default()),
        }
    }
}

impl PartitionOptions {
    /// Checks the settings on their own; the database checks them against the MANIFEST and
    /// the offload settings when it opens.
    pub fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::InvalidArgument(format!("partitions: {msg}")));
        if self.owners.is_empty() {
            return bad("at least one owner is needed".into());
        }
        if self.owners.len() > crate::version::range_map::MAX_OWNERS as usize {
            return bad(format!(
                "at most {} owners",
                crate::version::range_map::MAX_OWNERS
            ));
        }
        for (i, a) in self.owners.iter().enumerate() {
            if self.owners[..i].iter().any(|b| b.dir == a.dir) {
                return bad(format!("owners share the directory {}", a.dir.display()));
            }
        }
        if let Some(l) = &self.load_balance
            && !(l.backlog_ratio.is_finite() && l.backlog_ratio >= 1.0)
        {
            return bad(format!(
                "load_balance.backlog_ratio must be at least 1, got {}",
                l.backlog_ratio
            ));
        }
        if let Some(b) = &self.balance
            && !(b.max_skew.is_finite() && b.max_skew >= 0.0)
        {
            return bad(format!(
                "balance.max_skew must be at least 0, got {}",
                b.max_skew
            ));
        }
        if !self.initial_owners.is_empty()
            && let Some(o) = self
                .initial_owners
                .iter()
                .find(|&&o| o as usize >= self.owners.len())
        {
            return bad(format!("initial owner {o} is not an owner"));
        }
        self.initial_map().map(|_| ()).or_else(bad)
    }

    /// The range map a new database starts with.
    pub fn initial_map(&self) -> std::result::Result<RangeMap, String> {
        let ranges = self.boundaries.len() + 1;
        let owners: Vec<OwnerId> = if self.initial_owners.is_empty() {
            let n = self.owners.len().max(1);
            // Range i goes to owner floor(i * n / ranges): blocks differing by at most one.
            (0..ranges).map(|i| (i * n / ranges) as OwnerId).collect()
        } else {
            self.initial_owners.clone()
        };
        RangeMap::new(&self.boundaries, &owners)
    }

    /// The owners' directories, in owner order: table directories `1..`.
    pub fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.owners.iter().map(|o| &o.dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(n: usize) -> Vec<PartitionOwner> {
        (0..n)
            .map(|i| PartitionOwner {
                dir: PathBuf::from(format!("/d{i}")),
                worker: None,
            })
            .collect()
    }

    #[test]
    fn default_owners_are_even_blocks() {
        let p = PartitionOptions {
            owners: owners(2),
            boundaries: (1..=4u8).map(|b| vec![b]).collect(),
            ..PartitionOptions::default()
        };
        p.validate().unwrap();
        let owners: Vec<_> = p
            .initial_map()
            .unwrap()
            .ranges()
            .iter()
            .map(|r| r.owner)
            .collect();
        assert_eq!(owners, vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn bad_settings_name_the_problem() {
        let mut p = PartitionOptions {
            owners: owners(2),
            boundaries: vec![b"m".to_vec()],
            initial_owners: vec![0, 2],
            ..PartitionOptions::default()
        };
        assert!(
            p.validate()
                .unwrap_err()
                .to_string()
                .contains("initial owner 2")
        );
        p.balance = Some(BalanceOptions {
            max_skew: -1.0,
            ..BalanceOptions::default()
        });
        assert!(p.validate().unwrap_err().to_string().contains("max_skew"));
        p.balance = None;
        p.initial_owners = vec![0];
        assert!(p.validate().is_err());
        p.initial_owners.clear();
        p.boundaries = vec![b"m".to_vec(), b"a".to_vec()];
        assert!(p.validate().is_err());
        p.boundaries.clear();
        p.owners[1].dir = p.owners[0].dir.clone();
        assert!(p.validate().unwrap_err().to_string().contains("share"));
        p.owners.clear();
        assert!(p.validate().is_err());
    }
}
