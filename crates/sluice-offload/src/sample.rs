//! Sampled verification (`VerifyOutputs::Sample`): user keys drawn at random from a worker
//! part's inputs and outputs, each merged on the host by the same rules every executor
//! applies ([`CompactionSpec::compaction_iter`]: snapshots, range tombstones, filter, merge
//! operator), must have exactly those versions in the part's outputs.
//!
//! The digest check cannot see a worker that drops a live entry and adds it to the digest of
//! what it claims it dropped; a sampled key whose kept version is missing (or changed) can.
//! Each draw picks the inputs or the outputs with even odds, then a random entry of a random
//! block of a random table: a key dropped from the outputs is found by a draw from the
//! inputs, a key invented in them by a draw from the outputs. A lie touching a share `f` of
//! the keys (of the side it shows on) escapes `k` samples with probability about
//! `(1 - f/2)^k`. The keys are drawn with a seed the worker cannot know, after its outputs
//! are in.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::Arc;

use sluice_sst::compact::{CompactionSpec, OutputFile};
use sluice_sst::fs::Storage;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{MAX_SEQ, seek_key, user_key};
use sluice_sst::merge::MergingIterator;
use sluice_sst::table::{Table, TableReadOptions};

use sluice_sst::Result;

/// Entries as `(internal key, value)`.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A key whose outputs differ from the inputs' merge: what the host expected and what it found.
#[derive(Debug)]
pub(super) struct Mismatch {
    pub key: Vec<u8>,
    pub expected: usize,
    pub found: usize,
}

/// Checks `k` keys drawn from `spec`'s inputs and from `files` within `[lower, upper)`
/// against `files`; returns the first mismatch, if any.
pub(super) fn check_sample(
    spec: &CompactionSpec,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    files: &[OutputFile],
    k: u32,
) -> Result<Option<Mismatch>> {
    let mut rng = SplitMix(RandomState::new().hash_one(files.len()));
    // Only tables that reach into the part's range can give it a key.
    let reaches = |t: &&Arc<Table>| {
        let p = t.properties();
        p.num_entries > 0
            && lower.is_none_or(|lo| user_key(&p.largest_key) >= lo)
            && upper.is_none_or(|hi| user_key(&p.smallest_key) < hi)
    };
    let inputs: Vec<&Arc<Table>> = spec.inputs.iter().flatten().filter(reaches).collect();
    let outputs = open_outputs(files, &spec.storage)?;
    let output_refs: Vec<&Arc<Table>> = outputs.iter().collect();
    for _ in 0..k {
        let side = if rng.below(2) == 0 {
            &inputs
        } else {
            &output_refs
        };
        let Some(key) = draw_key(side, lower, upper, &mut rng)? else {
            continue;
        };
        let expected = merged_versions(spec, &key)?;
        let found = written_versions(&outputs, &key)?;
        if expected != found {
            return Ok(Some(Mismatch {
                key,
                expected: expected.len(),
                found: found.len(),
            }));
        }
    }
    Ok(None)
}

/// A small, fast generator (SplitMix64); seeded from the process's hash randomness.
struct SplitMix(u64);

impl SplitMix {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) % n.max(1) as u64) as usize
    }
}

/// A user key of a random entry of a random one of `tables`, inside `[lower, upper)`; `None`
/// if a few tries find none (a range with few keys).
fn draw_key(
    tables: &[&Arc<Table>],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    rng: &mut SplitMix,
) -> Result<Option<Vec<u8>>> {
    let inside = |uk: &[u8]| lower.is_none_or(|lo| uk >= lo) && upper.is_none_or(|hi| uk < hi);
    for _ in 0..8 {
        let Some(table) = tables.get(rng.below(tables.len())) else {
            return Ok(None);
        };
        let blocks = table.num_data_blocks();
        let Some((_, handle)) = table.index_entry(rng.below(blocks)) else {
            continue;
        };
        let block = table.read_block(handle)?;
        let mut it = block.iter();
        it.seek_to_first()?;
        let mut keys = Vec::new();
        while it.valid() {
            let uk = user_key(it.key());
            if inside(uk) {
                keys.push(uk.to_vec());
            }
            it.next()?;
        }
        if !keys.is_empty() {
            let i = rng.below(keys.len());
            return Ok(Some(keys.swap_remove(i)));
        }
    }
    Ok(None)
}

/// The versions of `key` a compaction of `spec` keeps: every input's versions merged, then
/// kept or dropped by the spec's own rules.
fn merged_versions(spec: &CompactionSpec, key: &[u8]) -> Result<Entries> {
    let children: Vec<Box<dyn InternalIterator>> = spec
        .inputs
        .iter()
        .flatten()
        .map(|t| Box::new(t.iter()) as Box<dyn InternalIterator>)
        .collect();
    let mut it = spec.compaction_iter(MergingIterator::new(children));
    it.set_upper_bound(Some([key, &[0]].concat()));
    it.seek(&seek_key(key, MAX_SEQ))?;
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// The outputs, opened again: each must still be the file that was verified (its identity).
fn open_outputs(files: &[OutputFile], storage: &Storage) -> Result<Vec<Arc<Table>>> {
    files
        .iter()
        .map(|f| {
            let opts = TableReadOptions {
                load_filter: false,
                storage: storage.clone(),
                ..TableReadOptions::default()
            };
            let table = Table::open(&f.path, f.number, opts)?;
            if table.identity() != f.summary.identity {
                return Err(sluice_sst::Error::corruption(
                    &f.path,
                    0,
                    "the output changed after it was verified",
                ));
            }
            Ok(table)
        })
        .collect()
}

/// The versions of `key` in `outputs` (key order): every file whose range holds it.
fn written_versions(outputs: &[Arc<Table>], key: &[u8]) -> Result<Entries> {
    let mut out = Vec::new();
    for table in outputs {
        let p = table.properties();
        if key < user_key(&p.smallest_key) || key > user_key(&p.largest_key) {
            continue;
        }
        let mut it = table.iter();
        it.seek(&seek_key(key, MAX_SEQ))?;
        while it.valid() && user_key(it.key()) == key {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
    }
    Ok(out)
}
