//! One compaction as a job: the picked [`Compaction`] is turned into a [`CompactionSpec`], run
//! by the executor it was given, checked, and returned as a version edit plus the figures the
//! database records. The job writes files and nothing else; `db/` installs the edit.

use std::path::PathBuf;
use std::sync::Arc;

use sluice_exec::{Executor, JobControl};
use sluice_sst::compact::{CompactionOutput, CompactionSpec, GrandparentFile};
use sluice_sst::digest::EntryDigest;
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{MAX_SEQ, SeqNo, parse_internal_key, seek_key, user_key};
use sluice_sst::table::{REMOTE_OPENS_AT_ONCE, Table, TableReadOptions, open_in_parallel};

use super::env::JobEnv;
use super::level_targets::LevelTargets;
use super::{Compaction, Reason};
use crate::blob::gc::BlobCollector;
use crate::version::edit::{FileMetaData, VersionEdit};
use crate::{Error, Result};

/// What a finished job hands to the database: the edit to install, and what to record once it
/// is installed.
pub(crate) struct JobOutcome {
    pub edit: VersionEdit,
    pub record: JobRecord,
}

/// A finished job's figures, for the metrics and the log.
pub(crate) enum JobRecord {
    /// A file moved down a level by the edit alone.
    TrivialMove {
        /// The level it moved into.
        output_level: usize,
        bytes: u64,
    },
    /// Inputs merged into new files.
    Merged(Box<MergeRecord>),
}

/// The figures of a compaction that merged its inputs.
pub(crate) struct MergeRecord {
    pub level: usize,
    pub output_level: usize,
    pub reason: Reason,
    /// The executor that ran it.
    pub executor: &'static str,
    pub inputs: usize,
    pub input_bytes: u64,
    /// Input bytes from the upper level: what the output level took in.
    pub upper_bytes: u64,
    pub output: CompactionOutput,
}

/// How the job's executor is held to account: whether the outputs must add up to the inputs
/// (`check_accounts_for_inputs`). Only workers the options trust are exempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accounting {
    /// Outputs plus dropped entries must equal the inputs, in count and digest.
    Checked,
    /// Trusted workers (the offload options' `VerifyOutputs::None`): not checked.
    Trusted,
}

/// The edit that moves `c`'s single file down to its output level, if `c` is a trivial move:
/// then it needs no executor, no placement and no file written.
pub(crate) fn trivial_move(c: &Compaction, env: &JobEnv<'_>) -> Option<JobOutcome> {
    c.is_trivial_move(env.max_grandparent_overlap_bytes())
        .then(|| moved(c))
}

/// Merges `c`'s inputs with `executor` and returns the edit installing the outputs.
/// `output_dir` is the table directory outputs go to (`None`: dealt over the data
/// directories); `control` sees the job's progress and may cancel it. On error nothing the
/// job wrote is left.
pub(crate) fn merge(
    c: &Compaction,
    env: &JobEnv<'_>,
    executor: &dyn Executor,
    accounting: Accounting,
    output_dir: Option<u32>,
    control: Arc<JobControl>,
) -> Result<JobOutcome> {
    let mut spec = spec_of(c, env)?;
    let collector = BlobCollector::for_compaction(c, env, output_dir)?.map(Arc::new);
    spec.blob_relocation = collector
        .clone()
        .map(|c| c as Arc<dyn sluice_sst::compact::BlobRelocation>);
    // What the outputs and the dropped entries must add up to, known from the inputs'
    // properties alone (None for inputs written before digests existed).
    let expected = spec
        .input_digest()
        .filter(|_| accounting == Accounting::Checked);
    let mut new_output = || -> sluice_sst::Result<(u64, PathBuf)> {
        let dir = output_dir.unwrap_or_else(|| env.table_cache.dir_for_new_table());
        Ok(env.new_table(dir))
    };
    let abandon = |out: Option<&CompactionOutput>| {
        if let Some(out) = out {
            delete_outputs(env, out);
        }
        if let Some(collector) = &collector {
            collector.abandon();
        }
    };
    let mut out = executor
        .execute(&spec, control, &mut new_output)
        .inspect_err(|_| abandon(None))?;
    let blob_files = match &collector {
        Some(collector) => collector.finish(),
        None => Ok(Vec::new()),
    };
    let checked = check_accounts_for_inputs(expected, &out).and(blob_files);
    let blob_files = checked.inspect_err(|_| abandon(Some(&out)))?;
    // Values moved to new blob files are bytes the compaction read and wrote, as tables are.
    out.profile.bytes_written += blob_files.iter().map(|b| b.file_size).sum::<u64>();
    out.profile.bytes_read += out.stats.blob_bytes_relocated;
    let clean = clean_seqs(c, env, &spec, &out)?;
    let mut edit = edit_for_outputs(c, env, &out, &clean);
    edit.new_blob_files = blob_files;
    Ok(JobOutcome {
        edit,
        record: JobRecord::Merged(Box::new(MergeRecord {
            level: c.level,
            output_level: c.output_level(),
            reason: c.reason,
            executor: executor.name(),
            inputs: c.all_inputs().count(),
            input_bytes: c.input_bytes() + out.stats.blob_bytes_relocated,
            upper_bytes: c.inputs[0].iter().map(|f| f.file_size).sum(),
            output: out,
        })),
    })
}

