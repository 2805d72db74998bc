//! Reads logical records back from a log file, telling a torn tail from lost data.
//!
//! A crash while appending leaves a *torn tail*: the last write reached the disk partly, or not
//! at all, or as zeros (the file size was extended but the data pages were not written), and
//! after a power loss the unsynced pages of a log may even reach the disk out of order. None of
//! that was acknowledged as durable, so recovery may discard it. Damage to bytes that *were*
//! synced is different: acknowledged writes are gone, and recovery must say so.
//!
//! What the reader knows about how far a log was synced:
//! - the MANIFEST records each closed WAL's synced length, and a WAL with a newer WAL after it
//!   was synced whole before the newer one was created ([`LogReader::synced_through`],
//!   [`LogReader::whole_file_synced`]);
//! - a WAL carries its own [`RecordType::SyncMark`]s: after each sync the writer states, in
//!   front of the next record, how far the file was synced. Damage with a mark after it that
//!   covers the damaged offset lost synced data.
//!
//! Damage at or below the synced point is [`Error::Corruption`] in every mode but
//! [`WalRecoveryMode::SkipAnyCorruptedRecords`]; what happens past it depends on the mode.
//! The MANIFEST is read by a stricter rule: every append to it is synced, so only a physically
//! incomplete last record (the file ends inside it, or in zeros) can be a torn write.
//!
//! The reader finds what follows damage by scanning forward for any valid fragment (a header
//! of a known type whose CRC32C matches, inside one block) at every byte offset, because a
//! damaged length field hides where the next record starts. Clean logs pay nothing for this.
//! A payload that itself contains a well-formed record (say, a value holding a copy of a log)
//! can make unsynced damage look like lost synced data: that errs on the safe side, refusing to
//! open rather than dropping data.

use std::path::{Path, PathBuf};

use sluice_sst::fs::ReadFile;
use sluice_sst::{Error, IoContext, Result};

use super::format::{
    BLOCK_SIZE, BadFragment, HEADER_SIZE, RecordType, SYNC_MARK_LEN, check_fragment,
    decode_sync_mark,
};
use super::recovery::{DroppedRange, WalRecoveryMode};
use super::tail::{read_block, scan_tail};

/// How many times a follower reads a record again that looked damaged while the log's
/// writer may have been writing it ([`LogReader::following`]).
const MAX_REREADS: u32 = 3;

/// Which rules the log is read by.
#[derive(Clone, Copy, Debug)]
enum Rule {
    /// A write-ahead log: sync marks name `log_number`; damage is judged by `mode`.
    Wal {
        mode: WalRecoveryMode,
        log_number: u64,
    },
    /// The MANIFEST: every append is synced, so only an incomplete last record may be dropped.
    Manifest,
}

/// Reads the logical records of one log file in order.
///
/// Not thread-safe (`&mut self`); recovery reads each log on one thread.
pub struct LogReader {
    file: Box<dyn ReadFile>,
    path: PathBuf,
    rule: Rule,
    /// Damage below this offset lost synced data. Raised by sync marks as they are read.
    synced_through: u64,
    /// The whole file was synced (a newer log exists): any damage lost synced data.
    whole_file_synced: bool,
    /// The block being parsed: `BLOCK_SIZE` bytes, or fewer only if it is the file's last.
    block: Vec<u8>,
    /// File offset of `block[0]`; always a multiple of `BLOCK_SIZE`.
    block_start: u64,
    /// Next unparsed byte in `block`.
    pos: usize,
    /// True once `block` is known to be the file's last block.
    at_eof: bool,
    last_record_offset: u64,
    valid_len: u64,
    records: u64,
    dropped: Vec<DroppedRange>,
    /// The log is still being appended to ([`LogReader::following`]): a torn tail is a write
    /// under way, not a loss, and is not logged.
    following: bool,
    /// Times the current record was read again, while following.
    rereads: u32,
    state: State,
}

/// Whether the reader can continue. After the end or an error, `read_record` keeps returning
/// the same outcome rather than resuming mid-damage.
enum State {
    Reading,
    Finished,
    Failed {
        corrupt_at: Option<u64>,
        message: String,
    },
}

/// A physical record found by [`LogReader::next_fragment`].
enum Physical {
    /// A valid fragment; its payload is `block[start..end]`.
    Fragment {
        kind: RecordType,
        offset: u64,
        start: usize,
        end: usize,
    },
    Bad {
        offset: u64,
        reason: BadFragment,
    },
    Eof,
}

