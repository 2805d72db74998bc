//! Lines over a numeric x axis, linear or logarithmic: throughput over time (seconds, linear),
//! latency CDFs (microseconds, log) and costs against a data size (log-log).
//!
//! A log axis spans whole decades around the data and labels only the powers of ten, so its
//! ticks never crowd. A linear y axis starts at zero, or spans the range a chart fixes (0 to
//! 100 for a CDF), so that no difference is exaggerated by a truncated axis.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::prelude::*;

use super::{Chart, DrawResult, FONT, msg, under_caption};

/// Fraction of the data's y range added above it when the chart fixes no range, kept free for
/// the legend.
const Y_HEADROOM: f64 = 1.35;

/// Lines with at most this many points get a marker on each point.
const MAX_MARKED_POINTS: usize = 60;

/// One line.
pub struct XyLine {
    /// Legend text.
    pub label: String,
    /// Stroke colour.
    pub color: RGBColor,
    /// `(x, y)` in ascending x. Points with a non-finite coordinate, or one <= 0 on a log axis,
    /// are skipped.
    pub points: Vec<(f64, f64)>,
}

/// How an axis maps values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10.
    Log,
}

/// A single-panel chart of lines.
pub struct XyChart {
    pub stem: &'static str,
    pub size: (u32, u32),
    pub caption: String,
    /// X axis description with unit.
    pub x_label: String,
    /// Y axis description with unit.
    pub y_label: String,
    pub x_scale: Scale,
    pub y_scale: Scale,
    /// Text of an x tick.
    pub x_format: fn(f64) -> String,
    /// Text of a y tick.
    pub y_format: fn(f64) -> String,
    /// A fixed y range; `None`: on a linear axis 0 to the highest point plus headroom, on a log
    /// axis the whole decades around the points.
    pub y_range: Option<(f64, f64)>,
    /// Where the legend goes: the corner the lines leave empty.
    pub legend: SeriesLabelPosition,
    pub lines: Vec<XyLine>,
}

impl Chart for XyChart {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let mut builder = ChartBuilder::on(&body);
        builder
            .margin(18)
            // The last x label is centred on the plot's edge: room for its right half.
            .margin_right(44)
            .x_label_area_size(56)
            .y_label_area_size(84);
        let x = match self.x_scale {
            Scale::Linear => linear_x_range(&self.lines),
            Scale::Log => log_range(finite_points(&self.lines).map(|p| p.0)),
        };
        let y = match (self.y_range, self.y_scale) {
            (Some(range), _) => range,
            (None, Scale::Linear) => (0.0, y_top(&self.lines)),
            (None, Scale::Log) => log_range(finite_points(&self.lines).map(|p| p.1)),
        };
        // A linear axis gets 10 (x) or 8 (y) labels; a log axis one per power of ten, none
        // between.
        let labels = |scale: Scale, (lo, hi): (f64, f64), linear: usize| match scale {
            Scale::Linear => linear,
            Scale::Log => (hi / lo).log10().round().max(1.0) as usize + 1,
        };
        let counts = (labels(self.x_scale, x, 10), labels(self.y_scale, y, 8));
        let (x, y) = (x.0..x.1, y.0..y.1);
        match (self.x_scale, self.y_scale) {
            (Scale::Linear, Scale::Linear) => {
                let chart = builder.build_cartesian_2d(x, y).map_err(msg)?;
                self.draw_lines(chart, counts)
            }
            (Scale::Log, Scale::Linear) => {
                let chart = builder.build_cartesian_2d(x.log_scale(), y).map_err(msg)?;
                self.draw_lines(chart, counts)
            }
            (Scale::Linear, Scale::Log) => {
                let chart = builder.build_cartesian_2d(x, y.log_scale()).map_err(msg)?;
                self.draw_lines(chart, counts)
            }
            (Scale::Log, Scale::Log) => {
                let chart = builder
                    .build_cartesian_2d(x.log_scale(), y.log_scale())
                    .map_err(msg)?;
                self.draw_lines(chart, counts)
            }
        }
    }
}

