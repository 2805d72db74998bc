//! The expected state: what the database must hold, kept in a file beside it so that a later
//! process (the parent of a killed child, or a `sluice stress` run days later) can verify it.
//!
//! Every keyspace of [`KEYSPACES`] has the same key numbers `0..keys`, each key with its own
//! slot: slot `ks * keys + k` is key `k` of keyspace `ks`.
//!
//! Layout (all integers little-endian):
//!
//! ```text
//! offset          size  field
//! 0               16    magic "sluice-stress-v2"
//! 16              8     keys: the number of keys per keyspace
//! 24              8     keyspaces: the number of keyspaces
//! 32              32    zero
//! 64 + 16 * s     16    slot s (key s % keys of keyspace s / keys):
//!                         0  4  committed version (0: never written)
//!                         4  4  pending version (meaningful with HAS_PENDING)
//!                         8  4  batch group of the pending write (0: not a batch)
//!                         12 1  flags: 1 committed is a delete, 2 pending is a delete,
//!                               4 a write is pending
//!                         13 3  zero
//! ```
//!
//! Protocol, per write: the slots of the keys it touches are stored with the new version as
//! *pending* before the write is handed to the database, and with it as *committed* (pending
//! cleared) after the database acknowledged it. A slot is one positioned write
//! (`FileExt::write_at`) into the page cache, which survives SIGKILL of this process: so after
//! a kill the file says, for every key, the version the database must hold, or the two it may
//! hold when a write was in flight. The file is never synced: it does not survive a power
//! loss, and the stress test does not cut power.
//!
//! Each key number is written by one thread only (its owner), in every keyspace, so a
//! thread's copy of its own slots is exact and slots never race.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::engine::KEYSPACES;

const MAGIC: &[u8; 16] = b"sluice-stress-v2";
const HEADER_BYTES: u64 = 64;
const SLOT_BYTES: usize = 16;
/// Keyspaces, each with a slot per key.
const KEYSPACE_COUNT: u64 = KEYSPACES.len() as u64;

const COMMITTED_DELETE: u8 = 1;
const PENDING_DELETE: u8 = 2;
const HAS_PENDING: u8 = 4;

/// What the database holds for a key: nothing, or one version's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    Absent,
    Version(u32),
}

/// One key's slot; see the module docs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Slot {
    /// Last acknowledged version (0: never written).
    pub committed: u32,
    pub committed_delete: bool,
    /// The write in flight (or whose outcome is unknown), if any: version and whether it is a
    /// delete.
    pub pending: Option<(u32, bool)>,
    /// Batch group of the pending write: keys of one batch share it (0: a single write).
    pub group: u32,
}

impl Slot {
    /// What the last acknowledged write left.
    pub fn committed(&self) -> Expect {
        if self.committed == 0 || self.committed_delete {
            Expect::Absent
        } else {
            Expect::Version(self.committed)
        }
    }

    /// What the pending write leaves, if one is pending.
    pub fn pending(&self) -> Option<Expect> {
        self.pending.map(|(v, delete)| {
            if delete {
                Expect::Absent
            } else {
                Expect::Version(v)
            }
        })
    }

    /// True if a read may return `found`: the committed state, or the pending one.
    pub fn allows(&self, found: Expect) -> bool {
        self.committed() == found || self.pending() == Some(found)
    }

    /// The version the next write of this key gets.
    pub fn next_version(&self) -> u32 {
        self.committed.max(self.pending.map_or(0, |(v, _)| v)) + 1
    }

    /// This slot with `version` (a delete or not) in flight, in batch `group`.
    pub fn begin(&self, version: u32, delete: bool, group: u32) -> Slot {
        Slot {
            pending: Some((version, delete)),
            group,
            ..*self
        }
    }

    /// This slot with its pending write acknowledged.
    pub fn commit(&self) -> Slot {
        match self.pending {
            Some((version, delete)) => Slot {
                committed: version,
                committed_delete: delete,
                pending: None,
                group: 0,
            },
            None => *self,
        }
    }

