//! Partitioned mode's operations on an open database: the range map and its figures, moving
//! a range to another owner, cutting a range in two, and the storage balancer that does both.

use std::sync::Arc;

use super::{Db, Tree, TreeState};
use crate::compaction::in_progress::JobId;
use crate::compaction::level_targets::LevelTargets;
use crate::partition::balance::{plan_move, plan_split};
use crate::partition::split::{choose_split_key, split_tables, tables_crossing};
use crate::partition::stats::{PartitionStats, partition_stats};
use crate::partition::{OwnerId, RangeMap};
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::{Error, Result};

/// A split registered as a running job.
struct ReservedSplit {
    job: JobId,
    /// The range map after the split.
    map: RangeMap,
    /// The tables crossing the split key, with their levels: they are rewritten in two.
    crossing: Vec<(usize, Arc<FileMetaData>)>,
}

impl Db {
    /// The current range map, or `None` when the database is not partitioned.
    pub fn range_map(&self) -> Option<Arc<RangeMap>> {
        self.tree
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
        self.tree.partition_stats()
    }

    /// Moves range `range` (of [`Db::range_map`]) to owner `to`: from the next flush on its
    /// data goes to `to`'s directory and its compactions run on `to`. Data already with the
    /// old owner stays where it is, reachable through a forwarding entry, until compaction
    /// rewrites it into `to`'s directory (the MStore paper).
    ///
    /// Every keyspace's data of the range's keys moves: each keyspace has a range map of its
    /// own (the storage balancer acts on each alone), so another keyspace's map is first cut
    /// at the range's ends where they fall inside one of its ranges, and then each of its
    /// ranges between them moves. The keyspaces move one after another, the default one
    /// first; each change is durable when made, so a crash may leave some moved and others
    /// not, each with a valid map.
    pub fn move_range(&self, range: usize, to: OwnerId) -> Result<()> {
        self.tree.check_writable()?;
        // One change visiting every keyspace at a time, and no keyspace created or dropped
        // meanwhile: two concurrent moves could otherwise leave keyspaces on different owners.
        let _every_keyspace = self.journal.keyspace_admin.lock();
        let (start, end) = self.journal.default.range_span(range, to)?;
        for tree in self.journal.all_trees() {
            tree.move_span(&start, end.as_deref(), to)?;
        }
        Ok(())
    }

    /// Cuts range `range` (of [`Db::range_map`]) in two at user key `at`, which must lie
    /// strictly inside it: `[start, at)` keeps the range's index and `[at, end)` becomes range
    /// `range + 1`, both with the same owner. Tables holding keys on both sides of `at` are
    /// rewritten in two, at their level and in their directory, in the edit that changes the
    /// map. Waits for running compactions that could write such a table.
    ///
    /// Every keyspace's map is cut at `at` too, unless a range of it already starts there
    /// (each keyspace has a map of its own; see [`Db::move_range`]).
    pub fn split_range(&self, range: usize, at: &[u8]) -> Result<()> {
        self.tree.check_writable()?;
        let _every_keyspace = self.journal.keyspace_admin.lock();
        self.journal.default.split_range(range, at, true)?;
        for keyspace in self.journal.trees() {
            keyspace.tree.split_at(at)?;
        }
        Ok(())
    }
}

/// Holds the range map's boundaries and owners fixed for a change of them; wakes the
/// background threads once let go, since the flush thread passes over a tree whose map is
/// being changed (`db/background.rs`) and would otherwise sleep through the end of it.
struct RangeMapChange<'a> {
    lock: Option<parking_lot::MutexGuard<'a, ()>>,
    tree: &'a Tree,
}

impl Drop for RangeMapChange<'_> {
    fn drop(&mut self) {
        drop(self.lock.take());
        self.tree.bg_work.notify_all();
    }
}

