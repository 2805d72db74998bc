//! The human rendering of a [`PcpReport`]: one block per figure and the summary, plain text for
//! a terminal or a log. MB is 10^6 bytes; sizes of sub-tasks are binary (KiB, MiB).

use std::fmt::Write as _;

use crate::results::{Figure, PcpReport};

/// The whole report as text, ending with a newline.
pub fn render(report: &PcpReport) -> String {
    let s = &report.settings;
    let mut out = format!(
        "PCP experiment (the PCP paper): up to {} entries, {}-byte keys, {}-byte values, {}, \
         {} I/O, {} CPUs, {} run(s) per point (median), {:.1} s in all\n",
        s.num,
        s.key_size,
        s.value_size,
        s.compression,
        if s.direct_io { "direct" } else { "buffered" },
        s.cpus,
        s.repeat,
        report.elapsed_seconds
    );
    for fig in &report.figures {
        out.push('\n');
        if fig.id == "fig8" {
            breakdown(fig, &mut out);
        } else {
            lines(fig, &mut out);
        }
    }
    out.push('\n');
    summary(report, &mut out);
    if s.repeat == 1 {
        out.push_str(
            "\nOne run per point: on a shared machine single runs vary by tens of percent; \
             --repeat K reports the median of K.\n",
        );
    }
    out
}

/// `64 KiB`, `4 MiB`, `100 B`: exact binary sizes as the sweeps use them.
pub fn binary_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// The x value as the figure's axis shows it.
pub fn x_text(fig: &Figure, x: u64) -> String {
    match fig.id.as_str() {
        "fig8" => format!("{x} B"),
        "fig11" => binary_size(x),
        _ => x.to_string(),
    }
}

fn breakdown(fig: &Figure, out: &mut String) {
    let _ = writeln!(out, "Fig. 8  {} (share of the S1..S7 step time)", fig.title);
    let steps = sluice::metrics::StageSeconds::default().entries();
    let _ = write!(
        out,
        "{:>8} {:>9} {:>5} {:>8} {:>8}",
        "value", "entries", "runs", "MB in", "MB/s"
    );
    for (i, (name, _)) in steps.iter().enumerate() {
        let _ = write!(out, " {:>9}", format!("S{} {}", i + 1, short(name)));
    }
    out.push('\n');
    for s in &fig.series {
        for p in &s.points {
            let run = &p.measurement.median;
            let _ = write!(
                out,
                "{:>8} {:>9} {:>5} {:>8.1} {:>8.1}",
                x_text(fig, p.x),
                p.entries,
                p.l0_files,
                run.input_bytes as f64 / 1e6,
                run.bandwidth_mb_s
            );
            let total = run.stage_profile.total();
            for (_, secs) in run.stage_profile.entries() {
                let pct = if total > 0.0 {
                    secs / total * 100.0
                } else {
                    0.0
                };
                let _ = write!(out, " {pct:>8.1}%");
            }
            out.push('\n');
        }
    }
}

/// Step names short enough for a column.
fn short(step: &str) -> &str {
    match step {
        "checksum" => "crc",
        "decompress" => "decomp",
        "compress" => "comp",
        "rechecksum" => "re-crc",
        other => other,
    }
}

/// A figure of lines: one row per x, one column per series (bandwidth in MB/s).
fn lines(fig: &Figure, out: &mut String) {
    let number = fig.id.trim_start_matches("fig");
    let _ = writeln!(out, "Fig. {number}  {} (MB/s)", fig.title);
    let xs = fig.xs();
    let x_head = fig.x_label.split(" (").next().unwrap_or("x");
    let x_width = xs
        .iter()
        .map(|&x| x_text(fig, x).len())
        .chain([x_head.len()])
        .max()
        .unwrap_or(8);
    let _ = write!(out, "{x_head:>x_width$}");
    for s in &fig.series {
        let _ = write!(out, "  {:>w$}", s.label, w = s.label.len().max(8));
    }
    out.push('\n');
    for x in xs {
        let _ = write!(out, "{:>x_width$}", x_text(fig, x));
        for s in &fig.series {
            let w = s.label.len().max(8);
            match s.points.iter().find(|p| p.x == x) {
                Some(p) => {
                    let _ = write!(out, "  {:>w$.1}", p.bandwidth_mb_s());
                }
                None => {
                    let _ = write!(out, "  {:>w$}", "-");
                }
            }
        }
        out.push('\n');
    }
}

