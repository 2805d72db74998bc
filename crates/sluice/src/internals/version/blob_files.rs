//! The blob files of a tree, as the version sees them: what each holds (from the MANIFEST
//! record that added it) and how much of it live tables still reference.
//!
//! A blob file enters the version in the edit that installs the first tables referencing it
//! (a flush's, or a compaction's that wrote values out of line), and leaves it in the first
//! edit after which no table references it. That is derived, not recorded: every table's
//! [`FileMetaData::blob_refs`] is in the MANIFEST, so replaying the edits reaches the same
//! counts and drops the same files. Garbage is what the file holds minus what is referenced.
//!
//! ```text
//! new_blob_file body := number: varint64  dir_index: varint32  file_size: varint64
//!                       records: varint64  value_bytes: varint64
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use sluice_sst::blob::{BlobRefTally, FOOTER_LEN, HEADER_LEN};
use sluice_sst::coding::{get_varint64, put_varint32, put_varint64};
use sluice_sst::{Error, Result};

use super::edit::FileMetaData;

/// What the MANIFEST records about one blob file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobFileMetaData {
    /// File number (names `NNNNNN.blob`).
    pub number: u64,
    /// Which of the table directories holds it (0 = the main directory).
    pub dir_index: u32,
    /// Size in bytes.
    pub file_size: u64,
    /// Records (values) it holds.
    pub records: u64,
    /// The values' bytes before compression.
    pub value_bytes: u64,
}

impl BlobFileMetaData {
    /// Bytes of its records, headers included: what references can cover.
    pub fn record_bytes(&self) -> u64 {
        self.file_size.saturating_sub(HEADER_LEN + FOOTER_LEN)
    }

    /// Appends the `new_blob_file` body.
    pub(super) fn encode_body(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.number);
        put_varint32(dst, self.dir_index);
        put_varint64(dst, self.file_size);
        put_varint64(dst, self.records);
        put_varint64(dst, self.value_bytes);
    }

    /// Decodes a `new_blob_file` body; the error says what is wrong.
    pub(super) fn decode_body(body: &[u8]) -> std::result::Result<Self, String> {
        let mut at = 0;
        let mut next = |what: &str| {
            let (v, n) = get_varint64(body.get(at..).unwrap_or_default())
                .ok_or_else(|| format!("bad {what}"))?;
            at += n;
            Ok::<u64, String>(v)
        };
        let number = next("number")?;
        let dir_index =
            u32::try_from(next("dir_index")?).map_err(|_| "dir_index exceeds u32".to_string())?;
        let meta = BlobFileMetaData {
            number,
            dir_index,
            file_size: next("file_size")?,
            records: next("records")?,
            value_bytes: next("value_bytes")?,
        };
        if at != body.len() {
            return Err(format!("{} bytes after the fields", body.len() - at));
        }
        Ok(meta)
    }
}

impl fmt::Display for BlobFileMetaData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blob #{:06} size={} records={} value_bytes={} dir={}",
            self.number, self.file_size, self.records, self.value_bytes, self.dir_index
        )
    }
}

/// A blob file in the version, and the references live tables hold into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlobFileState {
    pub meta: Arc<BlobFileMetaData>,
    /// Summed over the version's tables; never zero (the file leaves the version then).
    pub live: BlobRefTally,
}

impl BlobFileState {
    /// The file's record bytes no table references.
    pub fn garbage_bytes(&self) -> u64 {
        self.meta.record_bytes().saturating_sub(self.live.bytes)
    }

    /// Share of the file's record bytes no table references (0.0..=1.0).
    pub fn garbage_ratio(&self) -> f64 {
        match self.meta.record_bytes() {
            0 => 0.0,
            total => self.garbage_bytes() as f64 / total as f64,
        }
    }
}

/// The version's blob files by number.
pub type BlobFiles = BTreeMap<u64, BlobFileState>;

fn corrupt(reason: String) -> Error {
    Error::corruption("MANIFEST", 0, reason)
}

