//! What a worker is started with, and the checks made before it serves anything.

use std::net::SocketAddr;
use std::path::PathBuf;

use sluice_exec::decide::DecisionConfig;
use sluice_exec::{CompactionMode, ExecOptions};
use sluice_rpc::auth::Secret;
use sluice_sst::fs::os_fs;

/// Most tasks a worker runs at once (`--threads`).
pub const MAX_THREADS: usize = 1024;
/// Most compute threads one task may use (the worker's default and a task's request alike):
/// a task from the network must not make the worker spawn threads without bound.
pub const MAX_COMPUTE_THREADS: usize = 64;
/// Largest `--throttle` factor: enough to emulate any device, small enough that a sleep of
/// `(throttle - 1) x cpu time` stays a number of seconds a `Duration` holds.
pub const MAX_THROTTLE: f64 = 1000.0;

/// A directory the worker may touch, and the database it belongs to.
///
/// One worker may serve several databases (several hosts): each task names its database, and
/// the worker looks for its inputs and writes its outputs only in that database's roots, so
/// two databases' files of the same name are never confused. Roots given without a name
/// belong to the database named `""`, which is what a host that names none asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    /// The database's name ([`sluice_rpc::names::check_database_name`]).
    pub database: String,
    /// The directory.
    pub dir: PathBuf,
}

/// Checks a database name (see [`Root::database`]).
pub fn check_database_name(name: &str) -> Result<(), String> {
    sluice_rpc::names::check_database_name(name).map_err(|e| e.to_string())
}

impl std::str::FromStr for Root {
    type Err = String;

    /// `NAME=DIR`, or `DIR` for the unnamed database. A `DIR` containing `=` needs a name.
    fn from_str(s: &str) -> Result<Root, String> {
        match s.split_once('=') {
            Some((name, dir)) if check_database_name(name).is_ok() && !dir.is_empty() => Ok(Root {
                database: name.to_string(),
                dir: PathBuf::from(dir),
            }),
            _ => Ok(Root {
                database: String::new(),
                dir: PathBuf::from(s),
            }),
        }
    }
}

impl Root {
    /// A root of the unnamed database.
    pub fn unnamed(dir: impl Into<PathBuf>) -> Root {
        Root {
            database: String::new(),
            dir: dir.into(),
        }
    }
}

/// Where a worker that shares no directory with its host finds a task's inputs and writes its
/// outputs: objects in a bucket, as the host keeps its tables (`sluice_object::ObjectFs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectStoreConfig {
    /// `s3://bucket/prefix` (endpoint, region and credentials from the `AWS_*` environment)
    /// or `file:///dir`: what the host was given as `--object-store`.
    pub url: String,
    /// A local directory caching whole objects, and the most bytes it holds.
    pub cache: Option<(PathBuf, u64)>,
}

/// A worker's settings. [`WorkerConfig::validate`] states what must hold; [`crate::serve`]
/// checks it before it accepts a connection.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// The address asked for (the bound address may differ when the port is 0; the listener
    /// given to [`crate::serve`] is what is actually served).
    pub listen: SocketAddr,
    /// The directories the worker may touch, by database: a task's inputs are found in its
    /// database's roots, and its outputs written to them. Non-empty; each an existing
    /// directory; no two the same directory.
    pub roots: Vec<Root>,
    /// The secret every call must carry.
    pub secret: Secret,
    /// Tasks run at once, `1..=MAX_THREADS`; further tasks wait for a slot.
    pub threads: usize,
    /// `None`: a task that asks the worker to decide gets the decision component's choice
    /// (CoPro+). `Some(mode)`: such a task runs `mode`. A task naming its mode always gets it.
    /// Never `Some(Auto)`.
    pub mode: Option<CompactionMode>,
    /// Weights and thresholds of the decision component.
    pub decision: DecisionConfig,
    /// Emulated slowdown of the device CPU, `1.0..=MAX_THROTTLE`: after each task the worker
    /// sleeps `(throttle - 1) x` the task's CPU time before it answers, as if its CPU were
    /// `throttle` times slower; the sleeps of tasks running at once queue behind each other,
    /// so the device's speed does not grow with its tasks. 1.0 is no slowdown.
    pub throttle: f64,
    /// Compute threads of the parallel executor when a task does not say,
    /// `1..=MAX_COMPUTE_THREADS`.
    pub compute_threads: usize,
    /// Inputs and outputs in a bucket instead of the roots; there is then exactly one root,
    /// a local directory of the worker's own that the object paths are named relative to.
    pub object_store: Option<ObjectStoreConfig>,
}

