//! PCP: three stages on three threads, joined by bounded queues.
//!
//! ```text
//! reader (S1) ──queue──▶ compute (S2..S4) ──queue──▶ writer (S5..S7, this thread)
//! ```
//!
//! Sub-task i is written while i+1 is computed and i+2 is read. It is the parallel executor's
//! stage graph with a single compute thread, so results arrive in order, except that the
//! writer compresses and checksums: the compute thread is the bottleneck and the writer has
//! the time (the PCP paper puts S5 and S6 in the compute stage, for a machine with cores to
//! spare for the compute stage alone). A failing stage sends
//! its error downstream and stops; the writer stops at the first error, which drops its queue
//! and makes the stages upstream stop at their next send. Every thread is joined before the
//! outputs are deleted and the error returned.

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
    super::parallel::run_stages(spec, plan, exec, 1, shared, new_output)
}
