//! Charts of the PCP experiment, as PNG and SVG, drawn from a [`PcpReport`] with the chart
//! kinds of [`sluice_bench::charts`] (which also registers the font).
//!
//! | file                              | content                                             |
//! |-----------------------------------|-----------------------------------------------------|
//! | `fig8_breakdown.{png,svg}`        | stacked bars: SCP's S1..S7 share per value size     |
//! | `fig10_bandwidth_vs_size.{png,svg}` | lines: bandwidth and speedup over SCP vs data set |
//! | `fig11_subtask_size.{png,svg}`    | lines: PCP and SCP bandwidth vs sub-task size       |
//! | `fig12_threads_dirs.{png,svg}`    | lines: C-PPCP vs threads, S-PPCP vs directories     |

mod figures;

use std::path::{Path, PathBuf};

use sluice::Result;
use sluice_bench::charts::{register_font, render};

use crate::results::PcpReport;

/// Writes every chart of `report` into `dir` (which must exist), as PNG and SVG. Returns the
/// paths written.
pub fn write_charts(report: &PcpReport, dir: &Path) -> Result<Vec<PathBuf>> {
    register_font()?;
    let mut written = Vec::new();
    for chart in figures::charts(report) {
        written.extend(render(&chart, dir)?);
    }
    Ok(written)
}
