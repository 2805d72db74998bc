//! Every executor produces the same bytes: for random input trees (overlapping runs, snapshots,
//! tombstones, merge operands, values from 0 bytes to 64 KiB), the sequential, pipelined, parallel and streaming executors
//! must write identical files with identical cuts, and so must S-PPCP (inputs and outputs spread
//! over directories, each with its own reader and writer), C-PPCP whose compute threads read
//! their own sub-tasks (buffered inputs in one directory) and an executor reading and writing
//! with direct I/O. Every executor logs the same drops, and the host's audit of them
//! (`sluice_sst::compact::drop_audit`) passes every honest compaction.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use proptest::prelude::*;
use sluice::compaction::executor::{CompactionMode, ExecOptions, execute};
use sluice::fs::{IoMode, OsFileSystem, Storage, os_fs, probe_direct_io};
use sluice::{CompactionFilter, FilterDecision, MergeOperator};
use sluice_sst::compact::CompactionSpec;
use sluice_sst::compact::GrandparentFile;
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::range_del::{RangeTombstone, Tombstones};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

#[derive(Clone, Debug)]
struct Entry {
    key: u16,
    kind: ValueKind,
    value_len: usize,
}

fn entry_strategy() -> impl Strategy<Value = Entry> {
    (
        0u16..2000,
        prop_oneof![
            3 => Just(ValueKind::Deletion),
            13 => Just(ValueKind::Value),
            4 => Just(ValueKind::Merge),
        ],
        prop_oneof![8 => 0usize..200, 1 => 0usize..(64 << 10)],
    )
        .prop_map(|(key, kind, value_len)| Entry {
            key,
            kind,
            value_len,
        })
}

fn table_options() -> TableOptions {
    TableOptions {
        block_size: 1024,
        ..TableOptions::default()
    }
}

/// Writes one run (a table) of `entries`, all with sequence numbers from `first_seq`.
fn write_run(dir: &Path, number: u64, entries: &[Entry], first_seq: u64) -> Arc<Table> {
    let mut sorted: Vec<(Vec<u8>, u64, &Entry)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            (
                format!("key{:05}", e.key).into_bytes(),
                first_seq + i as u64,
                e,
            )
        })
        .collect();
    // Internal-key order: user key ascending, sequence descending.
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    let path = dir.join(format!("{number:06}.sst"));
    let mut builder = TableBuilder::create(&path, &table_options()).unwrap();
    for (key, seq, e) in sorted {
        let kind = e.kind;
        let value: Vec<u8> = if kind == ValueKind::Deletion {
            Vec::new()
        } else {
            (0..e.value_len)
                .map(|i| (i as u8).wrapping_mul(seq as u8 | 1))
                .collect()
        };
        builder
            .add(&make_internal_key(&key, seq, kind), &value)
            .unwrap();
    }
    builder.finish().unwrap();
    Table::open(&path, number, TableReadOptions::default()).unwrap()
}

/// Runs `spec` with `mode`, dealing output files over `dirs` directories under `out` (more
/// than one makes the pipelined and parallel executors S-PPCP); returns the files' bytes and
/// the drop log, after the host's audit of the drops passed and counted what the statistics
/// count.
fn run_mode(
    spec: &CompactionSpec,
    mode: CompactionMode,
    threads: usize,
    out: &Path,
    dirs: usize,
) -> (Vec<Vec<u8>>, Vec<u8>) {
    for d in 0..dirs {
        std::fs::create_dir_all(out.join(format!("d{d}"))).unwrap();
    }
    let mut next = 1000u64;
    let mut new_output = || -> sluice_sst::Result<(u64, PathBuf)> {
        next += 1;
        let dir = out.join(format!("d{}", next as usize % dirs));
        Ok((next, dir.join(format!("{next:06}.sst"))))
    };
    let exec = ExecOptions {
        mode,
        sub_task_bytes: 8 << 10,
        queue_depth: 2,
        table_dirs: dirs,
        compute_threads: threads,
    };
    let output = execute(spec, &exec, &mut new_output).unwrap();
    assert!(output.profile.bytes_read > 0);
    assert_eq!(output.drops.records(), output.stats.dropped().entries);
    let mut audit = DropAudit::new(spec, None, None, output.drops.as_bytes()).unwrap();
    for f in &output.files {
        let table = Table::open(&f.path, f.number, TableReadOptions::default()).unwrap();
        table
            .verify_all_visiting(|key, same| audit.written(key, same))
            .unwrap();
    }
    let counts = audit.finish().unwrap();
    counts.check_against(&output.stats).unwrap();
    let files = output
        .files
        .iter()
        .map(|f| std::fs::read(&f.path).unwrap())
        .collect();
    (files, output.drops.into_bytes())
}

/// A compaction filter that removes one key in three and rewrites another's value: every
/// executor must apply it identically.
#[derive(Debug)]
struct EveryThirdKey;

