//! The output end of a compaction or flush: entries in, finished table files out, with S5..S7
//! applied to every sealed block.

use std::path::PathBuf;

use crate::Result;
use crate::table::{TableContentBuilder, TableFileWriter, TableOptions, TableSummary};

use super::steps::{StepTimes, checksum_block, compress_block, write_block};

/// A finished output table.
#[derive(Clone, Debug)]
pub struct OutputFile {
    /// The file number the host reserved for it.
    pub number: u64,
    /// Where it was written.
    pub path: PathBuf,
    /// Size, key range and properties.
    pub summary: TableSummary,
}

struct OpenTable {
    number: u64,
    path: PathBuf,
    content: TableContentBuilder,
    writer: TableFileWriter,
}

/// Allocates `(file number, path)` for each new output file.
pub type NewOutput<'a> = dyn FnMut() -> Result<(u64, PathBuf)> + 'a;

/// Writes a stream of entries into one or more tables.
///
/// If anything fails, [`TableSink::abandon`] deletes every file the sink created, so a failed
/// job leaves no partial output behind.
pub struct TableSink<'a> {
    opts: TableOptions,
    times: &'a StepTimes,
    new_output: &'a mut NewOutput<'a>,
    current: Option<OpenTable>,
    done: Vec<OutputFile>,
}

impl<'a> TableSink<'a> {
    /// A sink that opens files through `new_output` as needed.
    pub fn new(
        opts: TableOptions,
        times: &'a StepTimes,
        new_output: &'a mut NewOutput<'a>,
    ) -> Self {
        TableSink {
            opts,
            times,
            new_output,
            current: None,
            done: Vec::new(),
        }
    }

    /// The content builder of the open file, opening one if needed.
    pub fn builder(&mut self) -> Result<&mut TableContentBuilder> {
        if self.current.is_none() {
            let (number, path) = (self.new_output)()?;
            let writer = TableFileWriter::create(&path, &self.opts)?;
            self.current = Some(OpenTable {
                number,
                path,
                content: TableContentBuilder::new(&self.opts),
                writer,
            });
        }
        match self.current.as_mut() {
            Some(open) => Ok(&mut open.content),
            None => unreachable!("an output file was just opened"),
        }
    }

    /// Bytes of the open file so far (written blocks plus the block being built).
    pub fn current_file_size(&self) -> u64 {
        self.current.as_ref().map_or(0, |t| {
            t.writer.file_size() + t.content.current_block_size() as u64
        })
    }

    /// True when a file is open and has at least one entry.
    pub fn has_entries(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|t| t.content.num_entries() > 0)
    }

    /// S5..S7 for every block the builder has sealed.
    pub fn drain_sealed(&mut self) -> Result<()> {
        let Some(open) = self.current.as_mut() else {
            return Ok(());
        };
        while let Some(sealed) = open.content.take_sealed() {
            let (compressed, used) = compress_block(&sealed, &self.opts, self.times);
            let encoded = checksum_block(sealed, compressed, used, self.times);
            write_block(&mut open.writer, &encoded, self.times)?;
        }
        Ok(())
    }

    /// Finishes the open file (meta blocks, index, footer, fsync), if any.
    pub fn finish_file(&mut self) -> Result<()> {
        let Some(mut open) = self.current.take() else {
            return Ok(());
        };
        if open.content.num_entries() == 0 {
            open.writer.abandon();
            return Ok(());
        }
        open.content.seal_current();
        while let Some(sealed) = open.content.take_sealed() {
            let (compressed, used) = compress_block(&sealed, &self.opts, self.times);
            let encoded = checksum_block(sealed, compressed, used, self.times);
            write_block(&mut open.writer, &encoded, self.times)?;
        }
        let before = open.writer.file_size();
        let summary = self
            .times
            .timed(crate::profile::Step::Write, || open.writer.finish())?;
        self.times
            .add_bytes_written(summary.file_size.saturating_sub(before));
        self.done.push(OutputFile {
            number: open.number,
            path: open.path,
            summary,
        });
        Ok(())
    }

    /// Finishes the open file and returns every file written.
    pub fn finish(mut self) -> Result<Vec<OutputFile>> {
        match self.finish_file() {
            Ok(()) => Ok(std::mem::take(&mut self.done)),
            Err(e) => {
                self.abandon();
                Err(e)
            }
        }
    }

    /// Deletes every file this sink created.
    pub fn abandon(mut self) {
        if let Some(open) = self.current.take() {
            open.writer.abandon();
        }
        for f in self.done.drain(..) {
            if let Err(e) = std::fs::remove_file(&f.path) {
                // Nothing references the file; a leftover is removed as garbage on next open.
                let _ = e;
            }
        }
    }
}
