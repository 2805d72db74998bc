//! Running a picked compaction: turning it into a [`CompactionSpec`] the executor understands
//! and handing out output file numbers. The executor only produces files; `install` commits.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_sst::compact::GrandparentFile;
use sluice_sst::compact::{CompactionOutput, CompactionSpec};

use sluice_exec::{CompactionMode, ExecOptions, JobControl, auto, execute_with};

use super::Compaction;
use super::placement::Where;
use crate::Result;
use crate::db::DbInner;
use crate::partition::owner_dir_index;

impl DbInner {
    /// Runs an automatic compaction the picker chose (and the caller registered as running).
    pub(crate) fn run_automatic_compaction(&self, c: Compaction) -> Result<()> {
        let exec = self.resolve_exec_options();
        self.run_compaction(&c, exec, Arc::default())?;
        // `c` pins the version its inputs came from; release it so they can be deleted.
        drop(c);
        self.delete_obsolete_files();
        Ok(())
    }

    /// Runs `c` with `exec` and installs its outputs (or moves its file, for a trivial move);
    /// `control` sees its progress and may cancel it. The caller deletes the obsolete inputs
    /// once it has dropped `c`, which pins them.
    pub(crate) fn run_compaction(
        &self,
        c: &Compaction,
        exec: ExecOptions,
        control: Arc<JobControl>,
    ) -> Result<()> {
        let max_overlap = self.max_grandparent_overlap_bytes();
        if c.is_trivial_move(max_overlap) {
            return self.install_trivial_move(c);
        }
        let mut reserved = Vec::new();
        // Partitioned mode: outputs go to the range owner's directory.
        let owner_dir = c.range().map(|(_, owner)| owner_dir_index(owner));
        let mut new_output = || -> Result<(u64, PathBuf)> {
            let number = self.reserve_number();
            reserved.push(number);
            let dir = owner_dir.unwrap_or_else(|| self.table_cache.dir_for_new_table());
            Ok((number, self.table_cache.table_path(dir, number)))
        };
        // Output numbers reserved for workers; like `reserved`, kept pending until installed.
        let mut worker_reserved = Vec::new();
        // Partitioned mode places the compaction on its range's owner(s); otherwise big
        // compactions are shared with the workers.
        let placed = self.place(c);
        let installed = self
            .compaction_spec(c)
            .and_then(|spec| match (&placed, self.offloader.as_ref()) {
                (Some((Where::Shared(placement), _)), Some(off)) => self.run_offloaded(
                    off,
                    c,
                    &spec,
                    &exec,
                    control,
                    &mut new_output,
                    &mut worker_reserved,
                    Some(placement),
                ),
                (Some(_), _) => execute_with(&spec, &exec, control, &mut new_output),
                (None, _) => match self.offloader_for(c) {
                    Some(off) => self.run_offloaded(
                        off,
                        c,
                        &spec,
                        &exec,
                        control,
                        &mut new_output,
                        &mut worker_reserved,
                        None,
                    ),
                    None => execute_with(&spec, &exec, control, &mut new_output),
                },
            })
            .and_then(|out: CompactionOutput| self.install_compaction(c, exec.mode, &out));
        let mut st = self.state.lock();
        for n in reserved.into_iter().chain(worker_reserved) {
            st.pending_outputs.remove(&n);
        }
        if installed
            .as_ref()
            .is_err_and(|e| !matches!(e, crate::Error::Cancelled))
        {
            st.compaction_metrics.failed += 1;
        }
        drop(st);
        installed
    }

    /// The executor settings for the next compaction; `auto` is decided here and logged.
    pub(crate) fn resolve_exec_options(&self) -> ExecOptions {
        let mut exec = self.options.exec_options();
        if exec.mode == CompactionMode::Auto {
            let (h, jobs) = {
                let st = self.state.lock();
                (
                    st.compaction_metrics.stage_profile,
                    st.compaction_metrics.count,
                )
            };
            let io = h.read + h.write;
            let compute = h.checksum + h.decompress + h.merge + h.compress + h.rechecksum;
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let decision = auto::choose(io, compute, jobs, cores, exec.compute_threads);
            tracing::info!(
                mode = %decision.mode,
                compute_threads = decision.compute_threads,
                reason = %decision.reason,
                "auto compaction mode"
            );
            exec.mode = decision.mode;
            exec.compute_threads = decision.compute_threads;
        }
        exec
    }

    /// The offloader, if `c` is worth sharing with workers: big enough, and not an intra-L0
    /// compaction (whose single output file must not be cut into key ranges).
    fn offloader_for(&self, c: &Compaction) -> Option<&super::offload::Offloader> {
        self.offloader.as_ref().filter(|off| {
            c.reason != super::Reason::IntraL0 && c.input_bytes() >= off.options().min_offload_bytes
        })
    }

    pub(crate) fn max_grandparent_overlap_bytes(&self) -> u64 {
        self.options
            .max_grandparent_overlap_factor
            .saturating_mul(self.options.target_file_size_base)
    }

    /// The executor's view of `c`: open tables, snapshots and output limits.
    fn compaction_spec(&self, c: &Compaction) -> Result<CompactionSpec> {
        let mut inputs = Vec::new();
        if c.level == 0 {
            // Each L0 file is its own sorted run; newest first.
            for f in &c.inputs[0] {
                inputs.push(vec![self.table_cache.get_for_compaction(f)?]);
            }
        } else if !c.inputs[0].is_empty() {
            inputs.push(self.open_all(&c.inputs[0])?);
        }
        if !c.inputs[1].is_empty() {
            inputs.push(self.open_all(&c.inputs[1])?);
        }
        Ok(CompactionSpec {
            inputs,
            snapshots: self.snapshots.sequences(),
            bottommost: c.bottommost,
            table: self.options.table_options(),
            storage: self.options.background_storage(),
            // Compactions into L0 write one file: L0 files are not cut by key.
            target_file_size: if c.output_level() == 0 {
                u64::MAX
            } else {
                self.options.target_file_size_base
            },
            grandparents: c
                .grandparents
                .iter()
                .map(|f| GrandparentFile {
                    smallest: f.smallest.clone(),
                    largest: f.largest.clone(),
                    size: f.file_size,
                })
                .collect(),
            max_grandparent_overlap_bytes: self.max_grandparent_overlap_bytes(),
            lower: None,
            upper: None,
        })
    }

    fn open_all(
        &self,
        files: &[Arc<crate::version::edit::FileMetaData>],
    ) -> Result<Vec<Arc<sluice_sst::table::Table>>> {
        files
            .iter()
            .map(|f| self.table_cache.get_for_compaction(f))
            .collect()
    }
}