/// Applies one edit's blob-related changes to `files`: the files it adds, then the
/// references of the tables it removes (`removed`) and adds (`added`). Files left without a
/// reference are dropped. Corruption if a table references a file the version does not hold,
/// more bytes than the file holds, or references that were never counted.
pub(super) fn apply(
    files: &mut BlobFiles,
    new_blob_files: &[BlobFileMetaData],
    removed: &[Arc<FileMetaData>],
    added: &[(usize, FileMetaData)],
) -> Result<()> {
    for meta in new_blob_files {
        if files.contains_key(&meta.number) {
            return Err(corrupt(format!(
                "version edit adds blob file {} twice",
                meta.number
            )));
        }
        let state = BlobFileState {
            meta: Arc::new(meta.clone()),
            live: BlobRefTally::default(),
        };
        files.insert(meta.number, state);
    }
    for table in removed {
        for (blob, tally) in table.blob_refs.iter() {
            let state = files
                .get_mut(&blob)
                .filter(|s| s.live.refs >= tally.refs && s.live.bytes >= tally.bytes);
            let Some(state) = state else {
                return Err(corrupt(format!(
                    "table {} is removed with references to blob file {blob} the version never counted",
                    table.number
                )));
            };
            state.live.refs -= tally.refs;
            state.live.bytes -= tally.bytes;
        }
    }
    for (_, table) in added {
        for (blob, tally) in table.blob_refs.iter() {
            let Some(state) = files.get_mut(&blob) else {
                return Err(corrupt(format!(
                    "table {} references blob file {blob}, which the version does not hold",
                    table.number
                )));
            };
            state.live.refs = state.live.refs.saturating_add(tally.refs);
            state.live.bytes = state.live.bytes.saturating_add(tally.bytes);
            if state.live.bytes > state.meta.record_bytes() {
                return Err(corrupt(format!(
                    "tables reference {} bytes of blob file {blob}, which holds {}",
                    state.live.bytes,
                    state.meta.record_bytes()
                )));
            }
        }
    }
    files.retain(|_, s| s.live.refs > 0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use sluice_sst::blob::BlobRef;

    use super::*;

    fn blob_file(number: u64, file_size: u64) -> BlobFileMetaData {
        BlobFileMetaData {
            number,
            dir_index: 1,
            file_size,
            records: 3,
            value_bytes: 900,
        }
    }

    fn table(number: u64, refs: &[(u64, u64)]) -> FileMetaData {
        let mut t = FileMetaData {
            number,
            ..FileMetaData::default()
        };
        for &(file_number, size) in refs {
            t.blob_refs.add(&BlobRef {
                file_number,
                offset: 16,
                size,
            });
        }
        t
    }

    #[test]
    fn bodies_round_trip_and_reject_trailing_bytes() {
        let meta = blob_file(7, 1040);
        let mut body = Vec::new();
        meta.encode_body(&mut body);
        assert_eq!(BlobFileMetaData::decode_body(&body), Ok(meta.clone()));
        body.push(0);
        assert!(BlobFileMetaData::decode_body(&body).is_err());
        assert!(BlobFileMetaData::decode_body(&body[..3]).is_err());
        assert_eq!(meta.record_bytes(), 1000);
    }

    #[test]
    fn files_live_while_referenced_and_garbage_is_what_is_not() {
        let mut files = BlobFiles::new();
        let (t1, t2) = (table(1, &[(7, 400), (7, 100)]), table(2, &[(7, 250)]));
        apply(
            &mut files,
            &[blob_file(7, 1040)],
            &[],
            &[(0, t1.clone()), (0, t2.clone())],
        )
        .unwrap();
        assert_eq!(
            files[&7].live,
            BlobRefTally {
                refs: 3,
                bytes: 750
            }
        );
        assert!((files[&7].garbage_ratio() - 0.25).abs() < 1e-9);
        // A compaction rewrites t1 keeping one of its references.
        let t3 = table(3, &[(7, 400)]);
        apply(&mut files, &[], &[Arc::new(t1)], &[(1, t3.clone())]).unwrap();
        assert_eq!(
            files[&7].live,
            BlobRefTally {
                refs: 2,
                bytes: 650
            }
        );
        // The last references go: so does the file.
        apply(&mut files, &[], &[Arc::new(t2), Arc::new(t3)], &[]).unwrap();
        assert!(files.is_empty());
    }

    #[test]
    fn inconsistent_references_are_corruption() {
        let err = |new: &[BlobFileMetaData], removed: FileMetaData, added: FileMetaData| {
            let mut files = BlobFiles::new();
            apply(
                &mut files,
                &[blob_file(9, 140)],
                &[],
                &[(0, table(1, &[(9, 50)]))],
            )
            .unwrap();
            let removed = [Arc::new(removed)].into_iter().filter(|t| t.number != 0);
            let added = [(0, added)].into_iter().filter(|(_, t)| t.number != 0);
            let removed: Vec<_> = removed.collect();
            let added: Vec<_> = added.collect();
            apply(&mut files, new, &removed, &added)
                .unwrap_err()
                .to_string()
        };
        let none = FileMetaData::default;
        let e = err(&[], none(), table(2, &[(8, 10)]));
        assert!(e.contains("does not hold"), "{e}");
        let e = err(&[], none(), table(2, &[(9, 60)]));
        assert!(e.contains("which holds 100"), "{e}");
        let e = err(&[blob_file(9, 140)], none(), none());
        assert!(e.contains("twice"), "{e}");
        let e = err(&[], table(2, &[(9, 60)]), none());
        assert!(e.contains("never counted"), "{e}");
    }
}
