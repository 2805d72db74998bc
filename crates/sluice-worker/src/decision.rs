//! Which executor a task runs: the task's own mode, else the worker's fixed `--mode`, else the
//! CoPro+ decision component (the CoPro paper, section 3.3) from this worker's load and the
//! task's values.

use std::sync::{Arc, Mutex, PoisonError};

use sluice_exec::CompactionMode;
use sluice_exec::decide::large_value_share;
use sluice_exec::decide::{Decision, DecisionConfig, DecisionCounters, LoadSampler, decide};
use sluice_sst::table::Table;

/// The worker's decision site: one load sampler, so each decision's CPU figure covers the time
/// since the previous decision; counts of what was chosen.
#[derive(Debug)]
pub(crate) struct Decider {
    fixed: Option<CompactionMode>,
    config: DecisionConfig,
    /// Locked only for the duration of one sample (a few `/proc` reads).
    sampler: Mutex<LoadSampler>,
    counters: DecisionCounters,
}

impl Decider {
    /// `fixed`: the worker's `--mode` (`None`: decide), never `Some(Auto)`; `config` valid.
    pub fn new(fixed: Option<CompactionMode>, config: DecisionConfig) -> Self {
        Decider {
            fixed,
            config,
            sampler: Mutex::new(LoadSampler::new()),
            counters: DecisionCounters::default(),
        }
    }

    /// The executor for a task that asked for `requested` (`None`: decide) with `inputs`, and
    /// the decision if the component made one (logged and counted here).
    pub fn choose(
        &self,
        job_id: u64,
        requested: Option<CompactionMode>,
        inputs: &[Vec<Arc<Table>>],
    ) -> (CompactionMode, Option<Decision>) {
        if let Some(mode) = requested.or(self.fixed) {
            return (mode, None);
        }
        let mut m = self
            .sampler
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sample();
        m.large_value_share = large_value_share(inputs, self.config.large_value_bytes);
        let d = decide(&self.config, &m);
        self.counters.record(&d);
        tracing::info!(
            job_id,
            mode = %d.mode,
            f = d.f,
            cpu_use = m.cpu_use,
            process_cpu_use = m.process_cpu_use,
            mem_use = m.mem_use,
            large_value_share = m.large_value_share,
            reason = %d.reason,
            "worker decision"
        );
        (d.mode, Some(d))
    }

    /// Decisions to pipeline so far.
    pub fn pipelined(&self) -> u64 {
        self.counters.pipelined()
    }

    /// Decisions to run sequentially so far.
    pub fn sequential(&self) -> u64 {
        self.counters.sequential()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_sst::key::{ValueKind, make_internal_key};
    use sluice_sst::table::{TableBuilder, TableOptions, TableReadOptions};

    use super::*;

    fn table(dir: &Path, number: u64, value_bytes: usize) -> Arc<Table> {
        let path = dir.join(format!("{number:06}.sst"));
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        for i in 0..8 {
            let key = make_internal_key(format!("k{i:04}").as_bytes(), 1, ValueKind::Value);
            b.add(&key, &vec![b'v'; value_bytes]).unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, number, TableReadOptions::default()).unwrap()
    }

    #[test]
    fn the_task_then_the_worker_then_the_component_decides() {
        let dir = tempfile::tempdir().unwrap();
        let large = vec![vec![table(dir.path(), 1, 20 << 10)]];
        let small = vec![vec![table(dir.path(), 2, 100)]];

        let fixed = Decider::new(Some(CompactionMode::Parallel), DecisionConfig::worker());
        assert_eq!(
            fixed.choose(1, Some(CompactionMode::Streaming), &large),
            (CompactionMode::Streaming, None)
        );
        assert_eq!(
            fixed.choose(2, None, &large),
            (CompactionMode::Parallel, None)
        );
        assert_eq!((fixed.pipelined(), fixed.sequential()), (0, 0));

        let d = Decider::new(None, DecisionConfig::worker());
        let (mode, record) = d.choose(3, None, &large);
        assert_eq!(mode, CompactionMode::Sequential);
        let record = record.unwrap();
        assert!(record.inputs.large_value_share > 0.9, "{record}");
        let (mode, record) = d.choose(4, None, &small);
        assert_eq!(mode, CompactionMode::Pipelined);
        assert_eq!(record.unwrap().inputs.large_value_share, 0.0);
        assert_eq!((d.pipelined(), d.sequential()), (1, 1));
    }
}
