//! db_bench-style benchmarks for Sluice: the workloads, their key and value generators, latency
//! histograms, and the reports (a human table and one JSON object per benchmark).
//!
//! The workloads follow LevelDB/RocksDB `db_bench` so numbers can be compared with theirs:
//!
//! | name       | what it does                                                              |
//! |------------|---------------------------------------------------------------------------|
//! | fillseq    | writes keys `0..num` in order                                             |
//! | fillrandom | writes `num` keys drawn uniformly from `[0, num)` (with repeats)          |
//! | overwrite  | as fillrandom, over the existing data                                     |
//! | readrandom | `reads` point lookups of uniform keys from `[0, num)`; reports `found`   |
//! | readseq    | a forward scan of up to `reads` entries                                   |
//! | seekrandom | `reads` seeks to uniform keys, reading the entry found                    |
//! | compact    | `compact_range(None, None)`: the whole tree down to one level            |
//!
//! Not in the default suite, named explicitly: `deleterange` (one range delete of the middle
//! tenth), `readwhilewriting` (`threads - 1` readers as readrandom while one thread overwrites
//! until they are done), `updaterandom` (get then put of random keys), `readrandomwriterandom`
//! (gets and puts of random keys, [`WorkloadOptions::read_write_percent`] of them gets) and
//! `deleterandom` (`num` deletes of random keys). [`WorkloadOptions`] also holds seekrandom's
//! `seek_nexts` and a time limit per benchmark; [`workloads::run_benchmarks_with`] takes it.
//!
//! Keys are `key_size` bytes of zero-padded decimal ([`keys`]); values are `value_size` bytes
//! that compress to about half ([`values`]). Fill benchmarks end only when background flushes
//! and compactions are done, so their time includes the work they caused. Every figure about
//! the engine (bytes written, write amplification, compaction bandwidth and stage profile) is
//! the difference of [`sluice::Db::metrics`] taken before and after the benchmark.
//!
//! Every result also carries what the process used meanwhile ([`resources`]: CPU per thread
//! group, peak memory, storage bytes), the operations completed in each second
//! ([`timeline`]) and the tree's shape at the end ([`shape`]); [`charts`] draws a run as PNG
//! and SVG.
//!
//! The experiments that reproduce the design documents' evaluations are built from these
//! pieces in their own crate, `sluice-experiments`; nothing here depends on them.
//!
//! ```no_run
//! use sluice_bench::{BenchConfig, run_benchmarks, report};
//! let dir = tempfile::tempdir()?;
//! let db = sluice::Db::open(dir.path(), sluice::Options::default())?;
//! let config = BenchConfig { num: 10_000, reads: 10_000, ..BenchConfig::default() };
//! run_benchmarks(&config, &db, &mut |r| println!("{}", report::table_row(r)))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod charts;
pub mod config;
pub mod delta;
pub mod histogram;
pub mod keys;
pub mod progress;
pub mod report;
pub mod resources;
pub mod shape;
pub mod stream;
pub mod timeline;
pub mod values;
pub mod workloads;
pub mod ycsb;

pub use config::{BenchConfig, Benchmark, WorkloadOptions};
pub use report::{BenchResult, ThreadResult};
pub use workloads::{run_benchmarks, run_benchmarks_until, run_benchmarks_with};
