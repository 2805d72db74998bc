//! What the CoPro experiment produces: one [`RunReport`] per workload, value size and
//! configuration, and the Table 5-style comparisons. This is the schema of `copro.json`; the
//! table and the charts are drawn from it alone.
//!
//! Units: bytes are bytes, MB/s is 10^6 bytes per second, seconds are wall-clock unless named
//! `cpu_seconds`; CPU percent is of one core (100% = one core busy for the whole run).
//!
//! A side's `bandwidth_mb_s` is the CoPro paper's compaction bandwidth: the input bytes of the
//! side's shares over the wall seconds of those shares (for a worker, from sending the share
//! to having its checked result). With offload, the host side counts the host's shares of
//! offloaded compactions only; compactions too small to offload run whole on the host and are
//! in the run's `compactions` figures. In host only, the host side is every compaction.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice::compaction::remote::SideTotals;
use sluice::{Error, Result};

use super::pin::CpuPlan;
use super::{Configuration, CoproConfig, Separation, Sizing};

/// One side's compaction work and CPU in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SideReport {
    /// `host`, `worker1`, `worker2`, ...
    pub side: String,
    /// A worker's address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The core the side was pinned to, if any.
    pub cpu: Option<usize>,
    /// Shares (host only: compactions) run.
    pub shares: u64,
    /// Input bytes of those shares.
    pub input_bytes: u64,
    /// Wall seconds of those shares.
    pub seconds: f64,
    /// `input_bytes / seconds`, MB/s.
    pub bandwidth_mb_s: f64,
    /// CPU seconds the side spent on its shares (as the side reported them).
    pub cpu_seconds: f64,
    /// Compaction MB per CPU second of the shares (the CoPro paper's MB per CPU).
    pub mb_per_cpu_second: Option<f64>,
    /// CPU seconds of the side's whole process during the run (the host's includes the
    /// writers and flushes); `None` without `/proc`.
    pub process_cpu_seconds: Option<f64>,
    /// `process_cpu_seconds` over the run's wall seconds, percent of one core.
    pub process_cpu_percent: Option<f64>,
    /// Shares per executor that ran them.
    pub modes: BTreeMap<String, u64>,
}

impl SideReport {
    /// A side from the engine's offload totals.
    pub fn from_totals(side: &str, address: Option<String>, t: &SideTotals) -> SideReport {
        SideReport {
            side: side.into(),
            address,
            shares: t.shares,
            input_bytes: t.input_bytes,
            seconds: t.seconds,
            cpu_seconds: t.cpu_seconds,
            modes: t.modes.clone(),
            ..SideReport::default()
        }
    }

    /// Fills in the derived figures: bandwidth, MB per CPU second, the process's CPU over a
    /// run of `run_seconds`, and the pinned core.
    pub fn finish(&mut self, process_cpu: Option<f64>, run_seconds: f64, cpu: Option<usize>) {
        self.cpu = cpu;
        self.bandwidth_mb_s = ratio(self.input_bytes as f64 / 1e6, self.seconds).unwrap_or(0.0);
        self.mb_per_cpu_second = ratio(self.input_bytes as f64 / 1e6, self.cpu_seconds);
        self.process_cpu_seconds = process_cpu;
        self.process_cpu_percent = process_cpu.and_then(|c| ratio(c * 100.0, run_seconds));
    }
}

/// `a / b` when `b` is positive and the result finite.
pub(crate) fn ratio(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b).filter(|r| r.is_finite())
}

/// One workload, value size and configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// `fillrandom` or `ycsb-a`.
    pub workload: String,
    /// Values inline or in blob files.
    pub separation: Separation,
    /// Bytes per value.
    pub value_size: usize,
    pub configuration: Configuration,
    /// The configuration's name in tables.
    pub label: String,
    /// Keys written (fillrandom) or loaded (YCSB).
    pub entries: u64,
    /// Operations (YCSB: load and run phases).
    pub ops: u64,
    /// Wall seconds from the first write to the end of the background work.
    pub seconds: f64,
    pub ops_per_sec: f64,
    /// Key and value bytes written per second, MB/s.
    pub mb_per_sec: f64,
    /// Key and value bytes the database accepted.
    pub user_bytes: u64,
    /// Table bytes written (flushes and compactions, every side) per user byte.
    pub write_amp: Option<f64>,
    /// Compactions (offloaded or not), their input and output bytes and bandwidth.
    pub compactions: u64,
    pub compaction_input_bytes: u64,
    pub compaction_output_bytes: u64,
    pub compaction_bandwidth_mb_s: f64,
    /// Compactions shared with workers.
    pub offloaded_jobs: u64,
    /// Worker shares re-run on the host after a failure.
    pub retries: u64,
    /// Dynamic-split chunks a worker held that the host also ran, out of other work, and of
    /// those, how many the host's copy finished first.
    pub races: u64,
    pub races_won_by_host: u64,
    /// The host decision component's choices (CoPro+, dynamic split).
    pub host_pipelined_decisions: u64,
    pub host_sequential_decisions: u64,
    pub host: SideReport,
    /// One per worker; empty in host only.
    pub workers: Vec<SideReport>,
    /// Throughput of every repetition, in the order they ran (the report is the median's).
    pub runs_ops_per_sec: Vec<f64>,
}

