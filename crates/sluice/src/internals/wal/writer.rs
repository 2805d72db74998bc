//! Appends logical records to a log file in the block format of [`super::format`].
//!
//! The writer buffers in user space so that group commit costs one `write` and one
//! `fdatasync` for many batches: the commit leader calls [`LogWriter::add_record`] once per
//! batch in the group, then [`LogWriter::sync`] (or [`LogWriter::flush`] when no writer in the
//! group asked for durability).
//!
//! Durability states of a record, in order:
//! 1. after `add_record`: in this process only; lost if the process dies;
//! 2. after `flush`: in the OS page cache; survives a process crash, not a power failure;
//! 3. after `sync`: on stable storage.
//!
//! A write-ahead log also says how far it was synced: after each sync, the next record is
//! preceded by a [`RecordType::SyncMark`] stating the synced length, so recovery can tell a
//! damaged synced region (lost acknowledged writes) from an unsynced torn tail. The MANIFEST,
//! which syncs every append, carries none.
//!
//! Thread-safety: `&mut self` everywhere; the commit pipeline owns the writer (one leader at a
//! time), so no internal locking.

use std::path::{Path, PathBuf};

use sluice_sst::fs::{FileSystem, IoMode, WriteFile};
use sluice_sst::{Error, Result};

use super::format::{
    BLOCK_SIZE, HEADER_SIZE, RecordType, SYNC_MARK_FRAGMENT_LEN, encode_fragment, encode_sync_mark,
};

/// Appends records to one log file.
///
/// Failures are sticky: once a `write` or `fdatasync` fails, the file's contents past the last
/// successful sync are unknown (a partial write may have landed, and after a failed fsync the
/// kernel may have dropped dirty pages), so appending more records could place valid records
/// after garbage, which recovery reports as mid-log corruption. Every later call therefore
/// fails; the caller must switch to a new log (and, for the WAL, stop accepting writes).
///
/// Records added but not flushed are discarded if the writer is dropped.
pub struct LogWriter {
    /// Created through the database's file system, so tests can fail its writes and syncs.
    file: Box<dyn WriteFile>,
    path: PathBuf,
    /// Encoded bytes not yet handed to the OS.
    buf: Vec<u8>,
    /// Offset within the current block where the next byte goes (`len % BLOCK_SIZE`).
    block_offset: usize,
    /// Logical length of the log: bytes in the file plus bytes in `buf`.
    len: u64,
    /// Set when a write or sync failed; see the type's documentation.
    failed: Option<String>,
    /// A WAL's number, named in its sync marks; `None` for a log that writes none.
    log_number: Option<u64>,
    /// Bytes made durable by the last successful sync.
    synced_len: u64,
    /// The synced length the last sync mark stated.
    marked_len: u64,
}

impl LogWriter {
    /// Creates an empty log at `path` on `fs` that writes no sync marks (the MANIFEST). It is
    /// written buffered: [`LogWriter::flush`] must reach the OS, which a direct-I/O file does
    /// not do, and every append to the MANIFEST is synced anyway.
    pub fn create(fs: &dyn FileSystem, path: PathBuf) -> Result<Self> {
        Self::create_in_mode(fs, path, IoMode::Buffered)
    }

    /// Creates write-ahead log number `log_number` at `path`: like [`LogWriter::create`], and
    /// every record written after a sync is preceded by a sync mark naming this number.
    ///
    /// The file is [`IoMode::Mapped`]: most commits are not synced, and each must still reach
    /// the kernel before it is acknowledged; a copy into a mapping does that without the
    /// `write` call per commit that was a third of a single writer's time. The zeros a crash
    /// leaves past the last record are the clean end the reader expects of a preallocated log.
    pub fn create_wal(fs: &dyn FileSystem, path: PathBuf, log_number: u64) -> Result<Self> {
        let mut log = Self::create_in_mode(fs, path, IoMode::Mapped)?;
        log.log_number = Some(log_number);
        Ok(log)
    }