impl WorkerConfig {
    /// A configuration with the defaults: one task per core, the decision component with the
    /// worker's settings, no throttle.
    pub fn new(listen: SocketAddr, roots: Vec<Root>, secret: Secret) -> Self {
        WorkerConfig {
            listen,
            roots,
            secret,
            threads: default_threads(),
            mode: None,
            decision: DecisionConfig::worker(),
            throttle: 1.0,
            compute_threads: ExecOptions::DEFAULT_COMPUTE_THREADS,
            object_store: None,
        }
    }

    /// The bucket of [`WorkerConfig::object_store`], for `roots` as [`WorkerConfig::validate`]
    /// returned them; `None` when tasks' files are on the local file system.
    pub fn object_fs(&self, roots: &[Root]) -> Result<Option<sluice_object::ObjectFs>, String> {
        let (Some(store), Some(root)) = (&self.object_store, roots.first()) else {
            return Ok(None);
        };
        let fs = sluice_object::ObjectFs::from_url(os_fs(), &store.url, &root.dir)
            .map_err(|e| format!("--object-store {}: {e}", store.url))?;
        let fs = match &store.cache {
            Some((dir, bytes)) => sluice_object::ObjectCache::open(dir, *bytes)
                .and_then(|cache| fs.with_cache(cache))
                .map_err(|e| format!("--object-cache-dir {}: {e}", dir.display()))?,
            None => fs,
        };
        Ok(Some(fs))
    }

    /// Checks every field against its documented range, and that every root is an existing
    /// directory, no two roots are the same directory and every database name is valid.
    /// Returns the roots canonicalized (symlinks and `..` resolved), in the order given:
    /// inputs are looked for in that order and outputs dealt over it.
    pub fn validate(&self) -> Result<Vec<Root>, String> {
        if self.roots.is_empty() {
            return Err("a worker needs at least one root directory".into());
        }
        if self.object_store.is_some() && self.roots.len() != 1 {
            return Err(
                "a worker reading from a bucket serves one database and takes one --root, a \
                 local directory of its own"
                    .into(),
            );
        }
        if !(1..=MAX_THREADS).contains(&self.threads) {
            return Err(format!(
                "threads must be in 1..={MAX_THREADS}, not {}",
                self.threads
            ));
        }
        if !(1..=MAX_COMPUTE_THREADS).contains(&self.compute_threads) {
            return Err(format!(
                "compute threads must be in 1..={MAX_COMPUTE_THREADS}, not {}",
                self.compute_threads
            ));
        }
        if self.mode == Some(CompactionMode::Auto) {
            return Err("the worker's mode is a fixed executor or None (decide), not auto".into());
        }
        if !(self.throttle >= 1.0 && self.throttle <= MAX_THROTTLE) {
            return Err(format!(
                "throttle must be in 1.0..={MAX_THROTTLE}, not {}",
                self.throttle
            ));
        }
        self.decision.validate().map_err(|e| e.to_string())?;
        let mut canonical: Vec<Root> = Vec::with_capacity(self.roots.len());
        for Root { database, dir } in &self.roots {
            check_database_name(database)?;
            let c =
                std::fs::canonicalize(dir).map_err(|e| format!("root {}: {e}", dir.display()))?;
            if !c.is_dir() {
                return Err(format!("root {} is not a directory", dir.display()));
            }
            if let Some(other) = canonical.iter().find(|r| r.dir == c) {
                return Err(format!(
                    "root {} is given twice (as {}, for databases {:?} and {database:?})",
                    dir.display(),
                    c.display(),
                    other.database
                ));
            }
            canonical.push(Root {
                database: database.clone(),
                dir: c,
            });
        }
        Ok(canonical)
    }
}

