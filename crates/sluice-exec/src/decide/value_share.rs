//! `V_size` of formula (1): the share of a compaction's input entries whose value is large,
//! estimated from the value-size histograms in the input tables' properties (no data block is
//! read).
//!
//! Separated values ([`ValueKind::BlobIndex`] entries, value separation's references into blob
//! files) count as small, whatever the size of the value they name: the merge copies the
//! reference, a few bytes, not the value, so the copying that makes the pipeline lose on large
//! values is not there and, with separation on, the pipeline stays on. The histogram records
//! the reference's size, so no special case is needed here; the test
//! `separated_values_keep_the_pipeline_on` holds this down. (A compaction that collects blob
//! files does copy the values it relocates, but it runs whole on the host with the local
//! executor, so this decision never sees it.)
//!
//! [`ValueKind::BlobIndex`]: sluice_sst::key::ValueKind::BlobIndex

use std::sync::Arc;

use sluice_sst::table::Table;

/// Estimated share (`0.0..=1.0`) of the entries in `inputs` (every table of every run) whose
/// value is larger than `large_value_bytes`, each table weighted by its entry count; 0 when
/// there are no entries.
///
/// How the histogram is read ([`share_of_values_larger_than`]): bucket 0 holds empty values, bucket `i >= 1` the sizes
/// `2^(i-1) ..= 2^i - 1`, and the last bucket every size from 4 MiB up. A bucket wholly above
/// the threshold counts whole, one wholly at or below it counts nothing, and a bucket that
/// straddles it counts the fraction of its size range above it, as if sizes were spread evenly
/// within the bucket.
///
/// So at the power-of-two defaults, values of *exactly* the threshold count as large: 32 KiB
/// (32768) is the lowest size of the bucket `32768 ..= 65535`, which counts as
/// `32767 / 32768` of its entries, because the histogram cannot tell a 32768-byte value from a
/// 65535-byte one. That agrees with the CoPro paper Fig. 7, where pipelining already loses at
/// 32 KB values on the host (and at 16 KB on the device). To count them as small instead, set
/// the threshold to the bucket's top (`65535`). Values one byte below the threshold fall in
/// the bucket below and count nothing. The open last bucket always counts whole, so thresholds
/// of 4 MiB or more overestimate.
///
/// Tombstones are in the histogram under their (usually empty) value and count as small.
/// Tables whose histogram is empty although they hold entries (written before the property
/// existed) are left out of both the numerator and the weights: they give no evidence either
/// way.
///
/// [`share_of_values_larger_than`]:
///     sluice_sst::properties::TableProperties::share_of_values_larger_than
pub fn large_value_share(inputs: &[Vec<Arc<Table>>], large_value_bytes: u64) -> f64 {
    // Sums in f64: entry counts decoded from disk may add up past u64::MAX.
    let (mut large, mut entries) = (0.0f64, 0.0f64);
    for table in inputs.iter().flatten() {
        let props = table.properties();
        if props.value_size_histogram.iter().all(|&c| c == 0) {
            continue;
        }
        let weight = props.num_entries as f64;
        large += weight * props.share_of_values_larger_than(large_value_bytes);
        entries += weight;
    }
    if entries == 0.0 {
        return 0.0;
    }
    (large / entries).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_sst::blob::BlobRef;
    use sluice_sst::key::{ValueKind, make_internal_key};
    use sluice_sst::table::{TableBuilder, TableOptions, TableReadOptions};

    use super::*;
    use crate::CompactionMode;
    use crate::decide::{DecisionConfig, Measurements, decide};

    /// Writes and opens table `number` holding one entry per size in `sizes`, in key order,
    /// and `tombstones` deletions after them.
    fn table(dir: &Path, number: u64, sizes: &[usize], tombstones: usize) -> Arc<Table> {
        let path = dir.join(format!("{number:06}.sst"));
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        for (i, &size) in sizes.iter().enumerate() {
            let key = make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::Value);
            b.add(&key, &vec![b'v'; size]).unwrap();
        }
        for i in 0..tombstones {
            let key = make_internal_key(format!("z{i:06}").as_bytes(), 1, ValueKind::Deletion);
            b.add(&key, b"").unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, number, TableReadOptions::default()).unwrap()
    }

    /// Writes and opens table `number` holding one reference per size in `sizes`: the
    /// entries a flush with value separation writes for values of those sizes.
    fn separated_table(dir: &Path, number: u64, sizes: &[usize]) -> Arc<Table> {
        let path = dir.join(format!("{number:06}.sst"));
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        let mut offset = 0;
        for (i, &size) in sizes.iter().enumerate() {
            let key = make_internal_key(format!("k{i:06}").as_bytes(), 1, ValueKind::BlobIndex);
            let size = size as u64;
            let blob = BlobRef {
                file_number: 7,
                offset,
                size,
            };
            offset += size;
            b.add(&key, &blob.encode()).unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, number, TableReadOptions::default()).unwrap()
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn weighted_by_entries_not_by_tables() {
        let dir = tempfile::tempdir().unwrap();
        // Run 1: 3 values of 70 000 bytes (bucket 65536..=131071, wholly above 32 KiB).
        // Run 2: two tables of 1000-byte values, 5 and 2 entries.
        let inputs = vec![
            vec![table(dir.path(), 1, &[70_000; 3], 0)],
            vec![
                table(dir.path(), 2, &[1000; 5], 0),
                table(dir.path(), 3, &[1000; 2], 0),
            ],
        ];
        let host = DecisionConfig::host().large_value_bytes;
        // 3 of 10 entries; the mean of the per-table shares would be 1/3.
        assert!(close(large_value_share(&inputs, host), 0.3));
        // Against 511 bytes every value is large (1000 is in 512..=1023); against 128 KiB none.
        assert!(close(large_value_share(&inputs, 511), 1.0));
        assert_eq!(large_value_share(&inputs, 128 << 10), 0.0);
        assert_eq!(large_value_share(&[], host), 0.0);
        assert_eq!(large_value_share(&[vec![], vec![]], host), 0.0);
    }

    #[test]
    fn tombstones_count_as_small_entries() {
        let dir = tempfile::tempdir().unwrap();
        let inputs = vec![vec![table(dir.path(), 1, &[70_000; 6], 4)]];
        assert!(close(large_value_share(&inputs, 32 << 10), 0.6));
    }

    #[test]
    fn buckets_at_and_around_the_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let at = |size: usize, threshold: u64, n: u64| {
            let t = table(dir.path(), n, &[size; 4], 0);
            large_value_share(&[vec![t]], threshold)
        };
        let host = DecisionConfig::HOST_LARGE_VALUE_BYTES;
        // Exactly 32 KiB opens the bucket 32768..=65535: counted large, all but 1/32768 of it.
        assert!(close(at(32 << 10, host, 1), 32767.0 / 32768.0));
        // One byte less is in the bucket below, wholly at or under the threshold.
        assert_eq!(at((32 << 10) - 1, host, 2), 0.0);
        // With the threshold at the bucket's top, exactly-32-KiB values count as small.
        assert_eq!(at(32 << 10, 65535, 3), 0.0);
        // A bucket straddling the threshold counts the part of its range above it, whatever
        // the actual sizes: 20 000-byte values, none above 24 KiB, still count for about half
        // (sizes 16384..=32767, of which 24577..=32767 are above).
        assert!(close(at(20_000, 24 << 10, 4), 8191.0 / 16384.0));
        // The worker's 16 KiB: 16 KiB values are large there and not on the host.
        let worker = DecisionConfig::WORKER_LARGE_VALUE_BYTES;
        assert!(close(at(16 << 10, worker, 5), 16383.0 / 16384.0));
        assert_eq!(at(16 << 10, host, 6), 0.0);
    }

    #[test]
    fn drives_the_host_decision() {
        let dir = tempfile::tempdir().unwrap();
        let host = DecisionConfig::host();
        let choose = |large: usize, small: usize, n: u64| {
            let mut sizes = vec![40 << 10; large];
            sizes.extend(std::iter::repeat_n(100, small));
            let t = table(dir.path(), n, &sizes, 0);
            let m = Measurements {
                large_value_share: large_value_share(&[vec![t]], host.large_value_bytes),
                ..Measurements::default()
            };
            decide(&host, &m).mode
        };
        // 40 KiB values count at (65535 - 32768) / 32768 of an entry each, just under 1.
        assert_eq!(choose(8, 2, 1), CompactionMode::Sequential);
        assert_eq!(choose(6, 4, 2), CompactionMode::Pipelined);
        assert_eq!(choose(0, 5, 3), CompactionMode::Pipelined);
    }

    #[test]
    fn separated_values_keep_the_pipeline_on() {
        let dir = tempfile::tempdir().unwrap();
        let host = DecisionConfig::host();
        let mode = |t: Arc<Table>| {
            let m = Measurements {
                large_value_share: large_value_share(&[vec![t]], host.large_value_bytes),
                ..Measurements::default()
            };
            (m.large_value_share, decide(&host, &m).mode)
        };
        // The same ten 64 KiB values: inline they switch the pipeline off; as references
        // the compaction copies a few bytes each and the pipeline stays on.
        let (share, inline) = mode(table(dir.path(), 1, &[64 << 10; 10], 0));
        assert!(close(share, 1.0));
        assert_eq!(inline, CompactionMode::Sequential);
        let (share, separated) = mode(separated_table(dir.path(), 2, &[64 << 10; 10]));
        assert_eq!(share, 0.0);
        assert_eq!(separated, CompactionMode::Pipelined);
    }
}
