//! Committing a compaction: one version edit that removes the inputs and adds the outputs.

use sluice_sst::compact::CompactionOutput;

use super::Compaction;
use crate::Result;
use crate::db::DbInner;
use crate::flush::file_meta;
use crate::version::edit::VersionEdit;
use sluice_exec::CompactionMode;

impl DbInner {
    /// Installs the outputs of `c` in one edit and records its figures.
    pub(crate) fn install_compaction(
        &self,
        c: &Compaction,
        mode: CompactionMode,
        out: &CompactionOutput,
    ) -> Result<()> {
        let mut edit = VersionEdit::default();
        for (which, files) in c.inputs.iter().enumerate() {
            for f in files {
                edit.deleted_files.insert((c.level + which, f.number));
            }
        }
        for f in &out.files {
            let dir = self.table_cache.dir_index_of(&f.path);
            edit.new_files
                .push((c.output_level(), file_meta(f.number, dir, &f.summary)));
        }
        // The round-robin pointer moves past compactions into the next level only.
        if let Some(largest) = c.inputs[0]
            .iter()
            .map(|f| &f.largest)
            .max_by(|a, b| sluice_sst::key::compare_internal(a, b))
            .filter(|_| !c.stays_in_level())
        {
            edit.compact_pointers.push((c.level, largest.clone()));
        }
        // Crash ordering: the outputs are fsynced (OutputWriter::finish); once this edit is
        // durable the inputs are garbage, before that the outputs are.
        self.log_and_apply(edit)?;
        let upper_bytes: u64 = c.inputs[0].iter().map(|f| f.file_size).sum();
        let mut st = self.state.lock();
        st.compaction_metrics.record(c.input_bytes(), &out.profile);
        st.compaction_metrics.record_stages(
            mode.name(),
            c.input_bytes(),
            &out.profile,
            &out.stages,
        );
        let out_level = c.output_level();
        st.level_counters.bytes_in[out_level] += upper_bytes;
        st.level_counters.bytes_read[out_level] += c.input_bytes();
        st.level_counters.bytes_written[out_level] += out.profile.bytes_written;
        st.level_counters.compactions[out_level] += 1;
        match c.reason {
            super::Reason::IntraL0 => st.intra_l0_compactions += 1,
            super::Reason::Relocate => st.relocations += 1,
            _ => {}
        }
        tracing::info!(
            level = c.level,
            reason = ?c.reason,
            %mode,
            inputs = c.all_inputs().count(),
            outputs = out.files.len(),
            input_bytes = c.input_bytes(),
            output_bytes = out.profile.bytes_written,
            mb_per_s = format!("{:.1}", out.profile.bandwidth_mb_s()),
            "compaction finished"
        );
        Ok(())
    }

    /// Moves a single file down one level by editing the MANIFEST only.
    pub(crate) fn install_trivial_move(&self, c: &Compaction) -> Result<()> {
        let mut edit = VersionEdit::default();
        for f in &c.inputs[0] {
            edit.deleted_files.insert((c.level, f.number));
            edit.new_files.push((c.output_level(), (**f).clone()));
            edit.compact_pointers.push((c.level, f.largest.clone()));
        }
        self.log_and_apply(edit)?;
        let mut st = self.state.lock();
        st.trivial_moves += 1;
        st.level_counters.bytes_moved[c.output_level()] += c.input_bytes();
        Ok(())
    }
}
