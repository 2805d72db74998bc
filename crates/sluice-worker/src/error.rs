//! Why a task failed, and the gRPC status the host receives for it.
//!
//! The status code tells the host what kind of failure it was (the host re-runs the share
//! whatever the code, but counts and logs them apart); the message names the file, and for
//! corruption the byte offset, so an operator can find the bad bytes. Corruption is always
//! `DATA_LOSS`, never mistaken for a transient I/O failure.

use tonic::{Code, Status};

/// A task's failure.
#[derive(Debug)]
pub enum WorkerError {
    /// The task is malformed or names something the worker refuses to touch.
    Invalid(String),
    /// An input file named by the task is in none of the roots.
    NotFound(String),
    /// Reading or writing tables failed (I/O, corruption, or the reserved output numbers ran
    /// out inside the executor).
    Sst(sluice_sst::Error),
    /// The worker itself failed (a job thread panicked, the worker is shutting down).
    Internal(String),
}

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerError::Invalid(m) | WorkerError::NotFound(m) | WorkerError::Internal(m) => {
                f.write_str(m)
            }
            WorkerError::Sst(e) => write!(f, "{e}"),
        }
    }
}

impl From<sluice_sst::Error> for WorkerError {
    fn from(e: sluice_sst::Error) -> Self {
        WorkerError::Sst(e)
    }
}

impl From<sluice_rpc::RpcError> for WorkerError {
    fn from(e: sluice_rpc::RpcError) -> Self {
        WorkerError::Invalid(e.to_string())
    }
}

impl WorkerError {
    /// The gRPC code the host receives: `INVALID_ARGUMENT` for a bad task, `NOT_FOUND` for a
    /// missing input, `DATA_LOSS` for corruption, `CANCELLED` for a job stopped by the host
    /// going away or by shutdown, `INTERNAL` for I/O and the worker's own failures.
    pub(crate) fn code(&self) -> Code {
        use sluice_sst::Error as E;
        match self {
            WorkerError::Invalid(_) => Code::InvalidArgument,
            WorkerError::NotFound(_) => Code::NotFound,
            WorkerError::Internal(_) => Code::Internal,
            WorkerError::Sst(e) => match e {
                E::Corruption { .. } => Code::DataLoss,
                E::InvalidArgument(_) => Code::InvalidArgument,
                E::Cancelled => Code::Cancelled,
                _ => Code::Internal,
            },
        }
    }
}

impl From<WorkerError> for Status {
    fn from(e: WorkerError) -> Self {
        Status::new(e.code(), e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_kind_of_failure() {
        let corrupt =
            WorkerError::from(sluice_sst::Error::corruption("/r/000007.sst", 4096, "bad"));
        let status = Status::from(corrupt);
        assert_eq!(status.code(), Code::DataLoss);
        assert!(
            status.message().contains("/r/000007.sst"),
            "{}",
            status.message()
        );
        assert!(status.message().contains("4096"), "{}", status.message());

        let io = sluice_sst::Error::io("/r/x", std::io::Error::other("disk on fire"));
        assert_eq!(WorkerError::from(io).code(), Code::Internal);
        assert_eq!(
            WorkerError::from(sluice_sst::Error::Cancelled).code(),
            Code::Cancelled
        );
        assert_eq!(
            WorkerError::from(sluice_sst::Error::InvalidArgument("n".into())).code(),
            Code::InvalidArgument
        );
        assert_eq!(WorkerError::NotFound("f".into()).code(), Code::NotFound);
        assert_eq!(
            WorkerError::Invalid("f".into()).code(),
            Code::InvalidArgument
        );
        assert_eq!(WorkerError::Internal("f".into()).code(), Code::Internal);
    }
}
