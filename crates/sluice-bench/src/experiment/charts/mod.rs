//! Charts of the PCP experiment, as PNG and SVG, drawn with plotters from a [`PcpReport`].
//!
//! Text is rendered with DejaVu Sans compiled into the binary (the `dejavu` crate) and
//! registered with plotters' `ab_glyph` renderer on first use, so charts come out the same on a
//! machine without any font installed. (Without a registered font plotters fails with
//! `FontUnavailable` and leaves a blank image.) The SVG files name the font family and leave
//! rendering to the viewer.
//!
//! | file                              | content                                             |
//! |-----------------------------------|-----------------------------------------------------|
//! | `fig8_breakdown.{png,svg}`        | stacked bars: SCP's S1..S7 share per value size     |
//! | `fig10_bandwidth_vs_size.{png,svg}` | lines: bandwidth and speedup over SCP vs data set |
//! | `fig11_subtask_size.{png,svg}`    | lines: PCP and SCP bandwidth vs sub-task size       |
//! | `fig12_threads_dirs.{png,svg}`    | lines: C-PPCP vs threads, S-PPCP vs directories     |

mod bars;
mod figures;
mod lines;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use sluice::{Error, Result};

use crate::experiment::results::PcpReport;

/// The font family every chart asks for; [`register_font`] maps it to DejaVu Sans.
pub(crate) const FONT: &str = "sans-serif";

/// Registers DejaVu Sans (regular and bold) as [`FONT`], once per process.
fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            register_font_bytes(FontStyle::Normal, dejavu::sans::regular())?;
            register_font_bytes(FontStyle::Bold, dejavu::sans::bold())
        })
        .clone()
        .map_err(Error::InvalidArgument)
}

fn register_font_bytes(style: FontStyle, bytes: &'static [u8]) -> std::result::Result<(), String> {
    plotters::style::register_font(FONT, style, bytes).map_err(|_| {
        format!(
            "the embedded DejaVu Sans ({}) is not a valid font",
            style.as_str()
        )
    })
}

/// A chart that can be drawn on any plotters backend.
pub(crate) trait Chart {
    /// File name without extension.
    fn stem(&self) -> &'static str;
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws the chart on `root`, which is already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

/// Drawing errors carry only their message: they are reported, never matched on.
pub(crate) type DrawResult = std::result::Result<(), String>;

/// Turns a plotters error into its message.
pub(crate) fn msg<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

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

/// Renders one chart to `dir/<stem>.png` and `dir/<stem>.svg`.
fn render(chart: &impl Chart, dir: &Path) -> Result<[PathBuf; 2]> {
    let png = dir.join(format!("{}.png", chart.stem()));
    let svg = dir.join(format!("{}.svg", chart.stem()));
    let failed = |path: &Path, e: String| Error::io(path, std::io::Error::other(e));
    {
        let root = BitMapBackend::new(&png, chart.size()).into_drawing_area();
        draw_on(chart, &root).map_err(|e| failed(&png, e))?;
    }
    {
        let root = SVGBackend::new(&svg, chart.size()).into_drawing_area();
        draw_on(chart, &root).map_err(|e| failed(&svg, e))?;
    }
    Ok([png, svg])
}

fn draw_on<DB: DrawingBackend>(chart: &impl Chart, root: &DrawingArea<DB, Shift>) -> DrawResult {
    root.fill(&WHITE).map_err(msg)?;
    chart.draw(root)?;
    // Writes the file; errors surface here rather than being lost in a drop.
    root.present().map_err(msg)
}

/// A stable colour per executor, so an executor looks the same in every chart.
pub(crate) fn executor_color(executor: &str) -> RGBColor {
    match executor {
        "sequential" => RGBColor(80, 80, 80),
        "pipelined" => RGBColor(31, 119, 180),
        "parallel" => RGBColor(214, 39, 40),
        "streaming" => RGBColor(44, 160, 44),
        _ => RGBColor(148, 103, 189),
    }
}
