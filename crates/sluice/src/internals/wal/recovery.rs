//! What recovery may do with damage ([`WalRecoveryMode`]) and how it reports what it did not
//! apply ([`DroppedRange`]).

use std::path::PathBuf;

/// How WAL recovery treats damage: RocksDB's `WALRecoveryMode`, with its names and meanings.
///
/// In every mode but [`SkipAnyCorruptedRecords`](Self::SkipAnyCorruptedRecords), damage at or
/// below the point the log is known to have been synced through is [`crate::Error::Corruption`]:
/// those records were acknowledged as durable. The modes differ past that point, where only
/// writes that were never synced can be. Every byte a mode drops is counted
/// ([`crate::wal::LogReader::dropped`]), logged, and reported by `open` and `check`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WalRecoveryMode {
    /// Damage past the synced point with no valid record after it (a torn tail) is dropped.
    /// Damage followed by valid records is [`crate::Error::Corruption`], even past the synced point.
    TolerateCorruptedTailRecords,
    /// No damage is tolerated: a torn tail is [`crate::Error::Corruption`] too. Only an all-zero tail
    /// after a complete record (space the writer never wrote) ends the log cleanly.
    AbsoluteConsistency,
    /// Recovery stops at the first damage past the synced point and drops the rest of the log,
    /// valid records included: none of them was synced, and replaying records after a hole
    /// would give a state that never existed. The default, as in RocksDB.
    #[default]
    PointInTime,
    /// Salvage: every damaged region is skipped, synced or not, and reading resumes at the next
    /// valid record. Acknowledged writes may be lost; every skipped byte is counted. For
    /// `sluice repair` and for reading whatever survives of a damaged log.
    SkipAnyCorruptedRecords,
}

impl WalRecoveryMode {
    /// Every mode, in the order RocksDB numbers them.
    pub const ALL: [WalRecoveryMode; 4] = [
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::AbsoluteConsistency,
        WalRecoveryMode::PointInTime,
        WalRecoveryMode::SkipAnyCorruptedRecords,
    ];

    /// The mode's name in options files and on the command line (RocksDB's, in snake case).
    pub fn name(self) -> &'static str {
        match self {
            WalRecoveryMode::TolerateCorruptedTailRecords => "tolerate_corrupted_tail_records",
            WalRecoveryMode::AbsoluteConsistency => "absolute_consistency",
            WalRecoveryMode::PointInTime => "point_in_time",
            WalRecoveryMode::SkipAnyCorruptedRecords => "skip_any_corrupted_records",
        }
    }
}

impl std::fmt::Display for WalRecoveryMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WalRecoveryMode {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        WalRecoveryMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = WalRecoveryMode::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown WAL recovery mode {s:?}; one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A region of a log that recovery did not apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DroppedRange {
    /// The log file.
    pub file: PathBuf,
    /// Offset of the first byte not applied.
    pub offset: u64,
    /// Bytes not applied, from `offset` on.
    pub bytes: u64,
    /// Why.
    pub reason: String,
}

impl std::fmt::Display for DroppedRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} bytes of {} at offset {}: {}",
            self.bytes,
            self.file.display(),
            self.offset,
            self.reason
        )
    }
}
