//! Flush (the "minor compaction"): writing a frozen memtable to an L0 table.

use std::time::Instant;

use sluice_sst::compact::{StepTimes, TableSink};
use sluice_sst::profile::{StageProfile, Step, thread_cpu_time};

use crate::db::DbInner;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::table_cache::TableCache;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::{Error, Result};

/// Writes `mem` to table `number` in the main directory. Returns `None` for an empty memtable.
/// The table is fsynced before this returns; it becomes part of the tree only once a version
/// edit naming it is installed.
pub(crate) fn write_level0_table(
    mem: &MemTable,
    table_cache: &TableCache,
    number: u64,
    options: &Options,
) -> Result<(Option<FileMetaData>, StageProfile)> {
    let start = Instant::now();
    let cpu_start = thread_cpu_time();
    let times = StepTimes::default();
    let mut one_file = Some((number, table_cache.table_path(0, number)));
    let mut new_output = || {
        one_file
            .take()
            .ok_or_else(|| Error::InvalidArgument("a flush writes exactly one table".into()))
    };
    let mut sink = TableSink::new(options.table_options(), &times, &mut new_output);
    let written = mem.for_each(|ikey, value| {
        sink.builder()?.add(ikey, value);
        sink.drain_sealed()
    });
    if let Err(e) = written {
        sink.abandon();
        return Err(e);
    }
    let files = sink.finish()?;
    let mut profile = times.profile();
    profile.wall_nanos = start.elapsed().as_nanos() as u64;
    // Everything that was not S5..S7 was building blocks from the memtable: S4.
    let others: u64 = profile.step_nanos.iter().sum();
    profile.step_nanos[Step::Merge as usize] = profile.wall_nanos.saturating_sub(others);
    profile.entries_in = mem.len() as u64;
    profile.entries_out = mem.len() as u64;
    profile.cpu_nanos = thread_cpu_time().saturating_sub(cpu_start).as_nanos() as u64;
    let meta = files
        .into_iter()
        .next()
        .map(|f| file_meta(f.number, 0, &f.summary));
    Ok((meta, profile))
}

/// The MANIFEST's description of a freshly written table.
pub(crate) fn file_meta(
    number: u64,
    dir_index: u32,
    summary: &sluice_sst::table::TableSummary,
) -> FileMetaData {
    let p = &summary.properties;
    FileMetaData {
        number,
        file_size: summary.file_size,
        smallest: summary.smallest_key.clone(),
        largest: summary.largest_key.clone(),
        smallest_seq: p.smallest_seq,
        largest_seq: p.largest_seq,
        num_entries: p.num_entries,
        num_deletions: p.num_deletions,
        raw_value_bytes: p.raw_value_bytes,
        dir_index,
    }
}

impl DbInner {
    /// Writes the oldest frozen memtable to L0 and installs it. Runs on the flush thread.
    pub(crate) fn flush_oldest_immutable(&self) -> Result<()> {
        let (imm, number) = {
            let mut st = self.state.lock();
            let Some(imm) = st.imm.front().cloned() else {
                return Ok(());
            };
            let number = st.versions.new_file_number();
            st.pending_outputs.insert(number);
            (imm, number)
        };
        let outcome = write_level0_table(&imm, &self.table_cache, number, &self.options).and_then(
            |(meta, profile)| {
                let mut edit = VersionEdit::default();
                if let Some(m) = &meta {
                    edit.new_files.push((0, m.clone()));
                }
                // Once this edit is durable the frozen memtable's WAL is no longer needed:
                // recovery starts from the WAL of the next memtable.
                edit.log_number = Some({
                    let st = self.state.lock();
                    st.imm
                        .get(1)
                        .map_or(st.mem.log_number(), |m| m.log_number())
                });
                self.log_and_apply(edit)?;
                Ok((meta, profile))
            },
        );
        let mut st = self.state.lock();
        st.pending_outputs.remove(&number);
        let (meta, profile) = outcome?;
        st.imm.pop_front();
        st.flush_metrics
            .record(imm.approximate_bytes() as u64, &profile);
        let bytes = meta.as_ref().map_or(0, |m| m.file_size);
        st.level_counters.bytes_in[0] += imm.approximate_bytes() as u64;
        st.level_counters.bytes_written[0] += bytes;
        st.level_counters.compactions[0] += 1;
        drop(st);
        tracing::debug!(number, bytes, "flushed memtable to L0");
        self.delete_obsolete_files();
        Ok(())
    }
}
