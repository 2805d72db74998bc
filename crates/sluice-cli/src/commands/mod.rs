//! The subcommands, one module each with its flags beside its code, and what they share: the
//! way they open a database and report the files they wrote.

pub mod backup;
pub mod bench;
pub mod blob;
pub mod chart;
pub mod check;
pub mod checkpoint;
pub mod compact;
pub mod dump;
pub mod experiment;
pub mod ingest;
pub mod keyspace;
pub mod kv;
pub mod manifest;
pub mod range;
pub mod repair;
pub mod sst;
pub mod stats;
pub mod stress;
pub mod wal;
pub mod ycsb;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use sluice::internals::filename::current_file_name;
use sluice::keyspace::DEFAULT_KEYSPACE;
use sluice::options::{PartitionOptions, PartitionOwner};
use sluice::{CompactionOptions, Db, KeyspaceOptions, Options};

use crate::args::Command;
use crate::engine_flags::EngineArgs;
use crate::failure::{CmdResult, Failure};

/// Runs `command`, writing its output to `out`.
pub fn run(command: Command, out: &mut dyn Write) -> CmdResult {
    match command {
        Command::Put(a) => kv::put(&a, out),
        Command::Merge(a) => kv::merge(&a, out),
        Command::DeleteRange(a) => kv::delete_range(&a, out),
        Command::Get(a) => kv::get(&a, out),
        Command::Delete(a) => kv::delete(&a, out),
        Command::Scan(a) => kv::scan(&a, out),
        Command::Dump(a) => dump::dump(&a, out),
        Command::Load(a) => dump::load(&a, out),
        Command::Keyspace(c) => keyspace::run(&c, out),
        Command::Compact(a) => compact::run(&a, out),
        Command::Stats(a) => stats::run(&a, out),
        Command::Check(a) => check::run(&a, out),
        Command::Checkpoint(a) => checkpoint::run(&a, out),
        Command::Backup(c) => backup::run(&c, out),
        Command::Ingest(a) => ingest::run(&a, out),
        Command::Repair(a) => repair::run(&a, out),
        Command::Sst(c) => sst::run(&c, out),
        Command::Blob(c) => blob::run(&c, out),
        Command::Wal(c) => wal::run(&c, out),
        Command::Manifest(c) => manifest::run(&c, out),
        Command::Range(c) => range::run(&c, out),
        Command::Bench(a) => bench::run(&a, out),
        Command::Experiment(c) => experiment::run(&c, out),
        Command::Ycsb(a) => ycsb::run(&a, out),
        Command::Stress(a) => stress::run(&a, out),
        Command::Chart(c) => chart::run(&c, out),
        Command::Worker(a) => sluice_worker::run(*a).map_err(Failure::Error),
        Command::LatencyProxy(a) => latency_proxy(&a, out),
    }
}

/// Serves `sluice latency-proxy` until the process is stopped, after one line naming its
/// address (a script reads the port from it when it asked for port 0).
fn latency_proxy(args: &crate::args::LatencyProxyArgs, out: &mut dyn Write) -> CmdResult {
    let delay = std::time::Duration::from_millis(args.delay_ms);
    let proxy = sluice_object::proxy::LatencyProxy::start(args.listen, args.target, delay)?;
    writeln!(
        out,
        "sluice latency proxy listening on {} -> {} (+{} ms per response)",
        proxy.addr(),
        args.target,
        args.delay_ms
    )?;
    out.flush()?;
    loop {
        std::thread::park();
    }
}

/// Where a database is: its directory and, if partitioned, its owners' directories.
#[derive(Debug, Args)]
pub struct DbArg {
    /// Database directory.
    #[arg(long, value_name = "DIR")]
    pub db: PathBuf,
    /// A partitioned database's owner directories, in owner order (repeat the flag for each
    /// owner). The range map itself is in the MANIFEST.
    #[arg(long = "owner-dir", value_name = "DIR")]
    pub owner_dirs: Vec<PathBuf>,
    /// Where the database's tables and blob files are: objects under `s3://bucket/prefix`
    /// (endpoint, region and credentials from the `AWS_*` environment, `AWS_ALLOW_HTTP=true`
    /// for a plain-HTTP endpoint) or `file:///dir`, with the WAL, MANIFEST and small files in
    /// `--db` (docs/design/0017). Give it on every open of such a database.
    #[arg(long, value_name = "URL")]
    pub object_store: Option<String>,
    /// A local directory caching whole objects of `--object-store`, so that reading a table
    /// costs one request per object rather than one per block (one process at a time).
    #[arg(long, value_name = "DIR", requires = "object_store")]
    pub object_cache_dir: Option<PathBuf>,
    /// The most bytes `--object-cache-dir` holds (least recently opened objects go first).
    #[arg(
        long,
        value_name = "BYTES",
        value_parser = crate::units::parse_size,
        default_value = "1G",
        requires = "object_cache_dir"
    )]
    pub object_cache_bytes: u64,
}

