//! `sluice-worker`: a compaction worker as a process of its own (`sluice worker` is the same
//! thing inside the `sluice` CLI). Logs go to stderr (`RUST_LOG` filters, default `info`).

use std::process::ExitCode;

use clap::Parser;
use sluice_worker::WorkerArgs;

/// The allocator of the `sluice` binary (see its `main.rs`), so that `sluice-worker` and
/// `sluice worker` run the same executors on the same allocator and measure alike.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs compaction shares for a Sluice host.
#[derive(Parser)]
#[command(name = "sluice-worker", version)]
struct Cli {
    #[command(flatten)]
    args: WorkerArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    match sluice_worker::run(cli.args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-worker: {e}");
            ExitCode::FAILURE
        }
    }
}
