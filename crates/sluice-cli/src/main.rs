//! `sluice`: the command-line tool for Sluice databases. See `sluice --help`.
//!
//! Each subcommand lives in its own module under `commands`, its flags beside its code; the
//! flags that say how a database is opened are shared, in `engine_flags`. Commands write to a
//! buffered stdout passed in, and report failure as a [`failure::Failure`], which `main` turns
//! into the exit status (0 ok, 1 negative answer, 2 error).

mod args;
mod commands;
mod engine_flags;
mod escape;
mod failure;
mod hex;
mod units;

use std::io::{BufWriter, IsTerminal, Write};
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// mimalloc instead of the system allocator. Compaction allocates and frees a buffer per
/// block, often on different threads (a block is read on one, merged on another, written on a
/// third); glibc's arenas then contend on their locks. RocksDB links jemalloc for the same
/// reason. It is built without transparent huge pages (the workspace's `no_thp`): mimalloc
/// returns freed memory to the kernel after a short delay, and with huge pages every fault on
/// it zeroed 2 MiB, a tenth of a compaction worker's CPU.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use crate::args::Cli;

fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // A second initialisation can only fail if something else installed a subscriber first;
    // logging then goes there, which is fine.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn main() -> ExitCode {
    // Usage errors exit with status 2 and --help/--version with 0, from clap.
    let cli = Cli::parse();
    init_logging();
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let outcome = commands::run(cli.command, &mut out).and_then(|()| Ok(out.flush()?));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // Whatever was printed before the failure still reaches the reader.
            let _ = out.flush();
            failure.report()
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::failure::Failure;

    #[test]
    fn broken_pipe_is_a_quiet_success() {
        let e = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(matches!(Failure::from(e), Failure::BrokenPipe));
        let e = std::io::Error::other("disk full");
        assert!(matches!(Failure::from(e), Failure::Error(m) if m.contains("disk full")));
    }
}