    /// This slot with its pending write known not to have happened.
    pub fn abandon(&self) -> Slot {
        Slot {
            pending: None,
            group: 0,
            ..*self
        }
    }

    fn encode(&self) -> [u8; SLOT_BYTES] {
        let mut b = [0u8; SLOT_BYTES];
        let (pending, pending_delete) = self.pending.unwrap_or((0, false));
        b[0..4].copy_from_slice(&self.committed.to_le_bytes());
        b[4..8].copy_from_slice(&pending.to_le_bytes());
        b[8..12].copy_from_slice(&self.group.to_le_bytes());
        let flag = |on: bool, bit: u8| if on { bit } else { 0 };
        b[12] = flag(self.committed_delete, COMMITTED_DELETE)
            | flag(pending_delete, PENDING_DELETE)
            | flag(self.pending.is_some(), HAS_PENDING);
        b
    }

    fn decode(b: &[u8; SLOT_BYTES]) -> Result<Slot, String> {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let flags = b[12];
        if flags & !(COMMITTED_DELETE | PENDING_DELETE | HAS_PENDING) != 0 || b[13..] != [0; 3] {
            return Err(format!("bad slot bytes {b:02x?}"));
        }
        Ok(Slot {
            committed: word(0),
            committed_delete: flags & COMMITTED_DELETE != 0,
            pending: (flags & HAS_PENDING != 0).then_some((word(4), flags & PENDING_DELETE != 0)),
            group: word(8),
        })
    }
}

/// Keyspace index and key number of slot `s`, with `keys` keys per keyspace.
pub fn slot_key(s: usize, keys: usize) -> (usize, u32) {
    (s / keys, (s % keys) as u32)
}

/// How messages name slot `s`, with `keys` keys per keyspace.
pub fn slot_name(s: usize, keys: usize) -> String {
    let (ks, k) = slot_key(s, keys);
    format!("key {k} of keyspace {:?}", KEYSPACES[ks])
}

/// The expected-state file; see the module docs. Shared by every workload thread: each
/// stores only the slots of the keys it owns.
#[derive(Debug)]
pub struct ExpectedFile {
    file: File,
    path: PathBuf,
    keys: u32,
}

