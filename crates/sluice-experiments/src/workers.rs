//! Worker processes for the experiments that offload (copro, mstore) and for `sluice stress
//! --workers`: a secret file, starting `sluice worker` processes on 127.0.0.1 with a free port
//! each, and stopping them.
//!
//! A worker is started as `PROGRAM LEADING_ARGS.. --listen 127.0.0.1:0 --root DIR..
//! --secret-file F --mode M --throttle T [--cpus C] [--object-store URL]` and prints exactly
//! one line on stdout,
//! `sluice worker listening on <addr>`, once it serves; the address is read from that line.
//! Its stderr (its log) goes to a file, quoted in the error if it fails to start. Afterwards a
//! thread keeps draining its stdout, so the worker never blocks on a full pipe.
//!
//! Stopping is SIGTERM (the worker drains and exits 0), then SIGKILL if it has not exited
//! after [`STOP_TIMEOUT`]. [`WorkerSet`] stops every worker it still holds when dropped, so an
//! error anywhere in a run leaves no process behind.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::Rng;
use sluice::{Error, IoContext, Result};
use sluice_offload::Secret;

/// The line a worker prints once it serves, before its address.
pub const READY_PREFIX: &str = "sluice worker listening on ";
/// How long a worker may take to print its ready line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a worker may take to exit after SIGTERM before it is killed.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters of a generated secret (alphanumeric: about 190 bits).
const SECRET_CHARS: usize = 32;
/// Lines of a failed worker's log quoted in the error.
const LOG_TAIL_LINES: usize = 20;

/// How to run a worker: `program`, then `leading_args` (`sluice`'s `worker` subcommand),
/// then the worker's flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerProgram {
    pub program: PathBuf,
    pub leading_args: Vec<OsString>,
}

impl WorkerProgram {
    /// `<sluice> worker`: the `sluice` executable at `sluice`.
    pub fn sluice(sluice: impl Into<PathBuf>) -> WorkerProgram {
        WorkerProgram {
            program: sluice.into(),
            leading_args: vec!["worker".into()],
        }
    }
}

/// Writes a fresh random secret to `path` (which must not exist), readable by the owner only
/// (mode 0600, set at creation so it is never readable by others), and returns it.
pub fn write_secret_file(path: &Path) -> Result<Secret> {
    let text: String = rand::rngs::OsRng
        .sample_iter(&rand::distributions::Alphanumeric)
        .take(SECRET_CHARS)
        .map(char::from)
        .collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_path(path)?;
    file.write_all(text.as_bytes()).with_path(path)?;
    file.sync_all().with_path(path)?;
    Secret::new(&text).map_err(Error::InvalidArgument)
}

/// What every worker of a run shares.
#[derive(Clone, Debug)]
pub struct WorkerSettings<'a> {
    pub program: &'a WorkerProgram,
    pub secret_file: &'a Path,
    /// `--throttle`: the emulated device CPU is this many times slower.
    pub throttle: f64,
    /// Where the workers' logs go (`worker-<i>.log`).
    pub log_dir: &'a Path,
    /// `--object-store URL`: the workers read inputs from and write outputs to this bucket
    /// (credentials from the `AWS_*` variables they inherit), not the host's directories.
    pub object_store: Option<&'a str>,
    /// `--mode`: the executor the workers run (`auto`: their decision component picks).
    pub mode: &'a str,
}

/// What is particular to one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerSpec {
    /// The directories it serves (`--root`, in order; the first is where its outputs go by
    /// default).
    pub roots: Vec<PathBuf>,
    /// The core it is pinned to (`--cpus`), if any.
    pub cpu: Option<usize>,
}

impl WorkerSpec {
    /// One spec per core of `cpus`, every worker serving `root` alone.
    pub fn serving(root: &Path, cpus: &[Option<usize>]) -> Vec<WorkerSpec> {
        cpus.iter()
            .map(|&cpu| WorkerSpec {
                roots: vec![root.to_path_buf()],
                cpu,
            })
            .collect()
    }
}

/// One running worker.
#[derive(Debug)]
struct Worker {
    child: Child,
    address: String,
    log: PathBuf,
}

/// Running workers, stopped when dropped.
#[derive(Debug)]
pub struct WorkerSet {
    workers: Vec<Worker>,
    /// How long a worker may take to exit after SIGTERM ([`STOP_TIMEOUT`]).
    stop_timeout: Duration,
}

impl WorkerSet {
    /// Starts one worker per spec, waiting for each to serve. On an error the workers
    /// already started are stopped.
    pub fn start(settings: &WorkerSettings<'_>, specs: &[WorkerSpec]) -> Result<WorkerSet> {
        let mut set = WorkerSet {
            workers: Vec::new(),
            stop_timeout: STOP_TIMEOUT,
        };
        for (i, spec) in specs.iter().enumerate() {
            set.workers.push(start_one(settings, i, spec)?);
        }
        Ok(set)
    }

