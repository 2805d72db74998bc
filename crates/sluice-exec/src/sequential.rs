//! SCP: every step of every sub-task on the calling thread, in key order.

use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::output::{NewOutput, OutputFile};
use sluice_sst::compact::plan::CompactionPlan;
use sluice_sst::compact::subtask::{
    decode_sub_task, encode_sub_task, merge_sub_task, read_sub_task,
};
use sluice_sst::compact::writer::OutputWriter;

use super::Shared;
use crate::Result;

pub(super) fn run(
    spec: &CompactionSpec,
    plan: &CompactionPlan,
    shared: &Shared,
    new_output: &mut NewOutput<'_>,
) -> Result<Vec<OutputFile>> {
    let start = std::time::Instant::now();
    let result = shared.with_cpu(|| {
        let times = &shared.times;
        let mut writer = OutputWriter::new(spec.output_rules(), times, new_output);
        let outcome = plan.sub_tasks.iter().try_for_each(|st| {
            let raw = read_sub_task(spec, st, times)?;
            let blocks = decode_sub_task(raw, times)?;
            let merged = merge_sub_task(spec, st, blocks, times)?;
            shared.add_stats(&merged.stats);
            shared.add_drops(st.index, merged.drops);
            for block in encode_sub_task(merged.blocks, &spec.table, times) {
                shared.before_append()?;
                writer.append(&block)?;
            }
            Ok(())
        });
        writer.conclude(outcome)
    });
    shared.record_stage("sequential", start.elapsed(), 0);
    result
}
