//! What the output end of a compaction or flush produces, and how it names new files. The
//! writing itself is [`super::writer::OutputWriter`].

use std::path::PathBuf;

use crate::Result;
use crate::table::TableSummary;

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

/// Allocates `(file number, path)` for each new output file.
pub type NewOutput<'a> = dyn FnMut() -> Result<(u64, PathBuf)> + Send + 'a;
