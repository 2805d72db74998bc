//! `sluice worker` / `sluice-worker`: the command-line arguments and the process's life.
//!
//! [`run`], in order: read the secret; pin the process to `--cpus` *before any thread exists*
//! (`sched_setaffinity` on pid 0 pins the calling thread, and every thread created afterwards,
//! the runtime's and the executors', inherits its mask); build the runtime; install the SIGTERM
//! and SIGINT handlers; bind; print exactly one line `sluice worker listening on <addr>` to
//! stdout (a parent reads the port from it when it asked for port 0); serve until a signal;
//! drain (`server.rs`); return `Ok(())`, so the process exits 0.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;
use sluice_exec::CompactionMode;
use sluice_rpc::auth::Secret;
use tokio::signal::unix::{SignalKind, signal};

use crate::config::{WorkerConfig, default_threads};
use crate::server::{CANCEL_TIMEOUT, serve};

/// The arguments of `sluice worker`.
#[derive(clap::Args, Clone, Debug)]
pub struct WorkerArgs {
    /// Address to listen on; port 0 picks a free port (the line printed at start names it).
    #[arg(long, default_value = "127.0.0.1:7419")]
    pub listen: SocketAddr,
    /// A directory the worker may read inputs from and write outputs to, as `DIR` or
    /// `NAME=DIR` (repeatable: a database's data directories, outputs dealt over them in
    /// order; with names, the directories of several databases, each task served only from
    /// the roots of the database it names; unnamed roots serve hosts that name none).
    #[arg(long = "root", required = true, value_name = "[NAME=]DIR")]
    pub roots: Vec<crate::config::Root>,
    /// File holding the secret every call must carry (at least 16 printable characters).
    #[arg(long)]
    pub secret_file: PathBuf,
    /// Tasks run at once [default: the cores this process may use].
    #[arg(long)]
    pub threads: Option<usize>,
    /// The executor for tasks that let the worker choose; `auto` asks the decision component
    /// (CoPro+) before each task.
    #[arg(long, value_enum, default_value_t = WorkerMode::Auto)]
    pub mode: WorkerMode,
    /// Pin the worker to these CPUs: `0`, `0,1`, `0-3`, `0-1,6`.
    #[arg(long)]
    pub cpus: Option<CpuList>,
    /// Emulate a device CPU this many times slower: after each task sleep (F - 1) x its CPU
    /// time, the sleeps of tasks running at once queued one after another. At least 1.0.
    #[arg(long, default_value_t = 1.0)]
    pub throttle: f64,
    /// Values larger than this many bytes count as large in the decision [default: 16384].
    #[arg(long)]
    pub large_value_bytes: Option<u64>,
    /// Run sequentially when the decision's f reaches this [default: 0.7].
    #[arg(long)]
    pub decision_threshold: Option<f64>,
    /// Read inputs and write outputs as objects under this URL, as the host keeps its tables
    /// (`s3://bucket/prefix` with endpoint, region and credentials from the `AWS_*`
    /// environment, or `file:///dir`): the worker then shares nothing with the host but the
    /// bucket, and its one `--root` is a local directory of its own.
    #[arg(long, value_name = "URL")]
    pub object_store: Option<String>,
    /// A local directory caching whole objects of `--object-store` (one process at a time).
    #[arg(long, value_name = "DIR", requires = "object_store")]
    pub object_cache_dir: Option<PathBuf>,
    /// The most bytes `--object-cache-dir` holds.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 30, requires = "object_cache_dir")]
    pub object_cache_bytes: u64,
    /// Test builds only: misreport every task this way (see `lies.rs`).
    #[cfg(feature = "test-lies")]
    #[arg(long, hide = true)]
    pub lie: Option<crate::lies::Lie>,
}

/// `--mode`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerMode {
    /// Decide per task.
    Auto,
    /// SCP.
    Sequential,
    /// PCP.
    Pipelined,
    /// C-PPCP.
    Parallel,
    /// The in-storage compaction paper's streaming engine.
    Streaming,
}

impl WorkerMode {
    /// The fixed executor, or `None` for "decide".
    pub fn executor(self) -> Option<CompactionMode> {
        match self {
            WorkerMode::Auto => None,
            WorkerMode::Sequential => Some(CompactionMode::Sequential),
            WorkerMode::Pipelined => Some(CompactionMode::Pipelined),
            WorkerMode::Parallel => Some(CompactionMode::Parallel),
            WorkerMode::Streaming => Some(CompactionMode::Streaming),
        }
    }
}

/// A set of CPU numbers, ascending and without repeats, each below [`CpuList::MAX_CPUS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl CpuList {
    /// CPU numbers are below this (the kernel's `CPU_SETSIZE`).
    pub const MAX_CPUS: usize = 1024;
}

impl FromStr for CpuList {
    type Err = String;

