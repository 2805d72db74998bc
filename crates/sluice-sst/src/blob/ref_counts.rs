//! [`BlobRefCounts`]: how many references a table holds into each blob file, and their bytes.
//!
//! This is how the host knows which blob bytes are live without reading a blob file: a blob
//! file's live bytes are the sum, over the live tables, of the bytes their references cover;
//! the rest of the file is garbage, and a file no live table references can be deleted.
//! The counts are built entry by entry as a table is written (its blocks' [`crate::table::BlockMeta`]),
//! stored in the table's properties and in the MANIFEST record of the table.
//!
//! ```text
//! counts := files: varint64  (file_number: varint64  refs: varint64  bytes: varint64)*
//! ```
//!
//! File numbers strictly increase and every `refs` is at least 1, so a set of counts has one
//! encoding.

use std::collections::BTreeMap;

use super::BlobRef;
use crate::coding::{get_varint64, put_varint64};

/// The references into one blob file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlobRefTally {
    /// How many.
    pub refs: u64,
    /// The records they name, in bytes ([`BlobRef::size`] summed).
    pub bytes: u64,
}

/// References per blob file, by file number.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlobRefCounts(BTreeMap<u64, BlobRefTally>);

impl BlobRefCounts {
    /// Counts one reference.
    pub fn add(&mut self, blob: &BlobRef) {
        let tally = self.0.entry(blob.file_number).or_default();
        tally.refs += 1;
        tally.bytes = tally.bytes.saturating_add(blob.size);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &BlobRefCounts) {
        for (&file, t) in &other.0 {
            let tally = self.0.entry(file).or_default();
            tally.refs = tally.refs.saturating_add(t.refs);
            tally.bytes = tally.bytes.saturating_add(t.bytes);
        }
    }

    /// True if no reference was counted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The blob files referenced, with their tallies, by file number.
    pub fn iter(&self) -> impl Iterator<Item = (u64, BlobRefTally)> + '_ {
        self.0.iter().map(|(&file, &tally)| (file, tally))
    }

    /// The tally of `file` (zero if it is not referenced).
    pub fn get(&self, file: u64) -> BlobRefTally {
        self.0.get(&file).copied().unwrap_or_default()
    }

    /// Appends the encoding to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.0.len() as u64);
        for (&file, t) in &self.0 {
            put_varint64(dst, file);
            put_varint64(dst, t.refs);
            put_varint64(dst, t.bytes);
        }
    }

    /// Decodes exactly one encoding: `None` for anything else (truncated, trailing bytes, file
    /// numbers not increasing, a file with no references).
    pub fn decode(src: &[u8]) -> Option<BlobRefCounts> {
        let mut at = 0;
        let mut next = || {
            let (v, n) = get_varint64(src.get(at..)?)?;
            at += n;
            Some(v)
        };
        let files = next()?;
        let mut counts = BTreeMap::new();
        let mut last = None;
        for _ in 0..files {
            let (file, refs, bytes) = (next()?, next()?, next()?);
            if refs == 0 || last.is_some_and(|l| l >= file) {
                return None;
            }
            last = Some(file);
            counts.insert(file, BlobRefTally { refs, bytes });
        }
        (at == src.len()).then_some(BlobRefCounts(counts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blob(file_number: u64, size: u64) -> BlobRef {
        BlobRef {
            file_number,
            offset: 16,
            size,
        }
    }

    #[test]
    fn counts_per_file_and_round_trips() {
        let mut c = BlobRefCounts::default();
        assert!(c.is_empty());
        c.add(&blob(9, 100));
        c.add(&blob(4, 10));
        c.add(&blob(9, 50));
        assert_eq!(
            c.get(9),
            BlobRefTally {
                refs: 2,
                bytes: 150
            }
        );
        assert_eq!(c.get(5), BlobRefTally::default());
        assert_eq!(c.iter().map(|(f, _)| f).collect::<Vec<_>>(), [4, 9]);
        let mut other = BlobRefCounts::default();
        other.add(&blob(4, 7));
        c.merge(&other);
        assert_eq!(c.get(4), BlobRefTally { refs: 2, bytes: 17 });
        let mut enc = Vec::new();
        c.encode_to(&mut enc);
        assert_eq!(BlobRefCounts::decode(&enc), Some(c));
    }

    #[test]
    fn only_the_canonical_encoding_decodes() {
        let enc = |fields: &[u64]| {
            let mut out = Vec::new();
            fields.iter().for_each(|&v| put_varint64(&mut out, v));
            out
        };
        assert_eq!(
            BlobRefCounts::decode(&enc(&[0])),
            Some(BlobRefCounts::default())
        );
        assert!(BlobRefCounts::decode(&[]).is_none(), "no count");
        assert!(
            BlobRefCounts::decode(&enc(&[1, 5, 1])).is_none(),
            "truncated"
        );
        assert!(
            BlobRefCounts::decode(&enc(&[1, 5, 1, 9, 0])).is_none(),
            "trailing"
        );
        assert!(
            BlobRefCounts::decode(&enc(&[1, 5, 0, 9])).is_none(),
            "no references"
        );
        assert!(
            BlobRefCounts::decode(&enc(&[2, 5, 1, 9, 5, 1, 9])).is_none(),
            "repeated file"
        );
        assert!(
            BlobRefCounts::decode(&enc(&[2, 6, 1, 9, 5, 1, 9])).is_none(),
            "decreasing files"
        );
        assert!(
            BlobRefCounts::decode(&enc(&[u64::MAX])).is_none(),
            "claims more than it holds"
        );
    }
}
