//! Where the bar charts put their bars, read back from the PNGs they write: with one, two and
//! many bars every bar lies inside the plot area, clear of the y axis, one bar per slot (a
//! single bar in the middle), with its label under it below the x axis.
//!
//! The axes are found in the picture itself: the y axis is the column with the longest run of
//! black pixels, the x axis the row with the longest run (its right end is the plot's right
//! edge). Bars are the pixels of exactly their fill colour.

use std::path::Path;

use image::RgbaImage;
use plotters::prelude::*;

use super::bars::{Bar, Breakdown};
use super::columns::{Column, Columns};
use super::panels::{BarPanel, BarPanels, PanelBar};
use super::{Chart, register_font, render, series_color};

/// The colour of every bar in the single-colour charts; used nowhere else in them.
const BAR: RGBColor = RGBColor(214, 39, 40);

/// The fewest pixels between the y axis and a bar.
const MIN_GAP: u32 = 5;

/// Bar counts every chart kind is drawn with.
const COUNTS: [usize; 4] = [1, 2, 3, 12];

fn draw(chart: &impl Chart) -> RgbaImage {
    register_font().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let [png, _] = render(chart, dir.path()).unwrap();
    open(&png)
}

fn open(path: &Path) -> RgbaImage {
    image::open(path).unwrap().to_rgba8()
}

fn is_black(img: &RgbaImage, x: u32, y: u32) -> bool {
    img.get_pixel(x, y).0 == [0, 0, 0, 255]
}

/// The longest run of `hit` positions in `0..len`: `(start, length)`.
fn longest_run(len: u32, hit: impl Fn(u32) -> bool) -> (u32, u32) {
    let (mut best, mut start, mut run) = ((0, 0), 0, 0);
    for i in 0..len {
        if hit(i) {
            if run == 0 {
                start = i;
            }
            run += 1;
            if run > best.1 {
                best = (start, run);
            }
        } else {
            run = 0;
        }
    }
    best
}

/// The plot area as the axes draw it.
#[derive(Debug)]
struct Axes {
    /// Column of the y axis.
    y_axis: u32,
    /// Row of the x axis.
    x_axis: u32,
    /// Last column of the x axis: the plot's right edge.
    right: u32,
}

fn axes(img: &RgbaImage) -> Axes {
    let (w, h) = img.dimensions();
    let y_axis = (0..w)
        .max_by_key(|&x| {
            (
                longest_run(h, |y| is_black(img, x, y)).1,
                std::cmp::Reverse(x),
            )
        })
        .unwrap();
    let (x_axis, (start, len)) = (0..h)
        .map(|y| (y, longest_run(w, |x| is_black(img, x, y))))
        .max_by_key(|&(y, (_, len))| (len, std::cmp::Reverse(y)))
        .unwrap();
    assert!(len > w / 3, "no x axis found ({len} px)");
    assert!(
        start.abs_diff(y_axis) <= 1,
        "the axes do not meet: {start} vs {y_axis}"
    );
    Axes {
        y_axis,
        x_axis,
        right: start + len - 1,
    }
}

/// Runs of bar pixels along `row` within `xs`: `(first, last)` column of each bar.
fn bars_on_row(
    img: &RgbaImage,
    row: u32,
    xs: std::ops::Range<u32>,
    is_bar: &dyn Fn([u8; 4]) -> bool,
) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for x in xs {
        if !is_bar(img.get_pixel(x, row).0) {
            continue;
        }
        match runs.last_mut() {
            Some(run) if run.1 + 1 == x => run.1 = x,
            _ => runs.push((x, x)),
        }
    }
    runs
}

/// Checks the bars of a picture with `count` bars: every bar pixel right of the y axis by at
/// least [`MIN_GAP`], left of the plot's right edge and above the x axis; one bar per slot,
/// centred in it; some ink under each bar, below the x axis (its label).
fn assert_laid_out(img: &RgbaImage, count: usize, is_bar: &dyn Fn([u8; 4]) -> bool, what: &str) {
    let axes = axes(img);
    let (w, h) = img.dimensions();
    let mut bar_pixels = 0;
    for (x, y, p) in img.enumerate_pixels() {
        // A legend beside the plot (from 25 px right of it) may use the bars' colours.
        if x > axes.right + 12 || !is_bar(p.0) {
            continue;
        }
        bar_pixels += 1;
        assert!(
            x >= axes.y_axis + MIN_GAP && x <= axes.right && y < axes.x_axis,
            "{what}: bar pixel ({x}, {y}) outside the plot {axes:?}"
        );
    }
    assert!(bar_pixels > 100, "{what}: no bars drawn");
    // Just above the x axis every bar is at full width.
    let runs = bars_on_row(img, axes.x_axis - 2, axes.y_axis..axes.right + 1, is_bar);
    assert_eq!(runs.len(), count, "{what}: bars {runs:?} on {axes:?}");
    let slot = f64::from(axes.right - axes.y_axis) / count as f64;
    for (i, &(first, last)) in runs.iter().enumerate() {
        let centre = f64::from(first + last) / 2.0 - f64::from(axes.y_axis);
        let expected = (i as f64 + 0.5) * slot;
        assert!(
            (centre - expected).abs() <= 2.0,
            "{what}: bar {i} centred at {centre}, its slot's centre is {expected}"
        );
        // The label: ink in the band under the axis, below the bar's centre.
        let cx = (first + last) / 2;
        let label = (axes.x_axis + 3..(axes.x_axis + 40).min(h))
            .flat_map(|y| (cx.saturating_sub(6)..(cx + 7).min(w)).map(move |x| (x, y)))
            .filter(|&(x, y)| img.get_pixel(x, y).0[0] < 128)
            .count();
        assert!(label > 0, "{what}: no label under bar {i}");
    }
}

