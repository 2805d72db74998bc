//! L0 sublevels, as Pebble organises L0: the L0 files arranged in layers such that the files of
//! one layer never overlap, and of two overlapping files the newer is in a higher layer.
//!
//! Built oldest file first: a file goes one layer above the highest layer holding an older file
//! it overlaps (layer 0 if none). Then every layer is a sorted run of disjoint files, so a read
//! needs at most one file per layer, and an iterator one level iterator per layer: L0's read
//! amplification is the number of sublevels, not the number of files. Flushes of random keys
//! overlap everything and stack one layer each; flushes of disjoint key ranges (sequential
//! loads, or L0 compactions cut by key range) share layers.

use std::sync::Arc;

use super::edit::FileMetaData;
use super::version::{smallest_user_key, user_ranges_overlap};

/// The sublevels of `l0` (files newest first, as a version keeps them): newest layer first,
/// each layer's files sorted by smallest key.
pub fn l0_sublevels(l0: &[Arc<FileMetaData>]) -> Vec<Vec<Arc<FileMetaData>>> {
    let mut placed: Vec<(usize, &Arc<FileMetaData>)> = Vec::with_capacity(l0.len());
    for f in l0.iter().rev() {
        let layer = placed
            .iter()
            .filter(|(_, older)| user_ranges_overlap(f, older))
            .map(|(layer, _)| layer + 1)
            .max()
            .unwrap_or(0);
        placed.push((layer, f));
    }
    let layers = placed.iter().map(|(l, _)| l + 1).max().unwrap_or(0);
    let mut sublevels: Vec<Vec<Arc<FileMetaData>>> = vec![Vec::new(); layers];
    for (layer, f) in placed {
        if let Some(s) = sublevels.get_mut(layer) {
            s.push(Arc::clone(f));
        }
    }
    for s in &mut sublevels {
        s.sort_by(|a, b| smallest_user_key(a).cmp(smallest_user_key(b)));
    }
    sublevels.reverse();
    sublevels
}

#[cfg(test)]
mod tests {
    use sluice_sst::key::{ValueKind, make_internal_key};

    use super::*;
    use crate::version::version::largest_user_key;

    fn file(number: u64, lo: &str, hi: &str) -> Arc<FileMetaData> {
        Arc::new(FileMetaData {
            number,
            smallest: make_internal_key(lo.as_bytes(), number, ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), number, ValueKind::Value),
            smallest_seq: number,
            largest_seq: number,
            ..FileMetaData::default()
        })
    }

    fn numbers(s: &[Vec<Arc<FileMetaData>>]) -> Vec<Vec<u64>> {
        s.iter()
            .map(|l| l.iter().map(|f| f.number).collect())
            .collect()
    }

    #[test]
    fn disjoint_files_share_a_layer_and_overlapping_ones_stack() {
        // Newest first, as a version keeps L0.
        let l0 = vec![
            file(5, "a", "z"), // overlaps everything: on top
            file(4, "m", "p"), // overlaps 2 (layer 1): layer 2
            file(3, "x", "y"), // overlaps nothing older: layer 0
            file(2, "c", "n"), // overlaps 1: layer 1
            file(1, "a", "d"),
        ];
        let s = l0_sublevels(&l0);
        assert_eq!(numbers(&s), vec![vec![5], vec![4], vec![2], vec![1, 3]]);
    }

    #[test]
    fn layers_are_disjoint_runs_and_newer_overlapping_files_sit_higher() {
        let mut x = 3u64;
        let mut l0 = Vec::new();
        for n in (1..=40u64).rev() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let lo = (x >> 40) % 1000;
            let hi = lo + (x >> 20) % 200;
            l0.push(file(n, &format!("{lo:04}"), &format!("{hi:04}")));
        }
        let s = l0_sublevels(&l0);
        let layer_of = |n: u64| {
            s.iter()
                .position(|l| l.iter().any(|f| f.number == n))
                .unwrap()
        };
        assert_eq!(s.iter().map(Vec::len).sum::<usize>(), 40);
        for layer in &s {
            for w in layer.windows(2) {
                assert!(
                    largest_user_key(&w[0]) < smallest_user_key(&w[1]),
                    "a layer overlaps"
                );
            }
        }
        for a in &l0 {
            for b in &l0 {
                // Layers are listed newest first: a lower position is a higher layer.
                if a.number > b.number && user_ranges_overlap(a, b) {
                    assert!(layer_of(a.number) < layer_of(b.number));
                }
            }
        }
        assert!(s.len() < 40, "some files should share a layer");
    }
}
