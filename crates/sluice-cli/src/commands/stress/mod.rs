//! `sluice stress`: the engine's db_stress and db_crashtest in one command.
//!
//! Threads run random puts, deletes, batches, gets, iterators, snapshot reads, flushes and
//! manual compactions ([`workload`]) over the default keyspace and two more (batches span
//! them), while the expected state of every keyspace is kept in a file beside the database
//! ([`expected`]), so that any later process can verify it ([`verify`]). The run is cut into
//! rounds, each with its own compaction executor and engine sizes ([`engine`]):
//!
//! - by default a round runs the workload in this process, closes the database, reopens it
//!   and verifies every key ([`rounds`]);
//! - with `--kill-every SECS` the workload runs in a child process (this same binary with
//!   the hidden `--child`), SIGKILLed after 0.5x-1.5x SECS; the database is then reopened and
//!   every acknowledged write must be there ([`kill`]);
//! - with `--corrupt` each round also damages the closed database's files and checks that
//!   the damage is reported or harmless, never hidden ([`damage`]), and every third round
//!   injects I/O faults into a running database ([`faults`]).
//!
//! The seed is printed first, so a failing run can be replayed with `--seed` (the same
//! rounds, executors, kill times and damage; thread interleavings differ). The database and
//! the files beside it are kept when a run fails, and their path printed. Output ends with
//! one summary line ([`tally`]); the exit status is 1 if anything failed.

mod check;
mod damage;
mod engine;
mod expected;
mod faults;
mod kill;
mod rounds;
mod tally;
mod value;
mod verify;
mod workload;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice::CompactionMode;
use sluice_offload::OffloadOptions;

use crate::failure::{CmdResult, Failure};
use engine::Engine;
use expected::ExpectedFile;
use tally::Tally;

/// `sluice stress`; see `sluice stress --help`.
#[derive(Debug, Args)]
pub struct StressArgs {
    /// Database directory [default: a fresh temporary directory, removed unless the run
    /// fails]. The expected state goes beside it, in DIR.expected; an existing database with
    /// its expected state is verified first and then stressed further.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// How long to run, in seconds.
    #[arg(long, value_name = "SECS", default_value = "60")]
    pub duration: f64,
    /// Seed of every random choice [default: random; always printed].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Run the workload in a child process and SIGKILL it after about SECS (0.5x to 1.5x),
    /// again and again, verifying the database after each kill.
    #[arg(long, value_name = "SECS")]
    pub kill_every: Option<f64>,
    /// Between rounds, damage the database's files (WAL, MANIFEST, tables) and check that
    /// the damage is reported, never hidden; every third round, inject I/O faults.
    #[arg(long)]
    pub corrupt: bool,
    /// Workload threads.
    #[arg(long, value_name = "N", default_value = "4")]
    pub threads: u32,
    /// Keys per keyspace (the key space; each key is owned by one thread).
    #[arg(long, value_name = "N", default_value = "20000")]
    pub keys: u32,
    /// Percent of writes that sync the WAL.
    #[arg(long, value_name = "P", default_value = "10")]
    pub sync_percent: u32,
    /// Compaction executor: all (a different one each round), sequential, pipelined,
    /// parallel, streaming or auto.
    #[arg(long, value_name = "MODE", default_value = "all", value_parser = parse_modes)]
    pub compaction_mode: Modes,
    /// Offload compactions to N `sluice worker` processes on 127.0.0.1, started and stopped
    /// by this command.
    #[arg(long, value_name = "N", default_value = "0")]
    pub workers: u32,
    /// Partitioned mode with N owner directories under the database directory.
    #[arg(long, value_name = "N", default_value = "0")]
    pub partitions: u32,
    /// Keep the tables and blob files as objects under this URL (`s3://bucket/prefix` with
    /// the `AWS_*` environment, or `file:///dir`), the WAL and MANIFEST in the database
    /// directory: kills then land between uploads and MANIFEST writes.
    #[arg(long, value_name = "URL", conflicts_with_all = ["corrupt", "workers"])]
    pub object_store: Option<String>,
    /// Internal: run the workload until killed (the parent of `--kill-every`).
    #[arg(long, hide = true)]
    pub child: bool,
    /// Internal: a worker address for the child.
    #[arg(long = "worker-addr", hide = true)]
    pub worker_addrs: Vec<String>,
    /// Internal: the workers' secret file, for the child.
    #[arg(long, hide = true)]
    pub worker_secret_file: Option<PathBuf>,
}

