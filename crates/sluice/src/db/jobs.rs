//! Running background jobs (flushes, compactions, manual compactions) and installing what
//! they return.
//!
//! A job gets a [`JobEnv`] (file numbers, table paths, open tables, snapshots) and returns a
//! version edit; only this module and [`super::install`] touch the version set. The
//! environment outlives the install, so the job's file numbers stay pending until the edit
//! naming their files is durable (or abandoned).
//!
//! Background failures are sticky: the first one is kept in `state.bg_error` with its kind,
//! and every later write or job fails with it until the database is reopened.

use std::sync::Arc;

use sluice_exec::{ExecOptions, JobControl};
use sluice_sst::profile::{StageProfile, thread_cpu_time};

use super::journal::Journal;
use super::{Tree, TreeState};
use crate::batch::DEFAULT_KEYSPACE_ID;
use crate::compaction::Compaction;
use crate::compaction::choose::{self, History, Request};
use crate::compaction::env::JobEnv;
use crate::compaction::job::{self, JobOutcome, JobRecord, MergeRecord};
use crate::compaction::level_targets::LevelTargets;
use crate::compaction::manual::{self, CompactOptions, ManualEnv};
use crate::events::{BackgroundErrorInfo, CompactionInfo, FileKind, FlushInfo, TableFileInfo};
use crate::options::Options;
use crate::partition::placement::{PlaceContext, Placed};
use crate::version::Version;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::{Error, Result};

impl Tree {
    /// A job's view of the database, as of now (its snapshots are the live ones), with
    /// `options` the tree's current ones ([`Tree::live_options`]).
    pub(crate) fn job_env<'a>(&'a self, options: &'a Options) -> JobEnv<'a> {
        let env = JobEnv::new(options, &self.table_cache, self.snapshots.sequences(), self);
        env.with_remote(self.remote.as_deref())
            .in_keyspace(self.keyspace_id)
    }

    /// Writes the oldest frozen memtable to L0 and installs it. Runs on the flush thread.
    ///
    /// The flush's CPU time (`Metrics::flush.cpu_seconds`) is this thread's CPU clock from
    /// here until the edit is installed: building and writing the table, its fsync, and the
    /// MANIFEST append. Deleting obsolete files afterwards is not counted.
    ///
    /// `journal` is the database's: the flush moves its WAL floor.
    pub(crate) fn flush_oldest_immutable(&self, journal: &Journal) -> Result<()> {
        let cpu_start = thread_cpu_time();
        // The tables are cut by this version's range map; no split may change its boundaries
        // before they are installed.
        let _map_fixed = self.range_map_lock.lock();
        let (imm, version, next_log_number) = {
            let st = self.state.lock();
            let Some(imm) = st.imm.front().cloned() else {
                return Ok(());
            };
            // The WAL of the memtable after this one: fixed even if `mem` is frozen meanwhile.
            let next = st
                .imm
                .get(1)
                .map_or(st.mem.log_number(), |m| m.log_number());
            (imm, Arc::clone(st.versions.current()), next)
        };
        let started = std::time::Instant::now();
        let memtable_bytes = imm.approximate_bytes() as u64;
        self.events.each(|l| {
            l.on_flush_begin(&FlushInfo {
                memtable_bytes,
                ..FlushInfo::default()
            })
        });
        let options = self.live_options();
        let env = self.job_env(&options);
        let flushed = crate::flush::run(&imm, &version, next_log_number, &env).and_then(|mut o| {
            if self.keyspace_id == DEFAULT_KEYSPACE_ID && !journal.keyspaces.read().is_empty() {
                // Other keyspaces may still need older WALs (see `db::journal`).
                let floor = journal.wal_floor_edit(Some(next_log_number));
                o.edit.default_log_number = Some(next_log_number);
                o.edit.log_number = floor.log_number;
                o.edit.keyspace_log_numbers = floor.keyspace_log_numbers;
            }
            // On failure the tables stay: the edit may have reached the MANIFEST before the
            // error, so only the next open can tell whether they are garbage. The memtable
            // leaves with the install: never both it and its tables in one read's view.
            self.log_and_apply_with(o.edit, |st| {
                st.imm.pop_front();
            })?;
            Ok((o.tables, o.profile))
        });
        drop(env);
        let cpu_used = thread_cpu_time().saturating_sub(cpu_start);
        let (tables, mut profile) = flushed?;
        // Replaces the table writer's own figure, which ends before the install.
        profile.cpu_nanos = cpu_used.as_nanos() as u64;
        let bytes: u64 = tables.iter().map(|m| m.file_size).sum();
        let mut st = self.state.lock();
        st.flush_metrics
            .record(imm.approximate_bytes() as u64, &profile);
        st.level_counters.record(
            0,
            imm.approximate_bytes() as u64,
            0,
            &StageProfile {
                bytes_written: bytes,
                ..profile
            },
        );
        drop(st);
        tracing::debug!(tables = tables.len(), bytes, "flushed memtable to L0");
        if !self.events.is_empty() {
            let info = FlushInfo {
                memtable_bytes,
                tables: tables.iter().map(|t| self.table_info(t, 0)).collect(),
                seconds: started.elapsed().as_secs_f64(),
            };
            self.events.each(|l| {
                info.tables.iter().for_each(|t| l.on_table_file_created(t));
                l.on_flush_completed(&info);
            });
        }
        self.delete_obsolete_files();
        if self.keyspace_id != DEFAULT_KEYSPACE_ID {
            // This keyspace may have been the last to need the oldest WALs.
            journal.advance_wal_floor()?;
        }
        Ok(())
    }

