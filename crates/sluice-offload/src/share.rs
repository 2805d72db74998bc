//! One side's part of an offloaded compaction, whichever split cut it (a static share or a
//! dynamic chunk): running a key range on the host, the wire task for a worker, turning a
//! worker's reply into checked outputs, reserving output numbers for a worker, and deleting
//! what a failed part left.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use sluice_exec::{ExecOptions, JobControl, execute_with};
use sluice_rpc::convert::{mode_from_wire, profile_from_wire, stats_from_wire};
use sluice_rpc::proto::{self, TaskResult};
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::compact::{CompactionSpec, NewOutput, OutputFile};
use sluice_sst::compaction_iter::CompactionIterStats;
use sluice_sst::key::user_key;
use sluice_sst::profile::{StageProfile, StageTiming};

use super::client::ShareError;
use super::options::VerifyOutputs;
use super::task::ShareTask;
use super::task::task_nonce;
use super::verify::{ShareBounds, check_drop_counts, verify_outputs};
use super::{Offloader, ShareReport};
use sluice::compaction::env::JobEnv;
use sluice::internals::filename::{table_file_name, temp_file_name};
use sluice_sst::Result;

/// What every part of one offloaded compaction shares.
pub(super) struct Job<'a> {
    pub off: &'a Offloader,
    /// Output numbers, table paths and open tables.
    pub env: &'a JobEnv<'a>,
    /// The host's id of the compaction, sent with every task.
    pub id: u64,
    /// The whole compaction.
    pub spec: &'a CompactionSpec,
    /// The level of each of `spec.inputs`' runs.
    pub run_levels: Vec<u32>,
    /// The engine's executor settings; workers get its sub-task size, queue depth, threads.
    pub exec: &'a ExecOptions,
    /// The executor of the host's parts, chosen once per job.
    pub host_exec: ExecOptions,
    pub control: Arc<JobControl>,
    /// Partitioned mode: the directory every worker output goes to (the range owner's).
    pub output_root: Option<std::path::PathBuf>,
    /// What every worker output is held against.
    pub inputs: super::verify::InputFacts,
    /// Every task's nonce derives from it ([`super::task::task_nonce`]).
    pub nonce_key: u64,
}

/// A contiguous run of sub-tasks given to one side: outputs must lie in `[lower, upper)`.
#[derive(Clone, Debug)]
pub(super) struct Share {
    /// 0 for the host, `i + 1` for worker `i`.
    pub side: usize,
    pub lower: Option<Vec<u8>>,
    pub upper: Option<Vec<u8>>,
    pub input_bytes: u64,
}

/// What a share produced, whoever ran it.
pub(super) struct Part {
    /// The share it ran: who ran it and its key range.
    pub share: Share,
    /// Output tables in key order.
    pub files: Vec<OutputFile>,
    pub profile: StageProfile,
    pub stats: CompactionIterStats,
    /// Executor stage timings; only the host's are known in detail.
    pub stages: Vec<StageTiming>,
    /// The nonce of the task the part answers (a worker's), written into its outputs: the
    /// host's copy of the part for `full` verification writes it too, so that honest files
    /// are byte-identical.
    pub task_nonce: Option<u64>,
}

/// Everything a job produced: its parts in key order, and one report per side that took
/// part (by side number).
pub(super) struct JobParts {
    pub parts: Vec<Part>,
    pub reports: Vec<(usize, ShareReport)>,
}

impl Job<'_> {
    /// The wire task running `share` of `spec` (whose runs are at `run_levels`) on a worker,
    /// with outputs numbered from `numbers`.
    pub fn task(
        &self,
        spec: &CompactionSpec,
        run_levels: &[u32],
        share: &Share,
        numbers: Range<u64>,
    ) -> std::result::Result<proto::CompactionTask, String> {
        ShareTask {
            job_id: self.id,
            spec,
            run_levels,
            lower: share.lower.clone(),
            upper: share.upper.clone(),
            mode: self.off.options.worker_mode.for_worker(),
            exec: self.exec,
            output_root: self.output_root.as_deref(),
            database: &self.off.options.database,
            keyspace: self.env.keyspace(),
            task_nonce: task_nonce(self.nonce_key, numbers.start),
            log_drops: self.audits_drops(),
            fence: spec.storage.fs.write_fence(),
            numbers,
        }
        .to_wire()
    }
}

