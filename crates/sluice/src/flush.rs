//! Flush (the "minor compaction"): writing a frozen memtable to an L0 table.

use std::time::Instant;

use sluice_sst::compact::subtask::encode_sub_task;
use sluice_sst::compact::{CompactionSpec, OutputWriter, StepTimes};
use sluice_sst::profile::{StageProfile, Step, thread_cpu_time};
use sluice_sst::table::TableContentBuilder;

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
    let dir = table_cache.dir_for_new_table();
    let mut one_file = Some((number, table_cache.table_path(dir, number)));
    let mut new_output = || {
        one_file
            .take()
            .ok_or_else(|| Error::InvalidArgument("a flush writes exactly one table".into()))
    };
    // A flush is a compaction of one sorted input (the memtable) into one file: no cuts.
    let spec = CompactionSpec {
        inputs: Vec::new(),
        snapshots: Vec::new(),
        bottommost: false,
        table: options.table_options(),
        storage: options.background_storage(),
        target_file_size: u64::MAX,
        grandparents: Vec::new(),
        max_grandparent_overlap_bytes: u64::MAX,
        lower: None,
        upper: None,
    };
    let mut writer = OutputWriter::new(&spec, &times, &mut new_output);
    let mut builder = TableContentBuilder::new(&spec.table);
    let write_sealed = |builder: &mut TableContentBuilder, writer: &mut OutputWriter<'_>| {
        let sealed: Vec<_> = std::iter::from_fn(|| builder.take_sealed()).collect();
        encode_sub_task(sealed, &spec, &times)
            .iter()
            .try_for_each(|block| writer.append(block))
    };
    let written = mem
        .for_each(|ikey, value| {
            builder.add(ikey, value);
            write_sealed(&mut builder, &mut writer)
        })
        .and_then(|()| {
            builder.seal_current();
            write_sealed(&mut builder, &mut writer)
        });
    let files = writer.conclude(written)?;
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
        .map(|f| file_meta(f.number, dir, &f.summary));
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
    ///
    /// The flush's CPU time (`Metrics::flush.cpu_seconds`) is this thread's CPU clock from
    /// here until the edit is installed: building and writing the table, its fsync, and the
    /// MANIFEST append. Deleting obsolete files afterwards is not counted.
    pub(crate) fn flush_oldest_immutable(&self) -> Result<()> {
        let cpu_start = thread_cpu_time();
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
        let cpu_used = thread_cpu_time().saturating_sub(cpu_start);
        let mut st = self.state.lock();
        st.pending_outputs.remove(&number);
        let (meta, mut profile) = outcome?;
        // Replaces the table writer's own figure, which ends before the install.
        profile.cpu_nanos = cpu_used.as_nanos() as u64;
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

#[cfg(test)]
mod tests {
    use crate::{Db, Options};

    #[test]
    fn flushes_report_their_cpu_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), Options::default()).unwrap();
        for i in 0..20_000u32 {
            db.put(format!("key{i:08}").as_bytes(), &[b'v'; 100])
                .unwrap();
        }
        db.flush().unwrap();
        let flush = db.metrics().flush;
        assert!(flush.count >= 1, "{flush:?}");
        assert!(flush.output_bytes > 0);
        // Building a table of 20,000 entries cannot take zero CPU on a thread clock with
        // nanosecond resolution.
        assert!(flush.cpu_seconds > 0.0, "{flush:?}");
    }
}
