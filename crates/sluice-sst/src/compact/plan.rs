//! The compaction planner: cuts one compaction into sub-tasks.
//!
//! A sub-task is a user-key range `[lower, upper)` covering about `sub_task_bytes` of input,
//! chosen from the inputs' index blocks (the PCP paper found 512 KiB best). Boundaries are user
//! keys, so all versions of one key fall into one sub-task and shadowing never crosses a
//! boundary. For every sub-task the plan lists, per input run, exactly the data blocks it must
//! read; a block that straddles a boundary is read by both neighbours.
//!
//! Sub-tasks are sized by the bytes they move, not only those they read: when the compaction
//! collects blob files ([`CompactionSpec::blob_relocation`]), a table's references into them
//! move their values too, so each of its blocks counts its share of those values
//! (`moved_bytes_per_block`). Without that, a sub-task over references into a collected file
//! would read 512 KiB of references and write hundreds of megabytes of values, and one
//! thread would carry the whole collection.
//!
//! The plan depends only on the inputs, the files they relocate from and `sub_task_bytes`,
//! never on the executor, which is what lets every executor produce the same blocks.

use std::ops::Range;
use std::sync::Arc;

use crate::format::{BLOCK_TRAILER_LEN, BlockHandle};
use crate::key::user_key;
use crate::table::Table;

use super::spec::CompactionSpec;

/// One block a sub-task reads: which table of its run, and where.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// Index of the table within its input run.
    pub table: usize,
    /// The block's location in that table.
    pub handle: BlockHandle,
}

impl BlockRef {
    /// Bytes read from storage for this block, trailer included.
    pub fn stored_len(&self) -> u64 {
        self.handle.size + BLOCK_TRAILER_LEN as u64
    }
}

/// A user-key range of one compaction and the blocks it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubTask {
    /// Position in the plan (outputs are emitted in this order).
    pub index: usize,
    /// Inclusive lower user-key bound; `None` for the first sub-task.
    pub lower: Option<Vec<u8>>,
    /// Exclusive upper user-key bound; `None` for the last sub-task.
    pub upper: Option<Vec<u8>>,
    /// Per input run (same order as `CompactionSpec::inputs`), the blocks to read, in order.
    pub blocks: Vec<Vec<BlockRef>>,
}

impl SubTask {
    /// Stored bytes this sub-task reads.
    pub fn input_bytes(&self) -> u64 {
        self.blocks.iter().flatten().map(BlockRef::stored_len).sum()
    }
}

/// The sub-tasks of one compaction, in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionPlan {
    /// Consecutive, non-overlapping key ranges covering the whole input.
    pub sub_tasks: Vec<SubTask>,
}

/// Cuts `spec` into sub-tasks of about `sub_task_bytes` input each.
///
/// Works on the tables' decoded indexes in place: planning a chunk of a big compaction (the
/// dynamic offload split plans one per chunk) costs in proportion to the chunk's blocks plus a
/// few binary searches per table, not to every block of every input.
pub fn plan(spec: &CompactionSpec, sub_task_bytes: u64) -> CompactionPlan {
    let bounds = choose_boundaries(spec, sub_task_bytes.max(1));
    let mut sub_tasks = Vec::with_capacity(bounds.len() + 1);
    let mut lower = spec.lower.clone();
    for (i, upper) in bounds
        .into_iter()
        .map(Some)
        .chain(std::iter::once(spec.upper.clone()))
        .enumerate()
    {
        let blocks = spec
            .inputs
            .iter()
            .map(|run| blocks_in_range(run, lower.as_deref(), upper.as_deref()))
            .collect();
        sub_tasks.push(SubTask {
            index: i,
            lower: lower.clone(),
            upper: upper.clone(),
            blocks,
        });
        lower = upper;
    }
    CompactionPlan { sub_tasks }
}

