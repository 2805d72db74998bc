//! What to run: the benchmark names and the workload parameters.
//!
//! Database options (compression, buffer and file sizes, caches) are not here: they belong to
//! the [`sluice::Options`] the database was opened with, and reports read them back from it.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use sluice::{Concurrency, Error, Result};

use crate::keys::KeyFormat;

/// One benchmark. Names are db_bench's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Benchmark {
    /// Write keys `0..num` in ascending order.
    FillSeq,
    /// Write `num` uniformly random keys from `[0, num)`.
    FillRandom,
    /// As [`Benchmark::FillRandom`], meant to run over existing data.
    Overwrite,
    /// `reads` point lookups of uniformly random keys.
    ReadRandom,
    /// A forward scan of up to `reads` entries.
    ReadSeq,
    /// `reads` seeks to uniformly random keys, each reading the entry it lands on and the
    /// [`WorkloadOptions::seek_nexts`] entries after it (one operation in all).
    SeekRandom,
    /// A full manual compaction.
    Compact,
    /// One range delete of the middle tenth of the key space, `[0.45 num, 0.55 num)`: what
    /// the reads and scans after it pay for it is the measure. Not in the default suite.
    DeleteRange,
    /// `threads` reader threads share `reads` point lookups of uniformly random keys (as
    /// readrandom) while one more thread overwrites uniformly random keys (as overwrite)
    /// until the readers are done: db_bench's extra writer thread. The operations, latency
    /// and `found` are the readers', as db_bench reports them; the writer's puts are counted
    /// apart. Not in the default suite.
    ReadWhileWriting,
    /// `reads` read-modify-writes of uniformly random keys: a get, then a put of a new value,
    /// timed together as one operation. Not in the default suite.
    UpdateRandom,
    /// `reads` operations on uniformly random keys, each a get or a put: every 100 operations
    /// of a thread are [`WorkloadOptions::read_write_percent`] gets, then the rest puts, as
    /// db_bench's `--readwritepercent` interleaves them. Not in the default suite.
    ReadRandomWriteRandom,
    /// `num` deletes of uniformly random keys from `[0, num)` (with repeats). Not in the
    /// default suite.
    DeleteRandom,
    /// `reads` transactions, each reading two uniformly random keys for update and writing
    /// both with new values, then committing; a commit that fails with `Busy` runs again and
    /// counts in `conflicts` (db_bench's `randomtransaction` with two transaction sets).
    /// [`WorkloadOptions::transaction`] picks optimistic or pessimistic. Also accepted as
    /// `txn`. Not in the default suite.
    RandomTransaction,
}

impl Benchmark {
    /// Benchmarks a run may name that the default suite leaves out.
    pub const EXTRA: [Benchmark; 6] = [
        Benchmark::DeleteRange,
        Benchmark::ReadWhileWriting,
        Benchmark::UpdateRandom,
        Benchmark::ReadRandomWriteRandom,
        Benchmark::DeleteRandom,
        Benchmark::RandomTransaction,
    ];

    /// Every benchmark, in the order of the default suite.
    pub const ALL: [Benchmark; 7] = [
        Benchmark::FillSeq,
        Benchmark::FillRandom,
        Benchmark::Overwrite,
        Benchmark::ReadRandom,
        Benchmark::ReadSeq,
        Benchmark::SeekRandom,
        Benchmark::Compact,
    ];

    /// The db_bench name.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::FillSeq => "fillseq",
            Benchmark::FillRandom => "fillrandom",
            Benchmark::Overwrite => "overwrite",
            Benchmark::ReadRandom => "readrandom",
            Benchmark::ReadSeq => "readseq",
            Benchmark::SeekRandom => "seekrandom",
            Benchmark::Compact => "compact",
            Benchmark::DeleteRange => "deleterange",
            Benchmark::ReadWhileWriting => "readwhilewriting",
            Benchmark::UpdateRandom => "updaterandom",
            Benchmark::ReadRandomWriteRandom => "readrandomwriterandom",
            Benchmark::DeleteRandom => "deleterandom",
            Benchmark::RandomTransaction => "randomtransaction",
        }
    }

    /// True for the benchmarks that only write user data: their time includes waiting for
    /// the flushes and compactions they caused. The mixed ones (readwhilewriting,
    /// updaterandom, readrandomwriterandom) measure their operations alone, as db_bench does.
    pub fn is_fill(self) -> bool {
        matches!(
            self,
            Benchmark::FillSeq
                | Benchmark::FillRandom
                | Benchmark::Overwrite
                | Benchmark::DeleteRandom
        )
    }

    /// True for the benchmarks whose results count lookups that found their key.
    pub fn counts_found(self) -> bool {
        matches!(
            self,
            Benchmark::ReadRandom
                | Benchmark::SeekRandom
                | Benchmark::ReadWhileWriting
                | Benchmark::UpdateRandom
                | Benchmark::ReadRandomWriteRandom
                | Benchmark::RandomTransaction
        )
    }

    /// True for the benchmarks that mix reads and writes, whose results count the writes.
    pub fn counts_writes(self) -> bool {
        matches!(
            self,
            Benchmark::ReadWhileWriting
                | Benchmark::UpdateRandom
                | Benchmark::ReadRandomWriteRandom
                | Benchmark::RandomTransaction
        )
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Benchmark {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let every = Benchmark::ALL.into_iter().chain(Benchmark::EXTRA);
        if s.trim() == "txn" {
            return Ok(Benchmark::RandomTransaction);
        }
        every.clone().find(|b| b.name() == s.trim()).ok_or_else(|| {
            let names: Vec<&str> = every.map(|b| b.name()).collect();
            format!(
                "unknown benchmark {s:?} (expected one of {})",
                names.join(", ")
            )
        })
    }
}

