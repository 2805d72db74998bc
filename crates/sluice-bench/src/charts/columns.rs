//! One bar per label with its value written on top: compaction bandwidth per benchmark or
//! phase, coloured by the executor that ran it.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, segment_label, under_caption};

/// The y axis ends this far above the tallest bar, leaving room for the text on top.
const Y_HEADROOM: f64 = 1.3;

/// One bar.
pub struct Column {
    /// The x tick.
    pub label: String,
    /// Bar height in the chart's y unit.
    pub value: f64,
    /// Text above the bar.
    pub note: String,
    pub color: RGBColor,
}

/// A chart of bars.
pub struct Columns {
    pub stem: &'static str,
    pub size: (u32, u32),
    pub caption: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description with unit.
    pub y_label: String,
    pub columns: Vec<Column>,
    /// Legend entries `(text, colour)`, drawn in the upper right; none if empty.
    pub legend: Vec<(String, RGBColor)>,
}

impl Chart for Columns {
    fn stem(&self) -> &str {
        self.stem
    }

    fn size(&self) -> (u32, u32) {
        self.size
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> DrawResult {
        let body = under_caption(root, &self.caption)?;
        let max = self
            .columns
            .iter()
            .map(|c| c.value)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let top = if max > 0.0 { max * Y_HEADROOM } else { 1.0 };
        // A segmented range `0..n` has the n + 1 segments 0..=n.
        let last = self.columns.len().saturating_sub(1) as i32;
        let mut chart = ChartBuilder::on(&body)
            .margin(18)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d((0..last).into_segmented(), 0.0..top)
            .map_err(msg)?;
        let x_text = |x: &SegmentValue<i32>| {
            segment_label(x, |i| self.columns.get(i).map(|b| b.label.clone()))
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style((FONT, 17))
            .label_style((FONT, 15))
            .x_label_formatter(&x_text)
            .y_label_formatter(&|y| super::si_text(*y))
            .y_labels(8)
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(msg)?;
        let note_style = TextStyle::from((FONT, 15).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, c) in self.columns.iter().enumerate() {
            let i = i as i32;
            let value = if c.value.is_finite() { c.value } else { 0.0 };
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), value),
                ],
                c.color.filled(),
            );
            bar.set_margin(0, 0, 30, 30);
            chart.draw_series(std::iter::once(bar)).map_err(msg)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    c.note.clone(),
                    (SegmentValue::CenterOf(i), value + top * 0.015),
                    note_style.clone(),
                )))
                .map_err(msg)?;
        }
        draw_legend(chart.plotting_area(), &self.legend)
    }
}

/// Colour boxes and their texts in the upper right corner of `area`.
fn draw_legend<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    area: &DrawingArea<DB, CT>,
    entries: &[(String, RGBColor)],
) -> DrawResult {
    if entries.is_empty() {
        return Ok(());
    }
    let font = (FONT, 16).into_font();
    let (width, _) = area.dim_in_pixel();
    let area = area.strip_coord_spec();
    let x = width as i32 - 220;
    for (row, (text, color)) in entries.iter().enumerate() {
        let y = 14 + 28 * row as i32;
        area.draw(&Rectangle::new([(x, y), (x + 20, y + 20)], color.filled()))
            .map_err(msg)?;
        area.draw(&Text::new(text.clone(), (x + 30, y + 2), font.clone()))
            .map_err(msg)?;
    }
    Ok(())
}
