//! Charts of the MStore experiment, as PNG and SVG, drawn from an [`MstoreReport`] with the
//! shared charts of [`sluice_bench::charts`]. Owner `i` has the same colour in every chart.
//!
//! | file                                          | content                                     |
//! |-----------------------------------------------|---------------------------------------------|
//! | `mstore_owner_bytes_<variant>.{png,svg}`      | each owner's table bytes over time          |
//! | `mstore_compaction_<variant>.{png,svg}`       | each owner's worker's compaction bandwidth  |
//! | `mstore_throughput.{png,svg}`                 | write throughput of each variant (Fig. 3)   |

use std::path::{Path, PathBuf};

use plotters::prelude::SeriesLabelPosition;
use plotters::style::RGBColor;
use sluice::Result;
use sluice_bench::charts::columns::{Column, Columns};
use sluice_bench::charts::runs::seconds_text;
use sluice_bench::charts::xy::{Scale, XyChart, XyLine};
use sluice_bench::charts::{PALETTE, register_font, render, series_color, si_text};

use super::Variant;
use super::report::{MstoreReport, Sample, VariantReport};

/// Writes every chart of `report` into `dir` (which must exist), as PNG and SVG. Returns the
/// paths written.
pub fn write_charts(report: &MstoreReport, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut written = Vec::new();
    for v in &report.variants {
        let Some(variant) = Variant::ALL.into_iter().find(|x| x.name() == v.name) else {
            continue;
        };
        written.extend(render(&owner_bytes(report, v, variant), dir)?);
        written.extend(render(&compaction(report, v, variant), dir)?);
    }
    if !report.variants.is_empty() {
        written.extend(render(&throughput(report), dir)?);
    }
    Ok(written)
}

fn setup(report: &MstoreReport) -> String {
    let s = &report.settings;
    format!(
        "{} owners, {} ranges at first, {} zipfian writes of {} B values, throttle {}",
        s.workers, s.ranges, s.num, s.value_size, s.throttle
    )
}

/// One line per owner of `value(sample, owner)` over the samples' seconds.
fn owner_lines(v: &VariantReport, value: impl Fn(&Sample, usize) -> Option<f64>) -> Vec<XyLine> {
    let owners = v.owner_bytes.len();
    (0..owners)
        .map(|o| XyLine {
            label: format!("owner {o}"),
            color: series_color(o),
            points: v
                .samples
                .iter()
                .filter_map(|s| Some((s.seconds, value(s, o)?)))
                .collect(),
        })
        .collect()
}

fn owner_bytes(report: &MstoreReport, v: &VariantReport, variant: Variant) -> XyChart {
    XyChart {
        stem: match variant {
            Variant::Basic => "mstore_owner_bytes_basic",
            Variant::Balanced => "mstore_owner_bytes",
        },
        size: (1200, 650),
        caption: format!("Bytes per owner, {} ({})", v.name, setup(report)),
        x_label: "seconds since the zipfian writes began".into(),
        y_label: "table bytes the owner holds (MiB)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_format: seconds_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperLeft,
        lines: owner_lines(v, |s, o| {
            s.owner_bytes.get(o).map(|b| *b as f64 / f64::from(1 << 20))
        }),
    }
}

fn compaction(report: &MstoreReport, v: &VariantReport, variant: Variant) -> XyChart {
    XyChart {
        stem: match variant {
            Variant::Basic => "mstore_compaction_basic",
            Variant::Balanced => "mstore_compaction",
        },
        size: (1200, 650),
        caption: format!(
            "Compaction bandwidth per owner's worker, {} ({})",
            v.name,
            setup(report)
        ),
        x_label: "seconds since the zipfian writes began".into(),
        y_label: "compaction input per second (MB/s, 1 MB = 10^6 B)".into(),
        x_scale: Scale::Linear,
        y_scale: Scale::Linear,
        x_format: seconds_text,
        y_format: si_text,
        y_range: None,
        legend: SeriesLabelPosition::UpperRight,
        lines: owner_lines(v, |s, o| s.owner_compaction_mb_s.get(o).copied()),
    }
}

fn variant_color(name: &str) -> RGBColor {
    if name == Variant::Basic.name() {
        RGBColor(120, 120, 120)
    } else {
        PALETTE[0]
    }
}

fn throughput(report: &MstoreReport) -> Columns {
    let ratio = report
        .comparison
        .as_ref()
        .and_then(|c| c.throughput_ratio)
        .map_or(String::new(), |r| format!(": MStore {r:.2}x MStore-basic"));
    let s = &report.settings;
    Columns {
        stem: "mstore_throughput",
        size: (1000, 650),
        caption: format!(
            "Write throughput{ratio} ({} owners, {} writes, throttle {})",
            s.workers, s.num, s.throttle
        ),
        x_label: "variant".into(),
        y_label: "writes per second (ops/s)".into(),
        columns: report
            .variants
            .iter()
            .map(|v| Column {
                label: v.name.clone(),
                value: v.ops_per_sec,
                note: format!(
                    "{} ops/s, skew {}, {} moves, {} splits",
                    si_text(v.ops_per_sec),
                    v.skew.map_or("inf".into(), |s| format!("{s:.2}")),
                    v.moves,
                    v.splits
                ),
                color: variant_color(&v.name),
            })
            .collect(),
        legend: Vec::new(),
    }
}
