//! Criterion benchmarks of lz4 on the blocks a compaction writes: 4 KiB data blocks of 16-byte
//! keys and 100-byte values that compress to about half, as `sluice bench` writes them. What
//! Sluice ships ([`compress`]: `lz4_flex`'s unsafe encoder; [`decompress`]: the reference C
//! library) beside the other side of each: the C library's encoder, and `lz4_flex`'s safe
//! decoder (what Sluice read with before). Throughput is of uncompressed bytes; the compressed
//! sizes are printed once. Design note 0001 quotes these.
//!
//! `cargo bench -p sluice-sst --bench compression`

#![allow(clippy::unwrap_used, reason = "benchmark set-up")]

mod common;

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_sst::block::BlockBuilder;
use sluice_sst::compression::{CompressionType, compress, decompress};
use sluice_sst::key::{ValueKind, make_internal_key};

/// Data blocks of about `TableOptions::default().block_size` bytes.
const BLOCKS: u64 = 512;

fn blocks() -> Vec<Vec<u8>> {
    let block_size = common::table_options().block_size;
    let mut n = 0u64;
    (0..BLOCKS)
        .map(|_| {
            let mut builder = BlockBuilder::new(16);
            while builder.estimated_size() < block_size {
                let key = format!("{:016}", n * 7);
                let ikey = make_internal_key(key.as_bytes(), n + 1, ValueKind::Value);
                builder.add(&ikey, &common::value(n, 100));
                n += 1;
            }
            builder.finish(block_size * 2)
        })
        .collect()
}

/// A block as the C library compresses it, size prefix included.
fn c_compress(block: &[u8]) -> Vec<u8> {
    let mut out = vec![0; 4 + lz4::block::compress_bound(block.len()).unwrap()];
    let n = lz4::block::compress_to_buffer(block, None, true, &mut out).unwrap();
    out.truncate(n);
    out
}

fn bench_lz4(c: &mut Criterion) {
    let blocks = blocks();
    let raw: usize = blocks.iter().map(Vec::len).sum();
    let shipped: Vec<Vec<u8>> = blocks
        .iter()
        .map(|b| {
            let mut out = Vec::new();
            assert_eq!(
                compress(CompressionType::Lz4, b, &mut out),
                CompressionType::Lz4
            );
            out
        })
        .collect();
    let by_c: Vec<Vec<u8>> = blocks.iter().map(|b| c_compress(b)).collect();
    let size = |v: &[Vec<u8>]| v.iter().map(Vec::len).sum::<usize>();
    println!(
        "{BLOCKS} blocks, {raw} bytes: lz4_flex writes {} bytes ({:.3} of raw), the C library {} ({:.3})",
        size(&shipped),
        size(&shipped) as f64 / raw as f64,
        size(&by_c),
        size(&by_c) as f64 / raw as f64,
    );
    let mut group = c.benchmark_group("lz4");
    group.throughput(Throughput::Bytes(raw as u64));
    group.bench_function("compress/lz4_flex (shipped)", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            for block in &blocks {
                black_box(compress(CompressionType::Lz4, block, &mut out));
            }
        });
    });
    group.bench_function("compress/c", |b| {
        b.iter(|| {
            for block in &blocks {
                black_box(c_compress(block));
            }
        });
    });
    group.bench_function("decompress/c (shipped)", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            for (block, stored) in blocks.iter().zip(&shipped) {
                decompress(CompressionType::Lz4, stored, block.len(), &mut out).unwrap();
                black_box(&out);
            }
        });
    });
    group.bench_function("decompress/lz4_flex safe", |b| {
        let mut out = Vec::new();
        b.iter(|| {
            for (block, stored) in blocks.iter().zip(&shipped) {
                out.resize(block.len(), 0);
                black_box(lz4_flex::block::decompress_into(&stored[4..], &mut out).unwrap());
            }
        });
    });
    group.finish();
}

criterion_group!(benches, bench_lz4);
criterion_main!(benches);