    /// The workers' addresses, `127.0.0.1:<port>`, in start order.
    pub fn addresses(&self) -> Vec<String> {
        self.workers.iter().map(|w| w.address.clone()).collect()
    }

    /// Each worker's CPU seconds so far (user + system, from `/proc/<pid>/stat`); `None`
    /// where unreadable.
    pub fn cpu_seconds(&self) -> Vec<Option<f64>> {
        self.workers
            .iter()
            .map(|w| {
                let stat = std::fs::read_to_string(format!("/proc/{}/stat", w.child.id())).ok()?;
                let t = sluice_bench::resources::parse_stat_cpu(&stat)?;
                Some((t.user + t.system).as_secs_f64())
            })
            .collect()
    }

    /// Stops every worker; the error names a worker that had to be killed or exited with a
    /// failure (all are stopped either way).
    pub fn stop(mut self) -> Result<()> {
        let mut first_error = None;
        for w in std::mem::take(&mut self.workers) {
            if let Err(e) = stop_one(w, self.stop_timeout) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for WorkerSet {
    fn drop(&mut self) {
        for w in std::mem::take(&mut self.workers) {
            if let Err(e) = stop_one(w, self.stop_timeout) {
                tracing::warn!(error = %e, "stopping a worker");
            }
        }
    }
}

fn start_one(settings: &WorkerSettings<'_>, index: usize, spec: &WorkerSpec) -> Result<Worker> {
    let log = settings.log_dir.join(format!("worker-{index}.log"));
    let log_file = std::fs::File::create(&log).with_path(&log)?;
    let program = &settings.program.program;
    let mut command = Command::new(program);
    command
        .args(&settings.program.leading_args)
        .arg("--listen")
        .arg("127.0.0.1:0");
    for root in &spec.roots {
        command.arg("--root").arg(root);
    }
    command
        .arg("--secret-file")
        .arg(settings.secret_file)
        .args(["--mode", settings.mode, "--throttle"])
        .arg(settings.throttle.to_string());
    if let Some(cpu) = spec.cpu {
        command.arg("--cpus").arg(cpu.to_string());
    }
    if let Some(url) = settings.object_store {
        command.arg("--object-store").arg(url);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .spawn()
        .with_path(program)?;
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(Error::InvalidArgument(
            "worker stdout was not captured".into(),
        ));
    };
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name(format!("worker-{index}-stdout"))
        .spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = tx.send(lines.next());
            // Keep draining until the worker exits, so it never blocks on a full pipe.
            for _ in lines.by_ref() {}
        })
        .map_err(|e| Error::io("<worker stdout thread>", e))?;
    let failed = |child: &mut Child, reason: String| {
        let _ = child.kill();
        let _ = child.wait();
        Error::InvalidArgument(format!(
            "worker {index} ({}) {reason}; its log {}:\n{}",
            program.display(),
            log.display(),
            log_tail(&log)
        ))
    };
    let line = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Some(Ok(line))) => line,
        Ok(Some(Err(e))) => return Err(failed(&mut child, format!("stdout unreadable: {e}"))),
        Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            return Err(failed(&mut child, "exited before serving".into()));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            return Err(failed(
                &mut child,
                format!("printed nothing in {START_TIMEOUT:?}"),
            ));
        }
    };
    match parse_ready_line(&line) {
        Some(address) => Ok(Worker {
            child,
            address,
            log,
        }),
        None => Err(failed(
            &mut child,
            format!("printed {line:?}, not {READY_PREFIX:?}<addr>"),
        )),
    }
}

/// The address in a worker's ready line.
pub fn parse_ready_line(line: &str) -> Option<String> {
    let address = line.trim().strip_prefix(READY_PREFIX)?.trim();
    (!address.is_empty() && !address.contains(char::is_whitespace)).then(|| address.to_string())
}

fn stop_one(mut w: Worker, timeout: Duration) -> Result<()> {
    let context = |what: String| {
        Error::InvalidArgument(format!(
            "worker {} ({}): {what}",
            w.address,
            w.log.display()
        ))
    };
    if let Ok(Some(status)) = w.child.try_wait() {
        return Err(context(format!("had already exited ({status})")));
    }
    let pid = i32::try_from(w.child.id())
        .map_err(|_| context(format!("pid {} out of range", w.child.id())))?;
    if let Err(e) = kill(Pid::from_raw(pid), Signal::SIGTERM) {
        tracing::warn!(worker = %w.address, error = %e, "SIGTERM failed; killing");
    }
    let deadline = Instant::now() + timeout;
    loop {
        match w.child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(context(format!("exited with {status} on SIGTERM"))),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) | Err(_) => {
                let _ = w.child.kill();
                let _ = w.child.wait();
                return Err(context(format!(
                    "still running {timeout:?} after SIGTERM; killed"
                )));
            }
        }
    }
}