/// Why the bytes at some offset are not the next record.
enum Damage {
    /// A fragment that does not check out.
    Bad(BadFragment),
    /// The file ends inside a record split across blocks.
    EndsInsideRecord,
    /// Fragments whose checksums match, in an order the writer never produces. No crash makes
    /// this, so it is never a torn tail; skipping resumes at `resume_at`.
    Misordered { what: String, resume_at: u64 },
}

impl Damage {
    /// The file ends inside the record: what an append cut short by a crash leaves.
    fn is_incomplete(&self) -> bool {
        matches!(
            self,
            Damage::EndsInsideRecord
                | Damage::Bad(BadFragment::TooShort | BadFragment::PastEndOfFile { .. })
        )
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Damage::Bad(reason) => write!(f, "{reason}"),
            Damage::EndsInsideRecord => write!(f, "log ends inside a record split across blocks"),
            Damage::Misordered { what, .. } => f.write_str(what),
        }
    }
}

/// Where reading goes after damage was judged.
enum After {
    End,
    ResumeAt(u64),
}

impl LogReader {
    /// Reads write-ahead log number `log_number` from `file` (read from offset 0), judging
    /// damage by `mode`. Nothing is known to be synced until [`LogReader::synced_through`] or
    /// [`LogReader::whole_file_synced`] says so, or the log's own sync marks do.
    pub fn wal(
        file: Box<dyn ReadFile>,
        path: PathBuf,
        mode: WalRecoveryMode,
        log_number: u64,
    ) -> Self {
        Self::new(file, path, Rule::Wal { mode, log_number })
    }

    /// Reads a MANIFEST from `file`: a complete record that is damaged is
    /// [`Error::Corruption`]; only a last record the file ends inside (or in zeros) is dropped
    /// as a torn append, and counted.
    pub fn manifest(file: Box<dyn ReadFile>, path: PathBuf) -> Self {
        Self::new(file, path, Rule::Manifest)
    }

    fn new(file: Box<dyn ReadFile>, path: PathBuf, rule: Rule) -> Self {
        LogReader {
            file,
            path,
            rule,
            synced_through: 0,
            whole_file_synced: false,
            block: Vec::with_capacity(BLOCK_SIZE),
            block_start: 0,
            pos: 0,
            at_eof: false,
            last_record_offset: 0,
            valid_len: 0,
            records: 0,
            dropped: Vec::new(),
            following: false,
            rereads: 0,
            state: State::Reading,
        }
    }

    /// The log is known to have been synced through `offset` (the MANIFEST says so): damage
    /// before it, or a file shorter than it, lost acknowledged writes.
    pub fn synced_through(mut self, offset: u64) -> Self {
        self.synced_through = self.synced_through.max(offset);
        self
    }

    /// The whole file is known to have been synced (a newer log exists, and a log is synced
    /// before its successor is created): any damage lost acknowledged writes.
    pub fn whole_file_synced(mut self) -> Self {
        self.whole_file_synced = true;
        self
    }

    /// Starts reading at file offset `offset`, where an earlier reader of this log stopped
    /// ([`LogReader::valid_len`]: the end of a complete record, or 0). Following a log that
    /// is still being appended to reads each record once: a record the last reader found cut
    /// short is read again, whole, from its start.
    pub fn resume_at(mut self, offset: u64) -> Result<Self> {
        if offset > 0 {
            self.seek(offset)?;
        }
        self.valid_len = offset;
        self.last_record_offset = offset;
        Ok(self)
    }

    /// The log is being followed while its writer appends to it (a secondary instance): a
    /// torn tail is an append still under way, which the next reader (from
    /// [`LogReader::valid_len`]) reads whole. It is still reported in [`LogReader::dropped`],
    /// but not logged as lost. A zero header where a record would start ends the read without
    /// scanning the (reserved) rest of the file, and damage with a valid record after it is
    /// read again a few times before it is judged: the writer may have been writing it.
    pub fn following(mut self) -> Self {
        self.following = true;
        self
    }