    /// Runs an automatic compaction the picker chose (and the caller registered as running).
    pub(crate) fn run_automatic_compaction(&self, c: Compaction) -> Result<()> {
        let exec = self.exec(Request::Configured);
        self.run_compaction(&c, exec, Arc::default())?;
        // `c` pins the version its inputs came from; release it so they can be deleted.
        drop(c);
        self.delete_obsolete_files();
        Ok(())
    }

    /// Runs `c` (its local executor settings `exec`) and installs its edit; `control` sees its
    /// progress and may cancel it. The caller deletes the obsolete inputs once it has dropped
    /// `c`, which pins them.
    pub(crate) fn run_compaction(
        &self,
        c: &Compaction,
        exec: ExecOptions,
        control: Arc<JobControl>,
    ) -> Result<()> {
        let options = self.live_options();
        let env = self.job_env(&options);
        let started = std::time::Instant::now();
        let trivial = job::trivial_move(c, &env);
        let mut info = (!self.events.is_empty()).then(|| CompactionInfo {
            level: c.level,
            output_level: c.output_level(),
            reason: c.reason.name().into(),
            inputs: c.all_inputs().map(|f| f.number).collect(),
            input_bytes: c.input_bytes(),
            trivial_move: trivial.is_some(),
            ..CompactionInfo::default()
        });
        if let Some(info) = &info {
            self.events.each(|l| l.on_compaction_begin(info));
        }
        let outcome = match trivial {
            Some(moved) => Ok(moved),
            None => {
                // The owners the placement occupies stay busy until the outputs are installed.
                let placed = self.place(c, &options);
                let (executor, accounting) =
                    choose::executor_for(c, &env, exec, placed.sides, placed.output_dir);
                job::merge(c, &env, &*executor, accounting, placed.output_dir, control)
            }
        };
        let outputs: Vec<TableFileInfo> = match (&info, &outcome) {
            (Some(_), Ok(o)) => self.created_files(&o.edit),
            _ => Vec::new(),
        };
        let installed = outcome.and_then(|outcome| self.install(outcome));
        if let Some(info) = &mut info {
            info.seconds = started.elapsed().as_secs_f64();
            match &installed {
                Ok(()) => info.outputs = outputs,
                Err(e) => info.error = Some(e.to_string()),
            }
            let info = &*info;
            self.events.each(|l| {
                info.outputs.iter().for_each(|t| l.on_table_file_created(t));
                l.on_compaction_completed(info);
            });
        }
        // Releases the job's file numbers: the outputs are installed, or garbage.
        drop(env);
        if installed
            .as_ref()
            .is_err_and(|e| !matches!(e, Error::Cancelled))
        {
            self.state.lock().compaction_metrics.failed += 1;
        }
        installed
    }