/// The last lines of a log file, or why it could not be read.
fn log_tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(LOG_TAIL_LINES);
            lines.get(from..).unwrap_or_default().join("\n")
        }
        Err(e) => format!("(unreadable: {e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in worker: a shell script given the worker's flags as `$@`.
    fn script(body: &str) -> WorkerProgram {
        WorkerProgram {
            program: "/bin/sh".into(),
            leading_args: vec!["-c".into(), body.into(), "worker".into()],
        }
    }

    fn settings<'a>(program: &'a WorkerProgram, dir: &'a Path) -> WorkerSettings<'a> {
        WorkerSettings {
            program,
            secret_file: dir,
            throttle: 2.0,
            log_dir: dir,
            object_store: None,
            mode: "auto",
        }
    }

    fn one(root: &Path) -> Vec<WorkerSpec> {
        WorkerSpec::serving(root, &[None])
    }

    #[test]
    fn ready_lines_parse() {
        assert_eq!(
            parse_ready_line("sluice worker listening on 127.0.0.1:4321\n").as_deref(),
            Some("127.0.0.1:4321")
        );
        for bad in [
            "",
            "listening on 1:2",
            "sluice worker listening on ",
            "sluice worker listening on a b",
        ] {
            assert_eq!(parse_ready_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn secret_files_are_private_and_fresh() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        let secret = write_secret_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Secret::from_file(&path).unwrap(), secret);
        // Never overwrites: a second secret goes to a new file.
        assert!(write_secret_file(&path).is_err());
        let other = write_secret_file(&dir.path().join("other")).unwrap();
        assert_ne!(other, secret);
    }

    #[test]
    fn workers_get_the_flags_and_stop_on_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        // Writes its flags to a file, announces a port, then waits for SIGTERM.
        let program = script(
            "echo \"$@\" > \"$4/args-$$\"; trap 'exit 0' TERM; \
             echo 'sluice worker listening on 127.0.0.1:9'; while true; do sleep 0.05; done",
        );
        let specs = [
            WorkerSpec {
                roots: vec![dir.path().into(), "/other".into()],
                cpu: Some(1),
            },
            WorkerSpec {
                roots: vec![dir.path().into()],
                cpu: None,
            },
        ];
        let set = WorkerSet::start(&settings(&program, dir.path()), &specs).unwrap();
        assert_eq!(set.addresses(), vec!["127.0.0.1:9", "127.0.0.1:9"]);
        assert!(set.cpu_seconds().iter().all(|c| c.is_some()));
        set.stop().unwrap();
        let mut args: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("args-")
            })
            .map(|p| std::fs::read_to_string(p).unwrap().trim().to_string())
            .collect();
        args.sort();
        let d = dir.path().display();
        let tail = format!("--secret-file {d} --mode auto --throttle 2");
        assert_eq!(
            args,
            vec![
                format!("--listen 127.0.0.1:0 --root {d} --root /other {tail} --cpus 1"),
                format!("--listen 127.0.0.1:0 --root {d} {tail}"),
            ]
        );
    }

    #[test]
    fn a_worker_ignoring_sigterm_is_killed_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let program = script(
            "trap '' TERM; echo 'sluice worker listening on 127.0.0.1:9'; \
             while true; do sleep 0.05; done",
        );
        let mut set = WorkerSet::start(&settings(&program, dir.path()), &one(dir.path())).unwrap();
        set.stop_timeout = Duration::from_millis(300);
        let start = Instant::now();
        let err = set.stop().unwrap_err().to_string();
        assert!(err.contains("killed"), "{err}");
        assert!(start.elapsed() >= Duration::from_millis(300));
    }

    #[test]
    fn start_failures_quote_the_log_and_leave_no_process() {
        let dir = tempfile::tempdir().unwrap();
        let program = script("echo 'bad flag --frobnicate' >&2; exit 2");
        let err = WorkerSet::start(&settings(&program, dir.path()), &one(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("exited before serving"), "{err}");
        assert!(err.contains("bad flag --frobnicate"), "{err}");
        let program = script("echo 'hello'; sleep 5");
        let err = WorkerSet::start(&settings(&program, dir.path()), &one(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"hello\""), "{err}");
        let missing = WorkerProgram::sluice(dir.path().join("no-such-sluice"));
        assert!(WorkerSet::start(&settings(&missing, dir.path()), &one(dir.path())).is_err());
    }

    #[test]
    fn dropping_the_set_stops_its_workers() {
        let dir = tempfile::tempdir().unwrap();
        let program = script(
            "echo $$ > \"$4/pid\"; trap 'exit 0' TERM; \
             echo 'sluice worker listening on 127.0.0.1:9'; while true; do sleep 0.05; done",
        );
        let set = WorkerSet::start(&settings(&program, dir.path()), &one(dir.path())).unwrap();
        let pid: i32 = std::fs::read_to_string(dir.path().join("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        drop(set);
        // Reaped by the drop: the pid no longer names a process of ours.
        assert!(kill(Pid::from_raw(pid), None).is_err());
    }
}
