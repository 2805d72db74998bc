//! Installing external tables ([`Db::ingest`]): holding writes and compactions off while the
//! files are placed, installing the edit the ingest job (`crate::ingest`) returns, and
//! publishing the sequence number the files took.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::journal::Journal;
use super::{Db, Tree};
use crate::compaction::level_targets::LevelTargets;
use crate::ingest::{self, External, IngestOptions, IngestReport};
use crate::memtable::MemTable;
use crate::{Error, IoContext, Result};

/// Why one attempt to place the files did not happen.
enum Attempt {
    Placed(IngestReport),
    /// A write reached the files' key range after the flush: flush again.
    MemtableOverlaps,
    /// The files need a sequence number and a memtable holds writes: every write must be in a
    /// table first (see [`Tree::place_ingest`]).
    MemtablesNotEmpty,
}

impl Db {
    /// Ingests tables written by [`crate::ingest::SstFileWriter`] (see the module docs of
    /// [`crate::ingest`]): checks every block and entry of each, then places them into the
    /// tree atomically: a reader sees all of them or none. Writes wait while the files are
    /// placed.
    pub fn ingest(&self, files: &[impl AsRef<Path>], opts: &IngestOptions) -> Result<IngestReport> {
        let inner = &*self.tree;
        inner.check_writable()?;
        if inner.options.partitions.is_some() {
            return Err(Error::InvalidArgument(
                "ingest: a partitioned database does not take external tables".into(),
            ));
        }
        if inner.options.ttl.is_some() {
            return Err(Error::InvalidArgument(
                "ingest: a database with a ttl stores write times with its values, and \
                 external tables have none"
                    .into(),
            ));
        }
        let mut externals = files
            .iter()
            .map(|p| ingest::inspect(&inner.options, p.as_ref()))
            .collect::<Result<Vec<_>>>()?;
        if externals.is_empty() {
            return Ok(IngestReport::default());
        }
        externals.sort_by(|a, b| a.smallest_user().cmp(b.smallest_user()));
        for pair in externals.windows(2) {
            if pair[0].largest_user() >= pair[1].smallest_user() {
                return Err(Error::InvalidArgument(format!(
                    "ingest: {} and {} overlap; the files of one ingest must not",
                    pair[0].path.display(),
                    pair[1].path.display()
                )));
            }
        }
        // Writes may keep landing in the range between the flush and the barrier; a few
        // rounds settle any realistic load.
        let mut flush_all = false;
        for _ in 0..8 {
            if inner.memtables_overlap(&externals) {
                inner.flush_and_wait(&self.journal)?;
            }
            // Leader of an empty group: no write runs until `finish`. Flushing everything
            // happens here, under the barrier, so no write can follow it before the files are
            // placed. The compaction slot is taken last: compactions and flushes finish
            // without writes, so waiting for it cannot deadlock with a writer stalled on L0.
            // A keyspace's writes go through the database's commit queue: its barrier.
            let journal = &self.journal;
            let group = journal.commit.join_barrier();
            let attempt = (if flush_all {
                inner.flush_as_leader(journal)
            } else {
                Ok(())
            })
            .and_then(|()| inner.acquire_compaction_slot())
            .and_then(|()| {
                let attempt = inner.place_ingest(journal, &externals, opts);
                inner.release_compaction_slot();
                attempt
            });
            journal.commit.finish(group, &Ok(()));
            match attempt? {
                Attempt::Placed(report) => {
                    if opts.move_files {
                        for e in &externals {
                            inner.options.fs.remove(&e.path).with_path(&e.path)?;
                        }
                    }
                    return Ok(report);
                }
                Attempt::MemtableOverlaps => continue,
                Attempt::MemtablesNotEmpty => flush_all = true,
            }
        }
        Err(Error::Busy(
            "ingest: writes kept landing in the ingested key range; retry".into(),
        ))
    }
}

impl Tree {
    /// True if a memtable holds a key in one of the files' ranges.
    fn memtables_overlap(&self, externals: &[External]) -> bool {
        let mems: Vec<Arc<MemTable>> = {
            let st = self.state.lock();
            std::iter::once(&st.mem).chain(&st.imm).cloned().collect()
        };
        ingest::memtables_overlap(&mems, externals)
    }

    /// Places the files. REQUIRES: `journal`'s commit barrier and the compaction slot are
    /// held.
    ///
    /// Files that take a sequence number need every earlier write in a table first: a memtable
    /// holding writes from before it and after it (or a WAL replay at open that puts both in
    /// one memtable) would be flushed into an L0 file whose sequence numbers straddle the
    /// ingested file's, which L0's ordering by sequence number cannot place.
    fn place_ingest(
        &self,
        journal: &Journal,
        externals: &[External],
        opts: &IngestOptions,
    ) -> Result<Attempt> {
        if self.memtables_overlap(externals) {
            return Ok(Attempt::MemtableOverlaps);
        }
        let (version, memtables_empty) = {
            let st = self.state.lock();
            let empty = st.mem.is_empty() && st.imm.is_empty();
            (Arc::clone(st.versions.current()), empty)
        };
        let base_level = LevelTargets::new(&version, &self.live_options().compaction).base_level();
        let snapshots_live = journal.snapshots.oldest().is_some();
        let plan = ingest::plan(&version, base_level, externals, snapshots_live);
        if plan.needs_sequence && !memtables_empty {
            return Ok(Attempt::MemtablesNotEmpty);
        }
        // No write runs under the barrier: the next sequence number is the files'.
        let seq = plan
            .needs_sequence
            .then(|| journal.visible_seq.load(Ordering::Acquire) + 1);
        let options = self.live_options();
        let env = self.job_env(&options);
        let (edit, report) = ingest::write_tables(&env, externals, &plan, seq, opts)?;
        self.log_and_apply(edit)?;
        drop(env);
        if let Some(seq) = seq {
            // Installed: readers from now on read at `seq` or later and see the files;
            // snapshots taken before read below it and do not.
            journal.visible_seq.store(seq, Ordering::Release);
        }
        Ok(Attempt::Placed(report))
    }
}