/// Each output's [`FileMetaData::range_clean_seq`]. The spec applied every tombstone of
/// `c.version`, which holds all up to its [`flushed_seq`](crate::version::Version::flushed_seq), and those at or below the
/// oldest snapshot with nothing left above them. An output that still holds a version a
/// tombstone covers in its stripe (a worker that ignored them) gets 0 instead, so the
/// tombstone stays and keeps hiding it: checked by reading the outputs' entries inside the
/// tombstones' ranges, which their own compaction has mostly emptied.
fn clean_seqs(
    c: &Compaction,
    env: &JobEnv<'_>,
    spec: &CompactionSpec,
    out: &CompactionOutput,
) -> Result<Vec<SeqNo>> {
    let applied = env
        .snapshots
        .iter()
        .copied()
        .min()
        .unwrap_or(u64::MAX)
        .min(c.version.flushed_seq());
    let Some(tombstones) = &spec.range_tombstones else {
        return Ok(vec![applied; out.files.len()]);
    };
    let mut snapshots = env.snapshots.clone();
    snapshots.sort_unstable();
    let mut clean = Vec::with_capacity(out.files.len());
    for f in &out.files {
        let (lo, hi) = (
            user_key(&f.summary.smallest_key),
            user_key(&f.summary.largest_key),
        );
        let overlapping: Vec<_> = c
            .version
            .range_tombstones()
            .iter()
            .filter(|t| t.overlaps(lo, hi))
            .collect();
        let mut holds_covered = false;
        if !overlapping.is_empty() {
            // Through the storage the outputs were written with, uncached: not installed yet.
            let opts = TableReadOptions {
                cache: None,
                storage: spec.storage.clone(),
                load_filter: false,
                ..TableReadOptions::default()
            };
            let table = Table::open(&f.path, f.number, opts)?;
            let mut it = table.iter();
            'ranges: for t in overlapping {
                it.seek(&seek_key(&t.start, MAX_SEQ))?;
                while it.valid() {
                    let p = parse_internal_key(it.key()).ok_or_else(|| {
                        Error::corruption(&f.path, 0, "an output's key does not parse")
                    })?;
                    if p.user_key >= t.end.as_slice() {
                        break;
                    }
                    if tombstones.covers_in_stripe(p.user_key, p.seq, &snapshots) {
                        holds_covered = true;
                        break 'ranges;
                    }
                    it.next()?;
                }
            }
        }
        if holds_covered {
            tracing::warn!(
                file = %f.path.display(),
                "a compaction output holds a version a range tombstone covers; the tombstone stays"
            );
        }
        clean.push(if holds_covered { 0 } else { applied });
    }
    Ok(clean)
}

