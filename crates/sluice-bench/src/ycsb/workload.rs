//! YCSB's core workloads A to F: their operation mixes, request distributions and the
//! per-thread chooser that turns a random stream into a sequence of operations and keys.
//!
//! | workload | mix                                         | default distribution |
//! |----------|---------------------------------------------|----------------------|
//! | a        | 50% read, 50% update                        | zipfian              |
//! | b        | 95% read, 5% update                         | zipfian              |
//! | c        | 100% read                                   | zipfian              |
//! | d        | 95% read, 5% insert                         | latest               |
//! | e        | 95% scan (1..=100 keys, uniform), 5% insert | zipfian              |
//! | f        | 50% read, 50% read-modify-write             | zipfian              |
//!
//! As in YCSB's `CoreWorkload`, "zipfian" means the scrambled zipfian over the loaded keys plus
//! room for the expected inserts (twice their expected number), redrawn while it names a key not
//! yet inserted; "uniform" is uniform over the keys inserted so far.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use super::generator::{Latest, ScrambledZipfian, next_f64};
use crate::stream::SplitMix64;

/// Longest scan of workload E (YCSB's `maxscanlength`).
pub const MAX_SCAN_LENGTH: u64 = 100;

/// Redraws of a key not yet inserted before falling back to the newest key.
const MAX_REDRAWS: u32 = 64;

/// One of YCSB's core workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    A,
    B,
    C,
    D,
    E,
    F,
}

/// How keys are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Distribution {
    Zipfian,
    Uniform,
    Latest,
}

/// One YCSB operation type. The discriminant indexes per-operation arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    Read = 0,
    Update = 1,
    Insert = 2,
    Scan = 3,
    ReadModifyWrite = 4,
}

impl Operation {
    /// Every operation, in report order.
    pub const ALL: [Operation; 5] = [
        Operation::Read,
        Operation::Update,
        Operation::Insert,
        Operation::Scan,
        Operation::ReadModifyWrite,
    ];

    /// The name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Update => "update",
            Operation::Insert => "insert",
            Operation::Scan => "scan",
            Operation::ReadModifyWrite => "read-modify-write",
        }
    }
}

/// The share of each operation type, summing to 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mix {
    pub read: f64,
    pub update: f64,
    pub insert: f64,
    pub scan: f64,
    pub read_modify_write: f64,
}

impl Workload {
    /// Every workload.
    pub const ALL: [Workload; 6] = [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
    ];

    /// The one-letter name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::A => "a",
            Workload::B => "b",
            Workload::C => "c",
            Workload::D => "d",
            Workload::E => "e",
            Workload::F => "f",
        }
    }

    /// The operation mix of YCSB's `workloads/workload<x>` file.
    pub fn mix(self) -> Mix {
        let none = Mix {
            read: 0.0,
            update: 0.0,
            insert: 0.0,
            scan: 0.0,
            read_modify_write: 0.0,
        };
        match self {
            Workload::A => Mix {
                read: 0.5,
                update: 0.5,
                ..none
            },
            Workload::B => Mix {
                read: 0.95,
                update: 0.05,
                ..none
            },
            Workload::C => Mix { read: 1.0, ..none },
            Workload::D => Mix {
                read: 0.95,
                insert: 0.05,
                ..none
            },
            Workload::E => Mix {
                scan: 0.95,
                insert: 0.05,
                ..none
            },
            Workload::F => Mix {
                read: 0.5,
                read_modify_write: 0.5,
                ..none
            },
        }
    }

    /// The request distribution of YCSB's workload file.
    pub fn default_distribution(self) -> Distribution {
        match self {
            Workload::D => Distribution::Latest,
            _ => Distribution::Zipfian,
        }
    }
}

impl Mix {
    /// The share of `op`.
    pub fn share(&self, op: Operation) -> f64 {
        match op {
            Operation::Read => self.read,
            Operation::Update => self.update,
            Operation::Insert => self.insert,
            Operation::Scan => self.scan,
            Operation::ReadModifyWrite => self.read_modify_write,
        }
    }

    /// The operation a uniform `u` in `[0, 1)` selects (YCSB's `DiscreteGenerator`: the first
    /// operation whose cumulative share exceeds `u`).
    pub fn pick(&self, u: f64) -> Operation {
        let mut acc = 0.0;
        let mut last = Operation::Read;
        for op in Operation::ALL {
            let share = self.share(op);
            if share <= 0.0 {
                continue;
            }
            acc += share;
            last = op;
            if u < acc {
                return op;
            }
        }
        // Rounding left the shares' sum just below 1: the last operation takes the rest.
        last
    }
}

macro_rules! named_enum {
    ($ty:ty, $what:literal, [$($name:literal => $value:expr),* $(,)?]) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let name = match self { $(x if *x == $value => $name,)* _ => "?" };
                f.write_str(name)
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s.trim().to_ascii_lowercase().as_str() {
                    $($name => Ok($value),)*
                    _ => Err(format!(
                        concat!("unknown ", $what, " {:?} (expected one of {})"),
                        s,
                        [$($name),*].join(", ")
                    )),
                }
            }
        }
    };
}

named_enum!(Workload, "workload", [
    "a" => Workload::A, "b" => Workload::B, "c" => Workload::C,
    "d" => Workload::D, "e" => Workload::E, "f" => Workload::F,
]);
named_enum!(Distribution, "distribution", [
    "zipfian" => Distribution::Zipfian,
    "uniform" => Distribution::Uniform,
    "latest" => Distribution::Latest,
]);

/// What the next operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read, update or read-modify-write of an existing key.
    Point(Operation, u64),
    /// Insert the key numbered by the shared insert counter.
    Insert,
    /// Scan `len` keys from `start`.
    Scan { start: u64, len: u64 },
}

