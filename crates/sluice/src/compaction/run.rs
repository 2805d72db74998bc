//! Running a picked compaction: turning it into a [`CompactionSpec`] the executor understands
//! and handing out output file numbers. The executor only produces files; `install` commits.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_sst::compact::GrandparentFile;
use sluice_sst::compact::{CompactionOutput, CompactionSpec};
use sluice_sst::digest::EntryDigest;

use sluice_exec::{CompactionMode, ExecOptions, JobControl, auto, execute_with};

use super::Compaction;
use super::placement::Where;
use crate::db::DbInner;
use crate::partition::owner_dir_index;
use crate::{Error, Result};

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
        // Who runs it: the owners (partitioned mode), the workers for a big compaction, or
        // this thread.
        let offload = match (&placed, self.offloader.as_ref()) {
            (Some((Where::Shared(placement), _)), Some(off)) => Some((off, Some(placement))),
            (Some(_), _) => None,
            (None, _) => self.offloader_for(c).map(|off| (off, None)),
        };
        let installed = self.compaction_spec(c).and_then(|spec| {
            // What the outputs and the dropped entries must add up to, known from the inputs'
            // properties alone (None for inputs written before digests existed). Workers the
            // options trust (`VerifyOutputs::None`) are not held to it.
            let trusted = offload.is_some_and(|(off, _)| {
                off.options().verify_outputs == super::offload::VerifyOutputs::None
            });
            let expected = spec.input_digest().filter(|_| !trusted);
            let out = match offload {
                Some((off, placement)) => self.run_offloaded(
                    off,
                    c,
                    &spec,
                    &exec,
                    control,
                    &mut new_output,
                    &mut worker_reserved,
                    placement,
                )?,
                None => execute_with(&spec, &exec, control, &mut new_output)?,
            };
            check_accounts_for_inputs(expected, &out)?;
            self.install_compaction(c, exec.mode, &out)
        });
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

/// Refuses a compaction whose outputs plus dropped entries do not add up to its inputs, in
/// count and digest ([`sluice_sst::digest`]): an entry was lost, changed or invented on the
/// way, by whichever executor or worker ran it. Checked before the edit that would install
/// the outputs and make the inputs obsolete.
pub(crate) fn check_accounts_for_inputs(
    expected: Option<EntryDigest>,
    out: &CompactionOutput,
) -> Result<()> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let accounted = out.accounted();
    if accounted == expected {
        return Ok(());
    }
    let file = out
        .files
        .first()
        .map_or_else(|| PathBuf::from("<compaction output>"), |f| f.path.clone());
    Err(Error::corruption(
        file,
        0,
        format!(
            "compaction outputs do not account for their inputs: inputs hold {expected}, \
             outputs plus dropped entries {accounted} ({} written, {} dropped)",
            out.files
                .iter()
                .map(|f| f.summary.properties.num_entries)
                .sum::<u64>(),
            out.stats.dropped().entries
        ),
    ))
}

#[cfg(test)]
mod tests {
    use sluice_sst::compact::OutputFile;
    use sluice_sst::compaction_iter::CompactionIterStats;
    use sluice_sst::properties::TableProperties;
    use sluice_sst::table::TableSummary;

    use super::*;

    /// An output of files holding `(entries, digest)` each, having dropped `dropped`.
    fn output(files: &[(u64, u64)], dropped: (u64, u64)) -> CompactionOutput {
        let files = files
            .iter()
            .enumerate()
            .map(|(i, &(entries, sum))| OutputFile {
                number: i as u64 + 10,
                path: PathBuf::from(format!("/db/{:06}.sst", i + 10)),
                summary: TableSummary {
                    file_size: 100,
                    smallest_key: Vec::new(),
                    largest_key: Vec::new(),
                    properties: TableProperties {
                        num_entries: entries,
                        entry_digest: Some(sum),
                        ..TableProperties::default()
                    },
                    file_checksum: 0,
                },
            })
            .collect();
        CompactionOutput {
            files,
            profile: Default::default(),
            stats: CompactionIterStats {
                shadowed_dropped: dropped.0,
                dropped_digest: dropped.1,
                ..CompactionIterStats::default()
            },
            stages: Vec::new(),
        }
    }

    #[test]
    fn a_compaction_that_loses_changes_or_invents_an_entry_is_refused() {
        let inputs = EntryDigest {
            entries: 10,
            sum: 1000u64.wrapping_neg(),
        };
        // 6 + 3 written, 1 dropped; the sums wrap around 2^64.
        let honest = output(&[(6, 5000), (3, u64::MAX - 6999)], (1, 1000));
        check_accounts_for_inputs(Some(inputs), &honest).unwrap();
        check_accounts_for_inputs(None, &output(&[], (0, 0))).unwrap();
        let lies = [
            output(&[(6, 5000), (2, u64::MAX - 6999)], (1, 1000)), // an entry lost
            output(&[(6, 5001), (3, u64::MAX - 6999)], (1, 1000)), // a value changed
            output(&[(7, 5000), (3, u64::MAX - 6999)], (1, 1000)), // an entry invented
            output(&[(6, 5000), (3, u64::MAX - 6999)], (1, 999)),  // a drop misreported
        ];
        for lie in lies {
            let err = check_accounts_for_inputs(Some(inputs), &lie).unwrap_err();
            assert!(err.is_corruption(), "{err}");
            assert!(err.to_string().contains("do not account"), "{err}");
        }
    }
}