/// Opens `files` for a compaction, in order: [`REMOTE_OPENS_AT_ONCE`] at a time from an object
/// store, one by one from local directories (`sluice_sst::table::open_in_parallel`).
fn open_inputs(env: &JobEnv<'_>, files: &[Arc<FileMetaData>]) -> Result<Vec<Arc<Table>>> {
    let remote = files.first().is_some_and(|f| {
        let path = env.table_cache.table_path(f.dir_index, f.number);
        env.table_cache.fs().is_remote(&path)
    });
    let threads = if remote { REMOTE_OPENS_AT_ONCE } else { 1 };
    Ok(open_in_parallel(files, threads, |f| {
        env.table_cache.get_for_compaction(f)
    })?)
}

/// The executor's view of `c`: open tables, snapshots and output limits.
fn spec_of(c: &Compaction, env: &JobEnv<'_>) -> Result<CompactionSpec> {
    let mut inputs = Vec::new();
    if c.level == 0 {
        // Each L0 file is its own sorted run; newest first.
        inputs.extend(open_inputs(env, &c.inputs[0])?.into_iter().map(|t| vec![t]));
    } else if !c.inputs[0].is_empty() {
        inputs.push(open_inputs(env, &c.inputs[0])?);
    }
    if !c.inputs[1].is_empty() {
        inputs.push(open_inputs(env, &c.inputs[1])?);
    }
    let options = env.options;
    let base_level = LevelTargets::new(&c.version, &options.compaction).base_level();
    Ok(CompactionSpec {
        inputs,
        snapshots: env.snapshots.clone(),
        bottommost: c.bottommost,
        table: options.table_for_level(c.output_level(), base_level, c.bottommost),
        storage: options.background_storage(),
        filter: options.compaction_filter_at(sluice_sst::ttl::now_secs()),
        merge_operator: options.merge_operator.clone(),
        range_tombstones: c.version.tombstones().cloned(),
        // Compactions into L0 write one file: L0 files are not cut by key.
        target_file_size: if c.output_level() == 0 {
            u64::MAX
        } else {
            options.compaction.target_file_size_base
        },
        grandparents: c
            .grandparents
            .iter()
            .map(|f| GrandparentFile {
                smallest: f.smallest.clone(),
                largest: f.largest.clone(),
                size: f.file_size,
            })
            .collect(),
        max_grandparent_overlap_bytes: env.max_grandparent_overlap_bytes(),
        lower: None,
        upper: None,
        blob_relocation: None,
        task_nonce: None,
        log_drops: false,
    })
}

/// The edit installing `out` as the result of `c`: inputs removed, outputs added, the level's
/// round-robin pointer moved past the inputs.
fn edit_for_outputs(
    c: &Compaction,
    env: &JobEnv<'_>,
    out: &CompactionOutput,
    range_clean_seqs: &[SeqNo],
) -> VersionEdit {
    let mut edit = VersionEdit::default();
    for (level, files) in [c.level, c.output_level()].into_iter().zip(&c.inputs) {
        for f in files {
            edit.deleted_files.insert((level, f.number));
        }
    }
    for (f, &range_clean_seq) in out.files.iter().zip(range_clean_seqs) {
        let dir = env.table_cache.dir_index_of(&f.path);
        let meta = FileMetaData {
            range_clean_seq,
            ..FileMetaData::of_new_table(f.number, dir, &f.summary)
        };
        edit.new_files.push((c.output_level(), meta));
    }
    // The round-robin pointer moves past compactions into the next level only.
    if let Some(largest) = c.inputs[0]
        .iter()
        .map(|f| &f.largest)
        .max_by(|a, b| sluice_sst::key::compare_internal(a, b))
        .filter(|_| !c.stays_in_level())
    {
        edit.compact_pointers.push((c.level, largest.clone()));
    }
    edit
}

/// Moves `c`'s single file down to its output level by editing the MANIFEST only.
fn moved(c: &Compaction) -> JobOutcome {
    let mut edit = VersionEdit::default();
    for f in &c.inputs[0] {
        edit.deleted_files.insert((c.level, f.number));
        edit.new_files.push((c.output_level(), (**f).clone()));
        edit.compact_pointers.push((c.level, f.largest.clone()));
    }
    JobOutcome {
        edit,
        record: JobRecord::TrivialMove {
            output_level: c.output_level(),
            bytes: c.input_bytes(),
        },
    }
}

