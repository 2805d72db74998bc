//! The human rendering of a [`CoproReport`]: one block per workload, separation and value size
//! with a row per configuration (throughput, write amplification, each side's compaction
//! bandwidth and CPU), then the comparisons with host only and Co-KV (the CoPro paper's Table 5
//! growth rates, as ratios), and each separated run against its inline twin. MB is 10^6 bytes;
//! CPU percent is of one core.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::Separation;
use super::report::{Comparison, CoproReport, RunReport};
use crate::table::binary_size;

/// The whole report as text, ending with a newline.
pub fn render(report: &CoproReport) -> String {
    let mut out = header(report);
    let (scenarios, sizes) = report.axes();
    for scenario in &scenarios {
        for &size in &sizes {
            let runs = runs_of(report, scenario, size);
            if let Some(first) = runs.first() {
                out.push('\n');
                let heading = format!(
                    "{}, {} values{} ({} keys)",
                    scenario.0,
                    binary_size(size as u64),
                    separation_text(report, scenario.1),
                    first.entries
                );
                block(&heading, &runs, &mut out);
            }
        }
    }
    if report.runs.is_empty() {
        out.push_str("\nno data\n");
        return out;
    }
    out.push('\n');
    comparisons(report, &scenarios, &sizes, &mut out);
    if report
        .summary
        .iter()
        .any(|c| c.throughput_vs_inline.is_some())
    {
        out.push('\n');
        separated_against_inline(report, &sizes, &mut out);
    }
    if report.settings.repeat == 1 {
        out.push_str(
            "\nOne run per point: on a shared machine single runs vary by tens of percent; \
             --repeat K reports the median of K.\n",
        );
    }
    out
}

fn header(report: &CoproReport) -> String {
    let s = &report.settings;
    let cores = match s.cpus.host {
        Some(host) => {
            let workers: Vec<String> = s
                .cpus
                .workers
                .iter()
                .enumerate()
                .map(|(i, c)| format!("worker{} on CPU {}", i + 1, cpu_text(*c)))
                .collect();
            format!(
                "host on CPU {host}, {}{}",
                workers.join(", "),
                if s.shared_cores { " (shared)" } else { "" }
            )
        }
        None => "nothing pinned".into(),
    };
    format!(
        "CoPro experiment (the CoPro paper): {:.1} MB per run, {}-byte keys, {}, {} worker(s) at \
         throttle {}, {} of {} usable CPU(s); memtable {}, sub-task {}, offload from {}, \
         dynamic chunks from {}; {} run(s) per point (median), {:.1} s in all\n",
        s.data_bytes as f64 / 1e6,
        s.key_size,
        s.compression,
        s.workers,
        s.throttle,
        cores,
        s.cpus.allowed.len(),
        binary_size(s.sizing.write_buffer_size as u64),
        binary_size(s.sizing.sub_task_bytes),
        binary_size(s.sizing.min_offload_bytes),
        binary_size(s.sizing.min_chunk_bytes),
        s.repeat,
        report.elapsed_seconds
    )
}

fn cpu_text(cpu: Option<usize>) -> String {
    cpu.map_or("-".into(), |c| c.to_string())
}

/// `1.5`, `-` for a missing figure.
fn num(v: Option<f64>, decimals: usize) -> String {
    v.filter(|v| v.is_finite())
        .map_or("-".into(), |v| format!("{v:.decimals$}"))
}

