//! Stacked bars of the share of time of each compaction step (S1 at the bottom, S7 on top, as
//! in the PCP paper's Fig. 8), one bar per label (a value size, a benchmark), with the legend
//! beside the plot.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, segment_label, under_caption};

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
    // A segmented range `0..n` has the n + 1 segments 0..=n.
    let last = bars.len().saturating_sub(1) as i32;
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(52)
        .y_label_area_size(72)
        .build_cartesian_2d((0..last).into_segmented(), 0.0..Y_TOP_PERCENT)
        .map_err(msg)?;
    let x_text = |x: &SegmentValue<i32>| segment_label(x, |i| bars.get(i).map(|b| b.label.clone()));
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_y_mesh()
        .x_desc(x_label)
        .y_desc("share of step time (%)")
        .axis_desc_style((FONT, 16))
        .label_style((FONT, 14))
        .x_label_formatter(&x_text)
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
    chart
        .draw_series((1..=10).map(|k| {
            let y = f64::from(k) * 10.0;
            PathElement::new(
                vec![(SegmentValue::Exact(0), y), (SegmentValue::Last, y)],
                BLACK.mix(0.12),
            )
        }))
        .map_err(msg)?;
    for (i, bar) in bars.iter().enumerate() {
        let i = i as i32;
        for (line, note) in bar.notes.iter().enumerate() {
            let y = Y_TOP_PERCENT - NOTE_LINE_PERCENT * (line as f64 + 0.5);
            chart
                .draw_series(std::iter::once(Text::new(
                    note.clone(),
                    (SegmentValue::CenterOf(i), y),
                    centered(14, &BLACK),
                )))
                .map_err(msg)?;
        }
        let mut bottom = 0.0;
        for (step, &share) in bar.shares.iter().enumerate() {
            let color = step_color(step);
            let top = bottom + share;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), bottom),
                    (SegmentValue::Exact(i + 1), top),
                ],
                color.filled(),
            );
            bar.set_margin(0, 0, 22, 22);
            chart.draw_series(std::iter::once(bar)).map_err(msg)?;
            if share >= MIN_LABELLED_PERCENT {
                let ink = text_color(color);
                let style = centered(14, &ink);
                chart
                    .draw_series(std::iter::once(Text::new(
                        format!("{share:.0}%"),
                        (SegmentValue::CenterOf(i), bottom + share / 2.0),
                        style,
                    )))
                    .map_err(msg)?;
            }
            bottom = top;
        }
    }
    Ok(())
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
