//! The host's end of the worker protocol: one gRPC client per worker, driven from the
//! (synchronous) compaction threads through a small tokio runtime the offloader owns.

use std::time::Duration;

use sluice_rpc::auth::{METADATA_KEY, Secret};
use sluice_rpc::envelope::{open, seal};
use sluice_rpc::proto::compaction_worker_client::CompactionWorkerClient;
use sluice_rpc::proto::{CompactionTask, MessageKind, Origin, TaskResult};
use sluice_rpc::{MAX_MESSAGE_BYTES, MAX_RESULT_BYTES, RpcError};
use tonic::transport::{Channel, Endpoint};

/// Why a worker's share did not come back usable. Every one of them is handled the same way:
/// the share's outputs are deleted and it is re-run on the host.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    /// No connection could be made.
    #[error("worker {addr} is unreachable: {reason}")]
    Unreachable {
        /// The worker.
        addr: String,
        /// What the transport said.
        reason: String,
    },
    /// No answer within the task timeout.
    #[error("worker {addr} did not answer within {timeout:?}")]
    Timeout {
        /// The worker.
        addr: String,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// The worker answered with an error.
    #[error("worker {addr} failed the task: {code:?}: {message}")]
    Failed {
        /// The worker.
        addr: String,
        /// The gRPC status code.
        code: tonic::Code,
        /// The worker's message.
        message: String,
    },
    /// The answer is not a valid result message.
    #[error("worker {addr} sent a bad reply: {source}")]
    Protocol {
        /// The worker.
        addr: String,
        /// What was wrong.
        source: RpcError,
    },
    /// A reported output file failed the host's checks.
    #[error("worker {addr} reported a bad output: {reason}")]
    Verify {
        /// The worker.
        addr: String,
        /// What did not match.
        reason: String,
    },
    /// A piece of a static share that was never sent: an earlier piece's call to the same
    /// worker failed, and each would have waited out its own timeout.
    #[error("worker {addr} was not sent this piece: an earlier one failed: {reason}")]
    NotSent {
        /// The worker.
        addr: String,
        /// How the earlier piece failed.
        reason: String,
    },
    /// The host's own check of the answer broke down (it panicked): a host bug, not the
    /// worker's, but the share is not installed either way.
    #[error("the host could not check the answer of worker {addr}: {reason}")]
    HostCheck {
        /// The worker.
        addr: String,
        /// What happened.
        reason: String,
    },
    /// The worker dropped an entry the rules of compaction keep, or its statistics count
    /// other drops than its drop log holds (`sluice_sst::compact::drop_audit`).
    #[error("worker {addr} made a drop decision the host refuses: {reason}")]
    DropAudit {
        /// The worker.
        addr: String,
        /// The drop and the rule it breaks.
        reason: String,
    },
}

impl ShareError {
    /// True when the share failed verification against its inputs (counted in
    /// `verify_failures` besides `retries`), not a structural check or the call.
    pub fn is_verify_failure(&self) -> bool {
        matches!(self, ShareError::DropAudit { .. })
    }
}

/// A connection to one worker. Connects lazily, and reconnects after a failure.
pub struct WorkerClient {
    addr: String,
    secret: Secret,
    client: CompactionWorkerClient<Channel>,
}

impl WorkerClient {
    /// A client for the worker at `addr` (`host:port`). Must be called inside the
    /// offloader's runtime (the channel's connection task runs there).
    pub fn new(addr: &str, secret: Secret) -> Result<WorkerClient, ShareError> {
        let unreachable = |reason: String| ShareError::Unreachable {
            addr: addr.to_string(),
            reason,
        };
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| unreachable(format!("bad address: {e}")))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true);
        let client = CompactionWorkerClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_RESULT_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES);
        Ok(WorkerClient {
            addr: addr.to_string(),
            secret,
            client,
        })
    }

    /// The worker's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends `task` and waits at most `timeout` for its result. Dropping the call on timeout
    /// cancels it on the worker, which then deletes what it wrote.
    pub async fn execute(
        &self,
        task: &CompactionTask,
        timeout: Duration,
    ) -> Result<TaskResult, ShareError> {
        let mut request =
            tonic::Request::new(seal(MessageKind::CompactionTask, Origin::Host, task));
        let header = self
            .secret
            .header_value()
            .parse()
            .map_err(|_| ShareError::Unreachable {
                addr: self.addr.clone(),
                reason: "the secret is not a valid header value".into(),
            })?;
        request.metadata_mut().insert(METADATA_KEY, header);
        request.set_timeout(timeout);
        let mut client = self.client.clone();
        let reply = match tokio::time::timeout(timeout, client.execute(request)).await {
            Err(_) => {
                return Err(ShareError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                });
            }
            Ok(Err(status)) if status.code() == tonic::Code::Unavailable => {
                return Err(ShareError::Unreachable {
                    addr: self.addr.clone(),
                    reason: status.message().to_string(),
                });
            }
            Ok(Err(status)) if status.code() == tonic::Code::DeadlineExceeded => {
                return Err(ShareError::Timeout {
                    addr: self.addr.clone(),
                    timeout,
                });
            }
            Ok(Err(status)) => {
                return Err(ShareError::Failed {
                    addr: self.addr.clone(),
                    code: status.code(),
                    message: status.message().to_string(),
                });
            }
            Ok(Ok(reply)) => reply.into_inner(),
        };
        if reply.origin != Origin::Worker as i32 {
            return Err(ShareError::Protocol {
                addr: self.addr.clone(),
                source: RpcError::Invalid(format!("reply origin {} is not a worker", reply.origin)),
            });
        }
        open(&reply, MessageKind::CompactionResult).map_err(|source| ShareError::Protocol {
            addr: self.addr.clone(),
            source,
        })
    }
}
