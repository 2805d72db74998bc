//! The engine's errors, in two layers (SlateDB's RFC 0007, Pebble's `internal/base`):
//!
//! - [`Error`] says what went wrong, with the detail: the file and byte offset of bad data,
//!   the path and OS error of a failed call, the argument refused, the background failure
//!   that made the database read-only.
//! - [`ErrorKind`] is the small, stable set a caller matches on to decide what to do. A
//!   background failure keeps the kind of its cause, so a corruption found by a compaction is
//!   still [`ErrorKind::Corruption`] when the next write reports it.
//!
//! The format crate (`sluice-sst`) has its own error for the bytes on disk; it converts into
//! this one kind for kind. Engine states (closed, busy, read-only, background failures) exist
//! only here.

use std::path::PathBuf;

/// Result alias of the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is: what the caller should do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Bytes on disk are wrong (a checksum, a decode, a missing file the MANIFEST names).
    /// Retrying will not help: restore from a backup, or `sluice repair` and accept losses.
    Corruption,
    /// The operating system refused an operation (disk full, permissions, a failed device).
    /// Possibly transient; the database stays consistent.
    Io,
    /// The caller asked for something impossible: a bad option, key, range or name.
    InvalidArgument,
    /// Someone else holds what the call needs: another process (or another handle in this
    /// one) has the database open.
    Busy,
    /// The database was opened read-only and the call would change it.
    ReadOnly,
    /// A limit the database cannot go past was reached (sequence numbers).
    ResourceExhausted,
    /// The database has been closed.
    Closed,
    /// The caller cancelled the operation; nothing it had not finished was kept.
    Cancelled,
    /// A background job panicked: a bug, or a panic in a callback the application gave
    /// (listener, merge operator, compaction filter). Its tree takes no more writes.
    Panicked,
}

/// Every error the engine returns. Match on [`Error::kind`] to decide what to do; the
/// variants carry the detail.
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
    /// The database is held by someone else (its LOCK file).
    #[error("busy: {0}")]
    Busy(String),
    /// The database (at this path) is open read-only.
    #[error("{} is open read-only", .0.display())]
    ReadOnly(PathBuf),
    /// A limit was reached.
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// A background flush or compaction failed earlier; the database refuses writes until it
    /// is reopened (the failure is sticky so it cannot be silently ignored). Its kind is the
    /// cause's.
    #[error("database is read-only after a background error: {0}")]
    Background(Box<Error>),
    /// The database has been closed.
    #[error("database is closed")]
    Closed,
    /// A background flush or compaction panicked (see [`ErrorKind::Panicked`]); the message
    /// says which and why.
    #[error("{0}")]
    Panicked(String),
    /// The caller cancelled the operation; what it had not finished was discarded and the
    /// database is as if that part had not started.
    #[error("cancelled")]
    Cancelled,
}

impl Error {
    /// Builds an [`Error::Corruption`].
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

    /// What kind of failure this is; a background failure is of its cause's kind.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Corruption { .. } => ErrorKind::Corruption,
            Error::Io { .. } => ErrorKind::Io,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Busy(_) => ErrorKind::Busy,
            Error::ReadOnly(_) => ErrorKind::ReadOnly,
            Error::ResourceExhausted(_) => ErrorKind::ResourceExhausted,
            Error::Background(cause) => cause.kind(),
            Error::Closed => ErrorKind::Closed,
            Error::Cancelled => ErrorKind::Cancelled,
            Error::Panicked(_) => ErrorKind::Panicked,
        }
    }

    /// True for corruption, including a background failure caused by one.
    pub fn is_corruption(&self) -> bool {
        self.kind() == ErrorKind::Corruption
    }

    /// A copy for the sticky background error, which is handed to every later caller. An
    /// I/O error keeps its kind and message (the OS error itself cannot be cloned).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Corruption {
                file,
                offset,
                reason,
            } => Error::corruption(file.clone(), *offset, reason.clone()),
            Error::Io { path, source } => Error::io(
                path.clone(),
                std::io::Error::new(source.kind(), source.to_string()),
            ),
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Busy(m) => Error::Busy(m.clone()),
            Error::ReadOnly(p) => Error::ReadOnly(p.clone()),
            Error::ResourceExhausted(m) => Error::ResourceExhausted(m.clone()),
            Error::Background(cause) => Error::Background(Box::new(cause.duplicate())),
            Error::Closed => Error::Closed,
            Error::Cancelled => Error::Cancelled,
            Error::Panicked(m) => Error::Panicked(m.clone()),
        }
    }
}

impl From<sluice_sst::Error> for Error {
    fn from(e: sluice_sst::Error) -> Self {
        match e {
            sluice_sst::Error::Corruption {
                file,
                offset,
                reason,
            } => Error::Corruption {
                file,
                offset,
                reason,
            },
            sluice_sst::Error::Io { path, source } => Error::Io { path, source },
            sluice_sst::Error::InvalidArgument(m) => Error::InvalidArgument(m),
            sluice_sst::Error::Cancelled => Error::Cancelled,
            // `sluice_sst::Error` is non-exhaustive; a kind added there is an argument error
            // until this conversion learns it.
            other => Error::InvalidArgument(other.to_string()),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_background_failure_keeps_the_kind_of_its_cause() {
        let cause = Error::corruption("/db/000012.sst", 4096, "block checksum mismatch");
        let sticky = Error::Background(Box::new(cause.duplicate()));
        assert_eq!(sticky.kind(), ErrorKind::Corruption);
        assert!(sticky.is_corruption());
        assert!(sticky.to_string().contains("000012.sst"), "{sticky}");
        let io = Error::io("/db/LOCK", std::io::Error::other("disk on fire"));
        let sticky = Error::Background(Box::new(io.duplicate()));
        assert_eq!(sticky.kind(), ErrorKind::Io);
        assert!(sticky.to_string().contains("disk on fire"), "{sticky}");
    }

    #[test]
    fn format_errors_convert_kind_for_kind() {
        let cases: [(sluice_sst::Error, ErrorKind); 4] = [
            (
                sluice_sst::Error::corruption("/t", 1, "bad"),
                ErrorKind::Corruption,
            ),
            (
                sluice_sst::Error::io("/t", std::io::Error::other("x")),
                ErrorKind::Io,
            ),
            (
                sluice_sst::Error::InvalidArgument("k".into()),
                ErrorKind::InvalidArgument,
            ),
            (sluice_sst::Error::Cancelled, ErrorKind::Cancelled),
        ];
        for (e, kind) in cases {
            let text = e.to_string();
            let converted = Error::from(e);
            assert_eq!(converted.kind(), kind);
            assert_eq!(converted.to_string(), text);
        }
    }
}