    /// Returns the next logical record, or `None` at the end of the log (a clean end, or the
    /// point where the mode stopped).
    ///
    /// Errors: [`Error::Corruption`] naming this file and the offset of the damage;
    /// [`Error::Io`] if reading fails. After `None` or an error, every later call returns the
    /// same outcome.
    pub fn read_record(&mut self) -> Result<Option<Vec<u8>>> {
        match &self.state {
            State::Reading => {}
            State::Finished => return Ok(None),
            State::Failed {
                corrupt_at: Some(offset),
                message,
            } => {
                return Err(Error::corruption(&self.path, *offset, message.clone()));
            }
            State::Failed {
                corrupt_at: None,
                message,
            } => {
                return Err(Error::io(
                    &self.path,
                    std::io::Error::other(message.clone()),
                ));
            }
        }
        let result = self.read_logical();
        match &result {
            Ok(Some(_)) => self.records += 1,
            Ok(None) => self.state = State::Finished,
            Err(Error::Corruption { offset, reason, .. }) => {
                self.state = State::Failed {
                    corrupt_at: Some(*offset),
                    message: reason.clone(),
                };
            }
            Err(e) => {
                self.state = State::Failed {
                    corrupt_at: None,
                    message: e.to_string(),
                }
            }
        }
        result
    }

    /// File offset of the first fragment of the record last returned by `read_record`.
    pub fn last_record_offset(&self) -> u64 {
        self.last_record_offset
    }

    /// File offset just past the last record returned.
    pub fn valid_len(&self) -> u64 {
        self.valid_len
    }

    /// Logical records returned so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Every region not applied, in file order.
    pub fn dropped(&self) -> &[DroppedRange] {
        &self.dropped
    }

    /// Total bytes in [`LogReader::dropped`].
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped.iter().map(|d| d.bytes).sum()
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_logical(&mut self) -> Result<Option<Vec<u8>>> {
        let mut record = Vec::new();
        // File offset of the first fragment of a record split across blocks, while reading it.
        let mut pending: Option<u64> = None;
        loop {
            let (kind, offset, start, end) = match self.next_fragment()? {
                Physical::Fragment {
                    kind,
                    offset,
                    start,
                    end,
                } => (kind, offset, start, end),
                Physical::Bad { offset, reason } => {
                    match self.on_damage(pending, offset, Damage::Bad(reason))? {
                        After::End => return Ok(None),
                        After::ResumeAt(at) => {
                            record.clear();
                            pending = None;
                            self.seek(at)?;
                            continue;
                        }
                    }
                }
                Physical::Eof => {
                    let end = self.file_offset();
                    if pending.is_some() {
                        // Skipping resumes nowhere: the damage runs to the end of the file.
                        self.on_damage(pending, end, Damage::EndsInsideRecord)?;
                        return Ok(None);
                    }
                    self.check_synced_length(end)?;
                    return Ok(None);
                }
            };
            let next = self.file_offset();
            let misordered = |what: String, resume_at: u64| Damage::Misordered { what, resume_at };
            let damage = match (kind, pending) {
                (RecordType::Full, None) => {
                    record.extend_from_slice(&self.block[start..end]);
                    return Ok(Some(self.finish(record, offset)));
                }
                (RecordType::First, None) => {
                    record.extend_from_slice(&self.block[start..end]);
                    pending = Some(offset);
                    continue;
                }
                (RecordType::Middle, Some(_)) => {
                    record.extend_from_slice(&self.block[start..end]);
                    continue;
                }
                (RecordType::Last, Some(first)) => {
                    record.extend_from_slice(&self.block[start..end]);
                    return Ok(Some(self.finish(record, first)));
                }
                (RecordType::SyncMark, None) => match self.absorb_sync_mark(offset, start, end) {
                    Ok(()) => continue,
                    Err(what) => misordered(what, next),
                },
                // Every arm below is damage of a record whose fragments all check out.
                (RecordType::Full | RecordType::First | RecordType::SyncMark, Some(_)) => {
                    misordered(
                        format!(
                            "record split across blocks has no last fragment; a {kind:?} \
                             fragment starts at offset {offset}"
                        ),
                        offset,
                    )
                }
                (RecordType::Zero, _) | (RecordType::Middle | RecordType::Last, None) => {
                    misordered(
                        format!("{kind:?} fragment without a preceding first fragment"),
                        next,
                    )
                }
            };
            let bad_at = pending.unwrap_or(offset);
            match self.on_damage(pending, bad_at, damage)? {
                After::End => return Ok(None),
                After::ResumeAt(at) => {
                    record.clear();
                    pending = None;
                    self.seek(at)?;
                }
            }
        }
    }

