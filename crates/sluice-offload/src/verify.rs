//! The host's checks on every file a worker reports, before any of them is installed. A worker
//! is another process, possibly on another machine: what it says is input, and input is
//! checked.
//!
//! Always: the number is one the host reserved for this share and not reported twice, the
//! name is the table name of that number, the file exists in one of the database's table
//! directories (or is an object under one, read through the host's file system) with the
//! reported size, a local file is a regular file of its own (not a symbolic link, one hard
//! link, not the inode of any input; an object has none of these), it opens (footer, index, filter and properties
//! blocks all pass their checksums), its properties agree with the reported entry count and
//! key range, its properties carry the task's nonce, its keys lie inside the share and inside
//! the inputs' key range, no entry is newer than the newest input, and the files are in key
//! order without overlap; the reported dropped counts add up without overflow to no more than
//! the inputs hold ([`check_drop_counts`]).
//!
//! Then the host reads every byte of the file it opened, computes the CRC32C itself (compared
//! with the reported one, and the one the MANIFEST records), and decodes every block: entries
//! in order, each block ending with its index key, the filter holding every key, every blob
//! reference decoding, and the properties those the entries make (`Table::verify_all`). So
//! the digest check of `prove.rs` works on digests the host confirmed, not on the worker's
//! word, and what the MANIFEST pins (size, identity, checksum) is what the host read. The
//! blob references the properties count, so confirmed, decide which blob files stay: no
//! output may reference a blob file more often than the inputs did.
//!
//! At `audit` and `sample:K` the caller passes a [`DropAudit`] of the share's drop log, shown
//! every entry of that read in order: the worker's drop decisions are checked in the same
//! pass over the outputs.
//!
//! Known gap: the link and inode checks look at the name, and the table is then opened by
//! name. A file swapped in between is the one read and pinned, so it must pass every check
//! above itself; one swapped in after them is refused at its next open (size, identity,
//! symbolic link) and by `check` (`sluice::internals::version::pin`), unless it matches the identity.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ops::Range;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use sluice_rpc::proto;
use sluice_sst::blob::BlobRefCounts;
use sluice_sst::compact::drop_audit::DropAudit;
use sluice_sst::compact::{CompactionSpec, OutputFile};
use sluice_sst::fs::Storage;
use sluice_sst::key::{compare_internal, user_key};
use sluice_sst::table::{Table, TableReadOptions, TableSummary};

use sluice::internals::filename::table_file_name;

/// What a share may produce.
pub struct ShareBounds<'a> {
    /// Output numbers reserved for the share.
    pub numbers: Range<u64>,
    /// The nonce of the share's task: every output must carry it in its properties.
    pub task_nonce: u64,
    /// Inclusive lower user-key bound of the share, if any.
    pub lower: Option<&'a [u8]>,
    /// Exclusive upper user-key bound, if any.
    pub upper: Option<&'a [u8]>,
    /// What the whole compaction's inputs are.
    pub inputs: &'a InputFacts,
    /// Where the database's tables are: the host reads the outputs through it, from its disk
    /// or from the bucket.
    pub storage: &'a Storage,
}

/// What the host knows of a compaction's inputs, to hold every output against.
#[derive(Clone, Debug, Default)]
pub struct InputFacts {
    /// `(device, inode)` of every input table: an output is a new file, never one of them.
    pub inodes: HashSet<(u64, u64)>,
    /// The newest sequence number of any input: compaction never makes an entry newer.
    pub max_seq: u64,
    /// Entries in all inputs (saturating): no share drops more.
    pub entries: u64,
    /// The inputs' internal-key bytes (saturating): a share's drop log holds no more.
    pub key_bytes: u64,
    /// The inputs' smallest and largest user keys: compaction never makes a key outside them.
    pub key_range: Option<(Vec<u8>, Vec<u8>)>,
    /// The inputs' references into blob files: compaction moves references, so the outputs
    /// hold at most these.
    pub blob_refs: BlobRefCounts,
}