fn summary(report: &PcpReport, out: &mut String) {
    let Some(first) = report.summary.first() else {
        let _ = writeln!(out, "Summary: no data");
        return;
    };
    let _ = writeln!(
        out,
        "Summary: every executor on the largest data set ({} entries, {:.1} MB of L0 input)",
        first.entries,
        first.input_bytes as f64 / 1e6
    );
    let width = report
        .summary
        .iter()
        .map(|r| r.label.len())
        .max()
        .unwrap_or(8);
    let _ = writeln!(
        out,
        "{:<width$}  {:>8}  {:>7}  {:>8}  {:>8}  busiest stage (busy share of wall time)",
        "executor", "MB/s", "vs SCP", "seconds", "CPU s"
    );
    for r in &report.summary {
        let busiest = match (&r.busiest_stage, r.busiest_stage_share) {
            (Some(stage), Some(share)) => format!("{stage} {:.0}%", share * 100.0),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<width$}  {:>8.1}  {:>6.2}x  {:>8.3}  {:>8.3}  {busiest}",
            r.label, r.bandwidth_mb_s, r.ratio_to_scp, r.seconds, r.cpu_seconds
        );
    }
    if let Some(m) = &report.machine_limit {
        let _ = writeln!(
            out,
            "Machine limit: {} CPUs x {:.1} MB/s (SCP's compute steps S2..S6 alone) = {:.1} MB/s; \
             best, {}, {:.1} MB/s = {:.0}% of it; disk sequential write (synced) {:.1} MB/s",
            m.cpus,
            m.one_core_compute_mb_s,
            m.compute_limit_mb_s,
            m.best_executor,
            m.best_mb_s,
            m.share_of_compute_limit * 100.0,
            m.disk_write_mb_s
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine_limit::machine_limit;
    use crate::results::tests::series;
    use crate::results::{Settings, summarize};
    use sluice::options::CompactionMode;

    fn report() -> PcpReport {
        let fig10 = Figure {
            id: "fig10".into(),
            title: "Compaction bandwidth vs data set size".into(),
            x_label: "data set (entries)".into(),
            series: vec![
                series(CompactionMode::Sequential, &[(250, 100.0), (500, 110.0)]),
                series(CompactionMode::Pipelined, &[(250, 150.0), (500, 165.0)]),
            ],
        };
        let fig8 = Figure {
            id: "fig8".into(),
            title: "SCP step breakdown vs value size".into(),
            x_label: "value size (bytes)".into(),
            series: vec![series(CompactionMode::Sequential, &[(64, 90.0)])],
        };
        let fig11 = Figure {
            id: "fig11".into(),
            title: "sub-tasks".into(),
            x_label: "sub-task size (bytes of input)".into(),
            series: vec![series(
                CompactionMode::Pipelined,
                &[(64 << 10, 120.0), (4 << 20, 130.0)],
            )],
        };
        PcpReport {
            experiment: "pcp".into(),
            document: "000".into(),
            settings: Settings {
                num: 500,
                key_size: 16,
                value_size: 100,
                compression: "lz4".into(),
                seed: 1,
                repeat: 1,
                direct_io: false,
                block_size: 4096,
                target_file_size: 2 << 20,
                sub_task_bytes: 512 << 10,
                compute_threads: 2,
                executors: vec!["sequential".into(), "pipelined".into()],
                cpus: 2,
            },
            summary: summarize(&fig10),
            machine_limit: machine_limit(&fig10, &summarize(&fig10), 2, 250.0),
            figures: vec![fig8, fig10, fig11],
            elapsed_seconds: 3.0,
        }
    }

    #[test]
    fn table_has_every_figure_and_the_ratios() {
        let text = render(&report());
        assert!(text.contains("Fig. 8  SCP step breakdown"), "{text}");
        assert!(text.contains("S4 merge"), "{text}");
        // The stage shares of the test point: read 10%, merge 30%, compress 40%, write 20%.
        assert!(text.contains("10.0%"), "{text}");
        assert!(text.contains("40.0%"), "{text}");
        assert!(text.contains("Fig. 10  Compaction bandwidth"), "{text}");
        // SCP's test point: 10 MB over 0.7 s of compute steps, on 2 CPUs; PCP at 165 MB/s.
        assert!(
            text.contains("Machine limit: 2 CPUs x 14.3 MB/s") && text.contains("= 28.6 MB/s"),
            "{text}"
        );
        assert!(
            text.contains("disk sequential write (synced) 250.0 MB/s"),
            "{text}"
        );
        assert!(text.contains("165.0"), "{text}");
        assert!(text.contains("64 KiB") && text.contains("4 MiB"), "{text}");
        assert!(
            text.contains("PCP (pipelined)      165.0    1.50x"),
            "{text}"
        );
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn sizes_print_exactly() {
        assert_eq!(binary_size(512 << 10), "512 KiB");
        assert_eq!(binary_size(1 << 20), "1 MiB");
        assert_eq!(binary_size(1000), "1000 B");
        assert_eq!(binary_size(1536 << 10), "1536 KiB");
    }
}