impl DbArg {
    /// `options` with the file system `--object-store` asks for (unchanged without it).
    pub fn with_object_store(&self, options: Options) -> sluice::Result<Options> {
        let cache = self
            .object_cache_dir
            .as_deref()
            .map(|dir| (dir, self.object_cache_bytes));
        with_object_store(options, self.object_store.as_deref(), cache, &self.db)
    }
}

/// `options` keeping the tables of the database in `root` as objects under `url`, read
/// through a cache in `cache` (directory and bytes) if given; unchanged without a URL.
pub fn with_object_store(
    options: Options,
    url: Option<&str>,
    cache: Option<(&std::path::Path, u64)>,
    root: &std::path::Path,
) -> sluice::Result<Options> {
    let Some(url) = url else {
        return Ok(options);
    };
    let fs = sluice_object::ObjectFs::from_url(Arc::clone(&options.fs), url, root)
        .map_err(|e| sluice::Error::InvalidArgument(format!("--object-store {url}: {e}")))?;
    let fs = match cache {
        Some((dir, bytes)) => sluice_object::ObjectCache::open(dir, bytes)
            .and_then(|cache| fs.with_cache(cache))
            .map_err(|e| {
                sluice::Error::InvalidArgument(format!("--object-cache-dir {}: {e}", dir.display()))
            })?,
        None => fs,
    };
    Ok(Options {
        fs: Arc::new(fs),
        ..options
    })
}

/// A database a command opens: where it is, and the engine flags it is opened with.
#[derive(Debug, Args)]
pub struct OpenArgs {
    #[command(flatten)]
    pub at: DbArg,
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// How a command uses the database it opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// Writes user data: creates the database if the directory holds none, and lets automatic
    /// compactions run as they would in an application.
    Create,
    /// Maintains an existing database (a missing one is an error). No automatic compaction
    /// starts, so the command returns as soon as its own work is done and figures it prints
    /// are its own (opening still replays the WAL, as every read-write open does).
    Existing,
    /// Reads an existing database without changing a byte of it ([`Db::open_read_only`]): the
    /// WAL's records are served from memory.
    ReadOnly,
    /// As `ReadOnly`, and beside a process that has the database open for writing, as a
    /// secondary instance of it ([`Db::open_secondary`]), with a note on stderr: what the
    /// writer had written when the command started.
    Read,
}

/// `Ok` if `dir` holds a database: the error every command that needs one gives when it does
/// not, whether it opens the database or reads its files directly.
fn require_database(dir: &std::path::Path) -> sluice::Result<()> {
    match current_file_name(dir).exists() {
        true => Ok(()),
        false => Err(sluice::Error::InvalidArgument(format!(
            "no database in {} (it has no CURRENT file)",
            dir.display()
        ))),
    }
}

/// Opens the database `target` names with its engine flags, adjusted for `access`.
fn open(target: &OpenArgs, access: Access) -> sluice::Result<Db> {
    open_with(target, access, target.engine.options(), DEFAULT_KEYSPACE)
}