impl RunReport {
    /// The workers taken together: summed bytes, seconds and CPU, so the bandwidth is the mean
    /// bandwidth of one worker; `None` in host only.
    pub fn worker_totals(&self) -> Option<SideReport> {
        if self.workers.is_empty() {
            return None;
        }
        let sum = |f: fn(&SideReport) -> f64| self.workers.iter().map(f).sum::<f64>();
        let sum_opt =
            |f: fn(&SideReport) -> Option<f64>| self.workers.iter().map(f).sum::<Option<f64>>();
        let mut modes = BTreeMap::new();
        for (mode, n) in self.workers.iter().flat_map(|w| &w.modes) {
            *modes.entry(mode.clone()).or_insert(0) += n;
        }
        let mut total = SideReport {
            side: "workers".into(),
            shares: self.workers.iter().map(|w| w.shares).sum(),
            input_bytes: self.workers.iter().map(|w| w.input_bytes).sum(),
            seconds: sum(|w| w.seconds),
            cpu_seconds: sum(|w| w.cpu_seconds),
            modes,
            ..SideReport::default()
        };
        total.finish(sum_opt(|w| w.process_cpu_seconds), self.seconds, None);
        Some(total)
    }
}

/// The median of `runs` (at least one) by throughput; for an even count the lower middle, so
/// every figure comes from one real run. Its `runs_ops_per_sec` lists every run.
pub fn median(runs: Vec<RunReport>) -> Result<RunReport> {
    let (mut median, all) = median_by(runs, |r| r.ops_per_sec)
        .ok_or_else(|| Error::InvalidArgument("a data point needs at least one run".into()))?;
    median.runs_ops_per_sec = all;
    Ok(median)
}

/// The run whose `key` is the median (the lower middle for an even count, so it is one real
/// run) and every run's `key` in the given order; `None` without runs.
pub(crate) fn median_by<T>(runs: Vec<T>, key: impl Fn(&T) -> f64) -> Option<(T, Vec<f64>)> {
    let all: Vec<f64> = runs.iter().map(&key).collect();
    let mut sorted = runs;
    sorted.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let median = sorted.into_iter().nth(all.len().checked_sub(1)? / 2)?;
    Some((median, all))
}

/// One configuration against the baselines at the same workload and value size, as document
/// 004's Table 5 sets CoPro and CoPro+ against Co-KV. A ratio is `None` when a figure is
/// missing or zero.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub workload: String,
    pub separation: Separation,
    pub value_size: usize,
    pub configuration: Configuration,
    /// Throughput over host only's.
    pub throughput_vs_host_only: Option<f64>,
    /// Write amplification over host only's (the CoPro paper: offload adds at most 5%).
    pub write_amp_vs_host_only: Option<f64>,
    /// Host compaction bandwidth over Co-KV's (1 + Table 5's G_B on the host).
    pub host_bandwidth_vs_co_kv: Option<f64>,
    /// Worker compaction bandwidth over Co-KV's (1 + G_B on the device).
    pub worker_bandwidth_vs_co_kv: Option<f64>,
    /// Host process CPU use over Co-KV's (1 + G_C on the host).
    pub host_cpu_vs_co_kv: Option<f64>,
    /// Worker process CPU use over Co-KV's (1 + G_C on the device).
    pub worker_cpu_vs_co_kv: Option<f64>,
    /// Separated runs only: throughput over the same configuration's with values inline.
    pub throughput_vs_inline: Option<f64>,
    /// Separated runs only: write amplification over the inline run's.
    pub write_amp_vs_inline: Option<f64>,
}

/// The parameters of the run, so `copro.json` stands alone.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Key and value bytes each run writes.
    pub data_bytes: u64,
    pub key_size: usize,
    pub value_sizes: Vec<usize>,
    pub workloads: Vec<String>,
    pub configurations: Vec<Configuration>,
    pub separations: Vec<Separation>,
    /// The smallest value separated in blob runs.
    pub min_blob_size: usize,
    /// Workers of an offloaded run.
    pub workers: usize,
    /// The workers' CPU slowdown.
    pub throttle: f64,
    pub compression: String,
    pub seed: u64,
    /// Runs per data point (the median is reported).
    pub repeat: usize,
    /// Engine sizes of every run.
    pub sizing: Sizing,
    /// The usable CPUs and each side's core.
    pub cpus: CpuPlan,
    /// Some worker shares a core with the host or another worker.
    pub shared_cores: bool,
}

