//! Blackbox crash testing: the workload runs in a child process (this binary, `stress
//! --child`) that is SIGKILLed at a random moment; the parent then reopens the database and
//! verifies that every acknowledged write survived. Also starts the offload workers, which
//! outlive the children they serve.
//!
//! The child reports on stdout, one line at a time: `progress <operations> <verified>
//! <offloaded compactions>` every
//! [`PROGRESS_EVERY`], and `failure: <message>` (then it exits with status 1) when a read
//! returned something the expected state does not allow. Its stderr goes to
//! `<db>.stress/child.log`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::Rng;
use rand::SeedableRng;
use rand::rngs::StdRng;
use sluice_experiments::workers::{
    WorkerProgram, WorkerSet, WorkerSettings, WorkerSpec, write_secret_file,
};
use sluice_offload::OffloadOptions;

use super::engine::{Engine, open_for_workload};
use super::expected::{ExpectedFile, slot_name};
use super::tally::Tally;
use super::workload::Workload;
use super::{Run, StressArgs, offload_options, rounds};
use crate::failure::{CmdResult, Failure};

/// How often the child reports its counts.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);
/// The child stops by itself this long after the run's end, should nobody kill it.
const CHILD_GRACE: Duration = Duration::from_secs(30);

/// Starts `n` workers serving the database's table directories (none for `n` = 0), with a
/// fresh secret in `work`.
pub fn start_workers(
    n: u32,
    engine: &Engine,
    work: &Path,
) -> Result<Option<(WorkerSet, OffloadOptions)>, Failure> {
    if n == 0 {
        return Ok(None);
    }
    let exe = std::env::current_exe()
        .map_err(|e| Failure::Error(format!("finding this executable: {e}")))?;
    let secret = work.join("worker-secret");
    let _ = std::fs::remove_file(&secret);
    write_secret_file(&secret)?;
    let program = WorkerProgram::sluice(exe);
    let settings = WorkerSettings {
        program: &program,
        secret_file: &secret,
        throttle: 1.0,
        log_dir: work,
        object_store: None,
        mode: "auto",
    };
    let specs: Vec<WorkerSpec> = (0..n)
        .map(|_| WorkerSpec {
            roots: engine.table_dirs(),
            cpu: None,
        })
        .collect();
    let set = WorkerSet::start(&settings, &specs)?;
    let options = offload_options(set.addresses(), &secret)?;
    Ok(Some((set, options)))
}

/// One kill round: start a child, SIGKILL it after 0.5x-1.5x `every` seconds, reopen and
/// verify.
pub fn round(run: &Run<'_>, round: u64, rng: &mut StdRng, every: f64, workers: Option<&WorkerSet>) {
    let kill_after = Duration::from_secs_f64(every * rng.gen_range(0.5..1.5)).min(run.time_left());
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return run.fail(round, format!("finding this executable: {e}")),
    };
    let log_path = run.paths.work.join("child.log");
    let log = match std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
    {
        Ok(log) => log,
        Err(e) => return run.fail(round, format!("{}: {e}", log_path.display())),
    };
    let args = run.args;
    let mut command = Command::new(exe);
    command
        .arg("stress")
        .arg("--child")
        .arg("--db")
        .arg(&run.paths.db)
        .arg("--seed")
        .arg(rng.r#gen::<u64>().to_string())
        .arg("--duration")
        .arg((run.time_left() + CHILD_GRACE).as_secs_f64().to_string())
        .arg("--threads")
        .arg(args.threads.to_string())
        .arg("--keys")
        .arg(args.keys.to_string())
        .arg("--sync-percent")
        .arg(args.sync_percent.to_string())
        .arg("--compaction-mode")
        .arg(run.mode(round).to_string())
        .arg("--partitions")
        .arg(args.partitions.to_string());
    if let Some(url) = &run.engine.object_url {
        command.arg("--object-store").arg(url);
    }
    if let Some(w) = workers {
        for addr in w.addresses() {
            command.arg("--worker-addr").arg(addr);
        }
        command
            .arg("--worker-secret-file")
            .arg(run.paths.work.join("worker-secret"));
    }
    let spawned = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return run.fail(round, format!("starting the child: {e}")),
    };
    let Some(stdout) = child.stdout.take() else {
        let _ = child.kill();
        let _ = child.wait();
        return run.fail(round, "the child's stdout was not captured");
    };
    // Lines are read on a thread so the kill lands at a wall-clock moment, not between lines.
    let reader = std::thread::spawn(move || {
        let (mut progress, mut failures) = ([0u64; 3], Vec::new());
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(counts) = line.strip_prefix("progress ") {
                let counts: Vec<u64> = counts.split(' ').filter_map(|n| n.parse().ok()).collect();
                if let Ok(counts) = counts.try_into() {
                    progress = counts;
                }
            } else if let Some(message) = line.strip_prefix("failure: ") {
                failures.push(message.to_string());
            }
        }
        (progress, failures)
    });
    let start = Instant::now();
    let mut exited = None;
    while start.elapsed() < kill_after {
        match child.try_wait() {
            Ok(Some(status)) => {
                exited = Some(status);
                break;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => {
                run.fail(round, format!("waiting for the child: {e}"));
                break;
            }
        }
    }
    if exited.is_none() {
        let _ = child.kill(); // SIGKILL
        match child.wait() {
            Ok(status) => {
                // A child that exited by itself just before the kill is not a kill.
                if status.code().is_none() {
                    run.tally.kills.fetch_add(1, Ordering::Relaxed);
                } else {
                    exited = Some(status);
                }
            }
            Err(e) => run.fail(round, format!("reaping the child: {e}")),
        }
    }
    let ([ops, verified, offloaded], failures) = reader.join().unwrap_or_default();
    run.tally.ops(ops);
    run.tally.verified(verified);
    run.tally.offloaded.fetch_add(offloaded, Ordering::Relaxed);
    for f in &failures {
        run.fail(round, format!("child ({} executor): {f}", run.mode(round)));
    }
    if let Some(status) = exited
        && !status.success()
        && failures.is_empty()
    {
        run.fail(
            round,
            format!(
                "the child exited with {status} before the kill; see {}",
                log_path.display()
            ),
        );
    }
    rounds::verify(run, round, "reopen after SIGKILL");
}

