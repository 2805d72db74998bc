//! Every call is authenticated before its request body is read: a tonic interceptor sees the
//! call's metadata only, and refuses it unless the `authorization` value carries the worker's
//! secret ([`Secret::accepts`], constant time). A refusal is `UNAUTHENTICATED`, counted in
//! `rejected_calls` and logged; the message does not say what was expected.

use std::sync::Arc;

use sluice_rpc::auth::METADATA_KEY;
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::state::WorkerState;

/// The interceptor in front of the worker's service.
#[derive(Clone, Debug)]
pub(crate) struct Authenticator {
    pub state: Arc<WorkerState>,
}

impl Interceptor for Authenticator {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let header = request
            .metadata()
            .get(METADATA_KEY)
            .and_then(|v| v.to_str().ok());
        match header {
            Some(h) if self.state.secret.accepts(h) => Ok(request),
            _ => {
                self.state.metrics.call_rejected();
                tracing::warn!(
                    peer = ?request.remote_addr(),
                    credentials = if header.is_some() { "wrong" } else { "missing" },
                    "call refused: not authenticated"
                );
                Err(Status::unauthenticated(
                    "the call does not carry the worker's secret",
                ))
            }
        }
    }
}