/// `seq:3 pipe:1`: shares per executor, short names.
fn modes_text(modes: &BTreeMap<String, u64>) -> String {
    if modes.is_empty() {
        return "-".into();
    }
    modes
        .iter()
        .map(|(m, n)| {
            let short = match m.as_str() {
                "sequential" => "seq",
                "pipelined" => "pipe",
                "parallel" => "par",
                "streaming" => "stream",
                other => other,
            };
            format!("{short}:{n}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The runs of one (workload, separation) at one value size, in run order.
fn runs_of<'a>(
    report: &'a CoproReport,
    (workload, separation): &(String, Separation),
    size: usize,
) -> Vec<&'a RunReport> {
    report
        .runs
        .iter()
        .filter(|r| &r.workload == workload && r.separation == *separation && r.value_size == size)
        .collect()
}

/// `, values from 4 KiB in blob files` for a separated run, nothing for an inline one.
fn separation_text(report: &CoproReport, separation: Separation) -> String {
    match separation {
        Separation::Inline => String::new(),
        Separation::Blobs => format!(
            ", values from {} in blob files",
            binary_size(report.settings.min_blob_size as u64)
        ),
    }
}

/// `fillrandom`, or `fillrandom+blobs` when separated: the workload column of the comparisons.
fn scenario_name((workload, separation): &(String, Separation)) -> String {
    match separation {
        Separation::Inline => workload.clone(),
        Separation::Blobs => format!("{workload}+blobs"),
    }
}

fn block(heading: &str, runs: &[&RunReport], out: &mut String) {
    let _ = writeln!(out, "{heading}");
    let _ = writeln!(
        out,
        "{:<13} {:>9} {:>7} {:>6} {:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7}  executors host | workers",
        "configuration",
        "ops/s",
        "MB/s",
        "W-amp",
        "jobs",
        "host MB/s",
        "wkr MB/s",
        "host%",
        "wkr%",
        "host MB/c",
        "wkr MB/c",
        "retries"
    );
    for r in runs {
        let w = r.worker_totals();
        let jobs = if r.configuration.offloaded() {
            format!("{}/{}", r.offloaded_jobs, r.compactions)
        } else {
            r.compactions.to_string()
        };
        let _ = writeln!(
            out,
            "{:<13} {:>9.0} {:>7.2} {:>6} {:>7} {:>9.1} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7}  {} | {}",
            r.label,
            r.ops_per_sec,
            r.mb_per_sec,
            num(r.write_amp, 2),
            jobs,
            r.host.bandwidth_mb_s,
            num(w.as_ref().map(|w| w.bandwidth_mb_s), 1),
            num(r.host.process_cpu_percent, 0),
            num(w.as_ref().and_then(|w| w.process_cpu_percent), 0),
            num(r.host.mb_per_cpu_second, 1),
            num(w.as_ref().and_then(|w| w.mb_per_cpu_second), 1),
            r.retries,
            modes_text(&r.host.modes),
            w.map_or("-".into(), |w| modes_text(&w.modes)),
        );
    }
    let _ = writeln!(
        out,
        "(jobs: offloaded/all compactions; host%, wkr%: process CPU, % of one core; MB/c: \
         compaction MB per CPU second of the side's shares)"
    );
}

fn comparisons(
    report: &CoproReport,
    scenarios: &[(String, Separation)],
    sizes: &[usize],
    out: &mut String,
) {
    let _ = writeln!(
        out,
        "Against the baselines (ratios; the CoPro paper's Table 5 growth G is ratio - 1)"
    );
    let _ = writeln!(
        out,
        "{:<16} {:>8} {:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "workload",
        "value",
        "configuration",
        "ops/HO",
        "W-amp/HO",
        "hostBW/CK",
        "wkrBW/CK",
        "hostCPU/CK",
        "wkrCPU/CK"
    );
    for scenario in scenarios {
        for &size in sizes {
            let rows: Vec<(&RunReport, &Comparison)> = runs_of(report, scenario, size)
                .into_iter()
                .filter(|r| r.configuration.offloaded())
                .filter_map(|r| Some((r, report.comparison(r)?)))
                .collect();
            for (r, c) in rows {
                let _ = writeln!(
                    out,
                    "{:<16} {:>8} {:<13} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                    scenario_name(scenario),
                    binary_size(size as u64),
                    r.label,
                    x(c.throughput_vs_host_only),
                    x(c.write_amp_vs_host_only),
                    x(c.host_bandwidth_vs_co_kv),
                    x(c.worker_bandwidth_vs_co_kv),
                    x(c.host_cpu_vs_co_kv),
                    x(c.worker_cpu_vs_co_kv),
                );
            }
        }
    }
    let _ = writeln!(out, "(HO: host only; CK: Co-KV; CPU: process CPU use)");
}

/// `1.50x`, `-` for a missing ratio.
fn x(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.2}x"))
}

/// Every separated run against the same configuration with values inline: what moving the
/// values out of the merge bought, and which executors the host then chose.
fn separated_against_inline(report: &CoproReport, sizes: &[usize], out: &mut String) {
    let _ = writeln!(
        out,
        "Values in blob files against inline (from {}; ratios)",
        binary_size(report.settings.min_blob_size as u64)
    );
    let _ = writeln!(
        out,
        "{:<10} {:>8} {:<13} {:>9} {:>9}  executors host (blobs | inline)",
        "workload", "value", "configuration", "ops/inl", "W-amp/inl"
    );
    let (scenarios, _) = report.axes();
    for (workload, _) in scenarios.iter().filter(|s| s.1 == Separation::Blobs) {
        for &size in sizes {
            for r in runs_of(report, &(workload.clone(), Separation::Blobs), size) {
                let (Some(c), Some(inline)) = (
                    report.comparison(r),
                    report.run((workload, Separation::Inline), size, r.configuration),
                ) else {
                    continue;
                };
                let _ = writeln!(
                    out,
                    "{:<10} {:>8} {:<13} {:>9} {:>9}  {} | {}",
                    workload,
                    binary_size(size as u64),
                    r.label,
                    x(c.throughput_vs_inline),
                    x(c.write_amp_vs_inline),
                    modes_text(&r.host.modes),
                    modes_text(&inline.host.modes),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copro::tests::sample_report;

    #[test]
    fn table_has_every_run_and_ratio() {
        let text = render(&sample_report());
        for needle in [
            "CoPro experiment (the CoPro paper)",
            "fillrandom, 100 B values",
            "ycsb-a, 64 KiB values",
            "host only",
            "Co-KV",
            "CoPro+",
            "dynamic split",
            "Against the baselines",
            "seq:4 | seq:4",
            "host on CPU 0, worker1 on CPU 1",
        ] {
            assert!(text.contains(needle), "{needle:?} missing:\n{text}");
        }
        // CoPro's host bandwidth is twice Co-KV's in the sample.
        assert!(text.contains("2.00x"), "{text}");
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn missing_figures_print_as_dashes() {
        assert_eq!(num(None, 1), "-");
        assert_eq!(num(Some(f64::NAN), 1), "-");
        assert_eq!(num(Some(2.345), 2), "2.35");
        let modes = BTreeMap::from([("pipelined".to_string(), 2), ("sequential".to_string(), 1)]);
        assert_eq!(modes_text(&modes), "pipe:2 seq:1");
        assert_eq!(modes_text(&BTreeMap::new()), "-");
    }
}
