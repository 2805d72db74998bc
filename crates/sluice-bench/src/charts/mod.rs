//! Charts as PNG and SVG, drawn with plotters: the shared machinery (font, rendering, colours,
//! chart kinds), the charts of a `sluice bench` or `sluice ycsb` run ([`runs`]) and the peer
//! comparison of `benches/peers/run` ([`peers`]). The chart kinds are public: the experiments'
//! figures (crate `sluice-experiments`) are drawn with them.
//!
//! Text is rendered with DejaVu Sans compiled into the binary (the `dejavu` crate) and
//! registered with plotters' `ab_glyph` renderer on first use, so charts come out the same on a
//! machine without any font installed. (Without a registered font plotters fails with
//! `FontUnavailable` and leaves a blank image.) The SVG files name the font family and leave
//! rendering to the viewer.
//!
//! | kind                  | module      | what it draws                                       |
//! |-----------------------|-------------|-----------------------------------------------------|
//! | [`bars::Breakdown`]   | [`bars`]    | stacked bars of the S1..S7 shares, legend beside    |
//! | [`lines::LineChart`]  | [`lines`]   | panels of lines over categorical x ticks            |
//! | [`xy::XyChart`]       | [`xy`]      | lines over a numeric x axis, linear or log          |
//! | [`columns::Columns`]  | [`columns`] | one bar per label with its value written on top     |
//! | [`ratios::RatioBars`] | [`ratios`]  | grouped ratio bars around 1.0 on a log2 axis        |
//! | [`panels::BarPanels`] | [`panels`]  | a grid of bar panels, each with its own unit         |
//!
//! The bar and line kinds share one categorical x axis, [`slots`]: a slot per label, bars
//! centred in their slots and clear of the y axis whether there are one, two or many.
//!
//! Units: throughput and bandwidth are in decimal units everywhere a chart or a table of
//! `sluice bench` and `sluice ycsb` shows them: MB/s with 1 MB = 10^6 bytes (as the
//! engine's `bandwidth_mb_s` and the experiments' tables), and ops/s. No chart or table of
//! theirs shows MiB/s. Sizes given on the command line (`--write-buffer-size 4M`) are binary
//! (4 MiB); the byte counts reported back are in MB all the same.

pub mod bars;
pub mod columns;
pub mod lines;
pub mod panels;
pub mod peers;
pub mod ratios;
pub mod runs;
pub mod slots;
pub mod xy;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use sluice::{Error, Result};

pub use peers::write_peer_charts;
pub use runs::{write_bench_charts, write_ycsb_charts};

/// The font family every chart asks for; [`register_font`] maps it to DejaVu Sans.
pub const FONT: &str = "sans-serif";

/// Registers DejaVu Sans (regular and bold) as [`FONT`], once per process. Every function
/// that writes charts calls it first.
pub fn register_font() -> Result<()> {
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
pub trait Chart {
    /// File name without extension.
    fn stem(&self) -> &str;
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws the chart on `root`, which is already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult;
}

/// Drawing errors carry only their message: they are reported, never matched on.
pub type DrawResult = std::result::Result<(), String>;

/// The area below a chart's bold caption, where the chart itself is drawn.
pub fn under_caption<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    caption: &str,
) -> std::result::Result<DrawingArea<DB, Shift>, String> {
    root.titled(caption, (FONT, 22).into_font().style(FontStyle::Bold))
        .map_err(msg)
}

/// Height of one line of [`notes_below`], pixels.
const NOTE_LINE: u32 = 20;