    /// Comma-separated CPUs or inclusive ranges `a-b` with `a <= b`.
    fn from_str(s: &str) -> Result<Self, String> {
        let cpu = |t: &str| -> Result<usize, String> {
            let n: usize = t
                .trim()
                .parse()
                .map_err(|_| format!("{t:?} in the CPU list {s:?} is not a CPU number"))?;
            if n >= Self::MAX_CPUS {
                return Err(format!("CPU {n} is beyond {}", Self::MAX_CPUS - 1));
            }
            Ok(n)
        };
        let mut cpus = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (cpu(a)?, cpu(b)?);
                    if a > b {
                        return Err(format!("CPU range {part:?} runs backwards"));
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(cpu(part)?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

/// Pins the calling thread, and so every thread it creates afterwards, to `cpus`.
fn pin_to(cpus: &CpuList) -> Result<(), String> {
    let mut set = CpuSet::new();
    for &c in &cpus.0 {
        set.set(c)
            .map_err(|e| format!("cannot pin to CPU {c}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| format!("cannot pin the worker to CPUs {:?}: {e}", cpus.0))
}

/// The worker's configuration from `args` (after any pinning: the default thread count is the
/// cores the process may then use).
fn config(args: &WorkerArgs, secret: Secret) -> WorkerConfig {
    let mut config = WorkerConfig::new(args.listen, args.roots.clone(), secret);
    config.threads = args.threads.unwrap_or_else(default_threads);
    config.mode = args.mode.executor();
    config.throttle = args.throttle;
    config.object_store = args
        .object_store
        .as_ref()
        .map(|url| crate::config::ObjectStoreConfig {
            url: url.clone(),
            cache: args
                .object_cache_dir
                .clone()
                .map(|dir| (dir, args.object_cache_bytes)),
        });
    if let Some(b) = args.large_value_bytes {
        config.decision.large_value_bytes = b;
    }
    if let Some(t) = args.decision_threshold {
        config.decision.threshold = t;
    }
    config
}

/// Runs a worker until SIGTERM or SIGINT (see the module comment). Must be called before the
/// process has created any thread if `--cpus` is given, or those threads stay unpinned.
pub fn run(args: WorkerArgs) -> Result<(), String> {
    let secret = Secret::from_file(&args.secret_file)?;
    if let Some(cpus) = &args.cpus {
        pin_to(cpus)?;
    }
    let config = config(&args, secret);
    config.validate()?;
    #[cfg(feature = "test-lies")]
    if let Some(lie) = args.lie {
        crate::lies::set(lie);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sluice-worker")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the worker's runtime: {e}"))?;
    let result = runtime.block_on(async {
        // Handlers first: a signal sent as soon as the address line is read is not lost.
        let mut term = signal(SignalKind::terminate()).map_err(|e| format!("SIGTERM: {e}"))?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| format!("SIGINT: {e}"))?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| format!("cannot listen on {}: {e}", config.listen))?;
        let addr = listener
            .local_addr()
            .map_err(|e| format!("cannot read the listening address: {e}"))?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "sluice worker listening on {addr}")
                .and_then(|()| out.flush())
                .map_err(|e| format!("cannot write to stdout: {e}"))?;
        }
        if let Some(cpus) = &args.cpus {
            tracing::info!(cpus = ?cpus.0, "pinned");
        }
        let shutdown = async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received"),
                _ = int.recv() => tracing::info!("SIGINT received"),
            }
        };
        serve(config, listener, shutdown).await
    });
    // Jobs cancelled by the drain stop at their next block; give their threads that long.
    runtime.shutdown_timeout(CANCEL_TIMEOUT);
    result
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: WorkerArgs,
    }

    #[test]
    fn cpu_lists() {
        let parse = |s: &str| s.parse::<CpuList>().map(|c| c.0);
        assert_eq!(parse("0").unwrap(), vec![0]);
        assert_eq!(parse("0,1").unwrap(), vec![0, 1]);
        assert_eq!(parse("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse("5,0-2,1").unwrap(), vec![0, 1, 2, 5]);
        for bad in [
            "",
            "a",
            "1-",
            "-1",
            "3-1",
            "1,,2",
            "1024",
            "0-99999999999999999999",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn arguments_and_defaults() {
        let cli = Cli::try_parse_from([
            "w",
            "--root",
            "/a",
            "--root",
            "/b",
            "--secret-file",
            "/s",
            "--mode",
            "pipelined",
            "--cpus",
            "0-1",
            "--throttle",
            "2.5",
            "--large-value-bytes",
            "1000",
            "--decision-threshold",
            "0.5",
            "--threads",
            "3",
        ])
        .unwrap();
        let a = cli.args;
        assert_eq!(
            a.roots,
            vec![
                crate::config::Root::unnamed("/a"),
                crate::config::Root::unnamed("/b")
            ]
        );
        assert_eq!(a.listen, "127.0.0.1:7419".parse().unwrap());
        assert_eq!(a.cpus, Some(CpuList(vec![0, 1])));
        let c = config(&a, Secret::new("0123456789abcdef0123").unwrap());
        assert_eq!(c.mode, Some(CompactionMode::Pipelined));
        assert_eq!((c.threads, c.throttle), (3, 2.5));
        assert_eq!(c.decision.large_value_bytes, 1000);
        assert_eq!(c.decision.threshold, 0.5);

        let d = Cli::try_parse_from(["w", "--root", "/a", "--secret-file", "/s"]).unwrap();
        assert_eq!(d.args.mode, WorkerMode::Auto);
        assert_eq!(d.args.mode.executor(), None);
        assert!(Cli::try_parse_from(["w", "--secret-file", "/s"]).is_err());
        assert!(Cli::try_parse_from(["w", "--root", "/a"]).is_err());
        assert!(
            Cli::try_parse_from(["w", "--root", "/a", "--secret-file", "/s", "--mode", "x"])
                .is_err()
        );
    }

    proptest! {
        /// Any text either parses to an ascending list of CPUs in range, or is refused.
        #[test]
        fn random_cpu_lists_never_panic(s in "[0-9,\\- a]{0,24}") {
            if let Ok(CpuList(cpus)) = s.parse::<CpuList>() {
                prop_assert!(cpus.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(cpus.iter().all(|&c| c < CpuList::MAX_CPUS));
            }
        }
    }
}