impl InputFacts {
    /// The facts of `spec`'s input tables. An input whose inode cannot be read is left out of
    /// `inodes` (its output would then still fail the link-count check).
    pub fn of(spec: &CompactionSpec) -> InputFacts {
        let mut facts = InputFacts::default();
        for table in spec.inputs.iter().flatten() {
            let p = table.properties();
            facts.max_seq = facts.max_seq.max(p.largest_seq);
            facts.entries = facts.entries.saturating_add(p.num_entries);
            facts.key_bytes = facts.key_bytes.saturating_add(p.raw_key_bytes);
            facts.blob_refs.merge(&p.blob_refs);
            if let Ok(meta) = std::fs::metadata(table.path()) {
                facts.inodes.insert((meta.dev(), meta.ino()));
            }
            if p.num_entries == 0 {
                continue;
            }
            let (lo, hi) = (user_key(&p.smallest_key), user_key(&p.largest_key));
            facts.key_range = Some(match facts.key_range.take() {
                None => (lo.to_vec(), hi.to_vec()),
                Some((a, b)) => (a.min(lo.to_vec()), b.max(hi.to_vec())),
            });
        }
        facts
    }
}

/// Checks `files` (as reported, in key order) against `bounds` and the files on disk in
/// `dirs`; returns them as output files ready to install, or what is wrong.
pub fn verify_outputs(
    files: &[proto::OutputFile],
    bounds: &ShareBounds<'_>,
    dirs: &[PathBuf],
    mut audit: Option<&mut DropAudit<'_>>,
) -> Result<Vec<OutputFile>, String> {
    let mut seen = HashSet::new();
    let mut out: Vec<OutputFile> = Vec::with_capacity(files.len());
    for f in files {
        let file = verify_one(f, bounds, dirs, audit.as_deref_mut())
            .map_err(|e| format!("output {} ({:?}): {e}", f.number, f.name))?;
        if !seen.insert(f.number) {
            return Err(format!("output {} is reported twice", f.number));
        }
        if let Some(prev) = out.last()
            && compare_internal(&prev.summary.largest_key, &file.summary.smallest_key)
                != Ordering::Less
        {
            return Err(format!(
                "outputs {} and {} are out of order or overlap",
                prev.number, file.number
            ));
        }
        out.push(file);
    }
    Ok(out)
}

fn verify_one(
    f: &proto::OutputFile,
    bounds: &ShareBounds<'_>,
    dirs: &[PathBuf],
    audit: Option<&mut DropAudit<'_>>,
) -> Result<OutputFile, String> {
    if !bounds.numbers.contains(&f.number) {
        return Err(format!(
            "number is outside the reserved {:?}",
            bounds.numbers
        ));
    }
    let fs = &bounds.storage.fs;
    let mut found = None;
    for p in dirs.iter().map(|d| table_file_name(d, f.number)) {
        match fs.metadata(&p) {
            Ok(m) if !m.is_dir => {
                found = Some(p);
                break;
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // The store or the disk did not answer: not the worker's fault to judge.
            Err(e) => return Err(format!("{}: {e}", p.display())),
        }
    }
    let path = found.ok_or("no such file in any table directory")?;
    if path.file_name().and_then(|n| n.to_str()) != Some(f.name.as_str()) {
        return Err(format!("name is not the table name of number {}", f.number));
    }
    // An object is a name and bytes: no link or inode to check. One copied from an input
    // carries another task's nonce, and one that is an input's bytes fails the digest.
    if !fs.is_remote(&path) {
        check_local_file(&path, bounds)?;
    }
    let opts = TableReadOptions {
        storage: bounds.storage.clone(),
        ..TableReadOptions::default()
    };
    let table = Table::open(&path, f.number, opts).map_err(|e| e.to_string())?;
    // The size of what was opened (and is read below), not of an earlier look at the name.
    let size = table.file_size();
    if size != f.size {
        return Err(format!(
            "{} is {size} bytes, reported {}",
            path.display(),
            f.size
        ));
    }
    let props = table.properties();
    if props.num_entries != f.entries {
        return Err(format!(
            "holds {} entries, reported {}",
            props.num_entries, f.entries
        ));
    }
    if props.smallest_key != f.smallest || props.largest_key != f.largest {
        return Err("key range differs from the file's properties".into());
    }
    if props.task_nonce != Some(bounds.task_nonce) {
        return Err(format!(
            "carries task nonce {}, this task's is {:016x}: an output of another task",
            props
                .task_nonce
                .map_or_else(|| "none".to_string(), |n| format!("{n:016x}")),
            bounds.task_nonce
        ));
    }
    if f.entries == 0 {
        return Err("an output with no entries".into());
    }
    let below = bounds.lower.is_some_and(|lo| user_key(&f.smallest) < lo);
    let above = bounds.upper.is_some_and(|hi| user_key(&f.largest) >= hi);
    if below || above {
        return Err("keys outside the share's range".into());
    }
    let outside_inputs = bounds.inputs.key_range.as_ref().is_none_or(|(lo, hi)| {
        user_key(&f.smallest) < lo.as_slice() || user_key(&f.largest) > hi.as_slice()
    });
    if outside_inputs {
        return Err("keys outside the inputs' key range".into());
    }
    if props.largest_seq > bounds.inputs.max_seq {
        return Err(format!(
            "holds sequence number {}, newer than any input's ({})",
            props.largest_seq, bounds.inputs.max_seq
        ));
    }
    if props.entry_digest.is_none() {
        return Err("properties without an entry digest: nothing to prove it by".into());
    }
    // Every byte, read through the file the checks above opened: the checksum and the
    // identity the MANIFEST will pin are of the bytes the host read.
    let verified = match audit {
        Some(audit) => table.verify_all_visiting(|key, same| audit.written(key, same)),
        None => table.verify_all(),
    }
    .map_err(|e| e.to_string())?;
    check_blob_refs(&table, &bounds.inputs.blob_refs)?;
    let Some(crc) = verified.file_crc32c else {
        return Err("its blocks and footer do not tile the file: bytes no checksum covers".into());
    };
    if crc != f.file_crc32c {
        return Err(format!(
            "file checksum {crc:#010x} differs from the reported {:#010x}",
            f.file_crc32c
        ));
    }
    Ok(OutputFile {
        number: f.number,
        summary: TableSummary {
            file_size: size,
            smallest_key: props.smallest_key.clone(),
            largest_key: props.largest_key.clone(),
            properties: props.clone(),
            file_checksum: crc,
            identity: table.identity(),
        },
        path,
    })
}

/// Checks that the local file at `path` is a regular file of its own: not a symbolic link,
/// one hard link, not the inode of any input.
fn check_local_file(path: &std::path::Path, bounds: &ShareBounds<'_>) -> Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.file_type().is_file() {
        return Err(format!(
            "{} is not a regular file (a link, or a directory)",
            path.display()
        ));
    }
    if meta.nlink() != 1 {
        return Err(format!(
            "{} has {} hard links: an output is a new file of its own",
            path.display(),
            meta.nlink()
        ));
    }
    if bounds.inputs.inodes.contains(&(meta.dev(), meta.ino())) {
        return Err(format!(
            "{} is one of the compaction's inputs",
            path.display()
        ));
    }
    Ok(())
}