    fn create_in_mode(fs: &dyn FileSystem, path: PathBuf, mode: IoMode) -> Result<Self> {
        let file = fs.create(&path, mode).map_err(|e| Error::io(&path, e))?;
        Ok(LogWriter {
            file,
            path,
            buf: Vec::new(),
            block_offset: 0,
            len: 0,
            failed: None,
            log_number: None,
            synced_len: 0,
            marked_len: 0,
        })
    }

    /// Encodes `payload` as one logical record into the user-space buffer. Nothing reaches the
    /// OS until [`flush`](Self::flush) or [`sync`](Self::sync).
    ///
    /// Payloads of any size are accepted; they are fragmented across blocks.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_healthy()?;
        let start_len = self.buf.len();
        self.add_sync_mark();
        let mut rest = payload;
        let mut first = true;
        loop {
            let leftover = BLOCK_SIZE - self.block_offset;
            if leftover < HEADER_SIZE {
                // Too little room for a header: zero-fill the trailer (the reader checks it is
                // zero) and start a new block.
                self.buf.resize(self.buf.len() + leftover, 0);
                self.block_offset = 0;
            }
            let room = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let (fragment, tail) = rest.split_at(rest.len().min(room));
            let last = tail.is_empty();
            let kind = match (first, last) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, false) => RecordType::Middle,
                (false, true) => RecordType::Last,
            };
            encode_fragment(&mut self.buf, kind, fragment);
            self.block_offset += HEADER_SIZE + fragment.len();
            debug_assert!(self.block_offset <= BLOCK_SIZE);
            rest = tail;
            first = false;
            if last {
                break;
            }
        }
        self.len += (self.buf.len() - start_len) as u64;
        Ok(())
    }

    /// Writes a sync mark if the log was synced past what the last mark stated. A mark never
    /// spans blocks: when it does not fit in the rest of the block, the next record goes
    /// there and the mark waits for the next call.
    fn add_sync_mark(&mut self) {
        let Some(number) = self.log_number else {
            return;
        };
        if self.synced_len <= self.marked_len {
            return;
        }
        if BLOCK_SIZE - self.block_offset < HEADER_SIZE {
            // The same zero trailer the record would get.
            self.buf
                .resize(self.buf.len() + BLOCK_SIZE - self.block_offset, 0);
            self.block_offset = 0;
        }
        if BLOCK_SIZE - self.block_offset < SYNC_MARK_FRAGMENT_LEN {
            return;
        }
        let mark = encode_sync_mark(number, self.synced_len);
        encode_fragment(&mut self.buf, RecordType::SyncMark, &mark);
        self.block_offset += SYNC_MARK_FRAGMENT_LEN;
        self.marked_len = self.synced_len;
    }

    /// Hands every buffered record to the OS (through the file's own buffer, flushed at the
    /// end). After this returns, the records survive a process crash but not a power failure.
    pub fn flush(&mut self) -> Result<()> {
        self.check_healthy()?;
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.file.append(&self.buf).and_then(|()| self.file.flush()) {
            // Some prefix of the buffer may be in the file now: poison the writer.
            self.failed = Some(format!("write failed: {e}"));
            return Err(Error::io(&self.path, e));
        }
        self.buf.clear();
        Ok(())
    }

    /// Flushes, then `fdatasync`s the file. After this returns, every record added so far is
    /// durable. The log's size is metadata that `fdatasync` also persists (it is needed to read
    /// the data back), so the new records are reachable after a power failure.
    pub fn sync(&mut self) -> Result<()> {
        self.flush_and("fdatasync", |file| file.sync_data())
    }

    /// Syncs the log and ends its file at the last record (a WAL's file is reserved ahead of
    /// its records): what a log gets when no more records will follow, so that its size on
    /// disk is its length, as recovery of a log with a newer one after it assumes.
    pub fn finish(&mut self) -> Result<()> {
        self.flush_and("sync at close", |file| file.finish())
    }

    /// Flushes, then makes the file durable with `sync`; on success every record added so far
    /// is synced.
    fn flush_and(
        &mut self,
        what: &str,
        sync: impl FnOnce(&mut dyn WriteFile) -> std::io::Result<()>,
    ) -> Result<()> {
        self.flush()?;
        if let Err(e) = sync(&mut *self.file) {
            // After a failed fsync the kernel may have dropped the dirty pages and will report
            // success next time: the only safe answer is to never trust this file again.
            self.failed = Some(format!("{what} failed: {e}"));
            return Err(Error::io(&self.path, e));
        }
        self.synced_len = self.len;
        Ok(())
    }

    /// The WAL number its sync marks name; `None` for a log without marks.
    pub fn log_number(&self) -> Option<u64> {
        self.log_number
    }

    /// Bytes known to be durable: the log's length at the last successful sync.
    pub fn synced_len(&self) -> u64 {
        self.synced_len
    }

    /// Logical size of the log in bytes, including records still buffered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the log holds no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_healthy(&self) -> Result<()> {
        match &self.failed {
            None => Ok(()),
            Some(why) => Err(Error::io(
                &self.path,
                std::io::Error::other(format!("log writer unusable after earlier failure: {why}")),
            )),
        }
    }
}

