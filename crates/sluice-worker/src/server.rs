//! Serving: the tonic server on a bound listener, until a shutdown signal, then a bounded
//! drain.
//!
//! Shutdown, in order: stop accepting connections (the listener is closed) and refuse new
//! calls on open ones (HTTP/2 GOAWAY); let running tasks finish for up to [`DRAIN_TIMEOUT`];
//! then cancel whatever still runs (each job stops before its next output block and deletes
//! its outputs, and its host gets `CANCELLED`) and wait up to [`CANCEL_TIMEOUT`] more.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sluice_rpc::proto::compaction_worker_server::CompactionWorkerServer;
use sluice_rpc::{MAX_MESSAGE_BYTES, MAX_RESULT_BYTES};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;

use crate::auth::Authenticator;
use crate::config::WorkerConfig;
use crate::service::WorkerService;
use crate::state::WorkerState;

/// How long running tasks may take to finish after a shutdown signal.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long cancelled tasks may take to stop after the drain timeout.
pub const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves the worker described by `config` on `listener` until `shutdown` completes, then
/// drains as the module comment says. Fails before serving if `config` is invalid
/// ([`WorkerConfig::validate`]), and if the server itself fails.
///
/// Must run inside a multi-threaded tokio runtime (jobs run on its blocking pool).
pub async fn serve(
    config: WorkerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), String> {
    let roots = config.validate()?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the listening address: {e}"))?;
    let objects = config.object_fs(&roots)?;
    let state = Arc::new(WorkerState::new(&config, roots, objects, bound));
    tracing::info!(
        worker_id = %state.worker_id,
        roots = ?state.roots,
        threads = state.threads,
        mode = config.mode.map_or("decide", |m| m.name()),
        throttle = state.throttle,
        "compaction worker serving"
    );
    // Authentication wraps the generated server, so it runs before a request is decoded.
    let service = InterceptedService::new(
        CompactionWorkerServer::new(WorkerService {
            state: Arc::clone(&state),
        })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_RESULT_BYTES),
        Authenticator {
            state: Arc::clone(&state),
        },
    );
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    let stopping = Arc::new(Notify::new());
    let signal = {
        let stopping = Arc::clone(&stopping);
        async move {
            shutdown.await;
            tracing::info!("shutting down: no new tasks; waiting for running ones");
            stopping.notify_one();
        }
    };
    let server = Server::builder()
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, signal);
    tokio::pin!(server);
    tokio::select! {
        r = &mut server => return r.map_err(|e| format!("the worker's server failed: {e}")),
        () = async { stopping.notified().await; tokio::time::sleep(DRAIN_TIMEOUT).await } => {}
    }
    tracing::warn!(
        tasks = state.tasks_running(),
        "tasks still running after {DRAIN_TIMEOUT:?}; cancelling them"
    );
    state.cancel_all();
    match tokio::time::timeout(CANCEL_TIMEOUT, &mut server).await {
        Ok(r) => r.map_err(|e| format!("the worker's server failed: {e}")),
        Err(_) => {
            tracing::warn!("connections still open after cancelling; closing them");
            Ok(())
        }
    }
}
