//! The peer charts from a small results.json: what is compared, what is not, and real
//! pictures.

use plotters::prelude::{IntoDrawingArea, SVGBackend};
use proptest::prelude::*;

use super::*;
use crate::charts::testing::{distinct_colors, ink_pixels};

/// A results.json as `benches/peers/run --out` writes it, cut down to what the charts read
/// plus a field they ignore.
const FIXTURE: &str = r#"{
 "command": "benches/peers/run --num 20000 --repeat 2",
 "date": "2026-11-22 06:35 UTC",
 "machine": {"nproc": 2, "cpu": "AMD EPYC", "memory": "23.5 GiB"},
 "num": 2000000, "repeat": 2,
 "chart": {
  "engines": [{"id": "sluice", "name": "Sluice"}, {"id": "rocksdb", "name": "RocksDB"},
              {"id": "leveldb", "name": "LevelDB"}],
  "rows": [
   {"label": "fillrandom", "unit": "ops/s", "cells": {
     "sluice": {"median": 100000, "min": 90000, "max": 110000, "runs": 2, "comparable": true},
     "rocksdb": {"median": 50000, "min": 45000, "max": 55000, "runs": 2, "comparable": true},
     "leveldb": {"median": 200000, "min": 150000, "max": 250000, "runs": 2, "comparable": true}}},
   {"label": "compact (parallel)", "unit": "MB/s", "cells": {
     "sluice": {"median": 150, "min": 128, "max": 170, "runs": 2, "comparable": true},
     "rocksdb": {"median": 51, "min": 50, "max": 52, "runs": 2, "comparable": true},
     "leveldb": {"median": 4481, "min": 1960, "max": 7001, "runs": 2, "comparable": false}}},
   {"label": "YCSB A", "unit": "ops/s", "cells": {
     "sluice": {"median": 106000, "min": 92000, "max": 121000, "runs": 2, "comparable": true},
     "leveldb": {"median": 118000, "min": 101000, "max": 136000, "runs": 2, "comparable": true}}}
  ],
  "notes": ["compact (parallel): Sluice --compaction-mode parallel, RocksDB --subcompactions=3"]
 }
}"#;

fn fixture() -> PeerResults {
    PeerResults::parse(FIXTURE.as_bytes(), Path::new("results.json")).unwrap()
}

#[test]
fn ratios_are_sluice_over_each_peer_and_skip_what_is_not_comparable() {
    let chart = ratio_chart(&fixture()).unwrap();
    let names: Vec<&str> = chart.series.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Sluice / RocksDB", "Sluice / LevelDB"]);
    let ratios: Vec<&[Option<f64>]> = chart.groups.iter().map(|g| &g.ratios[..]).collect();
    assert_eq!(ratios[0], [Some(2.0), Some(0.5)]);
    // LevelDB's compaction merged nothing: no ratio.
    assert_eq!(ratios[1][1], None);
    assert!((ratios[1][0].unwrap() - 150.0 / 51.0).abs() < 1e-12);
    // RocksDB did not run YCSB.
    assert_eq!(ratios[2][0], None);
    assert!(
        chart
            .caption
            .contains("2M keys, median of 2 runs, 2 CPUs (AMD EPYC)")
    );
    assert!(chart.notes.iter().any(|n| n.starts_with("n/a:")));
}

#[test]
fn medians_show_every_engine_that_ran_with_its_spread() {
    let chart = medians_chart(&fixture());
    assert_eq!(chart.panels.len(), 3);
    let compact = &chart.panels[1];
    assert_eq!(compact.y_label, "MB/s");
    let leveldb = &compact.bars[2];
    assert_eq!((leveldb.label.as_str(), leveldb.value), ("LevelDB", None));
    let sluice = &compact.bars[0];
    assert_eq!(
        (sluice.value, sluice.low, sluice.high),
        (Some(150.0), 128.0, 170.0)
    );
    // One colour per engine, the same in both charts.
    assert_eq!(sluice.color, engine_color("sluice", 0));
    assert_eq!(chart.panels[2].bars.len(), 2);
}

#[test]
fn long_names_lose_their_parenthesis_to_the_notes_under_the_panels() {
    let mut r = fixture();
    r.chart.engines[1].name = "RocksDB 7.8.3 (Debian, assertions on)".into();
    let chart = medians_chart(&r);
    assert_eq!(chart.panels[0].bars[1].label, "RocksDB 7.8.3");
    assert!(
        chart
            .notes
            .contains(&"RocksDB 7.8.3: Debian, assertions on.".to_string()),
        "{:?}",
        chart.notes
    );
    assert_eq!(short_name("Sluice"), ("Sluice", None));
    assert_eq!(short_name("a (b) c"), ("a (b) c", None));
}

