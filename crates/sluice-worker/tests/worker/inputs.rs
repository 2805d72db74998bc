//! Input tables, the tasks that name them, and the same compaction run locally.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_exec::{CompactionMode, ExecOptions, execute};
use sluice_rpc::convert::table_format;
use sluice_rpc::proto::{CompactionTask, ExecutorMode, FileRef, InputRun};
use sluice_sst::compact::{CompactionOutput, CompactionSpec};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{ValueKind, make_internal_key};
use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};

pub const TARGET_FILE_SIZE: u64 = 4 << 10;
pub const SUB_TASK_BYTES: u64 = 4 << 10;
pub const COMPUTE_THREADS: u32 = 2;

fn table_options() -> TableOptions {
    TableOptions {
        block_size: 512,
        ..TableOptions::default()
    }
}

/// Writes table `number` in `dir` with user keys `keys`, each once at `seq`: a tombstone for
/// multiples of 7, else a value of `value_bytes` bytes (or `k % 90` if 0); opens it.
pub fn table(
    dir: &Path,
    number: u64,
    keys: impl Iterator<Item = u32>,
    seq: u64,
    value_bytes: usize,
) -> Arc<Table> {
    let path = dir.join(format!("{number:06}.sst"));
    let mut b = TableBuilder::create(&path, &table_options()).unwrap();
    for k in keys {
        let kind = if k % 7 == 0 {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let len = if value_bytes == 0 {
            (k % 90) as usize
        } else {
            value_bytes
        };
        let key = make_internal_key(format!("key{k:06}").as_bytes(), seq, kind);
        b.add(&key, &vec![(k % 251) as u8; len]).unwrap();
    }
    b.finish().unwrap();
    Table::open(&path, number, TableReadOptions::default()).unwrap()
}

/// Three runs, newest first (two single-table runs and a two-table level), tables dealt over
/// `dirs` in turn.
pub fn standard(dirs: &[&Path]) -> Vec<Vec<Arc<Table>>> {
    let dir = |i: usize| dirs[i % dirs.len()];
    vec![
        vec![table(dir(0), 1, (0..3000).step_by(3), 300, 0)],
        vec![table(dir(1), 2, (0..3000).step_by(2), 200, 0)],
        vec![
            table(dir(2), 3, 0..1400, 100, 0),
            table(dir(3), 4, 1400..3000, 100, 0),
        ],
    ]
}

/// The task compacting `runs` with `mode`, outputs numbered from `first` (`count` of them).
pub fn task(
    runs: &[Vec<Arc<Table>>],
    mode: ExecutorMode,
    first: u64,
    count: u32,
) -> CompactionTask {
    let file = |level: usize, t: &Arc<Table>| FileRef {
        name: t.path().file_name().unwrap().to_string_lossy().into_owned(),
        number: t.file_number(),
        level: level as u32,
        size: t.file_size(),
        smallest: t.properties().smallest_key.clone(),
        largest: t.properties().largest_key.clone(),
    };
    CompactionTask {
        job_id: 77,
        runs: runs
            .iter()
            .enumerate()
            .map(|(level, run)| InputRun {
                files: run.iter().map(|t| file(level, t)).collect(),
            })
            .collect(),
        lower: None,
        upper: None,
        snapshots: vec![250],
        bottommost: true,
        format: Some(table_format(&table_options())),
        target_file_size: TARGET_FILE_SIZE,
        grandparents: Vec::new(),
        max_grandparent_overlap_bytes: u64::MAX,
        mode: mode as i32,
        sub_task_bytes: SUB_TASK_BYTES,
        queue_depth: 2,
        compute_threads: COMPUTE_THREADS,
        first_output_number: first,
        output_numbers: count,
        output_root: None,
        database: String::new(),
        merge_operator: String::new(),
        compaction_filter: String::new(),
        range_tombstones: Vec::new(),
        keyspace: 0,
        // None: the outputs are compared byte for byte with a local run's, which has none.
        task_nonce: 0,
        fence: None,
        // Compared with the local run's, which logs too.
        log_drops: true,
    }
}

/// Runs the same compaction in this process with `mode`, outputs in `out`.
pub fn local(runs: &[Vec<Arc<Table>>], mode: CompactionMode, out: &Path) -> CompactionOutput {
    let spec = CompactionSpec {
        inputs: runs.to_vec(),
        snapshots: vec![250],
        bottommost: true,
        table: table_options(),
        target_file_size: TARGET_FILE_SIZE,
        log_drops: true,
        ..CompactionSpec::default()
    };
    let exec = ExecOptions {
        mode,
        sub_task_bytes: SUB_TASK_BYTES,
        queue_depth: 2,
        compute_threads: COMPUTE_THREADS as usize,
        table_dirs: 1,
    };
    let mut next = 1000u64;
    let mut new_output = || {
        next += 1;
        Ok((next, out.join(format!("{next:06}.sst"))))
    };
    execute(&spec, &exec, &mut new_output).unwrap()
}

/// Every entry of the table at `path`, in order.
pub fn entries(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let t = Table::open(path, 1, TableReadOptions::default()).unwrap();
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    let mut v = Vec::new();
    while it.valid() {
        v.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    v
}

/// Every entry of the tables at `paths`, in order.
pub fn all_entries(paths: &[PathBuf]) -> Vec<(Vec<u8>, Vec<u8>)> {
    paths.iter().flat_map(|p| entries(p)).collect()
}
