//! The categorical x axis of the bar and line charts: one slot per label, slot `i` spanning
//! `i..i + 1` of a numeric axis `0..n`, its bar (or point) centred at `i + 0.5` and its label
//! drawn by [`draw_labels`] under the slot's centre.
//!
//! Why not plotters' segmented coordinates (`(0..n).into_segmented()`): with one label the
//! range `0..0` is degenerate and plotters maps every value to half the plot's *width* rather
//! than to a position inside it, so a single bar was drawn over the y axis with its label in
//! the middle of the chart; and a bar margin given in pixels flips a bar inside out once
//! slots are narrower than twice the margin. A numeric axis has neither problem.
//!
//! Invariants of the layout, for any number of slots and any plot width:
//! - a bar fills at most [`BAR_FILL`] of its slot and is centred in it, so it keeps at least
//!   `(1 - BAR_FILL) / 2` of a slot from either slot edge; slot 0's left edge is the y axis,
//!   so no bar touches it;
//! - a bar is at most [`MAX_BAR_PIXELS`] wide, so one or two bars stay bars rather than
//!   filling the plot;
//! - labels are drawn below the plot area (never over the axis), wrapped at spaces to at most
//!   [`MAX_LABEL_LINES`] lines when wider than their slot.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{DrawResult, FONT, msg};

/// The largest share of its slot a bar fills.
pub const BAR_FILL: f64 = 0.7;

/// The widest a bar is drawn, pixels.
pub const MAX_BAR_PIXELS: f64 = 140.0;

/// A label wider than its slot is wrapped to at most this many lines (the last line keeps
/// whatever is left).
pub const MAX_LABEL_LINES: usize = 2;

/// Pixels between the plot's bottom edge (the x axis) and the first line of a label.
const LABEL_GAP: i32 = 8;

/// The x range of `count` slots; one slot when there are none, so the axis is never empty.
pub fn x_range(count: usize) -> Range<f64> {
    0.0..count.max(1) as f64
}

/// The x of slot `slot`'s centre.
pub fn centre(slot: usize) -> f64 {
    slot as f64 + 0.5
}

/// The share of a slot each bar fills when `count` slots share `plot_pixels`: [`BAR_FILL`],
/// less when that would make bars wider than [`MAX_BAR_PIXELS`]. Always in `(0, BAR_FILL]`.
pub fn bar_fill(count: usize, plot_pixels: u32) -> f64 {
    let slot_pixels = f64::from(plot_pixels.max(1)) / count.max(1) as f64;
    BAR_FILL.min(MAX_BAR_PIXELS / slot_pixels)
}

/// The left and right x of slot `slot`'s bar filling `fill` of the slot, centred in it.
pub fn bar_span(slot: usize, fill: f64) -> (f64, f64) {
    let half = fill.clamp(0.0, BAR_FILL) / 2.0;
    (centre(slot) - half, centre(slot) + half)
}

/// The share of its slot a bar may fill in `plot` (the chart's plotting area), holding
/// `count` slots.
pub fn plot_bar_fill<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    plot: &DrawingArea<DB, CT>,
    count: usize,
) -> f64 {
    bar_fill(count, plot.dim_in_pixel().0)
}

/// Pixels between neighbouring labels or notes, at least.
const TEXT_GAP: f64 = 12.0;

/// The width of one slot of `plot` (the chart's plotting area) holding `count` slots, pixels.
pub fn slot_pixels<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    plot: &DrawingArea<DB, CT>,
    count: usize,
) -> f64 {
    f64::from(plot.dim_in_pixel().0) / count.max(1) as f64
}

/// The largest font size, at most `size` and at least [`MIN_TEXT_SIZE`], at which `text` fits
/// a slot `slot_pixels` wide with room to spare between neighbours: notes over narrow slots
/// shrink rather than run into each other.
pub fn fitting_size<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: u32,
    slot_pixels: f64,
) -> u32 {
    let style = TextStyle::from((FONT, f64::from(size)).into_font());
    let Ok((width, _)) = area.estimate_text_size(text, &style) else {
        return size;
    };
    let room = slot_pixels - TEXT_GAP;
    if f64::from(width) <= room || width == 0 {
        return size;
    }
    let scaled = (f64::from(size) * room / f64::from(width)).floor();
    (scaled.max(f64::from(MIN_TEXT_SIZE)) as u32).min(size)
}