/// Upper bounds of every sub-task but the last: user keys at which the running total of block
/// bytes (in key order over all inputs) passed another `sub_task_bytes`.
fn choose_boundaries(spec: &CompactionSpec, sub_task_bytes: u64) -> Vec<Vec<u8>> {
    let (lower, upper) = (spec.lower.as_deref(), spec.upper.as_deref());
    // The blocks whose last user key lies in [lower, upper), run by run and table by table;
    // the stable sort below keeps that order among equal keys, on which the cuts depend.
    let ranges: Vec<(&Arc<Table>, Range<usize>)> = spec
        .inputs
        .iter()
        .flatten()
        .map(|table| {
            let first = lower.map_or(0, |lo| first_block_reaching(table, lo));
            let end = upper.map_or(table.num_data_blocks(), |hi| {
                first_block_reaching(table, hi)
            });
            (table, first..end.max(first))
        })
        .collect();
    // Sized up front: a whole compaction lists 100k+ blocks, and growing the vector by
    // doubling would copy it and fault in fresh pages several times over.
    let mut blocks: Vec<(&[u8], u64)> =
        Vec::with_capacity(ranges.iter().map(|(_, r)| r.len()).sum());
    for (table, range) in ranges {
        let moved = moved_bytes_per_block(spec, table);
        blocks.extend(
            range
                .filter_map(|i| table.index_entry(i))
                .map(|(last, h)| (user_key(last), moved(h.size + BLOCK_TRAILER_LEN as u64))),
        );
    }
    blocks.sort_by(|a, b| a.0.cmp(b.0));
    let mut bounds: Vec<Vec<u8>> = Vec::new();
    let mut acc = 0u64;
    for (uk, size) in &blocks {
        acc += size;
        // Cut after this block's last key only if some later block holds larger keys, so the
        // last sub-task is never empty.
        let more_after = blocks.last().is_some_and(|(k, _)| k > uk);
        if acc >= sub_task_bytes && more_after {
            // The boundary is the smallest user key above `uk` among later blocks' ends: any
            // key > uk would do; a real key keeps boundaries readable in logs.
            let boundary = successor(uk);
            if bounds
                .last()
                .is_none_or(|b| b.as_slice() < boundary.as_slice())
            {
                bounds.push(boundary);
                acc = 0;
            }
        }
    }
    bounds
}

/// The bytes a block of `table` stands for in the plan, from its stored length: the length
/// itself, plus, when the compaction relocates blob files, the table's bytes of references
/// into them spread over its blocks in proportion to their length (the references' values
/// are read and written again; where in the table they sit is not recorded, so evenly is the
/// best guess).
fn moved_bytes_per_block(spec: &CompactionSpec, table: &Table) -> impl Fn(u64) -> u64 + use<> {
    let relocated: u64 = spec.blob_relocation.as_ref().map_or(0, |relocation| {
        table
            .properties()
            .blob_refs
            .iter()
            .filter(|(file, _)| relocation.relocates(*file))
            .map(|(_, tally)| tally.bytes)
            .fold(0u64, u64::saturating_add)
    });
    let stored = table.file_size().max(1);
    move |len| {
        let share = u128::from(len) * u128::from(relocated) / u128::from(stored);
        len.saturating_add(u64::try_from(share).unwrap_or(u64::MAX))
    }
}