impl CompactionFilter for EveryThirdKey {
    fn name(&self) -> &str {
        "every-third-key"
    }
    fn filter(&self, key: &[u8], value: &[u8]) -> FilterDecision {
        match key.last().map(|b| b % 3) {
            Some(0) => FilterDecision::Remove,
            Some(1) => FilterDecision::Change(value.iter().rev().copied().collect()),
            _ => FilterDecision::Keep,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn all_executors_write_identical_files(
        runs in prop::collection::vec(prop::collection::vec(entry_strategy(), 1..400), 1..5),
        snapshots in prop::collection::vec(0u64..2000, 0..4),
        bottommost: bool,
        target_kib in 16u64..256,
        filtered: bool,
        merging: bool,
        ranged: bool,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut seq = 1;
        let mut inputs = Vec::new();
        for (i, run) in runs.iter().enumerate() {
            // Inputs alternate between two directories, for S-PPCP's per-directory readers.
            let in_dir = dir.path().join(format!("in{}", i % 2));
            std::fs::create_dir_all(&in_dir).unwrap();
            inputs.push(vec![write_run(&in_dir, i as u64 + 1, run, seq)]);
            seq += run.len() as u64;
        }
        inputs.reverse(); // newest run first
        let spec = CompactionSpec {
            inputs,
            snapshots,
            bottommost,
            table: table_options(),
            target_file_size: target_kib << 10,
            grandparents: vec![GrandparentFile {
                smallest: make_internal_key(b"key00500", 1, ValueKind::Value),
                largest: make_internal_key(b"key00900", 1, ValueKind::Value),
                size: 64 << 10,
            }],
            max_grandparent_overlap_bytes: 32 << 10,
            filter: filtered.then(|| Arc::new(EveryThirdKey) as Arc<dyn CompactionFilter>),
            // Without an operator operands are copied as they are.
            merge_operator: merging.then(|| {
                Arc::new(sluice::merge_operator::Append::with_delimiter(b",")) as Arc<dyn MergeOperator>
            }),
            // Two overlapping tombstones from the middle of the writes.
            range_tombstones: ranged.then(|| {
                let t = |a: &str, b: &str, seq| RangeTombstone { start: a.into(), end: b.into(), seq };
                Arc::new(Tombstones::new(&[t("key00300", "key00700", seq / 2), t("key00500", "key01200", seq / 3)]))
            }),
            log_drops: true,
            ..CompactionSpec::default()
        };
        let (reference, reference_drops) =
            run_mode(&spec, CompactionMode::Sequential, 1, &dir.path().join("seq"), 1);
        let runs = [
            (CompactionMode::Pipelined, 1, 1),
            (CompactionMode::Parallel, 2, 1),
            (CompactionMode::Parallel, 3, 1),
            (CompactionMode::Streaming, 1, 1),
            (CompactionMode::Pipelined, 1, 2), // S-PPCP: two readers, two writers
            (CompactionMode::Parallel, 2, 3),
        ];
        for (mode, threads, dirs) in runs {
            let out = dir.path().join(format!("{mode}-{threads}-{dirs}"));
            let (got, drops) = run_mode(&spec, mode, threads, &out, dirs);
            prop_assert_eq!(got.len(), reference.len(), "{} cut files differently", mode);
            for (i, (a, b)) in got.iter().zip(&reference).enumerate() {
                prop_assert!(a == b, "{} file {} differs from sequential", mode, i);
            }
            prop_assert!(drops == reference_drops, "{} logged other drops", mode);
        }
        // Inputs in one directory: C-PPCP's compute threads read for themselves.
        let together = dir.path().join("together");
        std::fs::create_dir_all(&together).unwrap();
        let one_dir_spec = CompactionSpec {
            inputs: spec.inputs.iter().map(|run| run.iter().map(|t| {
                let path = together.join(t.path().file_name().unwrap());
                std::fs::copy(t.path(), &path).unwrap();
                Table::open(&path, t.file_number(), TableReadOptions::default()).unwrap()
            }).collect()).collect(),
            ..spec.clone()
        };
        for threads in [2, 3] {
            let out = dir.path().join(format!("local-read-{threads}"));
            let (got, _) = run_mode(&one_dir_spec, CompactionMode::Parallel, threads, &out, 1);
            prop_assert!(got == reference, "parallel reading on {} compute threads differs", threads);
        }
        if probe_direct_io(&OsFileSystem, dir.path()).is_ok() {
            let direct = Storage::new(os_fs(), IoMode::Direct);
            let reopened = |t: &Arc<Table>| {
                let opts = TableReadOptions { storage: direct.clone(), ..TableReadOptions::default() };
                Table::open(t.path(), t.file_number(), opts).unwrap()
            };
            let direct_spec = CompactionSpec {
                inputs: spec.inputs.iter().map(|run| run.iter().map(reopened).collect()).collect(),
                storage: direct.clone(),
                ..spec.clone()
            };
            let (got, _) = run_mode(&direct_spec, CompactionMode::Parallel, 2, &dir.path().join("direct"), 2);
            prop_assert!(got == reference, "direct I/O output differs from sequential");
        }
    }
}