/// The smallest font size [`fitting_size`] shrinks text to.
pub const MIN_TEXT_SIZE: u32 = 9;

/// Draws `labels[i]` under the centre of slot `i` of `plot` (the chart's plotting area), on
/// `area` (any area that contains the label area below the plot), in `size`-pixel text.
pub fn draw_labels<DB: DrawingBackend, CT: plotters::coord::CoordTranslate>(
    area: &DrawingArea<DB, Shift>,
    plot: &DrawingArea<DB, CT>,
    labels: &[String],
    size: u32,
) -> DrawResult {
    let (xs, ys) = plot.get_pixel_range();
    let (base_x, base_y) = area.get_base_pixel();
    let slot_pixels = f64::from(xs.end - xs.start) / labels.len().max(1) as f64;
    let style = TextStyle::from((FONT, f64::from(size)).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Center, VPos::Top));
    let fits = |text: &str| {
        area.estimate_text_size(text, &style)
            .map_or(true, |(w, _)| f64::from(w) <= slot_pixels - TEXT_GAP)
    };
    for (i, label) in labels.iter().enumerate() {
        // Backend pixels of the slot's centre, then relative to `area`.
        let x = xs.start + (centre(i) * slot_pixels).round() as i32 - base_x;
        let top = ys.end + LABEL_GAP - base_y;
        for (line, text) in wrap(label, MAX_LABEL_LINES, &fits).iter().enumerate() {
            let y = top + line as i32 * (size as i32 + 3);
            area.draw(&Text::new(text.clone(), (x, y), style.clone()))
                .map_err(msg)?;
        }
    }
    Ok(())
}

/// `text` in at most `max_lines` lines, breaking at spaces: each line takes as many words as
/// `fits`, at least one; the last line takes all that is left.
fn wrap(text: &str, max_lines: usize, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    if fits(text) || max_lines <= 1 {
        return vec![text.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut words = text.split(' ').peekable();
    while let Some(word) = words.next() {
        if lines.len() + 1 == max_lines {
            let rest: Vec<&str> = std::iter::once(word).chain(words).collect();
            lines.push(rest.join(" "));
            break;
        }
        let mut line = word.to_string();
        while let Some(next) = words.peek() {
            let longer = format!("{line} {next}");
            if !fits(&longer) {
                break;
            }
            line = longer;
            words.next();
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_centred_and_keep_off_the_slot_edges() {
        for count in [1, 2, 3, 12, 200] {
            for width in [1, 50, 400, 1000, 4000] {
                let fill = bar_fill(count, width);
                assert!(fill > 0.0 && fill <= BAR_FILL, "{count} bars in {width} px");
                let slot_pixels = f64::from(width) / count as f64;
                assert!(fill * slot_pixels <= MAX_BAR_PIXELS + 1e-9);
                for slot in [0, count - 1] {
                    let (l, r) = bar_span(slot, fill);
                    assert!(l > slot as f64 && r < slot as f64 + 1.0);
                    assert!((l + r - 2.0 * centre(slot)).abs() < 1e-12);
                }
            }
        }
        // One bar: in the middle of the plot.
        assert_eq!(x_range(1), 0.0..1.0);
        let (l, r) = bar_span(0, bar_fill(1, 1000));
        assert_eq!((l + r) / 2.0, 0.5);
        assert!((r - l) * 1000.0 <= MAX_BAR_PIXELS + 1e-9);
        // No bars: still a non-empty axis.
        assert_eq!(x_range(0), 0.0..1.0);
    }

    #[test]
    fn long_labels_wrap_at_spaces() {
        let fits = |s: &str| s.len() <= 10;
        assert_eq!(wrap("load", 2, &fits), ["load"]);
        assert_eq!(
            wrap("run: pipelined+sequential", 2, &fits),
            ["run:", "pipelined+sequential"]
        );
        assert_eq!(wrap("a bb cc dd ee", 2, &fits), ["a bb cc dd", "ee"]);
        assert_eq!(wrap("a bb cc dd ee ff", 1, &fits), ["a bb cc dd ee ff"]);
        // A word wider than the slot keeps a line of its own.
        assert_eq!(wrap("aaaaaaaaaaaa b c", 3, &fits), ["aaaaaaaaaaaa", "b c"]);
    }
}
