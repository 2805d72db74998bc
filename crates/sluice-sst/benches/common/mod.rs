//! What the compute-step benchmarks share: their table options, values and compaction spec.

// Each benchmark is its own crate and uses only part of this.
#![allow(dead_code, reason = "each benchmark uses part of this module")]

use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::plan::SubTask;
use sluice_sst::compression::CompressionType;
use sluice_sst::table::TableOptions;

pub fn table_options() -> TableOptions {
    TableOptions {
        compression: CompressionType::Lz4,
        ..TableOptions::default()
    }
}

/// A value of `len` bytes that compresses to about half, as the benchmark's values do.
pub fn value(n: u64, len: usize) -> Vec<u8> {
    let mut x = n.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let half: Vec<u8> = (0..len / 2)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b' ' + (x % 95) as u8
        })
        .collect();
    half.iter().cycle().take(len).copied().collect()
}

/// A bottommost compaction of everything into one unbounded output, with nothing else asked.
pub fn spec() -> CompactionSpec {
    CompactionSpec {
        bottommost: true,
        table: table_options(),
        ..CompactionSpec::default()
    }
}

/// The sub-task of everything: the merge of whole runs.
pub fn whole() -> SubTask {
    SubTask {
        index: 0,
        lower: None,
        upper: None,
        blocks: Vec::new(),
    }
}
