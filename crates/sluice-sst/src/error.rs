//! The format layer's errors: what reading, writing and merging tables can go wrong with.
//!
//! `Corruption` (data on disk is wrong; the file and byte offset say where), `Io` (the
//! operating system refused; the path says which file), `InvalidArgument` (the caller asked
//! for something impossible) and `Cancelled` (a compaction's control stopped it). Corruption
//! is always its own variant so that nobody mistakes a bad checksum for a transient I/O
//! failure. Engine states (a closed or busy database, sticky background failures) belong to
//! the engine's error (`sluice::Error`), which every one of these converts into.

use std::path::PathBuf;

/// Result alias used throughout Sluice.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error Sluice returns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes on disk do not decode or fail their checksum.
    #[error("corrupt data in {file} at offset {offset}: {reason}", file = .file.display())]
    Corruption {
        /// The file holding the bad bytes.
        file: PathBuf,
        /// Byte offset in `file` where the bad region starts.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// An operating-system I/O error on `path`.
    #[error("I/O error on {path}: {source}", path = .path.display())]
    Io {
        /// The file or directory the operation touched.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The caller passed an argument or option that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The caller cancelled the operation; what it had not finished was discarded and the
    /// database is as if that part had not started.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Builds a [`Error::Corruption`].
    pub fn corruption(file: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption {
            file: file.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// Builds an [`Error::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// True for [`Error::Corruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// Attaches a path to `std::io::Result`s.
pub trait IoContext<T> {
    /// Maps an I/O error to [`Error::Io`] naming `path`.
    fn with_path(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn with_path(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}
