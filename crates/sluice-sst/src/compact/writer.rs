//! S7 and output cutting: the single writer every executor funnels its blocks into.
//!
//! File cuts are decided here, block by block, from the blocks' own metadata, so they are the
//! same whichever thread produced a block. A file ends before a block when the file has reached
//! `target_file_size` or overlaps more than `max_grandparent_overlap_bytes` of the grandparent
//! level (LevelDB's `ShouldStopBefore`, at block granularity), and never between two versions
//! of one user key: a block that starts with the previous block's last user key stays with it.

use std::path::PathBuf;

use crate::Result;
use crate::key::{compare_internal, user_key};
use crate::profile::Step;
use crate::table::{EncodedBlock, TableFileWriter};

use super::output::{NewOutput, OutputFile};
use super::spec::{CompactionSpec, GrandparentFile};
use super::steps::{StepTimes, write_block};
use crate::fs::Storage;
use crate::table::TableOptions;

/// What the writer needs to know: how to write a table and where to cut files. A compaction
/// takes them from its spec ([`CompactionSpec::output_rules`]); a flush has only the first
/// two ([`OutputRules::one_file`]).
#[derive(Clone, Copy, Debug)]
pub struct OutputRules<'a> {
    /// Block size, compression, filters.
    pub table: &'a TableOptions,
    /// Where and how files are written.
    pub storage: &'a Storage,
    /// Cut a file once it holds this many bytes (`u64::MAX`: never by size).
    pub target_file_size: u64,
    /// Grandparent files, sorted: a file is cut once it overlaps too many of their bytes.
    pub grandparents: &'a [GrandparentFile],
    /// Cut a file once it overlaps this many grandparent bytes.
    pub max_grandparent_overlap_bytes: u64,
    /// Written into every file's properties ([`CompactionSpec::task_nonce`]).
    pub task_nonce: Option<u64>,
}

impl<'a> OutputRules<'a> {
    /// Everything in one file, never cut: a flush writes one table per piece.
    pub fn one_file(table: &'a TableOptions, storage: &'a Storage) -> Self {
        OutputRules {
            table,
            storage,
            target_file_size: u64::MAX,
            grandparents: &[],
            max_grandparent_overlap_bytes: u64::MAX,
            task_nonce: None,
        }
    }
}

impl CompactionSpec {
    /// How this compaction's outputs are written and cut.
    pub fn output_rules(&self) -> OutputRules<'_> {
        OutputRules {
            table: &self.table,
            storage: &self.storage,
            target_file_size: self.target_file_size,
            grandparents: &self.grandparents,
            max_grandparent_overlap_bytes: self.max_grandparent_overlap_bytes,
            task_nonce: self.task_nonce,
        }
    }
}

struct OpenFile {
    number: u64,
    path: PathBuf,
    writer: TableFileWriter,
}

/// Appends blocks to output files, cutting files as described in the module docs.
pub struct OutputWriter<'a> {
    rules: OutputRules<'a>,
    times: &'a StepTimes,
    new_output: &'a mut NewOutput<'a>,
    current: Option<OpenFile>,
    done: Vec<OutputFile>,
    /// Grandparent files passed so far, and the bytes of them the open file overlaps.
    grandparent_index: usize,
    overlapped_bytes: u64,
    /// User key of the last entry written, to keep versions of one key in one file.
    last_user_key: Option<Vec<u8>>,
}

impl<'a> OutputWriter<'a> {
    /// A writer of outputs following `rules`; files are named by `new_output`.
    pub fn new(
        rules: OutputRules<'a>,
        times: &'a StepTimes,
        new_output: &'a mut NewOutput<'a>,
    ) -> Self {
        OutputWriter {
            rules,
            times,
            new_output,
            current: None,
            done: Vec::new(),
            grandparent_index: 0,
            overlapped_bytes: 0,
            last_user_key: None,
        }
    }

    fn should_cut_before(&mut self, block: &EncodedBlock) -> bool {
        let first = &block.meta.first_key;
        let grandparents = self.rules.grandparents;
        while let Some(gp) = grandparents.get(self.grandparent_index) {
            if compare_internal(first, &gp.largest).is_le() {
                break;
            }
            if self.last_user_key.is_some() {
                self.overlapped_bytes += gp.size;
            }
            self.grandparent_index += 1;
        }
        let Some(open) = &self.current else {
            return false;
        };
        let same_key = self
            .last_user_key
            .as_deref()
            .is_some_and(|last| last == user_key(first));
        !same_key
            && (open.writer.file_size() >= self.rules.target_file_size
                || self.overlapped_bytes > self.rules.max_grandparent_overlap_bytes)
    }

    /// S7: appends one block, first ending the open file if the block belongs to the next.
    pub fn append(&mut self, block: &EncodedBlock) -> Result<()> {
        if self.should_cut_before(block) {
            self.finish_file()?;
            self.overlapped_bytes = 0;
        }
        if self.current.is_none() {
            let (number, path) = (self.new_output)()?;
            let mut writer = TableFileWriter::create(self.rules.storage, &path, self.rules.table)?;
            if let Some(nonce) = self.rules.task_nonce {
                writer.set_task_nonce(nonce);
            }
            self.current = Some(OpenFile {
                number,
                path,
                writer,
            });
        }
        if let Some(open) = self.current.as_mut() {
            write_block(&mut open.writer, block, self.times)?;
        }
        self.last_user_key = Some(user_key(&block.meta.last_key).to_vec());
        Ok(())
    }

    fn finish_file(&mut self) -> Result<()> {
        let Some(open) = self.current.take() else {
            return Ok(());
        };
        let before = open.writer.file_size();
        let summary = self.times.timed(Step::Write, || open.writer.finish())?;
        self.times
            .add_bytes_written(summary.file_size.saturating_sub(before));
        self.done.push(OutputFile {
            number: open.number,
            path: open.path,
            summary,
        });
        Ok(())
    }

    /// Finishes the open file and returns every file written, in key order.
    pub fn finish(mut self) -> Result<Vec<OutputFile>> {
        match self.finish_file() {
            Ok(()) => Ok(std::mem::take(&mut self.done)),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Ends the job: finishes the outputs if `outcome` (the rest of the job) succeeded,
    /// otherwise deletes them and returns the job's error.
    pub fn conclude(self, outcome: Result<()>) -> Result<Vec<OutputFile>> {
        match outcome {
            Ok(()) => self.finish(),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Deletes every file written or being written (after a failure anywhere in the job).
    pub fn abandon(mut self) {
        if let Some(open) = self.current.take() {
            open.writer.abandon();
        }
        for f in self.done.drain(..) {
            // Nothing references the file yet; if removal fails it is garbage collected later.
            let _ = self.rules.storage.fs.remove(&f.path);
        }
    }
}
