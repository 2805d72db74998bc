//! The human rendering of a [`ScaleReport`]: the fills, the compactions of the inverted LSM,
//! and the growth from each size to the next. MB is 10^6 bytes; a size's `M` is 2^20 keys,
//! as the command line reads `--sizes`.

use std::fmt::Write as _;

use super::report::{CompactionRun, Growth, ScaleReport, SizeReport};
use crate::table::binary_size;

/// The whole report as text, ending with a newline.
pub fn render(report: &ScaleReport) -> String {
    let s = &report.settings;
    let mut out = format!(
        "Scale experiment (issue 21, item 7): {}+{} B entries, {}, {} I/O, memtable {}, output \
         files {}, {} background compactions during fills, {} CPUs; {} run(s) per point \
         (median), {:.1} s in all\n",
        s.key_size,
        s.value_size,
        s.compression,
        if s.direct_io { "direct" } else { "buffered" },
        binary_size(s.write_buffer_size as u64),
        binary_size(s.target_file_size),
        s.background_compactions,
        s.cpus,
        s.repeat,
        report.elapsed_seconds
    );
    if report.sizes.is_empty() {
        out.push_str("no data\n");
        return out;
    }
    out.push_str("\nfillrandom, automatic compactions on, until they are done\n");
    let _ = writeln!(
        out,
        "{:>6} {:>8} {:>8} {:>7} {:>8} {:>10} {:>6} {:>5} {:>7} {:>11} {:>7}",
        "keys",
        "seconds",
        "write s",
        "wait s",
        "CPU s",
        "ops/s",
        "MB/s",
        "W-amp",
        "flushes",
        "compactions",
        "stall s"
    );
    for r in &report.sizes {
        fill_row(r, &mut out);
    }
    let threads = report.sizes.first().map_or(0, |r| r.parallel.threads);
    // The group names start at the `|` before their columns: 26 characters of size columns,
    // then 31 per executor.
    let parallel = format!("| parallel, {threads} threads");
    let _ = write!(
        out,
        "\nfull manual compaction of an inverted LSM (every table in L0)\n{:26}{:<31}{parallel}\n\
         {:>6} {:>8} {:>9} |",
        "", "| sequential", "keys", "L0 files", "input MB",
    );
    for _ in 0..2 {
        let _ = write!(
            out,
            " {:>7} {:>6} {:>6} {:>6} |",
            "seconds", "CPU s", "out MB", "MB/s"
        );
    }
    out.push_str(" speedup\n");
    for r in &report.sizes {
        compaction_row(r, &mut out);
    }
    if !report.growth.is_empty() {
        out.push_str("\ngrowth from the previous size: k of cost ~ N^k (1.00 is linear)\n");
        let _ = writeln!(
            out,
            "{:>13} {:>7} {:>8} {:>7} {:>8} {:>7} {:>8}",
            "keys", "fill s", "fill CPU", "seq s", "seq CPU", "par s", "par CPU"
        );
        for g in &report.growth {
            growth_row(g, &mut out);
        }
    }
    if s.repeat == 1 {
        out.push_str(
            "\nOne run per point: on a shared machine single runs vary by tens of percent; \
             --repeat K reports the median of K.\n",
        );
    }
    out
}

/// `1M`, `64M`, `20K`, `50000`: a size as `--sizes` would give it (binary suffixes).
pub fn keys_text(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}M", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}K", n >> 10),
        n => n.to_string(),
    }
}

/// `1,234,567`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn cpu_text(cpu: Option<f64>, width: usize) -> String {
    cpu.map_or_else(|| format!("{:>width$}", "-"), |c| format!("{c:>width$.2}"))
}

fn fill_row(r: &SizeReport, out: &mut String) {
    let f = &r.fill;
    let _ = writeln!(
        out,
        "{:>6} {:>8.2} {:>8.2} {:>7.2} {} {:>10} {:>6.1} {:>5} {:>7} {:>11} {:>7.2}",
        keys_text(r.entries),
        f.seconds,
        f.write_seconds,
        f.wait_seconds,
        cpu_text(f.cpu_seconds, 8),
        grouped(f.ops_per_sec.round() as u64),
        f.mb_per_sec,
        f.write_amp.map_or("-".into(), |w| format!("{w:.2}")),
        f.flushes,
        f.compactions,
        f.write_stall_seconds,
    );
}

fn compaction_row(r: &SizeReport, out: &mut String) {
    let _ = write!(
        out,
        "{:>6} {:>8} {:>9.1} |",
        keys_text(r.entries),
        r.l0.files,
        r.l0.bytes as f64 / 1e6
    );
    for c in [&r.sequential, &r.parallel] {
        executor_cells(c, out);
    }
    let _ = writeln!(
        out,
        " {}",
        r.parallel_speedup()
            .map_or("-".into(), |x| format!("{x:.2}x"))
    );
}

fn executor_cells(c: &CompactionRun, out: &mut String) {
    let _ = write!(
        out,
        " {:>7.2} {} {:>6.1} {:>6.1} |",
        c.seconds,
        cpu_text(c.cpu_seconds, 6),
        c.output_bytes as f64 / 1e6,
        c.bandwidth_mb_s
    );
}

fn growth_row(g: &Growth, out: &mut String) {
    let k = |k: Option<f64>, width: usize| {
        k.map_or_else(|| format!("{:>width$}", "-"), |k| format!("{k:>width$.2}"))
    };
    let _ = writeln!(
        out,
        "{:>13} {} {} {} {} {} {}",
        format!(
            "{} -> {}",
            keys_text(g.from_entries),
            keys_text(g.to_entries)
        ),
        k(g.fill_seconds, 7),
        k(g.fill_cpu_seconds, 8),
        k(g.sequential_seconds, 7),
        k(g.sequential_cpu_seconds, 8),
        k(g.parallel_seconds, 7),
        k(g.parallel_cpu_seconds, 8),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_read_as_given() {
        assert_eq!(keys_text(1 << 20), "1M");
        assert_eq!(keys_text(64 << 20), "64M");
        assert_eq!(keys_text(20 << 10), "20K");
        assert_eq!(keys_text(50_000), "50000");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(313_172), "313,172");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