fn columns(count: usize) -> Columns {
    Columns {
        stem: "columns",
        size: (1200, 650),
        caption: format!("{count} columns"),
        x_label: "phase".into(),
        y_label: "MB/s".into(),
        columns: (0..count)
            .map(|i| Column {
                label: format!("run: executor {i}"),
                value: 100.0 + 10.0 * i as f64,
                note: format!("{} MB/s", 100 + 10 * i),
                color: BAR,
            })
            .collect(),
        legend: Vec::new(),
    }
}

#[test]
fn columns_sit_inside_the_plot_one_per_slot() {
    for count in COUNTS {
        let img = draw(&columns(count));
        assert_laid_out(&img, count, &|p| p == [214, 39, 40, 255], "columns");
    }
}

#[test]
fn stacked_bars_sit_inside_the_plot_one_per_slot() {
    let steps: Vec<[u8; 4]> = (0..7)
        .map(|s| {
            let c = series_color(s);
            [c.0, c.1, c.2, 255]
        })
        .collect();
    for count in COUNTS {
        let chart = Breakdown {
            stem: "stages",
            caption: format!("{count} bars"),
            x_label: "phase".into(),
            bars: (0..count)
                .map(|i| Bar {
                    label: format!("bar {i}"),
                    notes: vec!["3 compactions".into()],
                    shares: [20.0, 5.0, 10.0, 30.0, 20.0, 5.0, 10.0],
                })
                .collect(),
        };
        let img = draw(&chart);
        assert_laid_out(&img, count, &|p| steps.contains(&p), "stacked bars");
    }
}

#[test]
fn panel_bars_sit_inside_the_plot_one_per_slot() {
    for count in COUNTS {
        let chart = BarPanels {
            stem: "panels",
            size: (900, 500),
            caption: format!("{count} engines"),
            columns: 1,
            panels: vec![BarPanel {
                title: "fillrandom".into(),
                y_label: "ops/s".into(),
                bars: (0..count)
                    .map(|i| PanelBar {
                        label: format!("e{i}"),
                        color: BAR,
                        value: Some(1_000.0 * (i + 1) as f64),
                        low: 900.0 * (i + 1) as f64,
                        high: 1_100.0 * (i + 1) as f64,
                    })
                    .collect(),
            }],
            notes: Vec::new(),
        };
        let img = draw(&chart);
        assert_laid_out(&img, count, &|p| p == [214, 39, 40, 255], "panels");
    }
}

#[test]
fn a_line_chart_with_one_tick_puts_its_point_in_the_middle() {
    use super::lines::{Line, LineChart, Panel};
    let chart = LineChart {
        stem: "lines",
        size: (900, 600),
        caption: "one tick".into(),
        panels: vec![Panel {
            title: "sweep".into(),
            x_label: "size".into(),
            y_label: "MB/s".into(),
            x_ticks: vec!["4 MiB".into()],
            lines: vec![Line {
                label: "parallel".into(),
                color: BAR,
                dashed: false,
                points: vec![(0, 100.0)],
            }],
        }],
    };
    let img = draw(&chart);
    let axes = axes(&img);
    // The legend, in the upper left, has the line's colour too: look below it.
    let marker: Vec<(u32, u32)> = img
        .enumerate_pixels()
        .filter(|&(_, y, p)| y > axes.x_axis / 3 && p.0 == [214, 39, 40, 255])
        .map(|(x, y, _)| (x, y))
        .collect();
    assert!(marker.len() > 20, "no point drawn");
    let (min, max) = marker
        .iter()
        .fold((u32::MAX, 0), |(lo, hi), &(x, _)| (lo.min(x), hi.max(x)));
    assert!(
        min >= axes.y_axis + MIN_GAP && max <= axes.right,
        "{min}..{max} {axes:?}"
    );
    let centre = f64::from(min + max) / 2.0;
    let middle = f64::from(axes.y_axis + axes.right) / 2.0;
    assert!(
        (centre - middle).abs() <= 2.0,
        "point at {centre}, middle {middle}"
    );
}
