//! The peer comparison charts of `benches/peers/run --out DIR`, drawn from its `results.json`
//! by `sluice chart peers`:
//!
//! | file                      | content                                                       |
//! |---------------------------|---------------------------------------------------------------|
//! | `peers_ratio.{png,svg}`   | Sluice / peer per workload, one bar per peer, log2 axis       |
//! |                           | around 1.0 (only if Sluice and at least one peer ran)         |
//! | `peers_medians.{png,svg}` | one panel per workload: each engine's median, whisker from    |
//! |                           | its lowest to its highest run                                 |
//!
//! The script decides what is compared with what (which RocksDB setting faces which Sluice
//! executor, which compaction merged nothing) and writes it into results.json's `chart`
//! object; this module only draws it. Every row is a throughput (higher is better), so every
//! ratio reads the same way. The part of results.json read here:
//!
//! ```text
//! { "num": u64, "repeat": u64, "date": str,
//!   "machine": { "nproc": u64, "cpu": str, ... },
//!   "chart": { "engines": [ { "id": str, "name": str }, ... ],   // "sluice" is the reference
//!              "rows": [ { "label": str, "unit": str,
//!                          "cells": { <engine id>: { "median": f64, "min": f64, "max": f64,
//!                                                    "runs": u64, "comparable": bool } } } ],
//!              "notes": [ str, ... ] },
//!   ... }
//! ```
//!
//! A cell is missing when the engine did not run that workload; `comparable: false` marks a
//! median that is not the rate the row is about (a compaction that merged nothing), drawn as
//! `n/a` in both charts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::style::RGBColor;
use serde::Deserialize;
use sluice::{Error, IoContext, Result};

use super::panels::{BarPanel, BarPanels, PanelBar};
use super::ratios::{RatioBars, RatioGroup};
use super::{PALETTE, register_font, render, si_text};

/// The engine every ratio is taken of.
pub const REFERENCE_ENGINE: &str = "sluice";

/// The fields of results.json the charts use.
#[derive(Clone, Debug, Deserialize)]
pub struct PeerResults {
    pub num: u64,
    pub repeat: u64,
    #[serde(default)]
    pub date: String,
    #[serde(default)]
    pub machine: Machine,
    pub chart: PeerChart,
}

/// Where the comparison ran.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Machine {
    #[serde(default)]
    pub nproc: u64,
    #[serde(default)]
    pub cpu: String,
}

/// results.json's `chart` object.
#[derive(Clone, Debug, Deserialize)]
pub struct PeerChart {
    /// The engines that ran, in table order.
    pub engines: Vec<Engine>,
    pub rows: Vec<Row>,
    #[serde(default)]
    pub notes: Vec<String>,
}

/// An engine: its id in `cells` and its display name.
#[derive(Clone, Debug, Deserialize)]
pub struct Engine {
    pub id: String,
    pub name: String,
}

/// One workload's throughputs.
#[derive(Clone, Debug, Deserialize)]
pub struct Row {
    pub label: String,
    /// Unit of the medians (`ops/s`, `MB/s`).
    pub unit: String,
    pub cells: BTreeMap<String, Cell>,
}

/// One engine's runs of one workload.
#[derive(Clone, Copy, Debug, Deserialize)]
pub struct Cell {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: u64,
    pub comparable: bool,
}

impl PeerResults {
    /// Parses results.json's bytes; `path` names the file in errors, which give the byte
    /// offset of the problem.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| {
            let offset = byte_offset(bytes, e.line(), e.column());
            Error::corruption(path, offset, format!("not a peer results.json: {e}"))
        })
    }

    /// The comparable median of `engine` in `row`.
    fn median(row: &Row, engine: &str) -> Option<f64> {
        row.cells
            .get(engine)
            .filter(|c| c.comparable && c.median.is_finite() && c.median > 0.0)
            .map(|c| c.median)
    }
}

/// The byte offset of serde_json's 1-based `line` and `column` in `bytes` (0 if unknown).
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> u64 {
    let line_start: usize = bytes
        .split(|&b| b == b'\n')
        .take(line.saturating_sub(1))
        .map(|l| l.len() + 1)
        .sum();
    (line_start + column.saturating_sub(1)).min(bytes.len()) as u64
}

/// Reads `results` (a results.json of `benches/peers/run --out`) and writes the peer charts
/// into `dir`, creating it if needed. Returns the paths written.
pub fn write_peer_charts(results: &Path, dir: &Path) -> Result<Vec<PathBuf>> {
    let bytes = std::fs::read(results).with_path(results)?;
    let parsed = PeerResults::parse(&bytes, results)?;
    register_font()?;
    std::fs::create_dir_all(dir).with_path(dir)?;
    let mut written = Vec::new();
    if let Some(chart) = ratio_chart(&parsed) {
        written.extend(render(&chart, dir)?);
    }
    written.extend(render(&medians_chart(&parsed), dir)?);
    Ok(written)
}