/// The position of the first data block of `table` whose last user key is `>= uk`
/// (`num_data_blocks()` if none): last keys are in key order, so this is a binary search.
fn first_block_reaching(table: &Table, uk: &[u8]) -> usize {
    let (mut lo, mut hi) = (0, table.num_data_blocks());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let below = table
            .index_entry(mid)
            .is_some_and(|(last, _)| user_key(last) < uk);
        if below {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The smallest byte string greater than `key`: `key` followed by a zero byte. A sub-task with
/// upper bound `successor(k)` holds every version of `k`.
fn successor(key: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(key.len() + 1);
    s.extend_from_slice(key);
    s.push(0);
    s
}

/// The blocks of one run that may hold user keys in `[lower, upper)`.
///
/// A block's keys lie between the previous block's last key (or the table's smallest key) and
/// its own last key, so the blocks needed are found by binary search on the last keys: the
/// first whose last key reaches `lower`, through the first whose last key reaches `upper`.
fn blocks_in_range(
    run: &[Arc<Table>],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Vec<BlockRef> {
    let mut out = Vec::new();
    for (index, table) in run.iter().enumerate() {
        if upper.is_some_and(|hi| user_key(&table.properties().smallest_key) >= hi) {
            continue;
        }
        let blocks = table.num_data_blocks();
        let first = lower.map_or(0, |lo| first_block_reaching(table, lo));
        // Blocks whose last key is below `upper`, plus the one that reaches it.
        let end = upper.map_or(blocks, |hi| {
            (first_block_reaching(table, hi) + 1).min(blocks)
        });
        out.extend(
            (first..end)
                .filter_map(|i| table.index_entry(i))
                .map(|(_, handle)| BlockRef {
                    table: index,
                    handle,
                }),
        );
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::iter::InternalIterator;
    use crate::key::{ValueKind, make_internal_key, parse_internal_key};
    use crate::table::{Table, TableBuilder, TableOptions, TableReadOptions};

    /// A table of 256-byte blocks holding `k{key:06}` at `seq` for every key.
    pub(crate) fn table(dir: &std::path::Path, n: u64, keys: &[u32], seq: u64) -> Arc<Table> {
        let path = dir.join(format!("{n}.sst"));
        let opts = TableOptions {
            block_size: 256,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&path, &opts).unwrap();
        for k in keys {
            let ikey = make_internal_key(format!("k{k:06}").as_bytes(), seq, ValueKind::Value);
            b.add(&ikey, &[7u8; 40]).unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, n, TableReadOptions::default()).unwrap()
    }

    /// A bottommost compaction of `inputs` with default output options.
    pub(crate) fn spec(inputs: Vec<Vec<Arc<Table>>>) -> CompactionSpec {
        CompactionSpec {
            inputs,
            bottommost: true,
            target_file_size: 1 << 20,
            ..CompactionSpec::default()
        }
    }

    /// User keys of `table` in `[lo, hi)`, read through the blocks `refs` lists.
    fn keys_via_blocks(
        table: &Table,
        refs: &[BlockRef],
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
    ) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for r in refs {
            let block = table.read_block(r.handle).unwrap();
            let mut it = block.iter();
            it.seek_to_first().unwrap();
            while it.valid() {
                let uk = parse_internal_key(it.key()).unwrap().user_key.to_vec();
                if lo.is_none_or(|lo| uk.as_slice() >= lo) && hi.is_none_or(|hi| uk.as_slice() < hi)
                {
                    out.push(uk);
                }
                it.next().unwrap();
            }
        }
        out
    }

    fn all_keys(table: &Arc<Table>, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Vec<Vec<u8>> {
        let mut it = table.iter();
        it.seek_to_first().unwrap();
        let mut out = Vec::new();
        while it.valid() {
            let uk = parse_internal_key(it.key()).unwrap().user_key.to_vec();
            if lo.is_none_or(|lo| uk.as_slice() >= lo) && hi.is_none_or(|hi| uk.as_slice() < hi) {
                out.push(uk);
            }
            it.next().unwrap();
        }
        out
    }

    #[test]
    fn sub_tasks_tile_the_key_space_and_list_every_needed_block() {
        let dir = tempfile::tempdir().unwrap();
        let evens: Vec<u32> = (0..2000).map(|i| i * 2).collect();
        let thirds: Vec<u32> = (0..1000).map(|i| i * 3 + 1).collect();
        let l1a: Vec<u32> = (0..700).collect();
        let l1b: Vec<u32> = (1500..3000).collect();
        let runs = vec![
            vec![table(dir.path(), 1, &evens, 9)],
            vec![table(dir.path(), 2, &thirds, 8)],
            vec![table(dir.path(), 3, &l1a, 1), table(dir.path(), 4, &l1b, 1)],
        ];
        let spec = spec(runs.clone());
        let plan = plan(&spec, 4 << 10);
        assert!(
            plan.sub_tasks.len() > 5,
            "{} sub-tasks",
            plan.sub_tasks.len()
        );
        assert_eq!(plan.sub_tasks[0].lower, None);
        assert_eq!(plan.sub_tasks.last().unwrap().upper, None);
        for pair in plan.sub_tasks.windows(2) {
            assert_eq!(pair[0].upper, pair[1].lower, "sub-tasks are consecutive");
            assert!(
                pair[0]
                    .lower
                    .as_ref()
                    .is_none_or(|lo| Some(lo) < pair[0].upper.as_ref())
            );
        }
        let mut total_read = 0;
        for st in &plan.sub_tasks {
            let (lo, hi) = (st.lower.as_deref(), st.upper.as_deref());
            for (run, refs) in runs.iter().zip(&st.blocks) {
                for (t, table) in run.iter().enumerate() {
                    let mine: Vec<BlockRef> =
                        refs.iter().filter(|r| r.table == t).copied().collect();
                    assert_eq!(
                        keys_via_blocks(table, &mine, lo, hi),
                        all_keys(table, lo, hi)
                    );
                }
            }
            total_read += st.input_bytes();
        }
        let input: u64 = runs
            .iter()
            .flatten()
            .map(|t| t.properties().data_bytes)
            .sum();
        assert!(
            total_read < input * 3 / 2,
            "blocks are read about once: {total_read} vs {input}"
        );
    }

    /// The planner as first written, kept as the oracle: every index entry copied out of
    /// every table, then filtered to the spec's range, sorted and cut. Cuts must not change,
    /// or executors and hosts of different versions would disagree on sub-task boundaries.
    fn copying_plan(spec: &CompactionSpec, sub_task_bytes: u64) -> CompactionPlan {
        let (lower, upper) = (spec.lower.as_deref(), spec.upper.as_deref());
        let mut blocks: Vec<(Vec<u8>, u64)> = spec
            .inputs
            .iter()
            .flatten()
            .flat_map(|t| t.index_entries())
            .map(|(last, h)| (user_key(&last).to_vec(), h.size + BLOCK_TRAILER_LEN as u64))
            .filter(|(uk, _)| {
                lower.is_none_or(|lo| uk.as_slice() >= lo)
                    && upper.is_none_or(|hi| uk.as_slice() < hi)
            })
            .collect();
        blocks.sort_by(|a, b| a.0.cmp(&b.0));
        let (mut bounds, mut acc) = (Vec::<Vec<u8>>::new(), 0u64);
        for (uk, size) in &blocks {
            acc += size;
            let more_after = blocks.last().is_some_and(|(k, _)| k > uk);
            if acc >= sub_task_bytes
                && more_after
                && bounds.last().is_none_or(|b| *b < successor(uk))
            {
                bounds.push(successor(uk));
                acc = 0;
            }
        }
        let mut sub_tasks = Vec::new();
        let mut lo = spec.lower.clone();
        for (index, hi) in bounds
            .into_iter()
            .map(Some)
            .chain([spec.upper.clone()])
            .enumerate()
        {
            let blocks = spec
                .inputs
                .iter()
                .map(|run| {
                    let mut refs = Vec::new();
                    for (table, t) in run.iter().enumerate() {
                        let e = t.index_entries();
                        if hi
                            .as_deref()
                            .is_some_and(|h| user_key(&t.properties().smallest_key) >= h)
                        {
                            continue;
                        }
                        let first = lo
                            .as_deref()
                            .map_or(0, |l| e.partition_point(|(k, _)| user_key(k) < l));
                        let end = hi.as_deref().map_or(e.len(), |h| {
                            (e.partition_point(|(k, _)| user_key(k) < h) + 1).min(e.len())
                        });
                        let kept = e.get(first..end).unwrap_or_default();
                        refs.extend(kept.iter().map(|(_, handle)| BlockRef {
                            table,
                            handle: *handle,
                        }));
                    }
                    refs
                })
                .collect();
            sub_tasks.push(SubTask {
                index,
                lower: lo.clone(),
                upper: hi.clone(),
                blocks,
            });
            lo = hi;
        }
        CompactionPlan { sub_tasks }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

        /// Planning from the tables' indexes in place cuts exactly as copying them out did,
        /// for whole compactions and for key-range shares of them, with versions of one key
        /// in several runs (whose order among equal keys decides some cuts).
        #[test]
        fn planning_in_place_cuts_as_copying_did(
            runs in proptest::collection::vec(
                (proptest::collection::btree_set(0u32..3000, 1..600), 1usize..4),
                1..5,
            ),
            bounds in (proptest::option::of(0u32..3000), proptest::option::of(0u32..3000)),
            sub_task_kib in 1u64..16,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut number = 0;
            let inputs: Vec<Vec<Arc<Table>>> = runs
                .iter()
                .enumerate()
                .map(|(r, (keys, tables))| {
                    let keys: Vec<u32> = keys.iter().copied().collect();
                    let per_table = keys.len().div_ceil(*tables);
                    keys.chunks(per_table)
                        .map(|part| {
                            number += 1;
                            table(dir.path(), number, part, 100 - r as u64)
                        })
                        .collect()
                })
                .collect();
            let mut spec = spec(inputs);
            let key = |k: u32| format!("k{k:06}").into_bytes();
            spec.lower = bounds.0.map(key);
            spec.upper = bounds.1.map(key);
            if let (Some(lo), Some(hi)) = (&spec.lower, &spec.upper) {
                proptest::prop_assume!(lo < hi);
            }
            let bytes = sub_task_kib << 10;
            proptest::prop_assert_eq!(plan(&spec, bytes), copying_plan(&spec, bytes));
        }
    }

    #[test]
    fn one_sub_task_when_the_input_is_small() {
        let dir = tempfile::tempdir().unwrap();
        let t = table(dir.path(), 1, &[1, 2, 3], 1);
        let plan = plan(&spec(vec![vec![t]]), 512 << 10);
        assert_eq!(plan.sub_tasks.len(), 1);
        assert_eq!(plan.sub_tasks[0].blocks[0].len(), 1);
    }

    /// Relocates blob file `.0`; planning never asks for a writer.
    #[derive(Debug)]
    struct Relocates(u64);

    impl crate::compact::BlobRelocation for Relocates {
        fn relocates(&self, file_number: u64) -> bool {
            file_number == self.0
        }
        fn writer(&self) -> Box<dyn crate::compact::RelocationWriter + '_> {
            unreachable!("planning writes nothing")
        }
    }

    #[test]
    fn sub_tasks_count_the_values_they_relocate() {
        use crate::blob::BlobRef;
        let dir = tempfile::tempdir().unwrap();
        // 2000 references to 64 KiB values, keys below 1000 in blob file 7, the rest in 8.
        let path = dir.path().join("1.sst");
        let opts = TableOptions {
            block_size: 256,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&path, &opts).unwrap();
        for k in 0..2000u32 {
            let ikey = make_internal_key(format!("k{k:06}").as_bytes(), 1, ValueKind::BlobIndex);
            let blob = BlobRef {
                file_number: if k < 1000 { 7 } else { 8 },
                offset: u64::from(k) << 16,
                size: 1 << 16,
            };
            b.add(&ikey, &blob.encode()).unwrap();
        }
        b.finish().unwrap();
        let t = Table::open(&path, 1, TableReadOptions::default()).unwrap();
        let quarter = t.file_size() / 4;
        let mut s = spec(vec![vec![t.clone()]]);
        let reading = plan(&s, quarter);
        // Collecting a file that holds nothing of this table's changes nothing.
        s.blob_relocation = Some(Arc::new(Relocates(9)));
        assert_eq!(plan(&s, quarter), reading);
        // Collecting file 7 moves 1000 x 64 KiB besides the references: about 64 MiB more
        // to share out, so many more sub-tasks of the same size.
        s.blob_relocation = Some(Arc::new(Relocates(7)));
        let moving = plan(&s, quarter);
        assert!(reading.sub_tasks.len() <= 5, "{}", reading.sub_tasks.len());
        assert!(
            moving.sub_tasks.len() > 10 * reading.sub_tasks.len(),
            "{} against {}",
            moving.sub_tasks.len(),
            reading.sub_tasks.len()
        );
        // They still tile the key space and read every key once.
        let mut keys = Vec::new();
        for st in &moving.sub_tasks {
            keys.extend(keys_via_blocks(
                &t,
                &st.blocks[0],
                st.lower.as_deref(),
                st.upper.as_deref(),
            ));
        }
        assert_eq!(keys, all_keys(&t, None, None));
    }
}
