//! The human rendering of a [`ScaleOutReport`]: what was measured, the calibration, the
//! measured points against the model, and the predictions. MB is 10^6 bytes.

use std::fmt::Write as _;

use super::ScaleOutReport;
use super::model::{Calibration, Prediction};

/// The whole report as text, ending with a newline.
pub fn render(report: &ScaleOutReport) -> String {
    let h = &report.host_only;
    let mut out = format!(
        "Scale-out experiment (issue 37, item 5): {} keys of {}+{} B, tables in {}, {} CPUs; \
         {:.1} s in all\n\nmeasured: {} input tables, {:.1} MB; the host alone {:.2} s \
         ({:.1} MB/s)\n",
        report.num,
        report.key_size,
        report.value_size,
        report.object_store,
        report.cores,
        report.elapsed_seconds,
        h.input_tables,
        h.input_bytes as f64 / 1e6,
        h.seconds,
        h.mb_per_second(),
    );
    calibration(&report.calibration, &mut out);
    out.push_str(
        "\nmeasured against the model run as this machine (workers and host share its cores; \
         1 worker is the calibration run)\n",
    );
    let _ = writeln!(
        out,
        "{:>7} {:>10} {:>11} {:>7} {:>9} {:>11}",
        "workers", "measured s", "predicted s", "error", "MB/s", "vs host"
    );
    for c in &report.checked {
        let _ = writeln!(
            out,
            "{:>7} {:>10.2} {:>11.2} {:>+6.1}% {:>9.1} {:>10.2}x",
            c.measured.workers,
            c.measured.seconds,
            c.predicted.seconds,
            c.error * 100.0,
            c.measured.mb_per_second(),
            h.seconds / c.measured.seconds.max(f64::MIN_POSITIVE),
        );
    }
    let job = &report.predicted_job;
    let _ = writeln!(
        out,
        "\npredicted: a compaction of {:.1} GB in {} tables, {} runs; each worker on a machine \
         of its own, bucket limits {:.0} GET and {:.0} PUT/s, {:.1} Gb/s per worker; a host \
         of {} cores checking that many shares at once | of {} cores",
        job.input_bytes as f64 / 1e9,
        job.tables,
        job.runs,
        report.cluster.get_limit,
        report.cluster.put_limit,
        report.cluster.nic_bytes_per_second * 8.0 / 1e9,
        report.cluster.check_threads,
        report.parallel_checks.check_threads,
    );
    let _ = writeln!(
        out,
        "{:>7} {:>9} {:>8} {:>10} {:>14} | {:>9} {:>8} {:>10} {:>14}",
        "workers",
        "seconds",
        "MB/s",
        "efficiency",
        "bound",
        "seconds",
        "MB/s",
        "efficiency",
        "bound"
    );
    for (a, b) in report
        .predicted
        .iter()
        .zip(&report.predicted_parallel_checks)
    {
        let _ = writeln!(out, "{:>7} {} | {}", a.workers, columns(a), columns(b));
    }
    out
}

fn columns(p: &Prediction) -> String {
    format!(
        "{:>9.3} {:>8.1} {:>10.2} {:>14}",
        p.seconds,
        p.mb_per_second,
        p.efficiency,
        p.bound.name()
    )
}

fn calibration(c: &Calibration, out: &mut String) {
    let per_mb = |per_byte: f64| per_byte * 1e6 * 1e3;
    let _ = writeln!(
        out,
        "calibration: a table open {:.1} requests of {:.2} ms; per share a worker spends \
         {:.3} s CPU and {:.3} s waiting, the host {:.3} s checking, and per input MB {:.2} ms \
         CPU, {:.2} ms waiting, {:.2} ms checking; install {:.2} ms per \
         table; per GB {:.0} read (besides opens) and {:.0} write requests, {:.2} bytes moved \
         per byte; beside one worker the rest of the machine spent {:.2} ms CPU per input MB",
        c.requests_per_open,
        c.request_seconds * 1e3,
        c.cpu_fixed_seconds,
        c.wait_fixed_seconds,
        c.check_fixed_seconds,
        per_mb(c.cpu_seconds_per_byte),
        per_mb(c.wait_seconds_per_byte),
        per_mb(c.check_seconds_per_byte),
        c.install_seconds_per_table * 1e3,
        c.reads_per_byte * 1e9,
        c.writes_per_byte * 1e9,
        c.bytes_moved_per_byte,
        per_mb(c.machine_seconds_per_byte),
    );
}
