//! PCP: three stages on three threads, joined by bounded queues.
//!
//! ```text
//! reader (S1) ──queue──▶ compute (S2..S6) ──queue──▶ writer (S7, this thread)
//! ```
//!
//! Sub-task i is written while i+1 is computed and i+2 is read. A failing stage sends its
//! error downstream and stops; the writer stops at the first error, which drops its queue and
//! makes the stages upstream stop at their next send. Every thread is joined (the scope) before
//! the outputs are deleted and the error returned.

use crossbeam_channel::bounded;
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::CompactionPlan;

use super::{ExecOptions, Shared};
use crate::Result;

pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    exec: &ExecOptions,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    let depth = exec.queue_depth.max(1);
    let (raw_tx, raw_rx) = bounded(depth);
    let (done_tx, done_rx) = bounded(depth);
    std::thread::scope(|scope| {
        scope.spawn(move || super::parallel::read_stage(spec, plan, shared, raw_tx));
        scope.spawn(move || super::parallel::compute_stage(spec, plan, shared, raw_rx, done_tx));
        super::parallel::write_stage(spec, shared, done_rx, new_output)
    })
}
