//! Tests of the streaming executor as a whole, and of failure handling in every executor.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crossbeam_channel::bounded;
use proptest::prelude::*;
use sluice_sst::compact::plan::{BlockRef, plan};
use sluice_sst::compact::{CompactionOutput, CompactionSpec};
use sluice_sst::format::BlockHandle;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

use super::decoder::{index_decoder, run_blocks};
use super::queue::{Inlet, Outlet, WaitClock};
use crate::{CompactionMode, ExecOptions, execute};
use crate::{Error, Result};

fn table_options() -> TableOptions {
    TableOptions {
        block_size: 512,
        ..TableOptions::default()
    }
}

/// Writes table `number` with user keys `keys`, each once at `seq` (a tombstone for multiples of
/// 7, else a value of up to 89 bytes), and opens it.
fn table(dir: &Path, number: u64, keys: impl Iterator<Item = u32>, seq: u64) -> Arc<Table> {
    let path = dir.join(format!("{number:06}.sst"));
    let mut b = TableBuilder::create(&path, &table_options()).unwrap();
    for k in keys {
        let kind = if k % 7 == 0 {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let value = vec![(k % 251) as u8; (k % 90) as usize];
        b.add(
            &make_internal_key(format!("key{k:06}").as_bytes(), seq, kind),
            &value,
        )
        .unwrap();
    }
    b.finish().unwrap();
    Table::open(&path, number, TableReadOptions::default()).unwrap()
}

/// Three runs, newest first: two overlapping single-table runs and a two-table "level".
fn inputs(dir: &Path) -> Vec<Vec<Arc<Table>>> {
    vec![
        vec![table(dir, 1, (0..3000).step_by(3), 300)],
        vec![table(dir, 2, (0..3000).step_by(2), 200)],
        vec![table(dir, 3, 0..1400, 100), table(dir, 4, 1400..3000, 100)],
    ]
}

fn spec(inputs: Vec<Vec<Arc<Table>>>) -> CompactionSpec {
    CompactionSpec {
        inputs,
        snapshots: vec![250],
        bottommost: true,
        table: table_options(),
        target_file_size: 4 << 10,
        ..CompactionSpec::default()
    }
}

fn exec(mode: CompactionMode) -> ExecOptions {
    ExecOptions {
        mode,
        sub_task_bytes: 4 << 10,
        // Depth 1 keeps every queue full, so failures must unblock stages that wait on a send.
        queue_depth: 1,
        table_dirs: 1,
        compute_threads: 2,
    }
}

/// Runs `mode` into `out` (created empty), failing the `fail_at`-th output file allocation.
/// Also returns how many output files were allocated.
fn run_counting(
    spec: &CompactionSpec,
    mode: CompactionMode,
    out: &Path,
    fail_at: Option<u64>,
) -> (Result<CompactionOutput>, u64) {
    std::fs::create_dir_all(out).unwrap();
    let mut next = 0u64;
    let mut new_output = || -> Result<(u64, PathBuf)> {
        next += 1;
        if Some(next) == fail_at {
            return Err(Error::io(out, std::io::Error::other("disk full")));
        }
        Ok((next, out.join(format!("{next:06}.sst"))))
    };
    let result = execute(spec, &exec(mode), &mut new_output);
    (result, next)
}

fn run_into(
    spec: &CompactionSpec,
    mode: CompactionMode,
    out: &Path,
    fail_at: Option<u64>,
) -> Result<CompactionOutput> {
    run_counting(spec, mode, out, fail_at).0
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

/// XORs the byte at `at` of `table`'s file with `mask`.
fn flip_bits(table: &Table, at: u64, mask: u8) {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(table.path())
        .unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ mask], at).unwrap();
}

#[test]
fn every_executor_accounts_for_every_input_entry() {
    // Snapshot 250 keeps some shadowed versions and tombstones and drops others: the digest
    // equation must hold whatever the executor, counting both.
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(inputs(dir.path()));
    let expected = spec.input_digest().unwrap();
    assert_eq!(expected.entries, 1000 + 1500 + 3000);
    for mode in CompactionMode::ALL {
        let out = run_into(&spec, mode, &dir.path().join(format!("out-{mode}")), None).unwrap();
        assert!(out.stats.shadowed_dropped > 0 && out.stats.tombstones_dropped > 0);
        assert_eq!(out.accounted(), expected, "{mode}");
    }
    // A share's key range is not described by whole-table digests.
    let bounded = CompactionSpec {
        lower: Some(b"key001000".to_vec()),
        ..spec
    };
    assert_eq!(bounded.input_digest(), None);
}

#[test]
fn a_corrupt_input_block_fails_every_executor_and_leaves_no_output() {
    // The first data block fails before anything is written; the last one after several
    // outputs were finished, which must then be deleted.
    for last in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let inputs = inputs(dir.path());
        let victim = Arc::clone(&inputs[2][1]);
        let entries = victim.index_entries();
        let (_, handle) = if last {
            entries.last().unwrap().clone()
        } else {
            entries.first().unwrap().clone()
        };
        flip_bits(&victim, handle.offset + handle.size / 2, 0x5a);
        let spec = spec(inputs);
        for mode in CompactionMode::ALL {
            let out = dir.path().join(format!("out-{mode}-{last}"));
            let (result, allocated) = run_counting(&spec, mode, &out, None);
            match result {
                Err(Error::Corruption { file, offset, .. }) => {
                    assert_eq!((file.as_path(), offset), (victim.path(), handle.offset));
                }
                other => panic!("{mode}: expected corruption, got {other:?}"),
            }
            if last {
                assert!(
                    allocated > 2,
                    "{mode}: only {allocated} outputs were started"
                );
            }
            assert!(is_empty_dir(&out), "{mode} left outputs behind");
        }
    }
}

