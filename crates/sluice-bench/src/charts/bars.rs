//! Stacked bars of the share of time of each compaction step (S1 at the bottom, S7 on top, as
//! in the PCP paper's Fig. 8), one bar per label (a value size, a benchmark), with the legend
//! beside the plot.
//!
//! Bars sit in the slots of [`super::slots`]: however many there are (one included), each is
//! centred in its slot, clear of the y axis, and its label is under it, below the axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, slots, under_caption};

/// Step names as the legend shows them (the document's names in capitals after ours).
pub const STEP_LABELS: [&str; 7] = [
    "S1 read (READ)",
    "S2 checksum (CRC)",
    "S3 decompress (DECOMP)",
    "S4 merge (SORT)",
    "S5 compress (COMP)",
    "S6 re-checksum (RE-CRC)",
    "S7 write (WRITE)",
];

/// One colour per step: the first seven of the palette.
fn step_color(step: usize) -> RGBColor {
    super::series_color(step)
}

/// Height of the area under the plot: two lines of tick labels and the axis description.
const X_LABEL_AREA: u32 = 70;

/// Width of the legend column, pixels.
const LEGEND_WIDTH: u32 = 260;

/// Segments smaller than this share (percent) get no text inside.
const MIN_LABELLED_PERCENT: f64 = 5.0;

/// One bar.
pub struct Bar {
    /// The x tick.
    pub label: String,
    /// Lines of text above the bar, top first.
    pub notes: Vec<String>,
    /// Each step's share of the step time, in percent.
    pub shares: [f64; 7],
}

/// The y axis ends here, leaving room for the notes above the 100% bars.
const Y_TOP_PERCENT: f64 = 116.0;

/// Height of one line of notes, in percent of the y axis.
const NOTE_LINE_PERCENT: f64 = 6.0;

/// A chart of stacked step bars.
pub struct Breakdown {
    /// File name without extension.
    pub stem: &'static str,
    pub caption: String,
    /// X axis description with unit.
    pub x_label: String,
    /// One bar per entry.
    pub bars: Vec<Bar>,
}

impl Chart for Breakdown {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        (1100, 620)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let (width, _) = body.dim_in_pixel();
        let (plot, legend) = body.split_horizontally(width.saturating_sub(LEGEND_WIDTH));
        draw_bars(&plot, &self.x_label, &self.bars)?;
        draw_legend(&legend)
    }
}

/// Black text on light colours, white on dark ones.
fn text_color(c: RGBColor) -> RGBColor {
    let luma = 0.299 * f64::from(c.0) + 0.587 * f64::from(c.1) + 0.114 * f64::from(c.2);
    if luma > 150.0 { BLACK } else { WHITE }
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x_label: &str,
    bars: &[Bar],
) -> DrawResult {
    let count = bars.len();
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(X_LABEL_AREA)
        .y_label_area_size(72)
        .build_cartesian_2d(slots::x_range(count), 0.0..Y_TOP_PERCENT)
        .map_err(msg)?;
    // The labels are drawn under the slots' centres below; the mesh draws none.
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_labels(0)
        .x_desc(x_label)
        .y_desc("share of step time (%)")
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .y_label_formatter(&|y| {
            if *y <= 100.0 {
                format!("{y:.0}")
            } else {
                String::new()
            }
        })
        .y_labels(12)
        .draw()
        .map_err(msg)?;
    // Grid lines up to 100% only: the notes live above.
    let right = slots::x_range(count).end;
    chart
        .draw_series((1..=10).map(|k| {
            let y = f64::from(k) * 10.0;
            PathElement::new(vec![(0.0, y), (right, y)], BLACK.mix(0.12))
        }))
        .map_err(msg)?;
    let fill = slots::plot_bar_fill(chart.plotting_area(), count);
    let slot_pixels = slots::slot_pixels(chart.plotting_area(), count);
    for (i, bar) in bars.iter().enumerate() {
        let centre = slots::centre(i);
        for (line, note) in bar.notes.iter().enumerate() {
            let y = Y_TOP_PERCENT - NOTE_LINE_PERCENT * (line as f64 + 0.5);
            let size = slots::fitting_size(area, note, 14, slot_pixels);
            chart
                .draw_series(std::iter::once(Text::new(
                    note.clone(),
                    (centre, y),
                    centered(size, &BLACK),
                )))
                .map_err(msg)?;
        }
        let (left, right) = slots::bar_span(i, fill);
        let mut bottom = 0.0;
        for (step, &share) in bar.shares.iter().enumerate() {
            let color = step_color(step);
            let top = bottom + share;
            let segment = Rectangle::new([(left, bottom), (right, top)], color.filled());
            chart.draw_series(std::iter::once(segment)).map_err(msg)?;
            if share >= MIN_LABELLED_PERCENT {
                let ink = text_color(color);
                let style = centered(14, &ink);
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{share:.0}%"),
                        (centre, bottom + share / 2.0),
                        style,
                    )))
                    .map_err(msg)?;
            }
            bottom = top;
        }
    }
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    slots::draw_labels(area, chart.plotting_area(), &labels, 14)
}

/// Text of `size` pixels in `ink`, centred on its position.
fn centered<'a>(size: u32, ink: &'a RGBColor) -> TextStyle<'a> {
    TextStyle::from((FONT, f64::from(size)).into_font())
        .color(ink)
        .pos(Pos::new(HPos::Center, VPos::Center))
}

/// The legend: S7 at the top down to S1, the order of the stack.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>) -> DrawResult {
    let font = (FONT, 15).into_font();
    let (x, mut y) = (10, 60);
    for (step, label) in STEP_LABELS.iter().enumerate().rev() {
        let color = step_color(step);
        area.draw(&Rectangle::new([(x, y), (x + 20, y + 20)], color.filled()))
            .map_err(msg)?;
        area.draw(&Text::new(*label, (x + 30, y + 2), font.clone()))
            .map_err(msg)?;
        y += 32;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_contrasts_with_its_segment() {
        assert_eq!(text_color(RGBColor(31, 119, 180)), WHITE);
        assert_eq!(text_color(RGBColor(255, 127, 14)), BLACK);
        assert_eq!(text_color(RGBColor(227, 119, 194)), BLACK);
    }
}