/// A stable colour per engine, so an engine looks the same in both charts.
fn engine_color(id: &str, index: usize) -> RGBColor {
    match id {
        "sluice" => PALETTE[0],
        "rocksdb" => PALETTE[1],
        "pebble" => PALETTE[2],
        "fjall" => PALETTE[4],
        "leveldb" => PALETTE[5],
        _ => super::series_color(index + 6),
    }
}

/// `2M keys, median of 2 runs, 2 CPUs (AMD EPYC), 2026-11-22 06:35 UTC`.
fn setup(r: &PeerResults) -> String {
    let mut s = format!(
        "{} keys, median of {} run{}",
        si_text(r.num as f64),
        r.repeat,
        if r.repeat == 1 { "" } else { "s" }
    );
    if r.machine.nproc > 0 {
        s += &format!(", {} CPUs", r.machine.nproc);
        if !r.machine.cpu.is_empty() && r.machine.cpu != "unknown" {
            s += &format!(" ({})", r.machine.cpu);
        }
    }
    if !r.date.is_empty() {
        s += &format!(", {}", r.date);
    }
    s
}

/// Sluice / peer per row; `None` without Sluice or without a peer.
fn ratio_chart(r: &PeerResults) -> Option<RatioBars> {
    let c = &r.chart;
    if !c.engines.iter().any(|e| e.id == REFERENCE_ENGINE) {
        return None;
    }
    let peers: Vec<(usize, &Engine)> = c
        .engines
        .iter()
        .enumerate()
        .filter(|(_, e)| e.id != REFERENCE_ENGINE)
        .collect();
    if peers.is_empty() {
        return None;
    }
    let groups = c
        .rows
        .iter()
        .map(|row| RatioGroup {
            label: row.label.clone(),
            ratios: peers
                .iter()
                .map(|(_, p)| {
                    let ours = PeerResults::median(row, REFERENCE_ENGINE)?;
                    Some(ours / PeerResults::median(row, &p.id)?)
                })
                .collect(),
        })
        .collect();
    Some(RatioBars {
        stem: "peers_ratio",
        size: (1400, 720),
        caption: format!("Sluice / peer throughput ({})", setup(r)),
        x_label: "workload".into(),
        y_label: "Sluice ÷ peer (log scale; above 1: Sluice faster)".into(),
        series: peers
            .iter()
            .map(|(i, p)| (format!("Sluice / {}", p.name), engine_color(&p.id, *i)))
            .collect(),
        groups,
        notes: notes(r),
    })
}

/// Every engine's median per row, one panel per row.
fn medians_chart(r: &PeerResults) -> BarPanels {
    let c = &r.chart;
    let panels = c
        .rows
        .iter()
        .map(|row| BarPanel {
            title: row.label.clone(),
            y_label: row.unit.clone(),
            bars: c
                .engines
                .iter()
                .enumerate()
                .filter_map(|(i, e)| {
                    let cell = row.cells.get(&e.id)?;
                    Some(PanelBar {
                        label: short_name(&e.name).0.to_string(),
                        color: engine_color(&e.id, i),
                        value: PeerResults::median(row, &e.id),
                        low: cell.min,
                        high: cell.max,
                    })
                })
                .collect(),
        })
        .collect();
    let mut notes = vec![format!(
        "Bars: the median of each engine's runs; whiskers: its lowest to highest run ({} \
         runs per cell).",
        r.repeat
    )];
    // The panels are narrow: a name's parenthesis goes into the notes.
    notes.extend(c.engines.iter().filter_map(|e| match short_name(&e.name) {
        (short, Some(more)) => Some(format!("{short}: {more}.")),
        (_, None) => None,
    }));
    notes.extend(self::notes(r));
    BarPanels {
        stem: "peers_medians",
        size: (1500, 900),
        caption: format!("Throughput per engine ({})", setup(r)),
        columns: 4,
        panels,
        notes,
    }
}

/// An engine's name without its trailing parenthesis, and what the parenthesis said:
/// `RocksDB 7.8.3 (Debian, assertions on)` is `RocksDB 7.8.3` and `Debian, assertions on`.
fn short_name(name: &str) -> (&str, Option<&str>) {
    match name.strip_suffix(')').and_then(|n| n.split_once(" (")) {
        Some((short, more)) => (short, Some(more)),
        None => (name, None),
    }
}

/// The script's notes, then what `n/a` means if a cell shows it.
fn notes(r: &PeerResults) -> Vec<String> {
    let mut notes = r.chart.notes.clone();
    let any_na = r
        .chart
        .rows
        .iter()
        .any(|row| row.cells.values().any(|c| !c.comparable));
    if any_na {
        notes.push(
            "n/a: some run of that engine merged nothing (one input table, a table moved down \
             whole, or nothing left to compact): not a merge rate."
                .into(),
        );
    }
    notes
}

#[cfg(test)]
mod tests;