impl XyChart {
    /// Draws the mesh with `(x, y)` labels, then the lines and the legend.
    fn draw_lines<'a, DB, X, Y>(
        &self,
        mut chart: ChartContext<'a, DB, Cartesian2d<X, Y>>,
        (x_labels, y_labels): (usize, usize),
    ) -> DrawResult
    where
        DB: DrawingBackend + 'a,
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let (x_format, y_format) = (self.x_format, self.y_format);
        chart
            .configure_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style((FONT, 17))
            .label_style((FONT, 15))
            .x_labels(x_labels)
            .y_labels(y_labels)
            .x_label_formatter(&|x| x_format(*x))
            .y_label_formatter(&|y| y_format(*y))
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(BLACK.mix(0.04))
            .draw()
            .map_err(msg)?;
        let shown = |v: f64, scale: Scale| v.is_finite() && (scale == Scale::Linear || v > 0.0);
        for line in &self.lines {
            let color = line.color;
            let points: Vec<(f64, f64)> = line
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| shown(x, self.x_scale) && shown(y, self.y_scale))
                .collect();
            let marked = points.len() <= MAX_MARKED_POINTS;
            chart
                .draw_series(LineSeries::new(points.clone(), color.stroke_width(3)))
                .map_err(msg)?
                .label(line.label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            if marked {
                chart
                    .draw_series(
                        points
                            .into_iter()
                            .map(|p| Circle::new(p, 4, color.filled())),
                    )
                    .map_err(msg)?;
            }
        }
        chart
            .configure_series_labels()
            .position(self.legend.clone())
            .margin(14)
            .legend_area_size(32)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(msg)
    }
}

fn finite_points(lines: &[XyLine]) -> impl Iterator<Item = (f64, f64)> + '_ {
    lines
        .iter()
        .flat_map(|l| l.points.iter().copied())
        .filter(|(x, y)| x.is_finite() && y.is_finite())
}

/// Headroom over the highest point; 1 when nothing is positive.
fn y_top(lines: &[XyLine]) -> f64 {
    let max = finite_points(lines).map(|p| p.1).fold(0.0, f64::max);
    if max > 0.0 { max * Y_HEADROOM } else { 1.0 }
}

/// Fraction of the x range added right of the last point, so its marker is not cut.
const X_PADDING: f64 = 0.03;

/// From 0 (or the lowest x, if negative) to just past the highest x; `0..1` without points.
fn linear_x_range(lines: &[XyLine]) -> (f64, f64) {
    let (lo, hi) = finite_points(lines).fold((0.0, 0.0), |(lo, hi): (f64, f64), (x, _)| {
        (lo.min(x), hi.max(x))
    });
    if hi > lo {
        (lo, hi + (hi - lo) * X_PADDING)
    } else {
        (lo, lo + 1.0)
    }
}

/// Whole decades around the positive values: `[10^floor(log10 min), 10^ceil(log10 max)]`, at
/// least one decade wide; `1..10` without positive values.
fn log_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|&v| v > 0.0)
        .fold((f64::INFINITY, 0.0), |(lo, hi): (f64, f64), v| {
            (lo.min(v), hi.max(v))
        });
    if hi <= 0.0 {
        return (1.0, 10.0);
    }
    let lo = 10f64.powf(lo.log10().floor());
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(points: &[(f64, f64)]) -> XyLine {
        XyLine {
            label: String::new(),
            color: BLACK,
            points: points.to_vec(),
        }
    }

    #[test]
    fn log_ranges_cover_whole_decades() {
        let xs = |points: &[(f64, f64)]| log_range(points.iter().map(|p| p.0));
        assert_eq!(xs(&[(0.3, 1.0), (4_500.0, 2.0)]), (0.1, 10_000.0));
        assert_eq!(xs(&[(10.0, 1.0)]), (10.0, 100.0));
        assert_eq!(xs(&[(0.0, 1.0)]), (1.0, 10.0));
        assert_eq!(xs(&[]), (1.0, 10.0));
        let l = line(&[(1.0, 0.02), (2.0, f64::NAN), (4.0, 35.0)]);
        assert_eq!(
            log_range(finite_points(std::slice::from_ref(&l)).map(|p| p.1)),
            (0.01, 100.0)
        );
    }

    #[test]
    fn linear_ranges_and_headroom() {
        let l = line(&[(0.5, 100.0), (2.5, f64::NAN), (3.5, 50.0)]);
        assert_eq!(
            linear_x_range(std::slice::from_ref(&l)),
            (0.0, 3.5 * (1.0 + X_PADDING))
        );
        assert_eq!(y_top(&[l]), 100.0 * Y_HEADROOM);
        assert_eq!(linear_x_range(&[]), (0.0, 1.0));
        assert_eq!(y_top(&[]), 1.0);
    }
}