/// The cores this process may run on (after any pinning), at least 1.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(roots: Vec<PathBuf>) -> WorkerConfig {
        let secret = Secret::new("0123456789abcdef0123").unwrap();
        let roots = roots.into_iter().map(Root::unnamed).collect();
        WorkerConfig::new("127.0.0.1:0".parse().unwrap(), roots, secret)
    }

    #[test]
    fn defaults_are_valid_and_roots_come_back_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a");
        std::fs::create_dir(&sub).unwrap();
        let c = config(vec![dir.path().join("a/../a")]);
        assert!(c.threads >= 1);
        assert_eq!(c.mode, None);
        assert_eq!(c.decision, DecisionConfig::worker());
        let roots = c.validate().unwrap();
        assert_eq!(
            roots,
            vec![Root::unnamed(std::fs::canonicalize(&sub).unwrap())]
        );
    }

    #[test]
    fn out_of_range_fields_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let ok = config(vec![dir.path().to_path_buf()]);
        let cases: Vec<(&str, WorkerConfig)> = vec![
            ("root", config(vec![])),
            ("root", config(vec![dir.path().join("missing")])),
            (
                "twice",
                config(vec![dir.path().to_path_buf(), dir.path().join(".")]),
            ),
            (
                "threads",
                WorkerConfig {
                    threads: 0,
                    ..ok.clone()
                },
            ),
            (
                "compute",
                WorkerConfig {
                    compute_threads: MAX_COMPUTE_THREADS + 1,
                    ..ok.clone()
                },
            ),
            (
                "auto",
                WorkerConfig {
                    mode: Some(CompactionMode::Auto),
                    ..ok.clone()
                },
            ),
            (
                "throttle",
                WorkerConfig {
                    throttle: 0.5,
                    ..ok.clone()
                },
            ),
            (
                "throttle",
                WorkerConfig {
                    throttle: f64::NAN,
                    ..ok.clone()
                },
            ),
            (
                "threshold",
                WorkerConfig {
                    decision: DecisionConfig {
                        threshold: 0.0,
                        ..DecisionConfig::worker()
                    },
                    ..ok.clone()
                },
            ),
        ];
        for (word, c) in cases {
            let err = c.validate().unwrap_err();
            assert!(err.contains(word), "{word}: {err}");
        }
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(
            config(vec![file])
                .validate()
                .unwrap_err()
                .contains("not a directory")
        );
    }

    #[test]
    fn roots_name_their_database() {
        let root = |s: &str| s.parse::<Root>().unwrap();
        assert_eq!(root("/data/db"), Root::unnamed("/data/db"));
        assert_eq!(
            root("db0=/data/db0"),
            Root {
                database: "db0".into(),
                dir: "/data/db0".into()
            }
        );
        // Not a valid name before the '=': the whole text is a directory.
        assert_eq!(root("/odd=dir"), Root::unnamed("/odd=dir"));
        assert_eq!(root("a b=/x"), Root::unnamed("a b=/x"));
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let secret = Secret::new("0123456789abcdef0123").unwrap();
        let named = |roots: Vec<Root>| {
            WorkerConfig::new("127.0.0.1:0".parse().unwrap(), roots, secret.clone()).validate()
        };
        let two = named(vec![
            Root {
                database: "x".into(),
                dir: a.clone(),
            },
            Root {
                database: "y".into(),
                dir: b.clone(),
            },
        ])
        .unwrap();
        assert_eq!(two[1].database, "y");
        // One directory cannot serve two databases.
        let err = named(vec![
            Root {
                database: "x".into(),
                dir: a.clone(),
            },
            Root {
                database: "y".into(),
                dir: a.join("../a"),
            },
        ])
        .unwrap_err();
        assert!(err.contains("twice"), "{err}");
    }
}