#[test]
fn a_writer_failure_stops_every_stage_and_removes_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(inputs(dir.path()));
    for mode in CompactionMode::ALL {
        let out = dir.path().join(format!("out-{mode}"));
        match run_into(&spec, mode, &out, Some(3)) {
            Err(Error::Io { source, .. }) => assert_eq!(source.to_string(), "disk full"),
            other => panic!("{mode}: expected the writer's error, got {other:?}"),
        }
        assert!(is_empty_dir(&out), "{mode} left outputs behind");
    }
}

#[test]
fn a_key_range_with_snapshots_matches_sequential_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec(inputs(dir.path()));
    spec.lower = Some(b"key000333".to_vec());
    spec.upper = Some(b"key002500".to_vec());
    let reference = run_into(
        &spec,
        CompactionMode::Sequential,
        &dir.path().join("seq"),
        None,
    )
    .unwrap();
    let got = run_into(
        &spec,
        CompactionMode::Streaming,
        &dir.path().join("str"),
        None,
    )
    .unwrap();
    assert!(reference.files.len() > 3, "{} files", reference.files.len());
    assert_eq!(got.files.len(), reference.files.len());
    for (a, b) in got.files.iter().zip(&reference.files) {
        assert_eq!(
            std::fs::read(&a.path).unwrap(),
            std::fs::read(&b.path).unwrap()
        );
    }
    assert_eq!(got.stats, reference.stats);
    assert!(got.stats.shadowed_dropped > 0 && got.stats.tombstones_dropped > 0);
    assert_eq!(got.profile.bytes_written, reference.profile.bytes_written);
    // Streams cross sub-task boundaries, so a straddling block is read once, not twice.
    let plan = plan(&spec, exec(CompactionMode::Streaming).sub_task_bytes);
    let once: u64 = (0..spec.inputs.len())
        .flat_map(|run| run_blocks(&plan, run))
        .map(|r| r.stored_len())
        .sum();
    assert_eq!(got.profile.bytes_read, once);
    assert!(once < reference.profile.bytes_read);
    assert!(got.profile.step_nanos.iter().all(|&n| n > 0));
}

#[test]
fn each_planned_block_is_decoded_once_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(inputs(dir.path()));
    let plan = plan(&spec, 2 << 10);
    assert!(plan.sub_tasks.len() > 10);
    for (run, tables) in spec.inputs.iter().enumerate() {
        let blocks = run_blocks(&plan, run);
        assert!(
            blocks
                .windows(2)
                .all(|w| (w[0].table, w[0].handle.offset) < (w[1].table, w[1].handle.offset))
        );
        // With no key bounds, the union is every block of every table of the run.
        let all: Vec<BlockRef> = tables
            .iter()
            .enumerate()
            .flat_map(|(t, table)| {
                table
                    .index_entries()
                    .into_iter()
                    .map(move |(_, handle)| BlockRef { table: t, handle })
            })
            .collect();
        assert_eq!(blocks, all);
        let listed: usize = plan.sub_tasks.iter().map(|st| st.blocks[run].len()).sum();
        assert!(listed > blocks.len(), "some block straddles a boundary");
    }
}

#[test]
fn the_index_decoder_rejects_a_plan_not_made_from_the_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let run = vec![table(dir.path(), 1, 0..500, 1)];
    let real = run[0].index_entries()[0].1;
    let bogus = [
        BlockRef {
            table: 0,
            handle: BlockHandle {
                offset: real.offset + 1,
                size: real.size,
            },
        },
        BlockRef {
            table: 1,
            handle: real,
        },
    ];
    for planned in bogus {
        let (tx, rx) = bounded(4);
        index_decoder(&run, &[planned], Outlet::new(tx, WaitClock::default()));
        let mut inlet = Inlet::new(rx, "index decoder", WaitClock::default());
        match inlet.recv() {
            Err(Error::InvalidArgument(why)) => assert!(why.contains("plan"), "{why}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Random damage to input tables never panics or hangs the streaming executor, and a
    /// failed compaction leaves nothing behind.
    #[test]
    fn random_bytes_in_inputs_never_panic(
        flips in prop::collection::vec((0usize..2, any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let run_a = table(dir.path(), 1, (0..800).step_by(2), 20);
        let run_b = table(dir.path(), 2, 0..800, 10);
        for (which, at, mask) in flips {
            let victim = if which == 0 { &run_a } else { &run_b };
            // Only data blocks are read after open: damage the data area.
            let data_end = victim.index_entries().last().unwrap().1.end_with_trailer().unwrap();
            let at = at.index(data_end as usize) as u64;
            flip_bits(victim, at, mask);
        }
        let spec = spec(vec![vec![run_a], vec![run_b]]);
        let out = dir.path().join("out");
        match run_into(&spec, CompactionMode::Streaming, &out, None) {
            Ok(output) => prop_assert!(!output.files.is_empty()),
            Err(e) => {
                prop_assert!(e.is_corruption(), "{e}");
                prop_assert!(is_empty_dir(&out));
            }
        }
    }
}