/// Writes `notes` as lines of small print along the bottom of `area` and returns the area
/// above them, where the chart goes (all of `area` when there are no notes).
pub fn notes_below<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    notes: &[String],
) -> std::result::Result<DrawingArea<DB, Shift>, String> {
    if notes.is_empty() {
        return Ok(area.clone());
    }
    let (_, height) = area.dim_in_pixel();
    let lines = u32::try_from(notes.len()).unwrap_or(u32::MAX);
    let needed = NOTE_LINE.saturating_mul(lines).saturating_add(12);
    let (upper, lower) = area.split_vertically(height.saturating_sub(needed));
    let font = (FONT, 14).into_font().color(&RGBColor(60, 60, 60));
    for (i, note) in notes.iter().enumerate() {
        let y = 4 + NOTE_LINE as i32 * i as i32;
        lower
            .draw(&Text::new(note.clone(), (18, y), font.clone()))
            .map_err(msg)?;
    }
    Ok(upper)
}

/// Turns a plotters error into its message.
pub fn msg<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// Renders one chart to `dir/<stem>.png` and `dir/<stem>.svg` (`dir` must exist). The font
/// must be registered ([`register_font`]).
pub fn render(chart: &impl Chart, dir: &Path) -> Result<[PathBuf; 2]> {
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
pub fn executor_color(executor: &str) -> RGBColor {
    match executor {
        "sequential" => RGBColor(80, 80, 80),
        "pipelined" => RGBColor(31, 119, 180),
        "parallel" => RGBColor(214, 39, 40),
        "streaming" => RGBColor(44, 160, 44),
        _ => RGBColor(148, 103, 189),
    }
}

/// A legend entry per executor, in the set's order, coloured as [`executor_color`] colours it.
pub fn executor_legend(executors: std::collections::BTreeSet<String>) -> Vec<(String, RGBColor)> {
    executors
        .into_iter()
        .map(|x| {
            let color = executor_color(&x);
            (x, color)
        })
        .collect()
}

/// Tableau 10: distinct in print and for common colour blindness.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// The `i`-th colour of [`PALETTE`], cycling.
pub fn series_color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// `950`, `12k`, `1.5M`: a count or rate as an axis tick.
pub fn si_text(v: f64) -> String {
    let trim = |v: f64, unit: &str| {
        let s = format!("{v:.2}");
        let s = s.trim_end_matches('0').trim_end_matches('.');
        format!("{s}{unit}")
    };
    match v.abs() {
        a if a >= 1e9 => trim(v / 1e9, "G"),
        a if a >= 1e6 => trim(v / 1e6, "M"),
        a if a >= 1e3 => trim(v / 1e3, "k"),
        a if a >= 10.0 || a == 0.0 => format!("{v:.0}"),
        _ => trim(v, ""),
    }
}

#[cfg(any(test, feature = "test-support"))]
pub mod testing {
    //! Checks on written charts shared by the chart tests, here and in the crates that draw with
    //! these chart kinds (feature `test-support`).
    use std::collections::HashSet;
    use std::path::Path;

    /// The PNG file at `path`, decoded; panics (failing the test) if it cannot be.
    fn open(path: &Path) -> image::RgbaImage {
        image::open(path)
            .unwrap_or_else(|e| panic!("decoding the chart {}: {e}", path.display()))
            .to_rgba8()
    }

    /// Distinct RGBA values in a PNG file (stops counting at 64).
    pub fn distinct_colors(path: &Path) -> usize {
        let img = open(path);
        let mut seen = HashSet::new();
        for p in img.pixels() {
            seen.insert(p.0);
            if seen.len() >= 64 {
                break;
            }
        }
        seen.len()
    }

    /// Pixels of a PNG file that are not white.
    pub fn ink_pixels(path: &Path) -> usize {
        let img = open(path);
        img.pixels().filter(|p| p.0 != [255, 255, 255, 255]).count()
    }
}

#[cfg(test)]
mod layout_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_with_si_suffixes() {
        assert_eq!(si_text(0.0), "0");
        assert_eq!(si_text(950.0), "950");
        assert_eq!(si_text(12_000.0), "12k");
        assert_eq!(si_text(1_500_000.0), "1.5M");
        assert_eq!(si_text(2.5), "2.5");
        assert_eq!(si_text(0.25), "0.25");
    }
}
