//! One bar per label with its value written on top: compaction bandwidth per benchmark or
//! phase, coloured by the executor that ran it.
//!
//! Bars sit in the slots of [`super::slots`]: however many there are (one included), each is
//! centred in its slot, clear of the y axis, and its label is under it, below the axis.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{Chart, DrawResult, FONT, msg, slots, under_caption};

/// The y axis ends this far above the tallest bar, leaving room for the text on top.
const Y_HEADROOM: f64 = 1.3;

/// Height of the area under the plot: two lines of tick labels and the axis description.
const X_LABEL_AREA: u32 = 76;

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
        let count = self.columns.len();
        let mut chart = ChartBuilder::on(&body)
            .margin(18)
            .x_label_area_size(X_LABEL_AREA)
            .y_label_area_size(84)
            .build_cartesian_2d(slots::x_range(count), 0.0..top)
            .map_err(msg)?;
        // The labels are drawn under the slots' centres below; the mesh draws none.
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .axis_desc_style((FONT, 17))
            .label_style((FONT, 15))
            .y_label_formatter(&|y| super::si_text(*y))
            .y_labels(8)
            .bold_line_style(BLACK.mix(0.12))
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(msg)?;
        let fill = slots::plot_bar_fill(chart.plotting_area(), count);
        let slot_pixels = slots::slot_pixels(chart.plotting_area(), count);
        for (i, c) in self.columns.iter().enumerate() {
            let size = slots::fitting_size(&body, &c.note, 15, slot_pixels);
            let note_style = TextStyle::from((FONT, f64::from(size)).into_font())
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Bottom));
            let value = if c.value.is_finite() { c.value } else { 0.0 };
            let (left, right) = slots::bar_span(i, fill);
            let bar = Rectangle::new([(left, 0.0), (right, value)], c.color.filled());
            chart.draw_series(std::iter::once(bar)).map_err(msg)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    c.note.clone(),
                    (slots::centre(i), value + top * 0.015),
                    note_style,
                )))
                .map_err(msg)?;
        }
        let labels: Vec<String> = self.columns.iter().map(|c| c.label.clone()).collect();
        slots::draw_labels(&body, chart.plotting_area(), &labels, 15)?;
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