/// The file system of the objects under `url` for the database in `db`, with an object cache
/// in the run's work directory under `cache` (the parent and its children each have their
/// own: a cache serves one process at a time).
fn object_fs(
    url: Option<&str>,
    db: &Path,
    cache: &str,
) -> Result<Option<std::sync::Arc<dyn sluice_sst::fs::FileSystem>>, Failure> {
    let Some(url) = url else {
        return Ok(None);
    };
    let failed = |e: std::io::Error| Failure::Error(format!("--object-store {url}: {e}"));
    let cache = sluice_object::ObjectCache::open(&Paths::beside(db).work.join(cache), 256 << 20)
        .map_err(failed)?;
    let fs = sluice_object::ObjectFs::from_url(sluice_sst::fs::os_fs(), url, db)
        .and_then(|fs| fs.with_cache(cache))
        .map_err(failed)?;
    Ok(Some(std::sync::Arc::new(fs)))
}

/// The executors rounds rotate through.
#[derive(Clone, Debug)]
pub struct Modes(Vec<CompactionMode>);

fn parse_modes(s: &str) -> Result<Modes, String> {
    if s == "all" {
        let mut all = CompactionMode::ALL.to_vec();
        all.push(CompactionMode::Auto);
        Ok(Modes(all))
    } else {
        s.parse().map(|m| Modes(vec![m]))
    }
}

/// The files of a run: the database and what lives beside it.
#[derive(Clone, Debug)]
struct Paths {
    db: PathBuf,
    /// The expected-state file.
    expected: PathBuf,
    /// A copy of the database taken before damage, restored after.
    backup: PathBuf,
    /// Child logs, the workers' secret and logs.
    work: PathBuf,
}

impl Paths {
    fn beside(db: &Path) -> Paths {
        let with = |suffix: &str| {
            let mut name = db.file_name().unwrap_or_default().to_os_string();
            name.push(suffix);
            db.with_file_name(name)
        };
        Paths {
            db: db.to_path_buf(),
            expected: with(".expected"),
            backup: with(".backup"),
            work: with(".stress"),
        }
    }
}

/// Everything a round needs.
struct Run<'a> {
    args: &'a StressArgs,
    paths: Paths,
    engine: Engine,
    expected: ExpectedFile,
    tally: Tally,
    seed: u64,
    deadline: Instant,
}

impl Run<'_> {
    /// Records a failure, naming the seed and the database so it can be replayed.
    fn fail(&self, round: u64, what: impl std::fmt::Display) {
        self.tally.fail(format!(
            "FAILURE (seed {}, round {round}, db {}): {what}",
            self.seed,
            self.paths.db.display()
        ));
    }

    /// The executor of round `round`.
    fn mode(&self, round: u64) -> CompactionMode {
        let modes = &self.args.compaction_mode.0;
        modes[round as usize % modes.len()]
    }

    fn time_left(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now())
    }
}

