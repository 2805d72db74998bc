//! Partitioned mode's operations on an open database: the range map and its figures, and
//! moving a range to another owner.

use std::sync::Arc;

use super::{Db, DbInner};
use crate::partition::balance::plan_move;
use crate::partition::stats::{PartitionStats, partition_stats};
use crate::partition::{OwnerId, RangeMap};
use crate::version::edit::VersionEdit;
use crate::{Error, Result};

impl Db {
    /// The current range map, or `None` when the database is not partitioned.
    pub fn range_map(&self) -> Option<Arc<RangeMap>> {
        self.inner
            .state
            .lock()
            .versions
            .current()
            .range_map()
            .cloned()
    }

    /// Per range and per owner: bytes, tables, pending compaction bytes and moves in progress;
    /// `None` when the database is not partitioned.
    pub fn partition_stats(&self) -> Option<PartitionStats> {
        self.inner.partition_stats()
    }

    /// Moves range `range` to owner `to`: from the next flush on its data goes to `to`'s
    /// directory and its compactions run on `to`. Data already with the old owner stays where it
    /// is, reachable through a forwarding entry, until compaction rewrites it into `to`'s
    /// directory (document 001).
    pub fn move_range(&self, range: usize, to: OwnerId) -> Result<()> {
        self.inner.move_range(range, to)
    }
}

impl DbInner {
    pub(crate) fn partition_stats(&self) -> Option<PartitionStats> {
        let owners = self.options.partitions.as_ref()?.owners.len();
        let version = Arc::clone(self.state.lock().versions.current());
        partition_stats(&version, &self.options, owners)
    }

    pub(crate) fn move_range(&self, range: usize, to: OwnerId) -> Result<()> {
        let Some(partitions) = &self.options.partitions else {
            return Err(Error::InvalidArgument(
                "move_range: the database is not partitioned".into(),
            ));
        };
        if to as usize >= partitions.owners.len() {
            return Err(Error::InvalidArgument(format!(
                "move_range: owner {to} is not one of the {} owners",
                partitions.owners.len()
            )));
        }
        // Moves are read-modify-write of the map: one at a time. Other edits only settle
        // forwarding entries, which `log_and_apply` recomputes from the tables anyway.
        let _moving = self.range_moves.lock();
        let map = self.state.lock().versions.current().range_map().cloned();
        let Some(map) = map else {
            return Err(Error::InvalidArgument(
                "move_range: the database has no range map".into(),
            ));
        };
        if range >= map.len() {
            return Err(Error::InvalidArgument(format!(
                "move_range: range {range} is not one of the {} ranges",
                map.len()
            )));
        }
        let from = map.ranges()[range].owner;
        if from == to {
            return Ok(());
        }
        tracing::info!(range, from, to, "moving a key range");
        self.log_and_apply(VersionEdit {
            range_map: Some(map.with_move(range, to)),
            ..VersionEdit::default()
        })?;
        let mut st = self.state.lock();
        st.range_moves += 1;
        // The old owner's tables of the range now wait for relocation.
        self.bg_work.notify_all();
        Ok(())
    }

    /// Storage balancing: moves one range if the owners are uneven enough (see
    /// [`crate::partition::balance`]). Runs on the flush thread after each flush, since writes
    /// are what make owners uneven. A failed move is logged; the next flush tries again.
    pub(crate) fn maybe_balance(&self) {
        let Some(balance) = self.options.partitions.as_ref().and_then(|p| p.balance) else {
            return;
        };
        let Some(stats) = self.partition_stats() else {
            return;
        };
        // One move at a time: until a moved range's data is relocated the owners' bytes are
        // in flux, and the relocation is compaction work the owners are still doing.
        if let Some(r) = stats.ranges.iter().find(|r| !r.forwarded_from.is_empty()) {
            tracing::debug!(start = ?r.start, "balancing storage: waiting for a move to finish");
            return;
        }
        let Some(planned) = plan_move(&stats, &balance) else {
            return;
        };
        tracing::info!(decision = %planned, "balancing storage: moving a range");
        if let Err(e) = self.move_range(planned.range, planned.to) {
            tracing::warn!(error = %e, "balancing storage: the move failed");
        }
    }
}