    fn finish(&mut self, record: Vec<u8>, start: u64) -> Vec<u8> {
        self.rereads = 0;
        self.last_record_offset = start;
        self.valid_len = self.file_offset();
        record
    }

    /// Takes the synced length a sync mark at `offset` (payload `block[start..end]`) states.
    /// Errors say why the mark cannot be this log's.
    fn absorb_sync_mark(
        &mut self,
        offset: u64,
        start: usize,
        end: usize,
    ) -> std::result::Result<(), String> {
        let Rule::Wal { log_number, .. } = self.rule else {
            return Err("a MANIFEST holds no sync marks".into());
        };
        let (number, synced) = decode_sync_mark(&self.block[start..end])
            .ok_or_else(|| format!("sync mark of {} bytes, not {SYNC_MARK_LEN}", end - start))?;
        if number != log_number {
            return Err(format!(
                "sync mark of log {number} in log {log_number}: the file holds another log's \
                 records"
            ));
        }
        if synced > offset {
            return Err(format!(
                "sync mark at offset {offset} states {synced} bytes synced"
            ));
        }
        self.synced_through = self.synced_through.max(synced);
        Ok(())
    }

    /// At a clean end of the file: fails if the log was synced through more than it holds.
    fn check_synced_length(&mut self, end: u64) -> Result<()> {
        if self.whole_file_synced || end >= self.synced_through {
            return Ok(());
        }
        let missing = self.synced_through - end;
        let reason = format!(
            "log ends at offset {end}, but it was synced through offset {}: {missing} bytes of \
             acknowledged writes are missing",
            self.synced_through
        );
        if self.mode() == Some(WalRecoveryMode::SkipAnyCorruptedRecords) {
            self.drop_range(end, missing, reason);
            return Ok(());
        }
        Err(Error::corruption(&self.path, end, reason))
    }

    fn mode(&self) -> Option<WalRecoveryMode> {
        match self.rule {
            Rule::Wal { mode, .. } => Some(mode),
            Rule::Manifest => None,
        }
    }

    /// Judges damage found at `bad`; `pending` is the start of the split record being
    /// assembled, lost along with it.
    fn on_damage(&mut self, pending: Option<u64>, bad: u64, damage: Damage) -> Result<After> {
        let start = pending.unwrap_or(bad);
        let skip = self.mode() == Some(WalRecoveryMode::SkipAnyCorruptedRecords);
        let path = self.path.clone();
        let corrupt = |why: String| Err(Error::corruption(&path, bad, why));
        if let (Damage::Misordered { what, .. }, false) = (&damage, skip) {
            return corrupt(what.clone());
        }
        // A follower at the end of what was written so far: the space after it (reserved
        // ahead, in a WAL) is zeros. The next reader starts here; the rest of the file need
        // not be scanned.
        if self.following
            && pending.is_none()
            && matches!(damage, Damage::Bad(BadFragment::ZeroHeader))
        {
            return Ok(After::End);
        }
        // Salvage needs only the next valid fragment; judging needs the sync marks too.
        let marks_of = match self.rule {
            Rule::Wal { log_number, .. } if !skip => Some(log_number),
            _ => None,
        };
        let tail = scan_tail(&*self.file, &self.path, bad, marks_of)?;
        if skip {
            let resume = match &damage {
                Damage::Misordered { resume_at, .. } => Some(*resume_at),
                _ => tail.next_valid,
            };
            let until = resume.unwrap_or(tail.file_len).max(start);
            self.drop_range(start, until - start, format!("skipped: {damage}"));
            return Ok(resume.map_or(After::End, After::ResumeAt));
        }
        // Following a log being appended to, the block may have been read while the writer
        // was filling it: a valid fragment after the damage may be that write landing. Read
        // the record again, a few times, before judging it.
        if self.following && self.rereads < MAX_REREADS && tail.next_valid.is_some() {
            self.rereads += 1;
            std::thread::sleep(std::time::Duration::from_micros(100));
            return Ok(After::ResumeAt(start));
        }
        let synced_through = self.synced_through.max(tail.max_mark);
        if self.whole_file_synced {
            return corrupt(format!(
                "{damage}; a newer log exists, so this one was synced whole and acknowledged \
                 writes are lost"
            ));
        }
        if start < synced_through {
            return corrupt(format!(
                "{damage}; the log was synced through offset {synced_through}, so acknowledged \
                 writes are lost"
            ));
        }
        let clean_end = tail.zeros_only && pending.is_none();
        let torn = format!("{damage}; never synced, so never acknowledged as durable");
        let mode = match self.rule {
            Rule::Wal { mode, .. } => mode,
            Rule::Manifest => {
                if let Some(next) = tail.next_valid {
                    return corrupt(format!(
                        "{damage}; a valid record follows at offset {next}, so edits were lost"
                    ));
                }
                if clean_end {
                    return Ok(After::End);
                }
                if tail.zeros_only || damage.is_incomplete() {
                    self.drop_range(start, tail.file_len - start, torn);
                    return Ok(After::End);
                }
                return corrupt(format!(
                    "{damage}; the record is complete but damaged, which a crash during an \
                     append cannot leave"
                ));
            }
        };
        match mode {
            WalRecoveryMode::AbsoluteConsistency if !clean_end => corrupt(format!(
                "{damage} (absolute_consistency tolerates no damage)"
            )),
            WalRecoveryMode::TolerateCorruptedTailRecords if tail.next_valid.is_some() => {
                let next = tail.next_valid.unwrap_or_default();
                corrupt(format!(
                    "{damage}; a valid record follows at offset {next}, so this is not a torn \
                     tail (tolerate_corrupted_tail_records drops only those)"
                ))
            }
            _ if clean_end => Ok(After::End),
            _ => {
                self.drop_range(start, tail.file_len - start, torn);
                Ok(After::End)
            }
        }
    }