/// The workload parameters, shared by every benchmark of a run.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Benchmarks to run, in order, on one database.
    pub benchmarks: Vec<Benchmark>,
    /// Key numbers are drawn from `[0, num)`; fill benchmarks write `num` entries.
    pub num: u64,
    /// Operations of the read benchmarks (readrandom, seekrandom; the readseq entry limit).
    pub reads: u64,
    /// Bytes per key.
    pub key_size: usize,
    /// Bytes per value.
    pub value_size: usize,
    /// Client threads; the operations of a benchmark are divided among them.
    pub threads: usize,
    /// Seed of every random choice (keys and values), so runs are repeatable.
    pub seed: u64,
    /// Sync the WAL on every write.
    pub sync: bool,
    /// Draw a progress bar on stderr. Callers set it only when stderr is a terminal.
    pub progress: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            benchmarks: Benchmark::ALL.to_vec(),
            num: 1_000_000,
            reads: 1_000_000,
            key_size: 16,
            value_size: 100,
            threads: 1,
            seed: 301,
            sync: false,
            progress: false,
        }
    }
}

impl BenchConfig {
    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        if self.num == 0 {
            return Err(Error::InvalidArgument("num must be at least 1".into()));
        }
        validate_clients(self.threads, self.key_size, self.value_size, self.num)
    }
}

/// Parameters of particular benchmarks and a time limit, beside [`BenchConfig`]: kept in
/// their own struct so that callers building a `BenchConfig` field by field (the experiments)
/// are unaffected. The default of every field is db_bench's, under which each benchmark
/// behaves as it did before the field existed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadOptions {
    /// `next` calls after each seek of seekrandom (db_bench's `--seek_nexts`).
    pub seek_nexts: usize,
    /// Percent of readrandomwriterandom's operations that are reads, 0 to 100 (db_bench's
    /// `--readwritepercent`).
    pub read_write_percent: u8,
    /// A benchmark's client threads stop at their next operation once this much time has
    /// passed since it began, done or not (db_bench's `--duration`); `None`: no limit. The
    /// result's `ops` counts what ran. compact and deleterange, single calls, are not limited.
    pub duration: Option<Duration>,
    /// Spread the keys over this many keyspaces, key number `n` in keyspace `n % keyspaces`
    /// (the default one and `bench-1`, `bench-2`, ..., created if missing): the same bytes
    /// as one keyspace, written round-robin. Only the fill benchmarks, overwrite and
    /// readrandom take more than 1.
    pub keyspaces: usize,
    /// randomtransaction's transactions: optimistic (db_bench's
    /// `--optimistic_transaction_db`, the default) or pessimistic (`--transaction_db`).
    pub transaction: Concurrency,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            seek_nexts: 0,
            read_write_percent: 90,
            duration: None,
            keyspaces: 1,
            transaction: Concurrency::Optimistic,
        }
    }
}

impl WorkloadOptions {
    /// Checks the parameters; the error names the offending one.
    pub fn validate(&self) -> Result<()> {
        if self.read_write_percent > 100 {
            return Err(Error::InvalidArgument(format!(
                "read_write_percent must be between 0 and 100, got {}",
                self.read_write_percent
            )));
        }
        if self.keyspaces == 0 || self.keyspaces > 1024 {
            return Err(Error::InvalidArgument(format!(
                "keyspaces must be between 1 and 1024, got {}",
                self.keyspaces
            )));
        }
        Ok(())
    }
}

/// Checks what every benchmark (db_bench-style or YCSB) needs of its clients: 1 to 1024
/// threads, values of at most 64 MiB, and keys wide enough for `keys` distinct key numbers.
pub fn validate_clients(
    threads: usize,
    key_size: usize,
    value_size: usize,
    keys: u64,
) -> Result<()> {
    if threads == 0 || threads > 1024 {
        return Err(Error::InvalidArgument(format!(
            "threads must be between 1 and 1024, got {threads}"
        )));
    }
    if value_size > 64 << 20 {
        return Err(Error::InvalidArgument(format!(
            "value_size must be at most 64 MiB, got {value_size}"
        )));
    }
    KeyFormat::new(key_size, keys)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for b in Benchmark::ALL.into_iter().chain(Benchmark::EXTRA) {
            assert_eq!(b.name().parse::<Benchmark>(), Ok(b));
            assert_eq!(b.to_string(), b.name());
        }
        let err = "fillsequential".parse::<Benchmark>().unwrap_err();
        assert!(err.contains("fillseq, fillrandom"), "{err}");
    }

    #[test]
    fn default_is_valid_and_bad_values_are_named() {
        BenchConfig::default().validate().unwrap();
        let c = BenchConfig {
            threads: 0,
            ..BenchConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("threads"));
        let c = BenchConfig {
            key_size: 3,
            num: 10_000,
            ..BenchConfig::default()
        };
        assert!(c.validate().unwrap_err().to_string().contains("key_size"));
    }

    #[test]
    fn new_benchmarks_stay_out_of_the_default_suite() {
        for b in Benchmark::EXTRA {
            assert!(!Benchmark::ALL.contains(&b), "{b}");
        }
        WorkloadOptions::default().validate().unwrap();
        let w = WorkloadOptions {
            read_write_percent: 101,
            ..WorkloadOptions::default()
        };
        assert!(
            w.validate()
                .unwrap_err()
                .to_string()
                .contains("read_write_percent")
        );
    }
}