/// The chooser of key numbers.
#[derive(Clone, Debug)]
enum KeyChooser {
    Uniform,
    Zipfian(ScrambledZipfian),
    Latest(Latest),
}

/// One thread's source of operations: its own stream, the workload's mix and a key chooser.
/// Clone a prototype per thread and [`Chooser::reseed`] it: the zipfian set-up is done once.
#[derive(Clone, Debug)]
pub struct Chooser {
    mix: Mix,
    keys: KeyChooser,
    rng: SplitMix64,
}

impl Chooser {
    /// A chooser for `workload` over `records` loaded keys and `operations` operations.
    pub fn new(
        workload: Workload,
        distribution: Distribution,
        records: u64,
        operations: u64,
        seed: u64,
    ) -> Self {
        let mix = workload.mix();
        let keys = match distribution {
            Distribution::Uniform => KeyChooser::Uniform,
            Distribution::Zipfian => {
                // YCSB: room for twice the expected inserts, so new keys get draws too.
                let expected_new = (operations as f64 * mix.insert * 2.0) as u64;
                KeyChooser::Zipfian(ScrambledZipfian::new(records.saturating_add(expected_new)))
            }
            Distribution::Latest => KeyChooser::Latest(Latest::new(records)),
        };
        Chooser {
            mix,
            keys,
            rng: SplitMix64::for_benchmark(seed, 0, 0),
        }
    }

    /// The same chooser drawing from the stream of client thread `thread`.
    pub fn reseed(&mut self, seed: u64, thread: u64) {
        self.rng = SplitMix64::for_benchmark(seed, 0, thread);
    }

    /// The next operation, given that keys `0..inserted` exist (`inserted >= 1`).
    pub fn next(&mut self, inserted: u64) -> Request {
        let op = self.mix.pick(next_f64(&mut self.rng));
        match op {
            Operation::Insert => Request::Insert,
            Operation::Scan => {
                let start = self.key(inserted);
                let len = 1 + self.rng.below(MAX_SCAN_LENGTH);
                Request::Scan { start, len }
            }
            _ => Request::Point(op, self.key(inserted)),
        }
    }

    /// An existing key number of `0..inserted`.
    fn key(&mut self, inserted: u64) -> u64 {
        let inserted = inserted.max(1);
        match &mut self.keys {
            KeyChooser::Uniform => self.rng.below(inserted),
            KeyChooser::Latest(l) => l.next(inserted, &mut self.rng),
            KeyChooser::Zipfian(z) => {
                for _ in 0..MAX_REDRAWS {
                    let k = z.next(&mut self.rng);
                    if k < inserted {
                        return k;
                    }
                }
                inserted - 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(w.to_string().parse::<Workload>(), Ok(w));
        }
        assert_eq!("A".parse::<Workload>(), Ok(Workload::A));
        assert!("g".parse::<Workload>().unwrap_err().contains("a, b, c"));
        for d in [
            Distribution::Zipfian,
            Distribution::Uniform,
            Distribution::Latest,
        ] {
            assert_eq!(d.to_string().parse::<Distribution>(), Ok(d));
        }
        assert!("hotspot".parse::<Distribution>().is_err());
    }

    #[test]
    fn mixes_sum_to_one() {
        for w in Workload::ALL {
            let m = w.mix();
            let sum: f64 = Operation::ALL.iter().map(|&op| m.share(op)).sum();
            assert!((sum - 1.0).abs() < 1e-12, "{w}");
            assert_eq!(m.pick(0.999_999_999), m.pick(0.999_999_999));
        }
        assert_eq!(Workload::D.default_distribution(), Distribution::Latest);
        assert_eq!(Workload::A.default_distribution(), Distribution::Zipfian);
    }

    #[test]
    fn operation_mix_is_within_one_percent_of_the_spec() {
        const OPS: u64 = 100_000;
        for w in Workload::ALL {
            let mut c = Chooser::new(w, w.default_distribution(), 10_000, OPS, 7);
            let mut counts = [0u64; 5];
            let mut inserted = 10_000;
            for _ in 0..OPS {
                let op = match c.next(inserted) {
                    Request::Point(op, k) => {
                        assert!(k < inserted);
                        op
                    }
                    Request::Insert => {
                        inserted += 1;
                        Operation::Insert
                    }
                    Request::Scan { start, len } => {
                        assert!(start < inserted);
                        assert!((1..=MAX_SCAN_LENGTH).contains(&len));
                        Operation::Scan
                    }
                };
                counts[op as usize] += 1;
            }
            for op in Operation::ALL {
                let got = counts[op as usize] as f64 / OPS as f64;
                let want = w.mix().share(op);
                assert!(
                    (got - want).abs() <= 0.01,
                    "{w} {}: {got} vs {want}",
                    op.name()
                );
            }
        }
    }

    #[test]
    fn choosers_are_deterministic_per_thread() {
        let proto = Chooser::new(Workload::A, Distribution::Zipfian, 1000, 1000, 9);
        let run = |thread| {
            let mut c = proto.clone();
            c.reseed(9, thread);
            (0..100).map(|_| c.next(1000)).collect::<Vec<_>>()
        };
        assert_eq!(run(0), run(0));
        assert_ne!(run(0), run(1));
    }

    #[test]
    fn uniform_and_latest_keys_stay_in_range() {
        for d in [Distribution::Uniform, Distribution::Latest] {
            let mut c = Chooser::new(Workload::C, d, 50, 1000, 1);
            for _ in 0..1000 {
                let Request::Point(Operation::Read, k) = c.next(50) else {
                    panic!("workload c only reads");
                };
                assert!(k < 50);
            }
        }
    }
}