    fn drop_range(&mut self, offset: u64, bytes: u64, reason: String) {
        // A follower's torn tail is an append under way, not a loss.
        if !self.following {
            tracing::warn!(
                file = %self.path.display(),
                offset,
                dropped_bytes = bytes,
                reason,
                "log recovery dropped bytes"
            );
        }
        self.dropped.push(DroppedRange {
            file: self.path.clone(),
            offset,
            bytes,
            reason,
        });
    }

    /// File offset of `block[pos]`.
    fn file_offset(&self) -> u64 {
        self.block_start + self.pos as u64
    }

    /// Parses the next physical record, loading blocks as needed.
    fn next_fragment(&mut self) -> Result<Physical> {
        loop {
            let rest = self.block.get(self.pos..).unwrap_or_default();
            if rest.len() < HEADER_SIZE {
                if self.at_eof {
                    return Ok(if rest.is_empty() {
                        Physical::Eof
                    } else {
                        Physical::Bad {
                            offset: self.file_offset(),
                            reason: BadFragment::TooShort,
                        }
                    });
                }
                // A full block's trailer: the writer zero-fills it.
                if rest.iter().any(|&b| b != 0) {
                    return Ok(Physical::Bad {
                        offset: self.file_offset(),
                        reason: BadFragment::NonZeroTrailer,
                    });
                }
                self.load_block(self.block_start + self.block.len() as u64)?;
                continue;
            }
            let offset = self.file_offset();
            return Ok(match check_fragment(&self.block, self.pos) {
                Ok((kind, payload)) => {
                    let start = self.pos + HEADER_SIZE;
                    let end = start + payload.len();
                    self.pos = end;
                    Physical::Fragment {
                        kind,
                        offset,
                        start,
                        end,
                    }
                }
                Err(reason) => Physical::Bad { offset, reason },
            });
        }
    }

    /// Makes the block starting at `start` (a multiple of `BLOCK_SIZE`) current, at its start.
    fn load_block(&mut self, start: u64) -> Result<()> {
        self.block.clear();
        self.block_start = start;
        self.pos = 0;
        let n = read_block(&*self.file, start, &mut self.block).with_path(&self.path)?;
        self.at_eof = n < BLOCK_SIZE;
        Ok(())
    }

    /// Continues reading at file offset `at` (skipping damage).
    fn seek(&mut self, at: u64) -> Result<()> {
        let block = BLOCK_SIZE as u64;
        self.load_block(at - at % block)?;
        self.pos = (at % block) as usize;
        Ok(())
    }
}

impl std::fmt::Debug for LogReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogReader")
            .field("path", &self.path)
            .field("rule", &self.rule)
            .field("offset", &self.file_offset())
            .field("synced_through", &self.synced_through)
            .field("dropped", &self.dropped)
            .finish()
    }
}
