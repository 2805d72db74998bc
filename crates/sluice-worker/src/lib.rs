//! The compaction worker: a process that runs compaction shares a host sends it, in the
//! directories it was started with, and reports the files it wrote. It is the software
//! stand-in for the MStore and CoPro papers's near-data-processing device (DESIGN.md section 5).
//!
//! What it may do is fixed by what it depends on: the table layer (`sluice-sst`), the
//! executors (`sluice-exec`) and the protocol (`sluice-rpc`), not the engine. A worker can
//! write table files but never commit a MANIFEST; the host verifies what it reports and
//! installs it in its own version edit.
//!
//! - [`config`]: [`WorkerConfig`] and its checks;
//! - [`serve`]: the gRPC server, its authentication and its bounded drain at shutdown;
//! - [`cli`]: [`WorkerArgs`] and [`run`], shared by `sluice worker` and `sluice-worker`;
//! - [`task`]: checking a task off the wire (public so it can be fuzzed), with [`error`].
//!
//! Inside, a task goes `task` (checked) -> `resolve` (found inside a root) -> `job` (opened,
//! executor chosen by `decision`, run) -> `outputs` (numbered, written as `.dbtmp`, renamed to
//! `.sst` once complete, deleted on any failure).

mod auth;
pub mod cli;
pub mod config;
mod decision;
pub mod error;
mod job;
#[cfg(feature = "test-lies")]
pub mod lies;
mod metrics;
mod outputs;
mod resolve;
mod server;
mod service;
mod state;
pub mod task;

pub use cli::{CpuList, WorkerArgs, WorkerMode, run};
pub use config::WorkerConfig;
pub use server::{CANCEL_TIMEOUT, DRAIN_TIMEOUT, serve};