/// The child: runs the workload until killed (or until `--duration` is over, then closes
/// the database), reporting on stdout.
pub fn child(args: &StressArgs, out: &mut dyn Write) -> CmdResult {
    let seed = args.seed.unwrap_or_default();
    let mut rng = StdRng::seed_from_u64(seed);
    let db = args
        .db
        .clone()
        .ok_or_else(|| Failure::Error("--child needs --db".into()))?;
    let mut engine = Engine {
        object_url: args.object_store.clone(),
        object_fs: super::object_fs(args.object_store.as_deref(), &db, "object-cache-child")?,
        db,
        keys: args.keys,
        owners: args.partitions,
        offload: None,
    };
    if let Some(secret) = &args.worker_secret_file {
        engine.offload = Some(offload_options(args.worker_addrs.clone(), secret)?);
    }
    let paths = super::Paths::beside(&engine.db);
    let expected =
        ExpectedFile::open_or_create(&paths.expected, args.keys).map_err(Failure::Error)?;
    let mode = args.compaction_mode.0.first().copied().unwrap_or_default();
    let report = |out: &mut dyn Write, message: String| -> CmdResult {
        writeln!(out, "failure: {message}")?;
        out.flush()?;
        Err(Failure::Negative(message))
    };
    let options = engine.workload_options(mode, &mut rng);
    let (db, keyspaces) = match open_for_workload(&engine.db, options) {
        Ok(opened) => opened,
        Err(e) => return report(out, format!("open: {e}")),
    };
    let slots = expected.load().map_err(Failure::Error)?;
    if let Some(s) = slots.iter().position(|s| s.pending.is_some()) {
        return report(
            out,
            format!(
                "{} is pending at start: the parent did not settle it",
                slot_name(s, args.keys as usize)
            ),
        );
    }
    let (tally, stop) = (Tally::default(), AtomicBool::new(false));
    let workload = Workload {
        db: &db,
        keyspaces: &keyspaces,
        expected: &expected,
        tally: &tally,
        threads: args.threads,
        sync_percent: args.sync_percent,
        owners: args.partitions,
        faults: false,
        stop: &stop,
    };
    let deadline = Instant::now() + Duration::from_secs_f64(args.duration);
    let progress = |out: &mut dyn Write| -> std::io::Result<()> {
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let offloaded = db.offload_metrics().map_or(0, |m| m.jobs);
        writeln!(
            out,
            "progress {} {} {offloaded}",
            load(&tally.operations),
            load(&tally.verified)
        )?;
        out.flush()
    };
    let outcome = std::thread::scope(|s| {
        let threads = s.spawn(|| workload.run(&slots, rng.r#gen(), deadline));
        while !threads.is_finished() {
            std::thread::sleep(PROGRESS_EVERY);
            progress(out)?;
            if let Some(message) = tally.failure_messages().first() {
                // Stop where it went wrong: no close, as if killed.
                writeln!(out, "failure: {message}")?;
                out.flush()?;
                std::process::exit(1);
            }
        }
        Ok::<(), std::io::Error>(())
    });
    outcome?;
    progress(out)?;
    // A keyspace handle keeps the database (and its lock) open until it is dropped.
    drop(keyspaces);
    db.close()?;
    Ok(())
}
