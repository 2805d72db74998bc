//! Line charts: one or more panels side by side, each a set of lines over labelled x ticks.
//!
//! The x axis is categorical: one evenly spaced slot per tick ([`super::slots`]), each point
//! at its slot's centre (a single tick included). The sweeps double their x from
//! one point to the next (sizes, data sets), so even spacing is a log2 axis for them, and a
//! linear one for the counts 1, 2, 3, 4 (threads, directories).
//!
//! Every panel's y axis starts at zero (bandwidths are compared as ratios, and a truncated axis
//! would exaggerate them) and leaves headroom above the highest point for the legend.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::{Chart, DrawResult, FONT, msg, slots, under_caption};

/// Fraction of the y range above the highest point, kept free for the legend.
const Y_HEADROOM: f64 = 1.5;

/// One line of a panel.
pub struct Line {
    /// Legend text.
    pub label: String,
    /// Stroke colour.
    pub color: RGBColor,
    /// Dashed and without markers: a reference, not a measurement.
    pub dashed: bool,
    /// `(slot, y)` in ascending slot: the slot indexes the panel's `x_ticks`.
    pub points: Vec<(usize, f64)>,
}

/// One panel: axes, ticks and lines.
pub struct Panel {
    /// Panel title.
    pub title: String,
    /// X axis description with unit.
    pub x_label: String,
    /// Y axis description with unit.
    pub y_label: String,
    /// The text of each x slot, left to right.
    pub x_ticks: Vec<String>,
    /// The lines.
    pub lines: Vec<Line>,
}

/// A figure of panels side by side under one caption.
pub struct LineChart {
    pub stem: &'static str,
    pub size: (u32, u32),
    pub caption: String,
    pub panels: Vec<Panel>,
}

impl Chart for LineChart {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let areas = body.split_evenly((1, self.panels.len().max(1)));
        for (area, panel) in areas.iter().zip(&self.panels) {
            draw_panel(area, panel)?;
        }
        Ok(())
    }
}

/// The y axis top: headroom over the highest point, 1 when nothing is positive.
fn y_top(lines: &[Line]) -> f64 {
    let max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    if max > 0.0 { max * Y_HEADROOM } else { 1.0 }
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> DrawResult {
    let top = y_top(&panel.lines);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, (FONT, 18).into_font().style(FontStyle::Bold))
        .margin(14)
        .x_label_area_size(52)
        .y_label_area_size(72)
        .build_cartesian_2d(slots::x_range(panel.x_ticks.len()), 0.0..top)
        .map_err(msg)?;
    let y_text = |y: &f64| {
        if top >= 10.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.1}")
        }
    };
    // The ticks are drawn under the slots' centres below; the mesh draws none.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc(panel.x_label.as_str())
        .y_desc(panel.y_label.as_str())
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .y_label_formatter(&y_text)
        .y_labels(8)
        .bold_line_style(BLACK.mix(0.12))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(msg)?;
    for line in &panel.lines {
        let color = line.color;
        let points: Vec<(f64, f64)> = line
            .points
            .iter()
            .map(|&(slot, y)| (slots::centre(slot), y))
            .collect();
        if line.dashed {
            let style = color.stroke_width(2);
            chart
                .draw_series(DashedLineSeries::new(points, 10, 6, style))
                .map_err(msg)?
                .label(line.label.as_str())
                .legend(move |(x, y)| {
                    DashedPathElement::new(vec![(x, y), (x + 24, y)], 6, 4, style)
                });
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))
                .map_err(msg)?
                .label(line.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 5, color.filled())),
                )
                .map_err(msg)?;
        }
    }
    slots::draw_labels(area, chart.plotting_area(), &panel.x_ticks, 14)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .margin(12)
        .legend_area_size(32)
        .label_font((FONT, 15))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headroom_over_the_highest_finite_point() {
        let line = Line {
            label: String::new(),
            color: BLACK,
            dashed: false,
            points: vec![(0, 100.0), (1, f64::NAN)],
        };
        assert_eq!(y_top(&[line]), 100.0 * Y_HEADROOM);
        assert_eq!(y_top(&[]), 1.0);
    }
}