impl std::fmt::Debug for LogWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("buffered", &self.buf.len())
            .field("failed", &self.failed)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use sluice_sst::fs::{Fault, FaultInjectingFs, FaultOp};

    use super::*;
    use crate::wal::format::{MAX_FRAGMENT_LEN, valid_fragment_at};

    fn writer(dir: &Path) -> LogWriter {
        LogWriter::create(&*sluice_sst::fs::os_fs(), dir.join("000001.log")).unwrap()
    }

    #[test]
    fn len_counts_buffered_bytes_and_flush_writes_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        assert!(w.is_empty());
        w.add_record(b"hello").unwrap();
        assert_eq!(w.len(), (HEADER_SIZE + 5) as u64);
        assert_eq!(std::fs::metadata(w.path()).unwrap().len(), 0);
        w.add_record(b"").unwrap();
        assert_eq!(w.len(), (2 * HEADER_SIZE + 5) as u64);
        w.sync().unwrap();
        assert_eq!(std::fs::metadata(w.path()).unwrap().len(), w.len());
    }

    #[test]
    fn short_block_tail_is_zero_padded() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        // Leave 3 bytes in the first block: the next record must start in block 2.
        w.add_record(&vec![b'a'; BLOCK_SIZE - HEADER_SIZE - 3])
            .unwrap();
        w.add_record(b"next").unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        assert_eq!(&bytes[BLOCK_SIZE - 3..BLOCK_SIZE], &[0, 0, 0]);
        assert_eq!(
            valid_fragment_at(&bytes[BLOCK_SIZE..], 0),
            Some((RecordType::Full, &b"next"[..]))
        );
        assert_eq!(w.len(), (BLOCK_SIZE + HEADER_SIZE + 4) as u64);
    }

    #[test]
    fn large_records_are_fragmented_first_middle_last() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = writer(dir.path());
        let payload: Vec<u8> = (0..2 * BLOCK_SIZE + 100).map(|i| i as u8).collect();
        w.add_record(&payload).unwrap();
        w.flush().unwrap();
        let bytes = std::fs::read(w.path()).unwrap();
        let kinds: Vec<RecordType> = bytes
            .chunks(BLOCK_SIZE)
            .map(|block| valid_fragment_at(block, 0).unwrap().0)
            .collect();
        assert_eq!(
            kinds,
            [RecordType::First, RecordType::Middle, RecordType::Last]
        );
        let (_, first) = valid_fragment_at(&bytes, 0).unwrap();
        assert_eq!(first.len(), MAX_FRAGMENT_LEN);
    }

    #[test]
    fn failures_are_sticky() {
        let dir = tempfile::tempdir().unwrap();
        let fs = FaultInjectingFs::new(sluice_sst::fs::os_fs());
        let mut w = LogWriter::create(&*fs, dir.path().join("000002.log")).unwrap();
        fs.inject(Fault::fail(FaultOp::Write));
        w.add_record(b"buffered").unwrap();
        assert!(matches!(w.flush(), Err(Error::Io { .. })));
        for result in [w.add_record(b"more"), w.flush(), w.sync()] {
            let err = result.unwrap_err();
            assert!(err.to_string().contains("earlier failure"), "{err}");
        }
    }
}
