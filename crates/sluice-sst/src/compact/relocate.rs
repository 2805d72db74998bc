//! Blob garbage collection inside compaction (RocksDB's integrated BlobDB GC): while S4 writes
//! the entries a compaction keeps, a reference into a blob file being collected has its value
//! read and written again into a new blob file, and the entry is written with the new
//! reference. Once no table references the old file, it is deleted like any other garbage.
//! No separate collector runs beside the writers: the values move with data the compaction
//! rewrites anyway.
//!
//! The host decides which blob files are collected and where new ones go
//! ([`BlobRelocation`]); this module only applies that to the entries. A relocated entry has
//! the same key and a new value, so it counts as a rewrite in the digest equation
//! ([`crate::digest`]): `inputs = outputs + dropped + rewritten` still holds.

use std::fmt;

use crate::blob::BlobRef;
use crate::compaction_iter::{CompactionIterStats, CompactionIterator};
use crate::digest::{EntryHash, entry_hash};
use crate::key::{TRAILER_LEN, ValueKind};
use crate::table::TableContentBuilder;
use crate::{InternalIterator, Result};

/// Which blob files a compaction collects, and how their live values are written again.
pub trait BlobRelocation: Send + Sync + fmt::Debug {
    /// True if references into blob file `file_number` are moved.
    fn relocates(&self, file_number: u64) -> bool;
    /// A writer for one thread's share of the entries (a sub-task, or the whole stream).
    fn writer(&self) -> Box<dyn RelocationWriter + '_>;
}

/// Writes relocated values into new blob files for one thread.
pub trait RelocationWriter {
    /// Reads the value `blob` points at, written under user key `key`, writes it to a new
    /// blob file, and returns its new reference.
    fn relocate(&mut self, key: &[u8], blob: &BlobRef) -> Result<BlobRef>;
    /// Finishes and syncs the files written. A writer dropped without it leaves files no
    /// table will reference: garbage for the next obsolete-file collection.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// What S4 writes for each kept entry: the entry itself, or the entry with its value moved
/// out of a collected blob file.
pub struct Relocating<'a> {
    relocation: Option<&'a dyn BlobRelocation>,
    writer: Option<Box<dyn RelocationWriter + 'a>>,
    /// The moved entry's new reference.
    value: Vec<u8>,
    moved: u64,
    moved_bytes: u64,
    rewrite_digest: u64,
}

impl<'a> Relocating<'a> {
    /// Applies `relocation`, if any.
    pub fn new(relocation: Option<&'a dyn BlobRelocation>) -> Self {
        Relocating {
            relocation,
            writer: None,
            value: Vec::new(),
            moved: 0,
            moved_bytes: 0,
            rewrite_digest: 0,
        }
    }

    /// Adds the compaction iterator's current entry to `builder`, with its value moved first
    /// when it points into a collected blob file. The hashes the iterator computed, or those
    /// of the moved reference, go with it, so that the builder hashes only entries nobody has.
    pub fn add_current<I: InternalIterator>(
        &mut self,
        input: &CompactionIterator<I>,
        builder: &mut TableContentBuilder,
    ) -> Result<()> {
        let (key, value, hash) = (input.key(), input.value(), input.written_hash());
        match self.relocate(key, value, hash)? {
            Some(moved) => builder.add_hashed(key, &self.value, moved),
            None => match hash {
                Some(hash) => builder.add_hashed(key, value, hash),
                None => builder.add(key, value),
            },
        }
        Ok(())
    }

    /// Moves the value of `(ikey, value)` into `self.value` when it is a reference into a
    /// collected blob file, and returns the hashes of the entry with the new reference; `None`
    /// when the entry stays as it is. `known` is the entry's own hashes, when computed already.
    fn relocate(
        &mut self,
        ikey: &[u8],
        value: &[u8],
        known: Option<EntryHash>,
    ) -> Result<Option<EntryHash>> {
        let Some(relocation) = self.relocation else {
            return Ok(None);
        };
        let Some(split) = ikey.len().checked_sub(TRAILER_LEN) else {
            return Ok(None);
        };
        if ikey[split] != ValueKind::BlobIndex as u8 {
            return Ok(None);
        }
        // The compaction iterator failed on any reference that does not decode.
        let Some(blob) = BlobRef::decode(value).filter(|b| relocation.relocates(b.file_number))
        else {
            return Ok(None);
        };
        let writer = match self.writer.take() {
            Some(writer) => writer,
            None => relocation.writer(),
        };
        let writer = self.writer.insert(writer);
        let moved = writer.relocate(&ikey[..split], &blob)?;
        self.value.clear();
        moved.encode_to(&mut self.value);
        self.moved += 1;
        self.moved_bytes += blob.size;
        let before = known.map_or_else(|| entry_hash(ikey, value), |h| h.entry);
        let after = EntryHash::of(ikey, &self.value);
        self.rewrite_digest = self
            .rewrite_digest
            .wrapping_add(before.wrapping_sub(after.entry));
        Ok(Some(after))
    }