/// `spec` and `run_levels` without the input tables that hold no key of `[lower, upper)`
/// (and runs left empty): a part reads and plans only what it needs, and a worker opens
/// fewer files. The result is the same, since such tables contribute no block to the range.
pub(super) fn restrict(
    spec: &CompactionSpec,
    run_levels: &[u32],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> (CompactionSpec, Vec<u32>) {
    let mut inputs = Vec::with_capacity(spec.inputs.len());
    let mut levels = Vec::with_capacity(spec.inputs.len());
    for (i, run) in spec.inputs.iter().enumerate() {
        let kept: Vec<_> = run
            .iter()
            .filter(|t| {
                let p = t.properties();
                lower.is_none_or(|lo| user_key(&p.largest_key) >= lo)
                    && upper.is_none_or(|hi| user_key(&p.smallest_key) < hi)
            })
            .cloned()
            .collect();
        if !kept.is_empty() {
            inputs.push(kept);
            levels.push(run_levels.get(i).copied().unwrap_or_default());
        }
    }
    (
        CompactionSpec {
            inputs,
            ..spec.clone()
        },
        levels,
    )
}

impl Job<'_> {
    /// Runs `share` of `spec` on the compaction thread with the job's host executor, stopped
    /// by `control` (the job's, or a child of it for a copy that may be abandoned).
    pub(super) fn run_share_on_host(
        &self,
        spec: &CompactionSpec,
        share: &Share,
        control: &Arc<JobControl>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<(Part, ShareReport)> {
        let started = Instant::now();
        let share_spec = CompactionSpec {
            lower: share.lower.clone(),
            upper: share.upper.clone(),
            ..spec.clone()
        };
        let out = execute_with(
            &share_spec,
            &self.host_exec,
            Arc::clone(control),
            new_output,
        )?;
        let report = ShareReport {
            side: "host".into(),
            input_bytes: share.input_bytes,
            seconds: started.elapsed().as_secs_f64(),
            bandwidth_mb_s: 0.0,
            mode: self.host_exec.mode.to_string(),
            cpu_seconds: out.profile.cpu_nanos as f64 / 1e9,
            check_seconds: 0.0,
            drop_log_bytes: 0,
            retried: false,
        };
        let part = Part {
            share: share.clone(),
            files: out.files,
            profile: out.profile,
            stats: out.stats,
            stages: out.stages,
            task_nonce: spec.task_nonce,
        };
        Ok((part, report))
    }

    /// Whether worker shares log their drops and the host audits them: at `audit` and
    /// `sample:K` (`full` re-runs every worker share on the host instead).
    pub(super) fn audits_drops(&self) -> bool {
        matches!(
            self.off.options.verify_outputs,
            VerifyOutputs::Audit | VerifyOutputs::Sample(_)
        )
    }

    /// Turns a worker's reply for `share` (outputs numbered from `numbers`) into checked
    /// outputs; the report's `seconds` is left for the caller, who timed the call.
    pub(super) fn check_worker_result(
        &self,
        addr: &str,
        share: &Share,
        numbers: Range<u64>,
        r: TaskResult,
    ) -> std::result::Result<(Part, ShareReport), ShareError> {
        let bad = |reason: String| ShareError::Verify {
            addr: addr.to_string(),
            reason,
        };
        let nonce = task_nonce(self.nonce_key, numbers.start);
        let bounds = ShareBounds {
            task_nonce: nonce,
            numbers,
            lower: share.lower.as_deref(),
            upper: share.upper.as_deref(),
            inputs: &self.inputs,
            storage: &self.spec.storage,
        };
        // The counts first: they cost nothing, the outputs' check reads every byte.
        let stats = r.stats.as_ref().map(stats_from_wire).unwrap_or_default();
        check_drop_counts(&stats, &self.inputs).map_err(&bad)?;
        // The drop decisions, checked in step with the read of every output (`audit` and up).
        let refused = |reason: String| ShareError::DropAudit {
            addr: addr.to_string(),
            reason,
        };
        let mut audit = match self.audits_drops() {
            true => {
                let (lower, upper) = (share.lower.as_deref(), share.upper.as_deref());
                let mut audit = DropAudit::new(self.spec, lower, upper, &r.drop_log)
                    .map_err(|e| refused(e.to_string()))?;
                audit.limit(self.inputs.entries, self.inputs.key_bytes);
                Some(audit)
            }
            false => None,
        };
        let files = verify_outputs(&r.files, &bounds, self.env.table_dirs(), audit.as_mut())
            .map_err(|e| match audit.as_ref().is_some_and(DropAudit::refused) {
                true => refused(e),
                false => bad(e),
            })?;
        if let Some(audit) = audit {
            let counts = audit.finish().map_err(|e| refused(e.to_string()))?;
            counts.check_against(&stats).map_err(refused)?;
        }
        let profile = r
            .profile
            .as_ref()
            .ok_or_else(|| bad("no profile".into()))
            .and_then(|p| profile_from_wire(p).map_err(|e| bad(e.to_string())))?;
        let mode = mode_from_wire(r.mode)
            .ok()
            .flatten()
            .map_or_else(|| "unknown".to_string(), |m| m.to_string());
        let report = ShareReport {
            side: addr.to_string(),
            input_bytes: share.input_bytes,
            seconds: 0.0,
            bandwidth_mb_s: 0.0,
            mode,
            cpu_seconds: profile.cpu_nanos as f64 / 1e9,
            check_seconds: 0.0,
            drop_log_bytes: r.drop_log.len() as u64,
            retried: false,
        };
        let part = Part {
            share: share.clone(),
            stats,
            stages: Vec::new(),
            files,
            profile,
            task_nonce: Some(nonce),
        };
        Ok((part, report))
    }

    /// Deletes whatever a failed worker share left: finished tables and temporary files with
    /// any of its reserved numbers, in every table directory. Best effort: anything missed is
    /// named by no version and is deleted by the next obsolete-file sweep or open.
    pub(super) fn delete_share_outputs(&self, numbers: Range<u64>) {
        for dir in self.env.table_dirs() {
            for n in numbers.clone() {
                for path in [table_file_name(dir, n), temp_file_name(dir, n)] {
                    remove_output(self.spec.storage.fs.as_ref(), &path);
                }
            }
        }
    }

    /// Deletes the outputs of parts that finished in a job that failed as a whole.
    pub(super) fn delete_parts(&self, parts: &[Part]) {
        for f in parts.iter().flat_map(|p| &p.files) {
            self.env.evict_table(f.number);
            remove_output(self.spec.storage.fs.as_ref(), &f.path);
        }
    }
}

/// Deletes `path` through `fs`: a file on the host's disk, or an object in its bucket.
fn remove_output(fs: &dyn sluice_sst::fs::FileSystem, path: &std::path::Path) {
    match fs.remove(path) {
        Ok(()) => tracing::info!(file = %path.display(), "deleted a failed share's output"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot delete a failed share's output")
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_sst::compact::plan::plan;
    use sluice_sst::key::{ValueKind, make_internal_key};
    use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

    use super::*;

    /// Table `number` in `dir` holding user keys `{prefix}000 .. {prefix}199`.
    fn table(dir: &Path, number: u64, prefix: &str) -> Arc<Table> {
        let path = table_file_name(dir, number);
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        for k in 0..200 {
            let key = format!("{prefix}{k:03}");
            b.add(
                &make_internal_key(key.as_bytes(), 9, ValueKind::Value),
                &[7u8; 100],
            )
            .unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, number, TableReadOptions::default()).unwrap()
    }

    /// Two runs: `[a.., m.., x..]` over `[m..]`.
    fn spec(dir: &Path) -> CompactionSpec {
        let (a, m, x) = (table(dir, 1, "a"), table(dir, 2, "m"), table(dir, 3, "x"));
        CompactionSpec {
            inputs: vec![vec![a, Arc::clone(&m), x], vec![m]],
            bottommost: true,
            target_file_size: 1 << 20,
            ..CompactionSpec::default()
        }
    }

    /// A key range `[lower, upper)`, either end open.
    type Bounds = (Option<&'static [u8]>, Option<&'static [u8]>);

    fn numbers(spec: &CompactionSpec) -> Vec<Vec<u64>> {
        spec.inputs
            .iter()
            .map(|run| run.iter().map(|t| t.file_number()).collect())
            .collect()
    }

    #[test]
    fn restrict_keeps_only_tables_that_reach_into_the_range() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let levels = [0, 1];
        let cases: [(Bounds, Vec<Vec<u64>>, Vec<u32>); 6] = [
            ((None, None), vec![vec![1, 2, 3], vec![2]], vec![0, 1]),
            ((Some(b"b"), Some(b"n")), vec![vec![2], vec![2]], vec![0, 1]),
            ((Some(b"n"), None), vec![vec![3]], vec![0]),
            ((None, Some(b"b")), vec![vec![1]], vec![0]),
            // The lower bound is inclusive: a table ending at it is kept.
            ((Some(b"a199"), Some(b"a2")), vec![vec![1]], vec![0]),
            // The upper bound is exclusive: a table starting at it is not.
            ((Some(b"b"), Some(b"m000")), vec![], vec![]),
        ];
        for ((lower, upper), want, want_levels) in cases {
            let (r, l) = restrict(&spec, &levels, lower, upper);
            assert_eq!(numbers(&r), want, "{lower:?}..{upper:?}");
            assert_eq!(l, want_levels, "{lower:?}..{upper:?}");
        }
    }

    #[test]
    fn a_restricted_spec_plans_the_same_sub_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let spec = spec(dir.path());
        let bounds: [Bounds; 4] = [
            (Some(b"m050"), Some(b"x100")),
            (None, Some(b"m100")),
            (Some(b"a150"), None),
            (Some(b"m000"), Some(b"m200")),
        ];
        for (lower, upper) in bounds {
            let bounded = |s: CompactionSpec| CompactionSpec {
                lower: lower.map(<[u8]>::to_vec),
                upper: upper.map(<[u8]>::to_vec),
                ..s
            };
            let (r, _) = restrict(&spec, &[0, 1], lower, upper);
            let (full, cut) = (plan(&bounded(spec.clone()), 256), plan(&bounded(r), 256));
            let shape = |p: &sluice_sst::compact::plan::CompactionPlan| {
                p.sub_tasks
                    .iter()
                    .map(|t| (t.lower.clone(), t.upper.clone(), t.input_bytes()))
                    .collect::<Vec<_>>()
            };
            assert!(full.sub_tasks.len() > 1, "{lower:?}..{upper:?}");
            assert_eq!(shape(&full), shape(&cut), "{lower:?}..{upper:?}");
        }
    }
}
