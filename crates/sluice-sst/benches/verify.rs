//! Criterion benchmarks of the host's check of a worker's output, per output entry: the full
//! read that every `--verify-outputs` level runs (`Table::verify_all`: checksums, decoding,
//! order, filter and properties rebuilt from the data) and the same read with the drop audit
//! that `audit` adds, over a table of overwritten keys whose older versions were dropped (the
//! shape of an inverted LSM's compaction). Design note 0005 quotes these as the check's cost.
//!
//! `cargo bench -p sluice-sst --bench verify`

#![allow(clippy::unwrap_used, reason = "benchmark set-up")]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::compaction_iter::drop_log::{DropLogWriter, DropReason};
use sluice_sst::compression::CompressionType;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

/// The `sluice` binary's allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Written entries: 16-byte keys and 100-byte values, as the benchmark writes them.
const ENTRIES: u64 = 200_000;

fn table_options() -> TableOptions {
    TableOptions {
        compression: CompressionType::Lz4,
        ..TableOptions::default()
    }
}

/// Writes one output table at `path` and returns its drop log: every other key had an older
/// version, dropped as shadowed by the written one.
fn output(path: &Path) -> Vec<u8> {
    let mut builder = TableBuilder::create(path, &table_options()).unwrap();
    let mut log = DropLogWriter::default();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..ENTRIES {
        let key = format!("{:016}", i * 7);
        let seq = 1_000_000 + i * 3;
        let written = make_internal_key(key.as_bytes(), seq, ValueKind::Value);
        let value: Vec<u8> = (0..100)
            .map(|j| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                if j < 50 { b'a' + (x % 26) as u8 } else { b'v' }
            })
            .collect();
        builder.add(&written, &value).unwrap();
        log.written(&written);
        if i % 2 == 0 {
            let older = make_internal_key(key.as_bytes(), seq - 1 - (x % 1000), ValueKind::Value);
            log.push(&older, DropReason::Shadowed { by: seq });
        }
    }
    builder.finish().unwrap();
    log.take().into_bytes()
}

fn spec() -> CompactionSpec {
    CompactionSpec {
        table: table_options(),
        target_file_size: 64 << 20,
        log_drops: true,
        ..CompactionSpec::default()
    }
}

fn bench_check(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.sst");
    let log = output(&path);
    let spec = spec();
    let table = Table::open(&path, 1, TableReadOptions::default()).unwrap();
    let mut group = c.benchmark_group("host_check");
    group.throughput(Throughput::Elements(ENTRIES));
    group.bench_function("full_read", |b| {
        b.iter(|| black_box(table.verify_all().unwrap()));
    });
    group.bench_function("full_read_and_drop_audit", |b| {
        b.iter(|| {
            let mut audit = DropAudit::new(&spec, None, None, &log).unwrap();
            let report = table
                .verify_all_visiting(|key, same| audit.written(key, same))
                .unwrap();
            let counts = audit.finish().unwrap();
            assert_eq!(counts.shadowed, ENTRIES / 2);
            black_box(report)
        });
    });
    group.finish();
}

criterion_group!(benches, bench_check);
criterion_main!(benches);