#[test]
fn ratio_values_print_two_decimals_or_n_a() {
    assert_eq!(crate::charts::ratios::value_text(Some(2.345)), "2.35");
    assert_eq!(crate::charts::ratios::value_text(None), "n/a");
    assert_eq!(crate::charts::ratios::value_text(Some(f64::NAN)), "n/a");
}

#[test]
fn without_sluice_or_peers_there_is_no_ratio_chart() {
    let mut r = fixture();
    r.chart.engines.retain(|e| e.id != "sluice");
    assert!(ratio_chart(&r).is_none());
    let mut r = fixture();
    r.chart.engines.retain(|e| e.id == "sluice");
    assert!(ratio_chart(&r).is_none());
    assert_eq!(medians_chart(&r).panels[0].bars.len(), 1);
}

#[test]
fn both_charts_are_real_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.json");
    std::fs::write(&results, FIXTURE).unwrap();
    let out = dir.path().join("charts");
    let written = write_peer_charts(&results, &out).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "peers_ratio.png",
            "peers_ratio.svg",
            "peers_medians.png",
            "peers_medians.svg"
        ]
    );
    for path in &written {
        if path.extension().is_some_and(|e| e == "png") {
            assert!(distinct_colors(path) > 8, "{} is blank", path.display());
            assert!(
                ink_pixels(path) > 20_000,
                "{} is nearly blank",
                path.display()
            );
        } else {
            let svg = std::fs::read_to_string(path).unwrap();
            assert!(
                svg.contains("<text") && svg.contains("Sluice"),
                "{svg:.200}"
            );
        }
    }
}

#[test]
fn a_damaged_file_is_corruption_at_its_offset() {
    let path = Path::new("results.json");
    let mut damaged = FIXTURE.as_bytes().to_vec();
    let at = FIXTURE.find("\"median\": 150").unwrap() + "\"median\": ".len();
    damaged[at] = b'x';
    match PeerResults::parse(&damaged, path) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, at as u64);
        }
        other => panic!("{other:?}"),
    }
    // Cut short, or missing the chart object (an older results.json).
    assert!(PeerResults::parse(&FIXTURE.as_bytes()[..FIXTURE.len() / 2], path).is_err());
    let old = r#"{"num": 1, "repeat": 1, "tables": {}}"#;
    let err = PeerResults::parse(old.as_bytes(), path).unwrap_err();
    assert!(err.to_string().contains("chart"), "{err}");
    let missing = write_peer_charts(Path::new("/nonexistent/results.json"), Path::new("/tmp"));
    assert!(matches!(missing, Err(Error::Io { .. })));
}

#[test]
fn offsets_count_bytes_of_earlier_lines() {
    assert_eq!(byte_offset(b"ab\ncd", 2, 2), 4);
    assert_eq!(byte_offset(b"ab\ncd", 1, 1), 0);
    assert_eq!(byte_offset(b"ab", 9, 9), 2);
    assert_eq!(byte_offset(b"", 0, 0), 0);
}

proptest! {
    #[test]
    fn random_bytes_never_panic_the_parser(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Err(Error::Corruption { offset, .. }) =
            PeerResults::parse(&bytes, Path::new("r.json"))
        {
            prop_assert!(offset <= bytes.len() as u64);
        }
    }

    #[test]
    fn any_numbers_draw_without_panicking(
        values in proptest::collection::vec(
            (any::<f64>(), any::<f64>(), any::<bool>()), 1..6),
    ) {
        let mut r = fixture();
        for (row, (median, max, comparable)) in r.chart.rows.iter_mut().zip(&values) {
            for cell in row.cells.values_mut() {
                *cell = Cell { median: *median, min: 0.0, max: *max, runs: 1, comparable: *comparable };
            }
        }
        crate::charts::register_font().unwrap();
        let mut svg = String::new();
        let root = SVGBackend::with_string(&mut svg, (800, 600)).into_drawing_area();
        if let Some(c) = ratio_chart(&r) {
            prop_assert!(crate::charts::Chart::draw(&c, &root).is_ok());
        }
        prop_assert!(crate::charts::Chart::draw(&medians_chart(&r), &root).is_ok());
    }
}
