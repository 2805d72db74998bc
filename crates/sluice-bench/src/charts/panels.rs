//! Small multiples: a grid of panels, each with one bar per label (an engine) in the panel's
//! own unit, a whisker from the lowest to the highest run, and the value written on top.
//!
//! Each panel gets its own y axis from zero: workloads in different units (ops/s, MB/s) or of
//! very different sizes would otherwise flatten one another, and a truncated axis would
//! exaggerate differences. A bar without a value (not comparable) is written `n/a` and does
//! not stretch the axis.
//!
//! Bars sit in the slots of [`super::slots`]: however many a panel has (one included), each is
//! centred in its slot, clear of the y axis, and its label is under it, below the axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, notes_below, si_text, slots, under_caption};

/// The y axis ends this far above the highest whisker, leaving room for the text on top.
const Y_HEADROOM: f64 = 1.25;

/// Height of the area under each panel's plot: two lines of tick labels.
const X_LABEL_AREA: u32 = 44;

/// One bar of a panel.
pub struct PanelBar {
    /// The x tick.
    pub label: String,
    pub color: RGBColor,
    /// Bar height; `None`: not comparable, written `n/a`.
    pub value: Option<f64>,
    /// The whisker's ends (the lowest and highest run); equal to `value` for one run.
    pub low: f64,
    pub high: f64,
}

/// One panel.
pub struct BarPanel {
    pub title: String,
    /// Y axis description with unit.
    pub y_label: String,
    pub bars: Vec<PanelBar>,
}

/// A grid of bar panels under one caption, filled row by row.
pub struct BarPanels {
    pub stem: &'static str,
    pub size: (u32, u32),
    pub caption: String,
    /// Panels per row.
    pub columns: usize,
    pub panels: Vec<BarPanel>,
    /// Lines of small print under the grid.
    pub notes: Vec<String>,
}

impl Chart for BarPanels {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let grid = notes_below(&body, &self.notes)?;
        let columns = self.columns.max(1);
        let rows = self.panels.len().div_ceil(columns).max(1);
        let cells = grid.split_evenly((rows, columns));
        for (panel, cell) in self.panels.iter().zip(&cells) {
            draw_panel(cell, panel)?;
        }
        Ok(())
    }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &BarPanel) -> DrawResult {
    let top = y_top(&panel.bars);
    let count = panel.bars.len();
    let mut chart = ChartBuilder::on(area)
        .caption(
            panel.title.as_str(),
            (FONT, 17).into_font().style(FontStyle::Bold),
        )
        .margin(10)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(62)
        .build_cartesian_2d(slots::x_range(count), 0.0..top)
        .map_err(msg)?;
    // The labels are drawn under the slots' centres below; the mesh draws none.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(panel.y_label.as_str())
        .axis_desc_style((FONT, 14))
        .label_style((FONT, 13))
        .y_label_formatter(&|y| si_text(*y))
        .y_labels(6)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(msg)?;
    let note = TextStyle::from((FONT, 13).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    let fill = slots::plot_bar_fill(chart.plotting_area(), count);
    for (i, b) in panel.bars.iter().enumerate() {
        let centre = slots::centre(i);
        let Some(value) = b.value.filter(|v| v.is_finite()) else {
            chart
                .draw_series(std::iter::once(Text::new(
                    "n/a",
                    (centre, top * 0.02),
                    note.clone(),
                )))
                .map_err(msg)?;
            continue;
        };
        let (left, right) = slots::bar_span(i, fill);
        let bar = Rectangle::new([(left, 0.0), (right, value)], b.color.filled());
        chart.draw_series(std::iter::once(bar)).map_err(msg)?;
        let high = if b.high.is_finite() { b.high } else { value };
        if b.low.is_finite() && high > b.low {
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(centre, b.low), (centre, high)],
                    BLACK.stroke_width(2),
                )))
                .map_err(msg)?;
        }
        chart
            .draw_series(std::iter::once(Text::new(
                value_text(value),
                (centre, high.max(value) + top * 0.015),
                note.clone(),
            )))
            .map_err(msg)?;
    }
    let labels: Vec<String> = panel.bars.iter().map(|b| b.label.clone()).collect();
    slots::draw_labels(area, chart.plotting_area(), &labels, 13)
}

/// `107k`, `75.5k`, `149`: a bar's value to three significant digits, which is all a run's
/// spread leaves meaningful.
fn value_text(v: f64) -> String {
    if !v.is_finite() || v == 0.0 {
        return si_text(v);
    }
    let scale = 10f64.powi(v.abs().log10().floor() as i32 - 2);
    si_text((v / scale).round() * scale)
}

/// Headroom over the highest comparable bar or whisker; 1 when there is none.
fn y_top(bars: &[PanelBar]) -> f64 {
    let max = bars
        .iter()
        .filter_map(|b| b.value.map(|v| v.max(b.high)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let top = max * Y_HEADROOM;
    if top > 0.0 && top.is_finite() {
        top
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(value: Option<f64>, high: f64) -> PanelBar {
        PanelBar {
            label: String::new(),
            color: BLACK,
            value,
            low: 0.0,
            high,
        }
    }

    #[test]
    fn values_keep_three_significant_digits() {
        assert_eq!(value_text(106_685.86), "107k");
        assert_eq!(value_text(75_479.5), "75.5k");
        assert_eq!(value_text(149.04), "149");
        assert_eq!(value_text(4_481.1), "4.48k");
        assert_eq!(value_text(0.0), "0");
        assert_eq!(value_text(1.234), "1.23");
    }

    #[test]
    fn the_axis_ignores_what_is_not_comparable() {
        assert_eq!(y_top(&[bar(Some(100.0), 120.0), bar(None, 5_000.0)]), 150.0);
        assert_eq!(y_top(&[bar(None, 5.0)]), 1.0);
        assert_eq!(y_top(&[bar(Some(f64::NAN), f64::NAN)]), 1.0);
        assert_eq!(y_top(&[bar(Some(f64::MAX), f64::MAX)]), 1.0);
    }
}