/// Opens the database `target` names with `base` options adjusted for `access` and, with
/// `--owner-dir`, for its partitions, for a command acting on `keyspace` (the one
/// `--merge-operator` is for). The CLI never balances: it inspects or edits the data.
///
/// Keyspaces' options are not stored (as RocksDB's column family options are not), so every
/// keyspace the database has opens with the same settings as the default one: the engine
/// flags (compression, TTL, sizes) apply to all of them. The merge operator each one was
/// written for is recorded, and a recorded built-in one is used ([`set_merge_operators`]).
fn open_with(
    target: &OpenArgs,
    access: Access,
    base: Options,
    keyspace: &str,
) -> sluice::Result<Db> {
    let base = target.at.with_object_store(base)?;
    let DbArg {
        db: dir,
        owner_dirs,
        object_store: _,
        object_cache_dir: _,
        object_cache_bytes: _,
    } = &target.at;
    if access != Access::Create {
        require_database(dir)?;
    }
    let partitions = (!owner_dirs.is_empty()).then(|| PartitionOptions {
        owners: owner_dirs
            .iter()
            .map(|dir| PartitionOwner {
                dir: dir.clone(),
                worker: None,
            })
            .collect(),
        balance: None,
        load_balance: None,
        ..PartitionOptions::default()
    });
    let mut options = Options {
        create_if_missing: access == Access::Create,
        partitions: partitions.or(base.partitions.clone()),
        compaction: CompactionOptions {
            disable_auto_compactions: access != Access::Create
                || base.compaction.disable_auto_compactions,
            ..base.compaction
        },
        ..base
    };
    let unread = set_merge_operators(&mut options, dir, keyspace);
    let opened = match access {
        Access::ReadOnly => Db::open_read_only(dir, options),
        Access::Read => open_beside_writer(dir, options),
        Access::Create | Access::Existing => Db::open(dir, options),
    };
    opened.map_err(|e| match e {
        sluice::Error::InvalidArgument(m) if m.contains("partitioned") => {
            sluice::Error::InvalidArgument(format!(
                "{m} (pass its owner directories with --owner-dir, in owner order)"
            ))
        }
        sluice::Error::InvalidArgument(m) if m.contains("written with merge operator") => {
            let unread = unread.map(|e| format!("; its MANIFESTs could not all be read: {e}"));
            sluice::Error::InvalidArgument(format!(
                "{m} (--merge-operator NAME on the command line){}",
                unread.unwrap_or_default()
            ))
        }
        other => other,
    })
}

/// Gives each tree of the database in `dir` its merge operator: the keyspace the command acts
/// on (`target`) the `--merge-operator` in `options` if one was given, and every other tree
/// (and `target` without the flag) the built-in operator its MANIFEST records. A recorded
/// operator that is not a built-in gives none, and the open then names it. Returns why the
/// records could not be read, if they could not.
fn set_merge_operators(options: &mut Options, dir: &Path, target: &str) -> Option<sluice::Error> {
    let flag = options.merge_operator.take();
    let (recorded, unread) = match Db::list_merge_operators(dir, &*options.fs) {
        Ok(recorded) => (recorded, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    let for_tree = |name: &str, recorded: &Option<String>| match (name == target, &flag) {
        (true, Some(flag)) => Some(Arc::clone(flag)),
        _ => recorded
            .as_deref()
            .and_then(sluice::merge_operator::builtin),
    };
    options.merge_operator = match recorded.first() {
        Some((name, written)) => for_tree(name, written),
        // A database not created yet, or not readable.
        None => flag.clone().filter(|_| target == DEFAULT_KEYSPACE),
    };
    let keyspace = KeyspaceOptions::of_default(options);
    for (name, written) in recorded.iter().skip(1) {
        let settings = KeyspaceOptions {
            merge_operator: for_tree(name, written),
            ..keyspace.clone()
        };
        options.keyspaces.entry(name.clone()).or_insert(settings);
    }
    unread
}

/// Opens `dir` read-only, or, if a process has it open for writing, as a secondary instance
/// that has caught up with that process once.
fn open_beside_writer(dir: &Path, options: Options) -> sluice::Result<Db> {
    match Db::open_read_only(dir, options.clone()) {
        Err(sluice::Error::Busy(_)) => {}
        other => return other,
    }
    // The secondary's directory holds only its LOG, which the CLI does not write.
    let scratch = tempfile::Builder::new()
        .prefix("sluice-secondary")
        .tempdir()
        .map_err(|e| sluice::Error::io(std::env::temp_dir(), e))?;
    let mut options = options;
    options.info_log.enabled = false;
    let db = Db::open_secondary(dir, scratch.path(), options)?;
    eprintln!(
        "note: another process has {} open for writing; read as a secondary instance, at \
         sequence number {}",
        dir.display(),
        db.snapshot().sequence()
    );
    Ok(db)
}

/// A fresh temporary directory named `prefix...`, for a command's database or scratch files.
fn temp_dir(prefix: &str) -> Result<tempfile::TempDir, Failure> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| Failure::Error(format!("creating a temporary directory: {e}")))
}

/// `wrote N files to DIR:` and their names, one per line.
fn list_written(dir: &Path, written: &[PathBuf], out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(out, "wrote {} files to {}:", written.len(), dir.display())?;
    for path in written {
        let name = path.file_name().unwrap_or(path.as_os_str());
        writeln!(out, "  {}", name.to_string_lossy())?;
    }
    Ok(())
}
