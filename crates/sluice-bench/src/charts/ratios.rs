//! Grouped ratio bars on a log2 axis: one group per label (a workload), one bar per series (a
//! peer engine) rising from the line at 1.0 when the ratio is above it and hanging from it when
//! below, with the ratio written at the bar's end.
//!
//! A log axis makes 2x and 0.5x the same length, so neither side of 1.0 looks bigger than it
//! is; the axis spans whole powers of two around the data (at least 0.5 to 2) and labels only
//! them. A missing ratio (the cell was not comparable) is written `n/a` on the line.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, notes_below, under_caption};

/// Share of a group's width left empty on each side, so groups stand apart.
const GROUP_PADDING: f64 = 0.12;

/// Height of the legend row above the plot, pixels.
const LEGEND_ROW: u32 = 40;

/// One group of bars.
pub struct RatioGroup {
    /// The x tick.
    pub label: String,
    /// One ratio per series, in series order; `None`: not comparable (drawn as `n/a`).
    pub ratios: Vec<Option<f64>>,
}

/// A chart of grouped ratio bars.
pub struct RatioBars {
    pub stem: &'static str,
    pub size: (u32, u32),
    pub caption: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description: what the ratio divides by what, and which way is better.
    pub y_label: String,
    /// Legend text and colour of each series.
    pub series: Vec<(String, RGBColor)>,
    pub groups: Vec<RatioGroup>,
    /// Lines of small print under the chart.
    pub notes: Vec<String>,
}

impl Chart for RatioBars {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let plot = notes_below(&body, &self.notes)?;
        let (lo, hi) = log2_range(self.groups.iter().flat_map(|g| g.ratios.iter().flatten()));
        let groups = self.groups.len().max(1);
        let mut chart = ChartBuilder::on(&plot)
            .margin(18)
            // Room for the legend row above the plot.
            .margin_top(LEGEND_ROW)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d(0.0..groups as f64, lo..hi)
            .map_err(msg)?;
        // Group labels are drawn below, at each group's centre; the mesh draws none.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style((FONT, 17))
            .label_style((FONT, 15))
            // Integer log2 values: one label per power of two.
            .y_labels((hi - lo) as usize + 1)
            .y_label_formatter(&|y| ratio_text(y.exp2()))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(msg)?;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (groups as f64, 0.0)],
                BLACK.stroke_width(2),
            )))
            .map_err(msg)?;
        let tick = TextStyle::from((FONT, 16).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        let series = self.series.len().max(1);
        let width = (1.0 - 2.0 * GROUP_PADDING) / series as f64;
        // Values read across a bar when the widest fits in it, else up along it: side by
        // side, the labels of narrow bars would run into each other.
        let bar_pixels = chart.backend_coord(&(width, 0.0)).0 - chart.backend_coord(&(0.0, 0.0)).0;
        let widest = self
            .groups
            .iter()
            .flat_map(|g| g.ratios.iter())
            .map(|r| value_text(*r).len())
            .max()
            .unwrap_or(0);
        let value_font = centred_text(14, VPos::Bottom);
        let across = root
            .estimate_text_size(&"8".repeat(widest), &value_font)
            .map_or(true, |(w, _)| w as i32 + 2 <= bar_pixels);
        for (g, group) in self.groups.iter().enumerate() {
            let left = g as f64 + GROUP_PADDING;
            for (s, ratio) in group.ratios.iter().enumerate().take(series) {
                let x0 = left + width * s as f64;
                let centre = x0 + width / 2.0;
                let color = self.series.get(s).map_or(BLACK, |(_, c)| *c);
                let Some(r) = ratio.filter(|r| r.is_finite() && *r > 0.0) else {
                    chart
                        .draw_series(std::iter::once(Text::new(
                            value_text(*ratio),
                            (centre, (hi - lo) * 0.01),
                            value_style(across, true),
                        )))
                        .map_err(msg)?;
                    continue;
                };
                let y = r.log2().clamp(lo, hi);
                let mut bar = Rectangle::new([(x0, 0.0), (x0 + width, y)], color.filled());
                bar.set_margin(0, 0, 2, 2);
                chart.draw_series(std::iter::once(bar)).map_err(msg)?;
                // Above a rising bar, below a hanging one.
                let rising = y >= 0.0;
                let at = match rising {
                    true => y + (hi - lo) * 0.01,
                    false => y - (hi - lo) * 0.01,
                };
                chart
                    .draw_series(std::iter::once(Text::new(
                        value_text(Some(r)),
                        (centre, at),
                        value_style(across, rising),
                    )))
                    .map_err(msg)?;
            }
            // Just under the plot's bottom edge, in the label area (pixels of `root`, whose
            // origin is the backend's).
            let (x, bottom) = chart.backend_coord(&(g as f64 + 0.5, lo));
            root.draw(&Text::new(
                group.label.clone(),
                (x, bottom + 8),
                tick.clone(),
            ))
            .map_err(msg)?;
        }
        draw_legend(&plot, &self.series)
    }
}

