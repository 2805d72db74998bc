//! What the MStore experiment produces: one [`VariantReport`] per variant and the comparison
//! of MStore with MStore-basic. This is the schema of `mstore.json`; the table and the charts
//! are drawn from it alone.
//!
//! Units: bytes are bytes, MB/s is 10^6 bytes per second, seconds are wall-clock. Owner `i`'s
//! figures are at index `i` of every per-owner list. An owner's compaction bytes are the input
//! bytes of the shares its worker ran, whichever owner's range they were from (with
//! compaction-load balancing a worker also runs shares of another owner's compactions).

use serde::Serialize;
use sluice::{Error, Result};

use super::workload::ReadCheck;
use super::{MstoreConfig, Variant};
use crate::copro::Sizing;
use crate::copro::pin::CpuPlan;
use crate::copro::report::{median_by, ratio};

/// The owners at one moment of a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the measured writes began.
    pub seconds: f64,
    /// Table bytes each owner holds (its ranges, forwarded data included where it lives).
    pub owner_bytes: Vec<u64>,
    /// Each owner's worker's compaction input bytes per second since the previous sample, MB/s.
    pub owner_compaction_mb_s: Vec<f64>,
}

/// One variant's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantReport {
    /// `mstore-basic` or `mstore`.
    pub name: String,
    /// Writes of the measured phase.
    pub ops: u64,
    /// Wall seconds from the first measured write to the end of the background work.
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Key and value bytes written per second, MB/s.
    pub mb_per_sec: f64,
    /// Table bytes written (flushes, compactions, relocations) per user byte.
    pub write_amp: Option<f64>,
    /// Table bytes each owner holds after the run.
    pub owner_bytes: Vec<u64>,
    /// Largest over smallest owner bytes; `None` when an owner holds nothing.
    pub skew: Option<f64>,
    /// Ranges moved by the storage balancer.
    pub moves: u64,
    /// Ranges the storage balancer cut in two (to move a piece of one too big to move whole).
    pub splits: u64,
    /// Tables rewritten from a former owner into their range's new owner.
    pub relocations: u64,
    /// Reference lookups that missed, during the run and in the final check.
    pub read_misses: u64,
    /// Reference lookups done.
    pub reads_checked: u64,
    /// The first miss, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_miss: Option<String>,
    /// The owner of each range after the run, in key order.
    pub range_owners: Vec<u32>,
    /// Compactions and their input bytes.
    pub compactions: u64,
    pub compaction_input_bytes: u64,
    /// Each owner's worker's shares and their input bytes.
    pub owner_shares: Vec<u64>,
    pub owner_compaction_bytes: Vec<u64>,
    /// Shares re-run on the host after a worker failed.
    pub retries: u64,
    /// Seconds writers were stalled.
    pub write_stall_seconds: f64,
    /// The owners over time.
    pub samples: Vec<Sample>,
    /// Throughput of every repetition, in the order they ran (the report is the median's).
    pub runs_ops_per_sec: Vec<f64>,
}

impl VariantReport {
    /// Records the reader's findings.
    pub fn add_reads(&mut self, found: ReadCheck) {
        self.reads_checked += found.checked;
        self.read_misses += found.misses;
        if self.first_miss.is_none() {
            self.first_miss = found.first_miss;
        }
    }
}

/// Largest over smallest of `bytes`; 1 when all are 0, `None` when only some are.
pub fn skew(bytes: &[u64]) -> Option<f64> {
    let (max, min) = (bytes.iter().max()?, bytes.iter().min()?);
    match (*max, *min) {
        (0, _) => Some(1.0),
        (_, 0) => None,
        (max, min) => Some(max as f64 / min as f64),
    }
}

/// The median of `runs` (at least one) by throughput; for an even count the lower middle, so
/// every figure comes from one real run. Its `runs_ops_per_sec` lists every run.
pub fn median(runs: Vec<VariantReport>) -> Result<VariantReport> {
    let (mut median, all) = median_by(runs, |r| r.ops_per_sec)
        .ok_or_else(|| Error::InvalidArgument("a variant needs at least one run".into()))?;
    median.runs_ops_per_sec = all;
    Ok(median)
}

/// The parameters of the experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    pub num: u64,
    pub key_size: usize,
    pub value_size: usize,
    pub workers: usize,
    pub ranges: usize,
    pub reference_keys: u64,
    pub throttle: f64,
    pub compression: String,
    pub seed: u64,
    pub repeat: usize,
    pub sample_interval_seconds: f64,
    pub sizing: Sizing,
    pub cpus: CpuPlan,
}

impl Settings {
    pub fn new(config: &MstoreConfig, plan: &CpuPlan) -> Settings {
        Settings {
            num: config.num,
            key_size: config.key_size,
            value_size: config.value_size,
            workers: config.workers,
            ranges: config.ranges(),
            reference_keys: config.num.div_ceil(config.reference_every),
            throttle: config.throttle,
            compression: config.compression.name().into(),
            seed: config.seed,
            repeat: config.repeat,
            sample_interval_seconds: config.sample_interval.as_secs_f64(),
            sizing: Sizing::for_data(config.data_bytes()),
            cpus: plan.clone(),
        }
    }
}

/// MStore against MStore-basic (the MStore paper, Fig. 3: +14% throughput from balancing).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Comparison {
    /// MStore's throughput over MStore-basic's.
    pub throughput_ratio: Option<f64>,
    /// Each variant's skew, basic first.
    pub skew_basic: Option<f64>,
    pub skew_balanced: Option<f64>,
    /// MStore's write amplification over MStore-basic's (moves cost rewrites).
    pub write_amp_ratio: Option<f64>,
}

/// The whole experiment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MstoreReport {
    /// `mstore`.
    pub experiment: String,
    /// `001`.
    pub document: String,
    pub settings: Settings,
    pub variants: Vec<VariantReport>,
    /// Present when both variants ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    pub elapsed_seconds: f64,
}

impl MstoreReport {
    pub fn new(
        settings: Settings,
        variants: Vec<VariantReport>,
        elapsed_seconds: f64,
    ) -> MstoreReport {
        let find = |v: Variant| variants.iter().find(|r| r.name == v.name());
        let comparison = match (find(Variant::Basic), find(Variant::Balanced)) {
            (Some(basic), Some(balanced)) => Some(Comparison {
                throughput_ratio: ratio(balanced.ops_per_sec, basic.ops_per_sec),
                skew_basic: basic.skew,
                skew_balanced: balanced.skew,
                write_amp_ratio: balanced
                    .write_amp
                    .zip(basic.write_amp)
                    .and_then(|(a, b)| ratio(a, b)),
            }),
            _ => None,
        };
        MstoreReport {
            experiment: "mstore".into(),
            document: "001".into(),
            settings,
            variants,
            comparison,
            elapsed_seconds,
        }
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