impl Settings {
    pub fn new(config: &CoproConfig, plan: &CpuPlan) -> Settings {
        Settings {
            data_bytes: config.data_bytes,
            key_size: config.key_size,
            value_sizes: config.value_sizes.clone(),
            workloads: config.workloads.iter().map(|w| w.name().into()).collect(),
            configurations: config.configurations.clone(),
            separations: config.separations.clone(),
            min_blob_size: config.min_blob_size,
            workers: config.workers,
            throttle: config.throttle,
            compression: config.compression.name().into(),
            seed: config.seed,
            repeat: config.repeat,
            sizing: config.sizing(),
            cpus: plan.clone(),
            shared_cores: plan.shared(),
        }
    }
}

/// Everything the experiment measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CoproReport {
    /// Always `copro`.
    pub experiment: String,
    /// The document reproduced (`004`).
    pub document: String,
    pub settings: Settings,
    /// In order: workload, separation, value size, configuration.
    pub runs: Vec<RunReport>,
    /// Every run against its baselines.
    pub summary: Vec<Comparison>,
    /// Wall seconds of the whole experiment.
    pub elapsed_seconds: f64,
}

impl CoproReport {
    /// The report of `runs`, with the comparisons computed.
    pub fn new(settings: Settings, runs: Vec<RunReport>, elapsed_seconds: f64) -> CoproReport {
        let mut report = CoproReport {
            experiment: "copro".into(),
            document: "004".into(),
            settings,
            runs,
            summary: Vec::new(),
            elapsed_seconds,
        };
        report.summary = report.runs.iter().map(|r| report.compare(r)).collect();
        report
    }

    /// The run of `configuration` at `workload`, `separation` and `value_size`.
    pub fn run(
        &self,
        (workload, separation): (&str, Separation),
        value_size: usize,
        configuration: Configuration,
    ) -> Option<&RunReport> {
        self.runs.iter().find(|r| {
            r.workload == workload
                && r.separation == separation
                && r.value_size == value_size
                && r.configuration == configuration
        })
    }

    /// The (workload, separation) pairs and the value sizes measured, in run order, each once.
    pub fn axes(&self) -> (Vec<(String, Separation)>, Vec<usize>) {
        let mut workloads: Vec<(String, Separation)> = Vec::new();
        let mut sizes: Vec<usize> = Vec::new();
        for r in &self.runs {
            let scenario = (r.workload.clone(), r.separation);
            if !workloads.contains(&scenario) {
                workloads.push(scenario);
            }
            if !sizes.contains(&r.value_size) {
                sizes.push(r.value_size);
            }
        }
        (workloads, sizes)
    }

    /// The comparison of the run `r`.
    pub fn comparison(&self, r: &RunReport) -> Option<&Comparison> {
        self.summary.iter().find(|c| {
            c.workload == r.workload
                && c.separation == r.separation
                && c.value_size == r.value_size
                && c.configuration == r.configuration
        })
    }

    fn compare(&self, r: &RunReport) -> Comparison {
        let scenario = (r.workload.as_str(), r.separation);
        let host_only = self.run(scenario, r.value_size, Configuration::HostOnly);
        let co_kv = self.run(scenario, r.value_size, Configuration::CoKv);
        let inline = match r.separation {
            Separation::Inline => None,
            Separation::Blobs => self.run(
                (&r.workload, Separation::Inline),
                r.value_size,
                r.configuration,
            ),
        };
        let worker = r.worker_totals();
        let co_kv_worker = co_kv.and_then(RunReport::worker_totals);
        let over = |a: Option<f64>, b: Option<f64>| ratio(a?, b?);
        Comparison {
            workload: r.workload.clone(),
            separation: r.separation,
            value_size: r.value_size,
            configuration: r.configuration,
            throughput_vs_inline: over(Some(r.ops_per_sec), inline.map(|i| i.ops_per_sec)),
            write_amp_vs_inline: over(r.write_amp, inline.and_then(|i| i.write_amp)),
            throughput_vs_host_only: over(Some(r.ops_per_sec), host_only.map(|h| h.ops_per_sec)),
            write_amp_vs_host_only: over(r.write_amp, host_only.and_then(|h| h.write_amp)),
            host_bandwidth_vs_co_kv: over(
                Some(r.host.bandwidth_mb_s),
                co_kv.map(|c| c.host.bandwidth_mb_s),
            ),
            worker_bandwidth_vs_co_kv: over(
                worker.as_ref().map(|w| w.bandwidth_mb_s),
                co_kv_worker.as_ref().map(|w| w.bandwidth_mb_s),
            ),
            host_cpu_vs_co_kv: over(
                r.host.process_cpu_percent,
                co_kv.and_then(|c| c.host.process_cpu_percent),
            ),
            worker_cpu_vs_co_kv: over(
                worker.and_then(|w| w.process_cpu_percent),
                co_kv_worker.and_then(|w| w.process_cpu_percent),
            ),
        }
    }

    /// Pretty-printed JSON (plain numbers and strings cannot fail to serialize; a non-finite
    /// float becomes `null`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}