    /// Where the placement policy puts `c`, judged by `options` (the current ones).
    fn place(&self, c: &Compaction, options: &Options) -> Placed<'_> {
        self.placement.place(
            c,
            &PlaceContext {
                options,
                table_cache: &self.table_cache,
                remote: self
                    .remote
                    .as_deref()
                    .map(|r| (r, self.remote_workers.as_slice())),
            },
        )
    }

    /// Installs a finished compaction's edit and records its figures.
    fn install(&self, outcome: JobOutcome) -> Result<()> {
        self.log_and_apply(outcome.edit)?;
        self.record(outcome.record);
        Ok(())
    }

    /// The local executor settings for the next compaction (see [`choose::local_exec`]).
    fn exec(&self, request: Request) -> ExecOptions {
        let history = {
            let st = self.state.lock();
            History {
                steps: st.compaction_metrics.stage_profile,
                jobs: st.compaction_metrics.count,
                modes: st.compaction_metrics.mode_totals.clone(),
            }
        };
        choose::local_exec(&self.options, &history, request)
    }

    /// Adds an installed compaction's figures to the metrics.
    fn record(&self, record: JobRecord) {
        let mut st = self.state.lock();
        match record {
            JobRecord::TrivialMove {
                output_level,
                bytes,
            } => {
                st.trivial_moves += 1;
                st.level_counters.bytes_moved[output_level] += bytes;
            }
            JobRecord::Merged(m) => record_merge(&mut st, &m),
        }
    }

    /// Flushes the memtable, then compacts every level holding data in `[start, end]` into the
    /// next ([`manual::compact_levels`]). Automatic compactions pause while it runs.
    pub(crate) fn compact_range(
        &self,
        journal: &Journal,
        start: Option<&[u8]>,
        end: Option<&[u8]>,
        opts: &CompactOptions,
    ) -> Result<()> {
        if let (Some(s), Some(e)) = (start, end)
            && s > e
        {
            return Err(Error::InvalidArgument(
                "compact_range: start is after end".into(),
            ));
        }
        self.flush_and_wait(journal)?;
        self.acquire_compaction_slot()?;
        let result = manual::compact_levels(self, start, end, opts);
        self.release_compaction_slot();
        result
    }

    /// Waits until no compaction runs and claims the right to run alone; automatic
    /// compactions do not start while a manual one waits.
    pub(crate) fn acquire_compaction_slot(&self) -> Result<()> {
        let mut st = self.state.lock();
        st.manual_waiting += 1;
        while (!st.compactions.is_empty() || st.manual_running)
            && st.bg_error.is_none()
            && !st.closing
        {
            self.bg_done.wait(&mut st);
        }
        st.manual_waiting -= 1;
        Self::check_bg_error(&st)?;
        if st.closing {
            return Err(Error::Closed);
        }
        st.manual_running = true;
        Ok(())
    }

    pub(crate) fn release_compaction_slot(&self) {
        let mut st = self.state.lock();
        st.manual_running = false;
        self.bg_done.notify_all();
        self.bg_work.notify_all();
    }

    /// Waits until no memtable awaits flush and no compaction is needed or running.
    pub(crate) fn wait_for_quiet(&self) -> Result<()> {
        let mut st = self.state.lock();
        loop {
            Self::check_bg_error(&st)?;
            if st.closing {
                return Err(Error::Closed);
            }
            let busy = !st.imm.is_empty()
                || st.flush_running
                || !st.compactions.is_empty()
                || st.manual_running
                || st.manual_waiting > 0
                || self.needs_compaction(&st, &self.live_options());
            if !busy {
                return Ok(());
            }
            self.bg_work.notify_all();
            self.bg_done.wait(&mut st);
        }
    }

    /// What listeners are told of table `f`, installed at `level`.
    fn table_info(&self, f: &FileMetaData, level: usize) -> TableFileInfo {
        TableFileInfo {
            kind: FileKind::Table,
            number: f.number,
            path: self.table_cache.table_path(f.dir_index, f.number),
            size: f.file_size,
            level: Some(level),
        }
    }

    /// The tables and blob files `edit` installs, as listeners are told of them. A trivial
    /// move's table is not new: it only changes level.
    fn created_files(&self, edit: &VersionEdit) -> Vec<TableFileInfo> {
        let deleted: std::collections::BTreeSet<u64> =
            edit.deleted_files.iter().map(|&(_, n)| n).collect();
        let tables = edit
            .new_files
            .iter()
            .filter(|(_, f)| !deleted.contains(&f.number))
            .map(|(level, f)| self.table_info(f, *level));
        let blobs = edit.new_blob_files.iter().map(|b| TableFileInfo {
            kind: FileKind::Blob,
            number: b.number,
            path: self.table_cache.blob_path(b.dir_index, b.number),
            size: b.file_size,
            level: None,
        });
        tables.chain(blobs).collect()
    }

    /// True when automatic compaction has work. REQUIRES: the state lock.
    pub(crate) fn needs_compaction(&self, st: &TreeState, options: &Options) -> bool {
        !options.compaction.disable_auto_compactions
            && crate::compaction::picker::needs_compaction(st.versions.current(), options)
    }

    /// Fails with the sticky background error, if any. REQUIRES: the state lock.
    pub(crate) fn check_bg_error(st: &TreeState) -> Result<()> {
        match &st.bg_error {
            Some(e) => Err(Error::Background(Box::new(e.duplicate()))),
            None => Ok(()),
        }
    }

    /// Tells the listeners that background `job` failed with `err` (a cancelled job did not
    /// fail). Call without the state lock.
    pub(crate) fn tell_background_error(&self, job: &'static str, err: &Error) {
        if matches!(err, Error::Cancelled) || self.events.is_empty() {
            return;
        }
        let info = BackgroundErrorInfo {
            job,
            error: err.to_string(),
        };
        self.events.each(|l| l.on_background_error(&info));
    }

    /// Records a background failure (the first one wins) and wakes everyone waiting.
    pub(crate) fn set_bg_error(&self, st: &mut TreeState, err: &Error) {
        tracing::error!(error = %err, "background error; database is now read-only");
        if st.bg_error.is_none() {
            st.bg_error = Some(err.duplicate());
        }
        self.bg_done.notify_all();
    }
}

