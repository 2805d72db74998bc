//! What partitioned mode looks like right now: per range and per owner, the bytes and tables
//! stored and the compaction work pending. Computed from one version; `Db::metrics` and
//! `sluice stats` show it, and the balancer decides from it.

use serde::{Deserialize, Serialize};

use super::{owner_dir_index, owner_of_dir};
use crate::compaction::level_targets::LevelTargets;
use crate::options::Options;
use crate::version::Version;
use crate::version::edit::NUM_LEVELS;
use crate::version::range_map::{OwnerId, RangeMap};
use crate::version::version::smallest_user_key;

/// One range of the map and what it holds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RangeStats {
    /// The range's first user key (empty for the first range).
    pub start: Vec<u8>,
    /// The next range's first key; `None` for the last range.
    pub end: Option<Vec<u8>>,
    /// The range's owner.
    pub owner: OwnerId,
    /// Former owners still holding data of the range: a move in progress.
    pub forwarded_from: Vec<OwnerId>,
    /// Bytes of the range's tables, wherever they are.
    pub bytes: u64,
    /// The part of `bytes` in L0: a write buffer that compaction drains, so it swings by a
    /// memtable's worth between compactions of a hot range.
    pub l0_bytes: u64,
    /// Tables of the range.
    pub files: usize,
    /// Bytes of the range's tables still in a former owner's directory.
    pub forwarded_bytes: u64,
    /// Estimated input bytes the range's compactions still have to process (see
    /// `partition::stats::pending_compaction_bytes`).
    pub pending_compaction_bytes: u64,
}

/// One owner and what it stores.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OwnerStats {
    /// The owner's id.
    pub owner: OwnerId,
    /// Ranges it owns.
    pub ranges: usize,
    /// Bytes of tables in its directory.
    pub bytes: u64,
    /// Tables in its directory.
    pub files: usize,
    /// Pending compaction bytes of the ranges it owns.
    pub pending_compaction_bytes: u64,
}

/// The range map with per-range and per-owner figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PartitionStats {
    /// In key order.
    pub ranges: Vec<RangeStats>,
    /// In owner order; every configured owner, even one that owns nothing.
    pub owners: Vec<OwnerStats>,
}

impl PartitionStats {
    /// The largest owner's bytes over the smallest's (1.0 when all are equal; infinite when
    /// one is empty and another is not).
    pub fn skew(&self) -> f64 {
        let bytes = self.owners.iter().map(|o| o.bytes);
        let (Some(max), Some(min)) = (bytes.clone().max(), bytes.min()) else {
            return 1.0;
        };
        match (max, min) {
            (0, _) => 1.0,
            (_, 0) => f64::INFINITY,
            _ => max as f64 / min as f64,
        }
    }
}

/// An estimate of the compaction input bytes a level's excess will cost: the fraction of a
/// deeper level above its target, counted in each range's share of the level. (L0 is counted
/// per range by [`pending_compaction_bytes`].)
fn level_excess_fraction(version: &Version, targets: &LevelTargets, level: usize) -> f64 {
    if level == NUM_LEVELS - 1 {
        return 0.0;
    }
    let bytes = version.level_bytes(level);
    let target = targets.target(level);
    if bytes <= target {
        0.0
    } else {
        1.0 - target as f64 / bytes as f64
    }
}

/// Pending compaction bytes of each range of `map` in `version`: all of a range's L0 once the
/// range holds `l0_compaction_trigger` L0 files, plus its share of every deeper level's
/// excess.
pub(crate) fn pending_compaction_bytes(
    version: &Version,
    options: &Options,
    map: &RangeMap,
) -> Vec<u64> {
    let mut pending = vec![0f64; map.len()];
    let mut l0_files = vec![0usize; map.len()];
    for f in version.files(0) {
        if let Some(n) = l0_files.get_mut(map.index_of(smallest_user_key(f))) {
            *n += 1;
        }
    }
    for f in version.files(0) {
        let i = map.index_of(smallest_user_key(f));
        if l0_files
            .get(i)
            .is_some_and(|&n| n >= options.compaction.l0_compaction_trigger)
            && let Some(p) = pending.get_mut(i)
        {
            *p += f.file_size as f64;
        }
    }
    let targets = LevelTargets::new(version, &options.compaction);
    for level in 1..NUM_LEVELS {
        let fraction = level_excess_fraction(version, &targets, level);
        if fraction == 0.0 {
            continue;
        }
        for f in version.files(level) {
            if let Some(p) = pending.get_mut(map.index_of(smallest_user_key(f))) {
                *p += f.file_size as f64 * fraction;
            }
        }
    }
    pending.into_iter().map(|p| p as u64).collect()
}