/// Runs `sluice stress`.
pub fn run(args: &StressArgs, out: &mut dyn Write) -> CmdResult {
    validate(args)?;
    if args.child {
        return kill::child(args, out);
    }
    let seed = args.seed.unwrap_or_else(|| rand::thread_rng().r#gen());
    // Without --db: a fresh temporary directory, removed at the end unless the run fails.
    let (db, temp) = match &args.db {
        Some(db) => (db.clone(), None),
        None => {
            let temp = super::temp_dir("sluice-stress-")?;
            (temp.path().join("db"), Some(temp))
        }
    };
    // A fresh database gets a prefix of its own under the URL, so that runs sharing a bucket
    // never sweep each other's objects (an open deletes the tables its MANIFEST does not name).
    let url = args.object_store.as_ref().map(|url| match &temp {
        Some(t) => {
            let name = t.path().file_name().unwrap_or_default().to_string_lossy();
            format!("{}/{name}", url.trim_end_matches('/'))
        }
        None => url.clone(),
    });
    let paths = Paths::beside(&db);
    let shown = url
        .as_ref()
        .map(|u| format!(", tables in {u}"))
        .unwrap_or_default();
    writeln!(out, "stress: seed {seed}, db {}{shown}", db.display())?;
    out.flush()?;
    let failed = stress(args, url.as_deref(), seed, paths, out)?;
    if failed {
        // Keep the evidence: the temporary directory outlives the run.
        if let Some(t) = temp {
            let _ = t.keep();
        }
        return Err(Failure::Negative(format!(
            "stress failed: replay with --seed {seed}; database kept in {}{shown}",
            db.display()
        )));
    }
    // A fresh database's objects go with its directory.
    if let (Some(url), Some(_)) = (&url, &temp) {
        sluice_object::ObjectFs::from_url(sluice_sst::fs::os_fs(), url, &db)
            .and_then(|fs| sluice_object::remove_objects(&fs))
            .map_err(|e| Failure::Error(format!("removing the objects under {url}: {e}")))?;
    }
    Ok(())
}

fn validate(args: &StressArgs) -> Result<(), Failure> {
    let bad = |m: &str| Err(Failure::Error(m.to_string()));
    if args.threads == 0 || args.threads > 256 {
        return bad("--threads must be between 1 and 256");
    }
    if args.keys < args.threads * 2 || args.keys > 10_000_000 {
        return bad("--keys must be at least twice --threads and at most 10000000");
    }
    if args.sync_percent > 100 {
        return bad("--sync-percent must be at most 100");
    }
    if !(args.duration.is_finite() && args.duration >= 0.0) {
        return bad("--duration must be a number of seconds");
    }
    if args.kill_every.is_some_and(|k| !(k.is_finite() && k > 0.0)) {
        return bad("--kill-every must be a positive number of seconds");
    }
    if args.partitions > 64 || args.workers > 16 {
        return bad("at most 64 --partitions and 16 --workers");
    }
    Ok(())
}

/// The rounds, then the report. Returns whether anything failed.
fn stress(
    args: &StressArgs,
    object_store: Option<&str>,
    seed: u64,
    paths: Paths,
    out: &mut dyn Write,
) -> Result<bool, Failure> {
    std::fs::create_dir_all(&paths.db)
        .and_then(|()| std::fs::create_dir_all(&paths.work))
        .map_err(|e| Failure::Error(format!("creating {}: {e}", paths.db.display())))?;
    for i in 0..args.partitions {
        let dir = Engine::owner_dir(&paths.db, i);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Failure::Error(format!("creating {}: {e}", dir.display())))?;
    }
    let expected =
        ExpectedFile::open_or_create(&paths.expected, args.keys).map_err(Failure::Error)?;
    let mut engine = Engine {
        db: paths.db.clone(),
        keys: args.keys,
        owners: args.partitions,
        offload: None,
        object_url: object_store.map(str::to_string),
        object_fs: object_fs(object_store, &paths.db, "object-cache")?,
    };
    let workers = kill::start_workers(args.workers, &engine, &paths.work)?;
    engine.offload = workers.as_ref().map(|(_, o)| o.clone());
    let run = Run {
        args,
        paths,
        engine,
        expected,
        tally: Tally::default(),
        seed,
        deadline: Instant::now() + Duration::from_secs_f64(args.duration),
    };
    // A database left by an earlier run is verified before anything else touches it.
    if sluice::internals::filename::current_file_name(&run.paths.db).exists() {
        rounds::verify(&run, 0, "verify at start");
    }
    let mut round = 0u64;
    while run.tally.failures() == 0 && !run.time_left().is_zero() {
        round += 1;
        let mut rng = StdRng::seed_from_u64(seed ^ round.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        if args.corrupt && round.is_multiple_of(3) {
            faults::round(&run, round, &mut rng);
        } else if let Some(every) = args.kill_every {
            kill::round(
                &run,
                round,
                &mut rng,
                every,
                workers.as_ref().map(|(w, _)| w),
            );
            if args.corrupt && run.tally.failures() == 0 {
                // Damage needs a cleanly closed database whose WAL holds data.
                rounds::workload(&run, round, &mut rng, Duration::from_millis(500));
                damage::round(&run, round, &mut rng);
            }
        } else {
            let length = Duration::from_secs_f64(rng.gen_range(2.0..5.0)).min(run.time_left());
            rounds::workload(&run, round, &mut rng, length);
            if args.corrupt && run.tally.failures() == 0 {
                damage::round(&run, round, &mut rng);
            }
            rounds::verify(&run, round, "reopen");
        }
        run.tally
            .rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if let Some((set, _)) = workers
        && let Err(e) = set.stop()
    {
        writeln!(out, "warning: stopping the workers: {e}")?;
    }
    for message in run.tally.failure_messages() {
        writeln!(out, "{message}")?;
    }
    if args.workers > 0 {
        let offloaded = run
            .tally
            .offloaded
            .load(std::sync::atomic::Ordering::Relaxed);
        writeln!(
            out,
            "offload: {offloaded} compactions shared with {} workers",
            args.workers
        )?;
    }
    if args.corrupt {
        for line in run.tally.class_lines() {
            writeln!(out, "{line}")?;
        }
    }
    writeln!(out, "{}", run.tally.summary(seed))?;
    Ok(run.tally.failures() > 0)
}

/// Offload settings for the workers at `addresses`, sharing the secret in `secret_file`.
fn offload_options(addresses: Vec<String>, secret_file: &Path) -> Result<OffloadOptions, Failure> {
    let secret = sluice_offload::Secret::from_file(secret_file).map_err(Failure::Error)?;
    Ok(OffloadOptions {
        min_offload_bytes: engine::OFFLOAD_MIN_BYTES,
        min_chunk_bytes: engine::OFFLOAD_MIN_BYTES,
        // Static shares go out in pieces, so kills land between and inside them too.
        piece_bytes: 4 * engine::OFFLOAD_MIN_BYTES,
        task_timeout: Duration::from_secs(30),
        ..OffloadOptions::new(addresses, secret)
    })
}