    /// Finishes the new blob files and adds the moves to `stats`.
    pub fn finish(self, stats: &mut CompactionIterStats) -> Result<()> {
        if let Some(writer) = self.writer {
            writer.finish()?;
        }
        stats.blob_values_relocated += self.moved;
        stats.blob_bytes_relocated += self.moved_bytes;
        stats.rewrite_digest = stats.rewrite_digest.wrapping_add(self.rewrite_digest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::key::make_internal_key;

    /// Moves references into file 7 to file 9, each to the next free offset.
    #[derive(Debug, Default)]
    struct ToFileNine {
        next: AtomicU64,
        finished: AtomicU64,
    }

    struct Writer<'a>(&'a ToFileNine);

    impl BlobRelocation for ToFileNine {
        fn relocates(&self, file_number: u64) -> bool {
            file_number == 7
        }
        fn writer(&self) -> Box<dyn RelocationWriter + '_> {
            Box::new(Writer(self))
        }
    }

    impl RelocationWriter for Writer<'_> {
        fn relocate(&mut self, key: &[u8], blob: &BlobRef) -> Result<BlobRef> {
            assert_eq!(key, b"k", "the user key, without its trailer");
            let offset = 16 + self.0.next.fetch_add(blob.size, Ordering::Relaxed);
            Ok(BlobRef {
                file_number: 9,
                offset,
                size: blob.size,
            })
        }
        fn finish(self: Box<Self>) -> Result<()> {
            self.0.finished.fetch_add(1, Ordering::Relaxed);
            Ok(())
        }
    }

    fn blob(file_number: u64) -> Vec<u8> {
        let r = BlobRef {
            file_number,
            offset: 100,
            size: 40,
        };
        r.encode()
    }

    #[test]
    fn only_references_into_collected_files_move_and_the_digest_accounts_for_them() {
        let relocation = ToFileNine::default();
        let mut r = Relocating::new(Some(&relocation));
        let reference = make_internal_key(b"k", 5, ValueKind::BlobIndex);
        let value = make_internal_key(b"k", 4, ValueKind::Value);
        // A value that happens to look like a reference is a value.
        assert_eq!(r.relocate(&value, &blob(7), None).unwrap(), None);
        assert_eq!(r.relocate(&reference, &blob(8), None).unwrap(), None);
        let hash = r.relocate(&reference, &blob(7), None).unwrap();
        let moved = r.value.clone();
        assert_eq!(hash, Some(EntryHash::of(&reference, &moved)));
        let moved_ref = BlobRef::decode(&moved).unwrap();
        assert_eq!((moved_ref.file_number, moved_ref.offset), (9, 16));

        let mut stats = CompactionIterStats::default();
        r.finish(&mut stats).unwrap();
        assert_eq!(
            (stats.blob_values_relocated, stats.blob_bytes_relocated),
            (1, 40)
        );
        let expected =
            entry_hash(&reference, &blob(7)).wrapping_sub(entry_hash(&reference, &moved));
        assert_eq!(stats.rewrite_digest, expected);
        assert_eq!(relocation.finished.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn without_a_relocation_nothing_moves_and_nothing_is_written() {
        let mut r = Relocating::new(None);
        let reference = make_internal_key(b"k", 5, ValueKind::BlobIndex);
        assert_eq!(r.relocate(&reference, &blob(7), None).unwrap(), None);
        let mut stats = CompactionIterStats::default();
        r.finish(&mut stats).unwrap();
        assert_eq!(stats, CompactionIterStats::default());
    }

    /// What `add_current` writes carries the hashes of what is written: a zeroed entry, a
    /// zeroed and moved reference and an entry left as it is all give a block whose digest is
    /// the sum of its entries' hashes, and the moves are accounted as rewrites.
    #[test]
    fn added_entries_carry_their_own_hashes() {
        use std::path::Path;
        use std::sync::Arc;

        use crate::block::Block;
        use crate::digest::EntryDigest;
        use crate::iter::VecIterator;
        use crate::table::TableOptions;

        let relocation = ToFileNine::default();
        let mut r = Relocating::new(Some(&relocation));
        let entries = vec![
            (make_internal_key(b"j", 3, ValueKind::Value), b"j".to_vec()),
            (make_internal_key(b"k", 2, ValueKind::BlobIndex), blob(7)),
            (make_internal_key(b"l", 5, ValueKind::Value), b"l".to_vec()),
        ];
        let mut read = EntryDigest::default();
        for (k, v) in &entries {
            read.add(k, v);
        }
        // Snapshot 4: j@3 and k@2 are zeroed at the bottom (k's reference also moves), l@5
        // stays above it as it is.
        let mut input = CompactionIterator::new(VecIterator::new(entries), vec![4], true);
        input.seek_to_first().unwrap();
        let mut builder = TableContentBuilder::new(&TableOptions::default());
        let mut written = EntryDigest::default();
        while input.valid() {
            r.add_current(&input, &mut builder).unwrap();
            input.next().unwrap();
        }
        builder.seal_current();
        let block = builder.take_sealed().unwrap();
        let path = Arc::from(Path::new("t"));
        let mut it = Arc::new(Block::new(block.contents, path, 0).unwrap()).iter();
        it.seek_to_first().unwrap();
        let mut seqs = Vec::new();
        while it.valid() {
            written.add(it.key(), it.value());
            seqs.push(crate::key::parse_internal_key(it.key()).unwrap().seq);
            it.next().unwrap();
        }
        assert_eq!(seqs, [0, 0, 5]);
        assert_eq!(
            (block.meta.num_entries, block.meta.digest_sum),
            (3, written.sum)
        );
        let mut stats = input.stats();
        r.finish(&mut stats).unwrap();
        assert_eq!((stats.seqs_zeroed, stats.blob_values_relocated), (2, 1));
        // What was read is what was written, plus what was rewritten.
        assert_eq!(read, written + stats.unwritten());
    }
}