/// Adds a merged compaction's figures to the metrics, and logs it. REQUIRES: the state lock.
fn record_merge(st: &mut TreeState, m: &MergeRecord) {
    let out = &m.output;
    st.compaction_metrics.record(m.input_bytes, &out.profile);
    st.compaction_metrics.filter_removed += out.stats.filter_removed;
    st.compaction_metrics.filter_changed += out.stats.filter_changed;
    st.compaction_metrics.merge_absorbed += out.stats.merge_absorbed;
    st.compaction_metrics.range_covered += out.stats.range_covered;
    st.compaction_metrics
        .record_stages(m.executor, m.input_bytes, &out.profile, &out.stages);
    st.level_counters
        .record(m.output_level, m.upper_bytes, m.input_bytes, &out.profile);
    match m.reason {
        crate::compaction::Reason::IntraL0 => st.intra_l0_compactions += 1,
        crate::compaction::Reason::Relocate => st.relocations += 1,
        _ => {}
    }
    tracing::info!(
        level = m.level,
        reason = ?m.reason,
        mode = m.executor,
        inputs = m.inputs,
        outputs = out.files.len(),
        input_bytes = m.input_bytes,
        output_bytes = out.profile.bytes_written,
        mb_per_s = format!("{:.1}", out.profile.bandwidth_mb_s()),
        "compaction finished"
    );
}

impl ManualEnv for Tree {
    fn current_version(&self) -> Arc<Version> {
        Arc::clone(self.state.lock().versions.current())
    }

    fn base_level(&self, version: &Version) -> usize {
        LevelTargets::new(version, &self.live_options().compaction).base_level()
    }

    fn exec(&self, request: Request) -> ExecOptions {
        Tree::exec(self, request)
    }

    fn run(&self, c: &Compaction, exec: ExecOptions, control: Arc<JobControl>) -> Result<()> {
        self.run_compaction(c, exec, control)
    }

    fn delete_obsolete_files(&self) {
        Tree::delete_obsolete_files(self);
    }

    fn rewrites_everything(&self) -> bool {
        // What a filter or a range tombstone drops is only dropped by rewriting, never by a
        // move.
        self.options.compaction_filter.is_some()
            || self.options.ttl.is_some()
            || !self.current_version().range_tombstones().is_empty()
    }
}
