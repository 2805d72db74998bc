//! The human rendering of an [`MstoreReport`]: a row per variant (throughput, write
//! amplification, the owners' bytes and skew, moves, read misses), then MStore against
//! MStore-basic. MB is 10^6 bytes, MiB 2^20.

use std::fmt::Write as _;

use super::report::{MstoreReport, VariantReport};

/// The whole report as text, ending with a newline.
pub fn render(report: &MstoreReport) -> String {
    let s = &report.settings;
    let mut out = format!(
        "MStore (the MStore paper, Fig. 3): {} owners x {} ranges at first, {} zipfian writes of \
         {}+{} B hot in owner 0's ranges, {} reference keys checked throughout, worker \
         throttle {}\n",
        s.workers,
        s.ranges / s.workers.max(1),
        s.num,
        s.key_size,
        s.value_size,
        s.reference_keys,
        s.throttle,
    );
    out.push_str(&cpus_text(report));
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<13} {:>10} {:>7} {:>6} {:>24} {:>6} {:>6} {:>6} {:>7} {:>7} {:>8}",
        "variant",
        "ops/s",
        "MB/s",
        "W-amp",
        "owner MiB",
        "skew",
        "moves",
        "splits",
        "relocs",
        "misses",
        "stall s"
    );
    for v in &report.variants {
        row(v, &mut out);
    }
    if report.variants.is_empty() {
        out.push_str("no data\n");
        return out;
    }
    out.push('\n');
    for v in &report.variants {
        let _ = writeln!(
            out,
            "{}: owner compaction MB {}, ranges' owners {:?}, {} retries",
            v.name,
            list(&v.owner_compaction_bytes, |b| format!(
                "{:.0}",
                b as f64 / 1e6
            )),
            v.range_owners,
            v.retries
        );
        if let Some(miss) = &v.first_miss {
            let _ = writeln!(out, "  first read miss: {miss}");
        }
    }
    if let Some(c) = &report.comparison {
        let x = |r: Option<f64>| r.map_or("-".into(), |r| format!("{r:.2}x"));
        let _ = writeln!(
            out,
            "\nMStore / MStore-basic: throughput {} (the MStore paper: 1.14x), write amplification \
             {}, skew {} -> {}",
            x(c.throughput_ratio),
            x(c.write_amp_ratio),
            skew_text(c.skew_basic),
            skew_text(c.skew_balanced),
        );
    }
    if s.repeat == 1 {
        out.push_str(
            "\nOne run per variant: on a shared machine single runs vary by tens of percent; \
             --repeat K reports the median of K.\n",
        );
    }
    out
}

fn row(v: &VariantReport, out: &mut String) {
    let mib = |b: &u64| format!("{:.1}", *b as f64 / f64::from(1 << 20));
    let _ = writeln!(
        out,
        "{:<13} {:>10.0} {:>7.2} {:>6} {:>24} {:>6} {:>6} {:>6} {:>7} {:>7} {:>8.2}",
        v.name,
        v.ops_per_sec,
        v.mb_per_sec,
        v.write_amp.map_or("-".into(), |w| format!("{w:.2}")),
        list(&v.owner_bytes, |b| mib(&b)),
        skew_text(v.skew),
        v.moves,
        v.splits,
        v.relocations,
        v.read_misses,
        v.write_stall_seconds,
    );
}

fn list(values: &[u64], text: impl Fn(u64) -> String) -> String {
    values
        .iter()
        .map(|&v| text(v))
        .collect::<Vec<_>>()
        .join(" / ")
}

fn skew_text(skew: Option<f64>) -> String {
    skew.map_or("inf".into(), |s| format!("{s:.2}"))
}

fn cpus_text(report: &MstoreReport) -> String {
    let cpus = &report.settings.cpus;
    match cpus.host {
        Some(host) => {
            let workers: Vec<String> = cpus
                .workers
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let cpu = c.map_or("any".into(), |c| c.to_string());
                    format!("owner {i}'s worker on CPU {cpu}")
                })
                .collect();
            format!(
                "host on CPU {host}, {}{}",
                workers.join(", "),
                if cpus.shared() { " (shared)" } else { "" }
            )
        }
        None => "nothing pinned (fewer than two usable CPUs)".into(),
    }
}
