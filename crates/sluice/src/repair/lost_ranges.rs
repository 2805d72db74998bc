//! What a repair may have sent back in time. A damaged data block (or a table gone whole)
//! held the newest versions of some keys; where an older version of such a key survives in
//! another table, the repaired database reads that older value, and `check` cannot tell. So
//! repair reports each key range it lost with the sequence numbers its table held, counts
//! the surviving keys in it whose newest version is no newer than that table's newest (each
//! may now read an older value than it had), and can delete those versions
//! ([`super::RepairOptions::drop_older_in_lost_ranges`]) so that nothing stale resurfaces.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::{FileSystem, IoMode};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{SeqNo, ValueKind, parse_internal_key, seek_key, user_key};
use sluice_sst::range_del::RangeTombstone;
use sluice_sst::table::Table;

use crate::version::edit::FileMetaData;
use crate::{IoContext, Result};

/// A key range whose newest versions may be lost (RocksDB's repair loses them silently).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostRange {
    /// The table the range was lost from.
    pub file: PathBuf,
    /// Its smallest user key (inclusive).
    pub smallest: Vec<u8>,
    /// Its largest user key (inclusive).
    pub largest: Vec<u8>,
    /// The smallest and largest sequence numbers the table held: what was lost lies between.
    pub seqs: (SeqNo, SeqNo),
    /// Surviving keys in the range whose newest version is at or below `seqs.1`: each may
    /// now read an older value than it had before the damage (or, when repair dropped older
    /// versions in lost ranges, was deleted).
    pub keys_at_risk: u64,
}

impl LostRange {
    /// The range of a table the MANIFEST described, gone whole (missing or unreadable).
    pub(super) fn of_file(path: &Path, meta: &FileMetaData) -> LostRange {
        LostRange {
            file: path.to_path_buf(),
            smallest: user_key(&meta.smallest).to_vec(),
            largest: user_key(&meta.largest).to_vec(),
            seqs: (meta.smallest_seq, meta.largest_seq),
            keys_at_risk: 0,
        }
    }

    /// The ranges of the damaged data blocks `bad` (indexes, ascending) of `table`: a run of
    /// adjacent blocks is one range, from just after the last user key of the block before it
    /// (that key's newest version is in that good block; the run can only have held older
    /// ones) to the run's last user key (whose newest version was in the run).
    pub(super) fn of_blocks(table: &Table, bad: &[usize]) -> Vec<LostRange> {
        let props = table.properties();
        let last_key = |i: usize| table.index_entry(i).map(|(k, _)| user_key(k).to_vec());
        let mut out: Vec<LostRange> = Vec::new();
        let mut previous: Option<usize> = None;
        for &i in bad {
            let Some(largest) = last_key(i) else {
                continue;
            };
            match out.last_mut() {
                Some(run) if previous == Some(i.wrapping_sub(1)) => run.largest = largest,
                _ => {
                    let smallest = match i.checked_sub(1).and_then(last_key) {
                        Some(before) => [before.as_slice(), &[0]].concat(),
                        None => user_key(&props.smallest_key).to_vec(),
                    };
                    out.push(LostRange {
                        file: table.path().to_path_buf(),
                        smallest,
                        largest,
                        seqs: (props.smallest_seq, props.largest_seq),
                        keys_at_risk: 0,
                    });
                }
            }
            previous = Some(i);
        }
        out
    }

    /// The range tombstone that deletes every version in the range at or below `seqs.1`.
    pub(super) fn tombstone(&self) -> RangeTombstone {
        RangeTombstone {
            start: self.smallest.clone(),
            // The end is exclusive: the smallest key after `largest`.
            end: [self.largest.as_slice(), &[0]].concat(),
            seq: self.seqs.1.saturating_add(1),
        }
    }
}

impl fmt::Display for LostRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "keys [{}, {}] of {} (sequence numbers {}..={}): {} surviving keys may read an older value",
            self.smallest.escape_ascii(),
            self.largest.escape_ascii(),
            self.file.display(),
            self.seqs.0,
            self.seqs.1,
            self.keys_at_risk
        )
    }
}

/// Sets each range's `keys_at_risk` from what `tables` (everything repair merges) hold:
/// the keys in it whose newest version is a value (or merge operand) at or below the lost
/// table's newest sequence number. Range tombstones are not applied: a key one of them
/// deletes anyway is still counted.
pub(super) fn count_keys_at_risk(ranges: &mut [LostRange], tables: &[Arc<Table>]) -> Result<()> {
    for range in ranges.iter_mut() {
        let mut newest: BTreeMap<Vec<u8>, (SeqNo, ValueKind)> = BTreeMap::new();
        for table in tables {
            let mut it = table.iter();
            it.seek(&seek_key(&range.smallest, sluice_sst::key::MAX_SEQ))?;
            while it.valid() {
                let Some(entry) = parse_internal_key(it.key()) else {
                    break;
                };
                if entry.user_key > range.largest.as_slice() {
                    break;
                }
                let slot = newest
                    .entry(entry.user_key.to_vec())
                    .or_insert((entry.seq, entry.kind));
                if entry.seq > slot.0 {
                    *slot = (entry.seq, entry.kind);
                }
                it.next()?;
            }
        }
        range.keys_at_risk = newest
            .values()
            .filter(|(seq, kind)| *seq <= range.seqs.1 && *kind != ValueKind::Deletion)
            .count() as u64;
    }
    Ok(())
}

/// Writes the ranges, one per line, to a new file in `lost/` of `dir` and makes it durable;
/// returns its path.
pub(super) fn write_report(
    fs: &dyn FileSystem,
    dir: &Path,
    ranges: &[LostRange],
    dropped_older: bool,
) -> Result<PathBuf> {
    let lost = dir.join("lost");
    crate::filename::create_dir_all_durably(fs, &lost)?;
    let mut path = lost.join("LOST-RANGES");
    let mut n = 1;
    while fs.exists(&path).with_path(&path)? {
        path = lost.join(format!("LOST-RANGES.{n}"));
        n += 1;
    }
    let mut text = String::from(if dropped_older {
        "# Key ranges repair lost; their keys' older versions were deleted.\n"
    } else {
        "# Key ranges repair lost; keys at risk may read an older value than before.\n"
    });
    for range in ranges {
        text.push_str(&format!("{range}\n"));
    }
    let mut file = fs.create(&path, IoMode::Buffered).with_path(&path)?;
    file.append(text.as_bytes()).with_path(&path)?;
    file.sync().with_path(&path)?;
    drop(file);
    crate::filename::sync_dir(fs, &lost)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_covers_the_range_inclusively_and_only_versions_up_to_the_lost_ones() {
        let range = LostRange {
            file: PathBuf::from("/db/000007.sst"),
            smallest: b"b".to_vec(),
            largest: b"d".to_vec(),
            seqs: (10, 20),
            keys_at_risk: 3,
        };
        let t = range.tombstone();
        assert_eq!(
            (t.start.as_slice(), t.end.as_slice(), t.seq),
            (&b"b"[..], &b"d\0"[..], 21)
        );
        assert!(t.end.as_slice() > b"d".as_slice() && t.end.as_slice() < b"d\x00\x00".as_slice());
        let text = range.to_string();
        assert!(
            text.contains("keys [b, d]")
                && text.contains("10..=20")
                && text.contains("3 surviving"),
            "{text}"
        );
    }
}