/// The figures of `version`'s range map for `owners` owners; `None` when not partitioned.
pub(crate) fn partition_stats(
    version: &Version,
    options: &Options,
    owners: usize,
) -> Option<PartitionStats> {
    let map = version.range_map()?;
    let pending = pending_compaction_bytes(version, options, map);
    let mut ranges: Vec<RangeStats> = (0..map.len())
        .map(|i| {
            let (start, end) = map.bounds(i);
            let r = &map.ranges()[i];
            RangeStats {
                start: start.to_vec(),
                end: end.map(<[u8]>::to_vec),
                owner: r.owner,
                forwarded_from: r.forwarded_from.clone(),
                pending_compaction_bytes: pending[i],
                ..RangeStats::default()
            }
        })
        .collect();
    let owner_count = owners.max(map.max_owner() as usize + 1);
    let mut per_owner: Vec<OwnerStats> = (0..owner_count)
        .map(|o| OwnerStats {
            owner: o as OwnerId,
            ..OwnerStats::default()
        })
        .collect();
    for (level, f) in (0..NUM_LEVELS).flat_map(|l| version.files(l).iter().map(move |f| (l, f))) {
        let i = map.index_of(smallest_user_key(f));
        let r = &mut ranges[i];
        r.bytes += f.file_size;
        if level == 0 {
            r.l0_bytes += f.file_size;
        }
        r.files += 1;
        if f.dir_index != owner_dir_index(r.owner) {
            r.forwarded_bytes += f.file_size;
        }
        if let Some(o) = owner_of_dir(f.dir_index).and_then(|o| per_owner.get_mut(o as usize)) {
            o.bytes += f.file_size;
            o.files += 1;
        }
    }
    for r in &ranges {
        if let Some(o) = per_owner.get_mut(r.owner as usize) {
            o.ranges += 1;
            o.pending_compaction_bytes += r.pending_compaction_bytes;
        }
    }
    Some(PartitionStats {
        ranges,
        owners: per_owner,
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::options::CompactionOptions;
    use crate::version::edit::{FileMetaData, VersionEdit};

    fn table(number: u64, lo: &str, hi: &str, size: u64, dir_index: u32) -> FileMetaData {
        FileMetaData {
            dir_index,
            ..crate::version::testing::table(number, lo, hi, size, 1)
        }
    }

    #[test]
    fn bytes_add_up_per_range_and_owner() {
        let map = RangeMap::new(&[b"m".to_vec()], &[0, 1])
            .unwrap()
            .with_move(0, 1);
        let mut edit = VersionEdit {
            range_map: Some(map.with_forwarding([(0, 0)])),
            ..VersionEdit::default()
        };
        edit.add_file(1, table(1, "a", "b", 100, 1)); // range 0, still with owner 0
        edit.add_file(1, table(2, "c", "d", 50, 2)); // range 0, with its new owner
        edit.add_file(1, table(3, "n", "o", 30, 2)); // range 1
        let v = Version::default().apply(&edit).unwrap();
        let options = Options {
            compaction: CompactionOptions {
                level_compaction_dynamic_level_bytes: false,
                max_bytes_for_level_base: 90,
                ..CompactionOptions::default()
            },
            ..Options::default()
        };
        let s = partition_stats(&v, &options, 3).unwrap();
        assert_eq!(s.ranges[0].bytes, 150);
        assert_eq!(s.ranges[0].files, 2);
        assert_eq!(s.ranges[0].forwarded_bytes, 100);
        assert_eq!(s.ranges[0].forwarded_from, vec![0]);
        assert_eq!(s.ranges[1].bytes, 30);
        assert_eq!(s.owners.len(), 3);
        assert_eq!((s.owners[0].bytes, s.owners[0].ranges), (100, 0));
        assert_eq!((s.owners[1].bytes, s.owners[1].ranges), (80, 2));
        assert_eq!(s.owners[2].bytes, 0);
        assert!(s.skew().is_infinite());
        // L1 holds 180 bytes against a 90-byte target: half of each range is pending.
        assert_eq!(s.ranges[0].pending_compaction_bytes, 75);
        assert_eq!(s.ranges[1].pending_compaction_bytes, 15);
        assert_eq!(s.owners[1].pending_compaction_bytes, 90);
    }
}