/// Text of `size` pixels, centred horizontally, `v` giving which edge sits on the point.
/// A bar's value as printed: two decimals, `n/a` for none.
pub(crate) fn value_text(ratio: Option<f64>) -> String {
    match ratio.filter(|r| r.is_finite() && *r > 0.0) {
        Some(r) => format!("{r:.2}"),
        None => "n/a".to_string(),
    }
}

/// How a bar's value is drawn: across (centred over or under the bar's end) or, when values
/// do not fit across the bars, turned to read upwards, starting at the bar's end (ending at
/// it, for a bar hanging below 1).
fn value_style(across: bool, rising: bool) -> TextStyle<'static> {
    match (across, rising) {
        (true, true) => centred_text(14, VPos::Bottom),
        (true, false) => centred_text(14, VPos::Top),
        (false, rising) => {
            TextStyle::from((FONT, 14.0).into_font().transform(FontTransform::Rotate270))
                .color(&BLACK)
                .pos(Pos::new(
                    if rising { HPos::Left } else { HPos::Right },
                    VPos::Center,
                ))
        }
    }
}

fn centred_text(size: u32, v: VPos) -> TextStyle<'static> {
    TextStyle::from((FONT, f64::from(size)).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, v))
}

/// The axis never goes beyond 1/1024x to 1024x; longer bars stop at its end (their text
/// still gives the ratio).
const MAX_LOG2: f64 = 10.0;

/// Whole powers of two around `ratios` in log2 units, with room for the text at the bars'
/// ends: at least `-1..1` (0.5x to 2x), at most `-MAX_LOG2..MAX_LOG2`.
pub fn log2_range<'a>(ratios: impl Iterator<Item = &'a f64>) -> (f64, f64) {
    let (lo, hi) = ratios
        .filter(|r| r.is_finite() && **r > 0.0)
        .map(|r| r.log2())
        .fold((0.0f64, 0.0f64), |(lo, hi), y| (lo.min(y), hi.max(y)));
    // A quarter of a power of two beyond the data leaves room for the value text.
    let lo = (lo - 0.25).floor().clamp(-MAX_LOG2, -1.0);
    let hi = (hi + 0.25).ceil().clamp(1.0, MAX_LOG2);
    (lo, hi)
}

/// `0.25×`, `1×`, `4×`: a ratio as a tick.
pub fn ratio_text(r: f64) -> String {
    let s = format!("{r:.3}");
    format!("{}×", s.trim_end_matches('0').trim_end_matches('.'))
}

/// The series' colours and names in a row along the top of `area`.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    series: &[(String, RGBColor)],
) -> DrawResult {
    let font = TextStyle::from((FONT, 16).into_font());
    let mut x = 110;
    for (name, color) in series {
        area.draw(&Rectangle::new([(x, 8), (x + 18, 26)], color.filled()))
            .map_err(msg)?;
        area.draw(&Text::new(name.clone(), (x + 26, 9), font.clone()))
            .map_err(msg)?;
        let (w, _) = area.estimate_text_size(name, &font).map_err(msg)?;
        x += 26 + w as i32 + 28;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_whole_powers_of_two_with_room() {
        assert_eq!(log2_range([1.0].iter()), (-1.0, 1.0));
        assert_eq!(log2_range([0.65, 2.94].iter()), (-1.0, 2.0));
        // 3.9 is just under 4: its text needs room above it.
        assert_eq!(log2_range([3.9].iter()), (-1.0, 3.0));
        assert_eq!(log2_range([0.2, f64::NAN, 0.0, -1.0].iter()), (-3.0, 1.0));
        assert_eq!(log2_range([].iter()), (-1.0, 1.0));
        assert_eq!(log2_range([1e300, 1e-300].iter()), (-MAX_LOG2, MAX_LOG2));
    }

    #[test]
    fn ticks_read_as_factors() {
        assert_eq!(ratio_text(1.0), "1×");
        assert_eq!(ratio_text(0.25), "0.25×");
        assert_eq!(ratio_text(0.125), "0.125×");
        assert_eq!(ratio_text(4.0), "4×");
    }
}
