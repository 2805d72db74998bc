//! Who runs a compaction, decided in one place.
//!
//! Two questions, answered in order:
//! 1. **Which local executor** ([`local_exec`]): the one the options name; for `auto`, the one
//!    [`sluice_exec::auto::choose`] picks from the step times measured so far, unless its
//!    measured bandwidth is below SCP's; for a parallel
//!    manual compaction, the parallel executor with the threads it asks for (one per core by
//!    default). The jobs that rewrite tables without the picker ask here too: repair's merge
//!    of what it salvaged, and a range split's halves.
//! 2. **Which sides** ([`executor_for`]): this thread alone, or (with `Options::offload`) the
//!    host and its workers ([`super::remote`]), as partitioned mode's placement or the
//!    workers' own split say. The host's parts run with the executor of step 1, unless the
//!    offload settings choose otherwise (CoPro+'s decision).
//!
//! The rest of the engine sees only the [`Executor`] returned.

use std::collections::BTreeMap;

use sluice_exec::{CompactionMode, ExecOptions, Executor, auto};

use super::Compaction;
use super::env::JobEnv;
use super::job::Accounting;
use super::remote::RemoteJob;
use crate::metrics::{ModeTotals, StageSeconds};
use crate::options::Options;
use crate::partition::placement::Sides;

/// How the caller wants a compaction run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// As the options say.
    Configured,
    /// Split by data and run on the parallel executor (`CompactOptions::parallel`) with
    /// `threads` compute threads; 0: one per core.
    Parallel { threads: usize },
    /// Repair's merge of every table it salvaged: the options' executor, but `auto` runs
    /// sequentially, since it decides from this database's measured compactions and repair
    /// has none.
    Repair,
    /// A range split's rewrite of a table into its two halves: sequential, on the thread that
    /// holds the range map (each half is one table's worth, and the split waits for it).
    RangeSplit,
}

/// What the database has measured of its compactions: what `auto` decides from.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    /// Step times summed over every compaction so far.
    pub steps: StageSeconds,
    /// Compactions so far.
    pub jobs: u64,
    /// Input bytes and wall seconds per executor mode, as [`crate::metrics`] keeps them.
    pub modes: BTreeMap<String, ModeTotals>,
}

impl History {
    /// The input bytes per second measured of `mode`, if it has run on enough bytes.
    fn bandwidth(&self, mode: CompactionMode) -> Option<f64> {
        self.modes
            .get(&mode.to_string())
            .filter(|t| t.input_bytes >= auto::MIN_MEASURED_BYTES && t.seconds > 0.0)
            .map(|t| t.input_bytes as f64 / t.seconds)
    }
}

/// The local executor for the next compaction; `auto` is decided here and logged.
pub(crate) fn local_exec(options: &Options, history: &History, request: Request) -> ExecOptions {
    let mut exec = options.exec_options();
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    match request {
        Request::Configured => {}
        Request::Parallel { threads } => {
            exec.mode = CompactionMode::Parallel;
            exec.compute_threads = if threads == 0 { cores } else { threads };
            return exec;
        }
        Request::Repair if exec.mode != CompactionMode::Auto => return exec,
        Request::Repair | Request::RangeSplit => {
            exec.mode = CompactionMode::Sequential;
            return exec;
        }
    }
    if exec.mode == CompactionMode::Auto {
        let h = &history.steps;
        let io = h.read + h.write;
        let compute = h.checksum + h.decompress + h.merge + h.compress + h.rechecksum;
        let decision = auto::no_slower_than_sequential(
            auto::choose(io, compute, history.jobs, cores, exec.compute_threads),
            |mode| history.bandwidth(mode),
        );
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

/// The executor that runs `c`: `exec` on this thread, or split with the workers when `sides`
/// (the placement's answer) or the offload options say so; and whether its outputs must add
/// up to its inputs. `output_dir` is where the placement puts the outputs.
pub(crate) fn executor_for<'a>(
    c: &Compaction,
    env: &'a JobEnv<'a>,
    exec: ExecOptions,
    sides: Sides,
    output_dir: Option<u32>,
) -> (Box<dyn Executor + 'a>, Accounting) {
    // Workers know only the built-in filter (the TTL's alone) and merge operators: what the
    // user's own apply to runs here.
    let unknown_to_workers = env
        .options
        .merge_operator
        .as_ref()
        .is_some_and(|op| sluice_sst::merge_operator::builtin(op.name()).is_none());
    // Moving values out of blob files reads them, which only the host does.
    let collects_blobs =
        !crate::blob::gc::relocated_by(&c.version, &env.options.blob, c.all_inputs(), output_dir)
            .is_empty();
    if env.options.compaction_filter.is_some() || unknown_to_workers || collects_blobs {
        return (Box::new(exec), Accounting::Checked);
    }
    let sharing = match sides {
        Sides::Host => return (Box::new(exec), Accounting::Checked),
        Sides::Default => None,
        Sides::Shared(sharing) => Some(sharing),
    };
    let offered = env.remote.and_then(|remote| {
        remote.executor(RemoteJob {
            env,
            level: c.level,
            output_level: c.output_level(),
            has_lower_run: !c.inputs[1].is_empty(),
            input_bytes: c.input_bytes(),
            single_output: c.reason == super::Reason::IntraL0,
            exec,
            sharing,
        })
    });
    offered.unwrap_or((Box::new(exec), Accounting::Checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompactionOptions;

    #[test]
    fn auto_does_not_pick_what_it_measured_slower_than_sequential() {
        let options = Options {
            compaction: CompactionOptions {
                mode: CompactionMode::Auto,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        // Step times where I/O and compute are both significant: the steps say "pipelined"
        // (on two cores or more; on one, "sequential" whatever was measured).
        let steps = StageSeconds {
            read: 1.0,
            merge: 1.5,
            ..StageSeconds::default()
        };
        let totals = |input_bytes: u64, seconds: f64| ModeTotals {
            jobs: 3,
            input_bytes,
            seconds,
        };
        let mut history = History {
            steps,
            jobs: 6,
            modes: BTreeMap::from([
                ("sequential".to_string(), totals(300 << 20, 3.0)),
                ("pipelined".to_string(), totals(300 << 20, 2.0)),
            ]),
        };
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let predicted = if cores >= 2 {
            CompactionMode::Pipelined
        } else {
            CompactionMode::Sequential
        };
        assert_eq!(
            local_exec(&options, &history, Request::Configured).mode,
            predicted
        );
        // Measured slower than sequential: sequential.
        history
            .modes
            .insert("pipelined".to_string(), totals(300 << 20, 4.0));
        assert_eq!(
            local_exec(&options, &history, Request::Configured).mode,
            CompactionMode::Sequential
        );
    }

    #[test]
    fn repair_keeps_a_named_executor_and_splits_run_sequentially() {
        let with = |mode| Options {
            compaction: CompactionOptions {
                mode,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let none = History::default();
        for mode in [CompactionMode::Pipelined, CompactionMode::Parallel] {
            assert_eq!(local_exec(&with(mode), &none, Request::Repair).mode, mode);
            assert_eq!(
                local_exec(&with(mode), &none, Request::RangeSplit).mode,
                CompactionMode::Sequential
            );
        }
        // Nothing measured to decide `auto` from.
        assert_eq!(
            local_exec(&with(CompactionMode::Auto), &none, Request::Repair).mode,
            CompactionMode::Sequential
        );
    }
}