/// Checks the dropped-entry counts a worker reported: added up without overflow, and no more
/// than the compaction's inputs hold (a wrapped negative count would otherwise balance
/// invented entries modulo 2^64).
pub fn check_drop_counts(
    stats: &sluice_sst::compaction_iter::CompactionIterStats,
    inputs: &InputFacts,
) -> Result<(), String> {
    let dropped = stats
        .checked_unwritten()
        .ok_or("its dropped-entry counts overflow when added up")?;
    if dropped.entries > inputs.entries {
        return Err(format!(
            "it reports {} entries dropped, more than the inputs' {}",
            dropped.entries, inputs.entries
        ));
    }
    Ok(())
}

/// Which blob files stay is decided by the references the tables count, so an output may
/// not reference any blob file more often than the inputs did. `table`'s properties count
/// its references as its data does: the full read (`Table::verify_all`) checked them, and
/// refused a reference that does not decode.
fn check_blob_refs(table: &Table, inputs: &BlobRefCounts) -> Result<(), String> {
    let counted = &table.properties().blob_refs;
    match counted
        .iter()
        .find(|&(file, t)| t.refs > inputs.get(file).refs)
    {
        Some((file, t)) => Err(format!(
            "holds {} references to blob file {file}, the inputs {}",
            t.refs,
            inputs.get(file).refs
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use sluice_sst::key::{ValueKind, make_internal_key};
    use sluice_sst::table::{TableBuilder, TableOptions};

    use super::*;

    /// The nonce of the task every test share answers.
    const NONCE: u64 = 0x5eed_0f7a_5c00;

    /// Writes table `number` in `dir` with keys `key000..key099` and reports it truthfully.
    fn honest(dir: &Path, number: u64) -> proto::OutputFile {
        answering(dir, number, NONCE)
    }

    /// [`honest`], as an output of the task whose nonce is `nonce`.
    fn answering(dir: &Path, number: u64, nonce: u64) -> proto::OutputFile {
        let path = table_file_name(dir, number);
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        b.set_task_nonce(nonce);
        for k in 0..100 {
            let key = make_internal_key(format!("key{k:03}").as_bytes(), 5, ValueKind::Value);
            b.add(&key, b"value").unwrap();
        }
        let s = b.finish().unwrap();
        proto::OutputFile {
            number,
            name: format!("{number:06}.sst"),
            size: s.file_size,
            smallest: s.smallest_key,
            largest: s.largest_key,
            entries: 100,
            file_crc32c: s.file_checksum,
        }
    }

    /// Inputs spanning `key000..key099` at sequence numbers up to 5.
    fn facts() -> &'static InputFacts {
        static FACTS: std::sync::OnceLock<InputFacts> = std::sync::OnceLock::new();
        FACTS.get_or_init(|| InputFacts {
            inodes: HashSet::new(),
            max_seq: 5,
            entries: 100,
            key_bytes: 100 * 14,
            key_range: Some((b"key000".to_vec(), b"key099".to_vec())),
            blob_refs: Default::default(),
        })
    }

    fn bounds(lower: Option<&'static [u8]>, upper: Option<&'static [u8]>) -> ShareBounds<'static> {
        ShareBounds {
            numbers: 10..20,
            task_nonce: NONCE,
            lower,
            upper,
            inputs: facts(),
            storage: storage(),
        }
    }

    fn storage() -> &'static Storage {
        static STORAGE: std::sync::LazyLock<Storage> = std::sync::LazyLock::new(Storage::default);
        &STORAGE
    }

    #[test]
    fn an_honest_report_passes() {
        let dir = tempfile::tempdir().unwrap();
        let f = honest(dir.path(), 12);
        let dirs = vec![dir.path().to_path_buf()];
        let out =
            verify_outputs(&[f], &bounds(Some(b"key000"), Some(b"key100")), &dirs, None).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].summary.properties.num_entries, 100);
        assert_eq!(out[0].path, table_file_name(dir.path(), 12));
    }

    #[test]
    fn every_lie_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        let good = honest(dir.path(), 12);
        let any = bounds(None, None);
        let lies: Vec<(&str, proto::OutputFile, ShareBounds<'static>)> = vec![
            (
                "unreserved number",
                proto::OutputFile {
                    number: 25,
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "missing file",
                proto::OutputFile {
                    number: 13,
                    name: "000013.sst".into(),
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "wrong name",
                proto::OutputFile {
                    name: "x.sst".into(),
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "wrong size",
                proto::OutputFile {
                    size: good.size + 1,
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "wrong count",
                proto::OutputFile {
                    entries: 99,
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "wrong range",
                proto::OutputFile {
                    smallest: good.largest.clone(),
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "wrong checksum",
                proto::OutputFile {
                    file_crc32c: good.file_crc32c ^ 1,
                    ..good.clone()
                },
                bounds(None, None),
            ),
            (
                "below the share",
                good.clone(),
                bounds(Some(b"key050"), None),
            ),
            (
                "above the share",
                good.clone(),
                bounds(None, Some(b"key099")),
            ),
        ];
        for (what, report, b) in lies {
            assert!(
                verify_outputs(&[report], &b, &dirs, None).is_err(),
                "{what} was accepted"
            );
        }
        // Facts of the inputs: an output newer than every input, or with keys past them.
        for (what, inputs) in [
            (
                "newer than the inputs",
                InputFacts {
                    max_seq: 4,
                    ..facts().clone()
                },
            ),
            (
                "keys past the inputs",
                InputFacts {
                    key_range: Some((b"key000".to_vec(), b"key098".to_vec())),
                    ..facts().clone()
                },
            ),
        ] {
            let b = ShareBounds {
                inputs: &inputs,
                ..bounds(None, None)
            };
            assert!(
                verify_outputs(std::slice::from_ref(&good), &b, &dirs, None).is_err(),
                "{what}"
            );
        }
        // An output of another task (say, kept from an earlier one), truthfully reported.
        let stale = answering(dir.path(), 13, NONCE ^ 1);
        let err = verify_outputs(&[stale], &any, &dirs, None).unwrap_err();
        assert!(err.contains("an output of another task"), "{err}");
        std::fs::remove_file(table_file_name(dir.path(), 13)).unwrap();
        // The same file twice: reported twice, and overlapping itself.
        assert!(verify_outputs(&[good.clone(), good.clone()], &any, &dirs, None).is_err());
        // A corrupt byte in a data block: the footer and meta blocks still open; reading every
        // block finds it, whether the report carries the good file's CRC or the damaged one's.
        let path = table_file_name(dir.path(), 12);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[10] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let damaged = proto::OutputFile {
            file_crc32c: crc32c::crc32c(&bytes),
            ..good.clone()
        };
        for report in [good, damaged] {
            let err = verify_outputs(&[report], &any, &dirs, None).unwrap_err();
            assert!(err.contains("checksum mismatch"), "{err}");
        }
    }

    /// An output referencing a blob file more often than the inputs did would keep the file
    /// alive past its values (or, counted less, let it be deleted under them): refused on the
    /// counts the full read confirmed.
    #[test]
    fn blob_references_beyond_the_inputs_are_refused() {
        use sluice_sst::blob::BlobRef;
        let dir = tempfile::tempdir().unwrap();
        let path = table_file_name(dir.path(), 12);
        let mut b = TableBuilder::create(&path, &TableOptions::default()).unwrap();
        b.set_task_nonce(NONCE);
        for k in 0..3u64 {
            let key = make_internal_key(format!("key{k:03}").as_bytes(), 5, ValueKind::BlobIndex);
            let blob = BlobRef {
                file_number: 7,
                offset: k * 100,
                size: 100,
            };
            b.add(&key, &blob.encode()).unwrap();
        }
        let s = b.finish().unwrap();
        let report = proto::OutputFile {
            number: 12,
            name: "000012.sst".into(),
            size: s.file_size,
            smallest: s.smallest_key.clone(),
            largest: s.largest_key.clone(),
            entries: 3,
            file_crc32c: s.file_checksum,
        };
        let dirs = vec![dir.path().to_path_buf()];
        let inputs_with = |refs: u64| {
            let mut counts = BlobRefCounts::default();
            for k in 0..refs {
                counts.add(&BlobRef {
                    file_number: 7,
                    offset: k * 100,
                    size: 100,
                });
            }
            InputFacts {
                blob_refs: counts,
                ..facts().clone()
            }
        };
        let (enough, too_few) = (inputs_with(3), inputs_with(2));
        let b = |inputs| ShareBounds {
            inputs,
            ..bounds(None, None)
        };
        verify_outputs(std::slice::from_ref(&report), &b(&enough), &dirs, None).unwrap();
        let err =
            verify_outputs(std::slice::from_ref(&report), &b(&too_few), &dirs, None).unwrap_err();
        assert!(err.contains("references to blob file 7"), "{err}");
    }

    #[test]
    fn an_output_must_be_a_new_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        let input = honest(dir.path(), 5);
        let input_path = table_file_name(dir.path(), 5);
        let meta = std::fs::metadata(&input_path).unwrap();
        let inputs = InputFacts {
            inodes: HashSet::from([(meta.dev(), meta.ino())]),
            ..facts().clone()
        };
        let b = ShareBounds {
            inputs: &inputs,
            ..bounds(None, None)
        };
        // The input itself under an output's number, reported with its size, range and CRC:
        // as a symbolic link, and as a hard link.
        let output = table_file_name(dir.path(), 12);
        let as_output = proto::OutputFile {
            number: 12,
            name: "000012.sst".into(),
            ..input
        };
        std::os::unix::fs::symlink(&input_path, &output).unwrap();
        let err = verify_outputs(std::slice::from_ref(&as_output), &b, &dirs, None).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_file(&output).unwrap();
        std::fs::hard_link(&input_path, &output).unwrap();
        let err = verify_outputs(std::slice::from_ref(&as_output), &b, &dirs, None).unwrap_err();
        assert!(err.contains("hard links"), "{err}");
        // A copy is a file of its own, but not when it is (by inode) an input.
        std::fs::remove_file(&output).unwrap();
        std::fs::copy(&input_path, &output).unwrap();
        verify_outputs(std::slice::from_ref(&as_output), &b, &dirs, None).unwrap();
        std::fs::remove_file(&input_path).unwrap();
        std::fs::rename(&output, &input_path).unwrap();
        let meta = std::fs::metadata(&input_path).unwrap();
        let same = InputFacts {
            inodes: HashSet::from([(meta.dev(), meta.ino())]),
            ..facts().clone()
        };
        let as_input = proto::OutputFile {
            number: 5,
            name: "000005.sst".into(),
            ..as_output
        };
        let b = ShareBounds {
            inputs: &same,
            numbers: 5..6,
            ..bounds(None, None)
        };
        let err = verify_outputs(&[as_input], &b, &dirs, None).unwrap_err();
        assert!(err.contains("one of the compaction's inputs"), "{err}");
    }
}