impl ExpectedFile {
    /// Opens the file at `path`, or creates it with `keys` never-written slots per keyspace.
    /// An existing file must have been made for the same numbers of keys and keyspaces.
    pub fn open_or_create(path: &Path, keys: u32) -> Result<ExpectedFile, String> {
        let err = |e: std::io::Error| format!("expected-state file {}: {e}", path.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(err)?;
        let len = file.metadata().map_err(err)?.len();
        let want = HEADER_BYTES + KEYSPACE_COUNT * u64::from(keys) * SLOT_BYTES as u64;
        if len == 0 {
            let mut header = [0u8; HEADER_BYTES as usize];
            header[..16].copy_from_slice(MAGIC);
            header[16..24].copy_from_slice(&u64::from(keys).to_le_bytes());
            header[24..32].copy_from_slice(&KEYSPACE_COUNT.to_le_bytes());
            file.write_all_at(&header, 0).map_err(err)?;
            file.set_len(want).map_err(err)?;
        } else {
            let mut header = [0u8; 32];
            file.read_exact_at(&mut header, 0).map_err(err)?;
            if &header[..16] != MAGIC {
                return Err(format!(
                    "{} is not an expected-state file of this version",
                    path.display()
                ));
            }
            let word = |at: usize| {
                let mut n = [0u8; 8];
                n.copy_from_slice(&header[at..at + 8]);
                u64::from_le_bytes(n)
            };
            let (found, keyspaces) = (word(16), word(24));
            if found != u64::from(keys) || keyspaces != KEYSPACE_COUNT || len != want {
                return Err(format!(
                    "{} was made for {found} keys in {keyspaces} keyspaces ({len} bytes); this \
                     run has --keys {keys} in {KEYSPACE_COUNT}",
                    path.display()
                ));
            }
        }
        Ok(ExpectedFile {
            file,
            path: path.to_path_buf(),
            keys,
        })
    }

    /// Number of keys per keyspace.
    pub fn keys(&self) -> u32 {
        self.keys
    }

    /// Every slot: keyspace 0's keys from key 0, then keyspace 1's, and so on.
    pub fn load(&self) -> Result<Vec<Slot>, String> {
        let mut bytes = vec![0u8; KEYSPACES.len() * self.keys as usize * SLOT_BYTES];
        self.file
            .read_exact_at(&mut bytes, HEADER_BYTES)
            .map_err(|e| format!("reading {}: {e}", self.path.display()))?;
        bytes
            .chunks_exact(SLOT_BYTES)
            .enumerate()
            .map(|(s, chunk)| {
                let mut b = [0u8; SLOT_BYTES];
                b.copy_from_slice(chunk);
                Slot::decode(&b).map_err(|e| format!("{} slot {s}: {e}", self.path.display()))
            })
            .collect()
    }

    /// Stores the slot of key `k` of keyspace `ks`. REQUIRES: the caller owns `k` (no other
    /// thread stores it).
    pub fn store(&self, ks: usize, k: u32, slot: &Slot) -> Result<(), String> {
        debug_assert!(ks < KEYSPACES.len() && k < self.keys);
        let index = ks as u64 * u64::from(self.keys) + u64::from(k);
        let offset = HEADER_BYTES + index * SLOT_BYTES as u64;
        self.file
            .write_all_at(&slot.encode(), offset)
            .map_err(|e| format!("writing {}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_through_the_file_and_a_reopen() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("db.expected");
        let file = ExpectedFile::open_or_create(&path, 100).expect("create");
        assert!(
            file.load()
                .expect("load")
                .iter()
                .all(|s| *s == Slot::default())
        );
        let put = Slot::default().begin(1, false, 0);
        let del = put.commit().begin(2, true, 77);
        file.store(0, 3, &put).expect("store");
        file.store(2, 99, &del).expect("store");
        file.store(1, 50, &del.commit()).expect("store");
        drop(file);
        let file = ExpectedFile::open_or_create(&path, 100).expect("reopen");
        let slots = file.load().expect("load");
        assert_eq!(slots.len(), 100 * KEYSPACES.len());
        assert_eq!(slots[3], put);
        assert_eq!(slots[299], del);
        assert_eq!(slots[150].committed(), Expect::Absent);
        assert_eq!(slots[150].committed, 2);
        assert_eq!(slots[0], Slot::default());
        assert_eq!(
            slots[103],
            Slot::default(),
            "keyspaces have their own slots"
        );
        assert!(
            ExpectedFile::open_or_create(&path, 101).is_err(),
            "other key count"
        );
        std::fs::write(dir.path().join("other"), b"not a stress file at all......").expect("w");
        assert!(ExpectedFile::open_or_create(&dir.path().join("other"), 100).is_err());
    }

    #[test]
    fn pending_writes_allow_either_state() {
        let s = Slot::default().begin(1, false, 0).commit();
        assert_eq!(s.committed(), Expect::Version(1));
        assert!(s.allows(Expect::Version(1)) && !s.allows(Expect::Absent));
        let p = s.begin(s.next_version(), true, 9);
        assert!(p.allows(Expect::Version(1)) && p.allows(Expect::Absent));
        assert!(!p.allows(Expect::Version(2)));
        assert_eq!(p.next_version(), 3);
        assert_eq!(p.commit().committed(), Expect::Absent);
        assert_eq!(p.abandon(), s);
    }

    #[test]
    fn damaged_slots_are_refused() {
        let mut b = Slot::default().begin(4, true, 1).encode();
        assert!(Slot::decode(&b).is_ok());
        b[12] |= 0x80;
        assert!(Slot::decode(&b).is_err());
    }
}