/// Deletes the files of an output that will not be installed. Best effort: a leftover is
/// named by no version and is collected as obsolete later.
fn delete_outputs(env: &JobEnv<'_>, out: &CompactionOutput) {
    for f in &out.files {
        env.table_cache.evict(f.number);
        let _ = env.options.fs.remove(&f.path);
    }
}

/// Refuses a compaction whose outputs plus dropped entries do not add up to its inputs, in
/// count and digest ([`sluice_sst::digest`]): an entry was lost, changed or invented on the
/// way, by whichever executor or worker ran it. Checked before the edit that would install
/// the outputs and make the inputs obsolete.
pub(crate) fn check_accounts_for_inputs(
    expected: Option<EntryDigest>,
    out: &CompactionOutput,
) -> Result<()> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let accounted = out.accounted();
    if accounted == expected {
        return Ok(());
    }
    let file = out
        .files
        .first()
        .map_or_else(|| PathBuf::from("<compaction output>"), |f| f.path.clone());
    Err(Error::corruption(
        file,
        0,
        format!(
            "compaction outputs do not account for their inputs: inputs hold {expected}, \
             outputs plus dropped entries {accounted} ({} written, {} dropped)",
            out.files
                .iter()
                .map(|f| f.summary.properties.num_entries)
                .sum::<u64>(),
            out.stats.dropped().entries
        ),
    ))
}

#[cfg(test)]
mod tests {
    use sluice_sst::compact::OutputFile;
    use sluice_sst::compaction_iter::CompactionIterStats;
    use sluice_sst::properties::TableProperties;
    use sluice_sst::table::TableSummary;

    use super::*;

    /// An output of files holding `(entries, digest)` each, having dropped `dropped`.
    fn output(files: &[(u64, u64)], dropped: (u64, u64)) -> CompactionOutput {
        let files = files
            .iter()
            .enumerate()
            .map(|(i, &(entries, sum))| OutputFile {
                number: i as u64 + 10,
                path: PathBuf::from(format!("/db/{:06}.sst", i + 10)),
                summary: TableSummary {
                    file_size: 100,
                    smallest_key: Vec::new(),
                    largest_key: Vec::new(),
                    properties: TableProperties {
                        num_entries: entries,
                        entry_digest: Some(sum),
                        ..TableProperties::default()
                    },
                    file_checksum: 0,
                    identity: Default::default(),
                },
            })
            .collect();
        CompactionOutput {
            files,
            profile: Default::default(),
            stats: CompactionIterStats {
                shadowed_dropped: dropped.0,
                dropped_digest: dropped.1,
                ..CompactionIterStats::default()
            },
            drops: Default::default(),
            stages: Vec::new(),
        }
    }

    #[test]
    fn a_compaction_that_loses_changes_or_invents_an_entry_is_refused() {
        let inputs = EntryDigest {
            entries: 10,
            sum: 1000u64.wrapping_neg(),
        };
        // 6 + 3 written, 1 dropped; the sums wrap around 2^64.
        let honest = output(&[(6, 5000), (3, u64::MAX - 6999)], (1, 1000));
        check_accounts_for_inputs(Some(inputs), &honest).unwrap();
        check_accounts_for_inputs(None, &output(&[], (0, 0))).unwrap();
        let lies = [
            output(&[(6, 5000), (2, u64::MAX - 6999)], (1, 1000)), // an entry lost
            output(&[(6, 5001), (3, u64::MAX - 6999)], (1, 1000)), // a value changed
            output(&[(7, 5000), (3, u64::MAX - 6999)], (1, 1000)), // an entry invented
            output(&[(6, 5000), (3, u64::MAX - 6999)], (1, 999)),  // a drop misreported
        ];
        for lie in lies {
            let err = check_accounts_for_inputs(Some(inputs), &lie).unwrap_err();
            assert!(err.is_corruption(), "{err}");
            assert!(err.to_string().contains("do not account"), "{err}");
        }
    }
}