impl Tree {
    /// Takes the range map for a change (see [`RangeMapChange`]).
    fn change_range_map(&self) -> RangeMapChange<'_> {
        RangeMapChange {
            lock: Some(self.range_map_lock.lock()),
            tree: self,
        }
    }

    pub(crate) fn partition_stats(&self) -> Option<PartitionStats> {
        let owners = self.options.partitions.as_ref()?.owners.len();
        let version = Arc::clone(self.state.lock().versions.current());
        partition_stats(&version, &self.live_options(), owners)
    }

    /// The current range map. REQUIRES: partitioned mode (checked by `what`'s caller).
    fn current_map(&self, what: &str) -> Result<Arc<RangeMap>> {
        let map = self.state.lock().versions.current().range_map().cloned();
        map.ok_or_else(|| Error::InvalidArgument(format!("{what}: the database has no range map")))
    }

    /// The keys of range `range`, `[start, end)` (`end` `None`: unbounded), after checking
    /// that the tree is partitioned, the range exists and `to` is an owner.
    fn range_span(&self, range: usize, to: OwnerId) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
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
        let map = self.current_map("move_range")?;
        if range >= map.len() {
            return Err(Error::InvalidArgument(format!(
                "move_range: range {range} is not one of the {} ranges",
                map.len()
            )));
        }
        let (start, end) = map.bounds(range);
        Ok((start.to_vec(), end.map(<[u8]>::to_vec)))
    }

    /// Moves range `range` to owner `to` (checked by the caller) in one edit.
    pub(crate) fn move_range(&self, range: usize, to: OwnerId) -> Result<()> {
        let (start, end) = self.range_span(range, to)?;
        self.move_span(&start, end.as_deref(), to)
    }

    /// Moves every range of this tree within `[start, end)` to owner `to`, first cutting the
    /// map at `start` and `end` where they fall inside a range; the moves are one edit. Does
    /// nothing (and cuts nothing) when `to` owns every key of the span already.
    fn move_span(&self, start: &[u8], end: Option<&[u8]>, to: OwnerId) -> Result<()> {
        let map = self.current_map("move_range")?;
        let overlapping = |i: usize| {
            let (from, until) = map.bounds(i);
            end.is_none_or(|end| from < end) && until.is_none_or(|until| until > start)
        };
        if (0..map.len()).all(|i| !overlapping(i) || map.ranges()[i].owner == to) {
            return Ok(());
        }
        self.split_at(start)?;
        if let Some(end) = end {
            self.split_at(end)?;
        }
        // Moves are read-modify-write of the map: one change at a time. Other edits only
        // settle forwarding entries, which `log_and_apply` recomputes from the tables anyway.
        let _moving = self.change_range_map();
        if self.state.lock().closing {
            return Err(Error::Closed);
        }
        let map = self.current_map("move_range")?;
        let mut moved = RangeMap::clone(&map);
        let mut count = 0;
        for (i, range) in map.ranges().iter().enumerate() {
            // The map is cut at `start` and `end`: a range is inside or outside whole.
            let inside = match (map.bounds(i), end) {
                ((from, _), None) => from >= start,
                ((from, Some(until)), Some(end)) => from >= start && until <= end,
                ((_, None), Some(_)) => false,
            };
            if inside && range.owner != to {
                tracing::info!(range = i, from = range.owner, to, "moving a key range");
                moved = moved.with_move(i, to);
                count += 1;
            }
        }
        if count == 0 {
            return Ok(());
        }
        self.log_and_apply(VersionEdit {
            range_map: Some(moved),
            ..VersionEdit::default()
        })?;
        let mut st = self.state.lock();
        st.range_moves += count;
        // The old owner's tables of the range now wait for relocation.
        self.bg_work.notify_all();
        Ok(())
    }

    /// Cuts the map at `at` unless a range already starts there, trying again when the
    /// storage balancer changed the map between reading it and the split.
    fn split_at(&self, at: &[u8]) -> Result<()> {
        loop {
            let map = self.current_map("split_range")?;
            let range = map.index_of(at);
            if map.bounds(range).0 == at {
                return Ok(());
            }
            match self.split_range(range, at, true) {
                Err(Error::InvalidArgument(_)) if self.current_map("split_range")? != map => {}
                outcome => return outcome.map(|_| ()),
            }
        }
    }

    /// See [`Db::split_range`]. With `wait` false, gives up (returning `Ok(false)`) instead of
    /// waiting when a running compaction could write a table across `at`, or a manual
    /// compaction runs.
    pub(crate) fn split_range(&self, range: usize, at: &[u8], wait: bool) -> Result<bool> {
        if self.options.partitions.is_none() {
            return Err(Error::InvalidArgument(
                "split_range: the database is not partitioned".into(),
            ));
        }
        let _changing = self.change_range_map();
        let ReservedSplit { job, map, crossing } = {
            let mut st = self.state.lock();
            let mut waiting = false;
            let reserved = loop {
                match Self::try_reserve_split(&mut st, range, at) {
                    Ok(None) if wait => {
                        // Like a manual compaction: no automatic compaction starts meanwhile.
                        if !waiting {
                            st.manual_waiting += 1;
                            waiting = true;
                        }
                        self.bg_work.notify_all();
                        self.bg_done.wait(&mut st);
                    }
                    outcome => break outcome,
                }
            };
            if waiting {
                st.manual_waiting -= 1;
            }
            match reserved? {
                Some(reserved) => reserved,
                None => return Ok(false),
            }
        };
        let options = self.live_options();
        let env = self.job_env(&options);
        let version = Arc::clone(self.state.lock().versions.current());
        let base_level = LevelTargets::new(&version, &options.compaction).base_level();
        let result = split_tables(&crossing, at, base_level, &env).and_then(|new_files| {
            let mut edit = VersionEdit {
                range_map: Some(map),
                new_files,
                ..VersionEdit::default()
            };
            for (level, f) in &crossing {
                edit.delete_file(*level, f.number);
            }
            self.log_and_apply(edit)
        });
        // Releases the new tables' numbers: installed, or garbage.
        drop(env);
        let mut st = self.state.lock();
        st.compactions.finish(job);
        if result.is_ok() {
            st.range_splits += 1;
        }
        self.bg_done.notify_all();
        self.bg_work.notify_all();
        drop(st);
        // A failed split leaves the tables it wrote unreferenced; this deletes them, and on
        // success the tables it replaced.
        drop(crossing);
        self.delete_obsolete_files();
        result?;
        tracing::info!(range, at = %at.escape_ascii(), "split a key range");
        Ok(true)
    }

    /// Registers a split of `range` at `at` as a running job, if nothing running stands in
    /// its way (`None` otherwise).
    fn try_reserve_split(
        st: &mut TreeState,
        range: usize,
        at: &[u8],
    ) -> Result<Option<ReservedSplit>> {
        Self::check_bg_error(st)?;
        if st.closing {
            return Err(Error::Closed);
        }
        let version = Arc::clone(st.versions.current());
        let map = version
            .range_map()
            .ok_or_else(|| {
                Error::InvalidArgument("split_range: the database has no range map".into())
            })?
            .with_split(range, at)
            .map_err(|e| Error::InvalidArgument(format!("split_range: {e}")))?;
        // A manual compaction's jobs are not registered: it runs alone, so wait for it.
        if st.manual_running {
            return Ok(None);
        }
        let crossing = tables_crossing(&version, at);
        let numbers = crossing.iter().map(|(_, f)| f.number).collect();
        Ok(st
            .compactions
            .reserve_split_key(at, numbers)
            .map(|job| ReservedSplit { job, map, crossing }))
    }

    /// Storage balancing: moves one range if the owners are uneven enough, first cutting one
    /// in two if none is small enough to move (see [`crate::partition::balance`]). Runs on the
    /// flush thread after each flush, since writes are what make owners uneven. A failure is
    /// logged; the next flush tries again.
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
        let planned = match plan_move(&stats, &balance) {
            Some(planned) => planned,
            None => {
                let Some(split) = plan_split(&stats, &balance) else {
                    return;
                };
                if !self.split_for_balance(&split) {
                    return;
                }
                let Some(planned) = self
                    .partition_stats()
                    .and_then(|stats| plan_move(&stats, &balance))
                else {
                    return;
                };
                planned
            }
        };
        tracing::info!(decision = %planned, "balancing storage: moving a range");
        if let Err(e) = self.move_range(planned.range, planned.to) {
            tracing::warn!(error = %e, "balancing storage: the move failed");
        }
    }

    /// Carries out `split` if a key gives a piece the balancer can move; true if it did.
    fn split_for_balance(&self, split: &crate::partition::balance::SplitPlan) -> bool {
        let version = Arc::clone(self.state.lock().versions.current());
        let Some(key) = choose_split_key(
            &version,
            split.range,
            split.side,
            split.target_bytes,
            split.max_piece_bytes,
        ) else {
            tracing::debug!(plan = %split, "balancing storage: no key splits the range well");
            return false;
        };
        drop(version);
        tracing::info!(
            decision = %split,
            at = %key.key.escape_ascii(),
            piece_bytes = key.piece_bytes,
            tables_rewritten = key.crossing.len(),
            "balancing storage: splitting a range"
        );
        match self.split_range(split.range, &key.key, false) {
            Ok(true) => true,
            Ok(false) => {
                tracing::debug!("balancing storage: the split waits for a running compaction");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "balancing storage: the split failed");
                false
            }
        }
    }
}
