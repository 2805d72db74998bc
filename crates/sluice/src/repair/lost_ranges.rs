//! What a repair may have sent back in time. A damaged data block (or a table gone whole)
//! held the newest versions of some keys; where an older version of such a key survives in
//! another table, the repaired database reads that older value, and `check` cannot tell. So
//! repair reports each key range it lost with the sequence numbers its table held, and counts
//! the surviving keys in it that went back in time, as far as can be proven: the table's
//! bloom filter says it may have held the key, and the key's newest surviving version is
//! older than everything the table held (its sequence number is below the table's smallest).
//! Asked to ([`super::RepairOptions::drop_older_in_lost_ranges`]), repair deletes exactly
//! those keys' surviving versions, so that they read as absent rather than stale.
//!
//! Not counted: a key the table held whose surviving version lies within the table's own
//! sequence range (it may be newer or older than the lost one), and a key whose newest version
//! is a merge operand newer than the table merged onto an older base. The filter's false
//! positives (about 1% at 10 bits per key) can count, and with the option delete, a key the
//! table never held; a table with no readable filter (or gone whole) counts every such key
//! in its range.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_sst::fs::Storage;
use sluice_sst::fs::{FileSystem, IoMode};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::{SeqNo, ValueKind, parse_internal_key, seek_key, user_key};
use sluice_sst::range_del::RangeTombstone;
use sluice_sst::table::{Table, TableReadOptions};

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
    /// Surviving keys in the range that went back in time (see the module docs): each reads
    /// an older value than it had before the damage, or, when repair dropped older versions
    /// in lost ranges, was deleted.
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
    /// ones, unless that version is a merge operand, whose base they held: then from that
    /// key) to the run's last user key (whose newest version was in the run).
    pub(super) fn of_blocks(table: &Table, bad: &[usize]) -> Vec<LostRange> {
        let props = table.properties();
        let last_key = |i: usize| table.index_entry(i).map(|(k, _)| user_key(k).to_vec());
        let ends_in_operand = |i: usize| {
            let last = table
                .index_entry(i)
                .and_then(|(k, _)| parse_internal_key(k));
            last.is_some_and(|k| k.kind == ValueKind::Merge)
        };
        let mut out: Vec<LostRange> = Vec::new();
        let mut previous: Option<usize> = None;
        for &i in bad {
            let Some(largest) = last_key(i) else {
                continue;
            };
            match out.last_mut() {
                Some(run) if previous == Some(i.wrapping_sub(1)) => run.largest = largest,
                _ => {
                    let before = i.checked_sub(1);
                    let smallest = match before.and_then(last_key) {
                        Some(key) if before.is_some_and(ends_in_operand) => key,
                        Some(key) => [key.as_slice(), &[0]].concat(),
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
}

/// A tombstone over exactly `key`'s versions up to `seq`.
fn deleting(key: &[u8], seq: SeqNo) -> RangeTombstone {
    RangeTombstone {
        start: key.to_vec(),
        // The end is exclusive: the smallest key after `key`.
        end: [key, &[0]].concat(),
        seq: seq.saturating_add(1),
    }
}

impl fmt::Display for LostRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "keys [{}, {}] of {} (sequence numbers {}..={}): {} surviving keys read an older value",
            self.smallest.escape_ascii(),
            self.largest.escape_ascii(),
            self.file.display(),
            self.seqs.0,
            self.seqs.1,
            self.keys_at_risk
        )
    }
}

/// Sets each range's `keys_at_risk` from what `tables` (everything repair merges) hold (see
/// the module docs; range tombstones are not applied: a key one of them deletes anyway is
/// still counted), and returns the tombstones that delete those keys' surviving versions.
/// The damaged tables are opened again, with their filters, through `storage`.
pub(super) fn count_keys_at_risk<'a>(
    ranges: impl IntoIterator<Item = &'a mut LostRange>,
    tables: &[Arc<Table>],
    storage: &Storage,
) -> Result<Vec<RangeTombstone>> {
    let mut stale = Vec::new();
    for range in ranges {
        let filtered = TableReadOptions {
            storage: storage.clone(),
            ..TableReadOptions::default()
        };
        // Gone whole, or its filter unreadable: every key of the range may have been in it.
        let lost_table = Table::open(&range.file, 0, filtered).ok();
        let may_have_held = |key: &[u8]| lost_table.as_ref().is_none_or(|t| t.may_contain(key));
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
        let before_all_lost = range.seqs.0;
        let at_risk: Vec<_> = newest
            .into_iter()
            .filter(|(key, (seq, kind))| {
                *seq < before_all_lost && *kind != ValueKind::Deletion && may_have_held(key)
            })
            .collect();
        range.keys_at_risk = at_risk.len() as u64;
        stale.extend(at_risk.iter().map(|(key, (seq, _))| deleting(key, *seq)));
    }
    Ok(stale)
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
    fn a_tombstone_covers_one_key_up_to_its_stale_version() {
        let t = deleting(b"d", 20);
        assert_eq!(
            (t.start.as_slice(), t.end.as_slice(), t.seq),
            (&b"d"[..], &b"d\0"[..], 21)
        );
        // Nothing sorts between `d` and `d\0`: the tombstone covers exactly one key.
        assert!(t.end.as_slice() > b"d".as_slice() && t.end.as_slice() < b"d\x00\x00".as_slice());
        let range = LostRange {
            file: PathBuf::from("/db/000007.sst"),
            smallest: b"b".to_vec(),
            largest: b"d".to_vec(),
            seqs: (10, 20),
            keys_at_risk: 3,
        };
        let text = range.to_string();
        assert!(
            text.contains("keys [b, d]")
                && text.contains("10..=20")
                && text.contains("3 surviving"),
            "{text}"
        );
    }
}
