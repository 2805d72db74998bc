//! The experiment's keys and values, its writer and its checking reader.
//!
//! Keys are db_bench's decimal key numbers ([`KeyFormat`]), so a contiguous range of numbers
//! is a contiguous key range, and the partition boundaries are keys of evenly spaced numbers.
//! A value is the key number (8 bytes, little-endian) followed by db_bench-style filler: any
//! version of a key's value names its key, so the reader can check what it finds without
//! knowing which write it sees.

use std::sync::atomic::{AtomicBool, Ordering};

use serde::Serialize;
use sluice::{Db, Error, Result};
use sluice_bench::keys::KeyFormat;
use sluice_bench::stream::SplitMix64;
use sluice_bench::values::ValueGenerator;
use sluice_bench::ycsb::generator::Zipfian;

/// Smallest value: the key number, and some filler.
pub const MIN_VALUE_SIZE: usize = 16;

/// Builds values that name their key.
pub struct Values {
    filler: ValueGenerator,
    size: usize,
    buf: Vec<u8>,
}

impl Values {
    /// Values of `size` bytes (at least [`MIN_VALUE_SIZE`]), filler drawn from `rng`.
    pub fn new(size: usize, rng: &mut SplitMix64) -> Values {
        let size = size.max(MIN_VALUE_SIZE);
        Values {
            filler: ValueGenerator::from_stream(rng, size),
            size,
            buf: Vec::with_capacity(size),
        }
    }

    /// The value of key number `n`.
    pub fn value(&mut self, n: u64) -> &[u8] {
        self.buf.clear();
        self.buf.extend_from_slice(&n.to_le_bytes());
        self.buf
            .extend_from_slice(self.filler.generate(self.size - 8));
        &self.buf
    }
}

/// True when `value` is a `size`-byte value of key number `n`.
pub fn names_key(value: &[u8], n: u64, size: usize) -> bool {
    value.len() == size.max(MIN_VALUE_SIZE) && value.get(..8) == Some(&n.to_le_bytes()[..])
}

/// The reference set: every `every`-th key number below `num`.
#[derive(Clone, Copy, Debug)]
pub struct Reference {
    pub num: u64,
    pub every: u64,
}

impl Reference {
    /// Keys in the set.
    pub fn len(&self) -> u64 {
        self.num.div_ceil(self.every.max(1))
    }

    /// True when the set is empty (`num` is 0).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `i`-th key number of the set.
    pub fn number(&self, i: u64) -> u64 {
        i * self.every.max(1)
    }
}

/// Writes every key of `reference` in key order. Returns the writes.
pub fn load(db: &Db, keys: KeyFormat, values: &mut Values, reference: Reference) -> Result<u64> {
    let mut key = Vec::with_capacity(keys.key_size());
    for i in 0..reference.len() {
        let n = reference.number(i);
        keys.write(n, &mut key);
        db.put(&key, values.value(n))?;
    }
    Ok(reference.len())
}

/// Writes `count` values to key numbers drawn from the zipfian distribution over `0..num`,
/// unscrambled: the smallest numbers are the hottest. Returns the writes.
pub fn write_zipfian(
    db: &Db,
    keys: KeyFormat,
    values: &mut Values,
    num: u64,
    count: u64,
    rng: &mut SplitMix64,
) -> Result<u64> {
    let mut zipf = Zipfian::new(num);
    let mut key = Vec::with_capacity(keys.key_size());
    for _ in 0..count {
        let n = zipf.next(rng);
        keys.write(n, &mut key);
        db.put(&key, values.value(n))?;
    }
    Ok(count)
}

/// What a reader found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReadCheck {
    /// Lookups done.
    pub checked: u64,
    /// Lookups that found nothing, a value of another key, or an error.
    pub misses: u64,
    /// The first miss, for the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_miss: Option<String>,
}

impl ReadCheck {
    /// Adds `other`'s counts; the earlier first miss wins.
    pub fn merge(&mut self, other: ReadCheck) {
        self.checked += other.checked;
        self.misses += other.misses;
        if self.first_miss.is_none() {
            self.first_miss = other.first_miss;
        }
    }

    fn check(&mut self, db: &Db, keys: KeyFormat, n: u64, value_size: usize, key: &mut Vec<u8>) {
        keys.write(n, key);
        self.checked += 1;
        let miss = match db.get(key) {
            Ok(Some(v)) if names_key(&v, n, value_size) => return,
            Ok(Some(v)) => format!("key {n}: a value of {} bytes naming another key", v.len()),
            Ok(None) => format!("key {n}: not found"),
            Err(e) => format!("key {n}: {e}"),
        };
        self.misses += 1;
        self.first_miss.get_or_insert(miss);
    }
}

/// Lookups the reader makes between pauses.
pub const READER_BATCH: u64 = 16;
/// The reader's pause after each batch. The reader shares the host's core with the writer and
/// the flushes; unpaced it would take half of that core and the run would measure the reader.
/// Paced it makes at most 16,000 lookups a second, which still visits every reference key of
/// a default run (131,072) in the first ten seconds.
pub const READER_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// Looks up random reference keys, [`READER_BATCH`] at a time with a [`READER_PAUSE`] after
/// each batch, until `stop` is set.
pub fn check_until(
    db: &Db,
    keys: KeyFormat,
    reference: Reference,
    value_size: usize,
    rng: &mut SplitMix64,
    stop: &AtomicBool,
) -> ReadCheck {
    let mut found = ReadCheck::default();
    let mut key = Vec::with_capacity(keys.key_size());
    while !stop.load(Ordering::Relaxed) && !reference.is_empty() {
        for _ in 0..READER_BATCH {
            let n = reference.number(rng.below(reference.len()));
            found.check(db, keys, n, value_size, &mut key);
        }
        std::thread::sleep(READER_PAUSE);
    }
    found
}

/// Looks up every reference key once.
pub fn check_all(db: &Db, keys: KeyFormat, reference: Reference, value_size: usize) -> ReadCheck {
    let mut found = ReadCheck::default();
    let mut key = Vec::with_capacity(keys.key_size());
    for i in 0..reference.len() {
        found.check(db, keys, reference.number(i), value_size, &mut key);
    }
    found
}

/// The partition boundaries of `ranges` equal ranges of the key numbers `0..num`.
pub fn boundaries(keys: KeyFormat, num: u64, ranges: usize) -> Result<Vec<Vec<u8>>> {
    let ranges = ranges as u64;
    if ranges == 0 || ranges > num {
        return Err(Error::InvalidArgument(format!(
            "cannot cut {num} keys into {ranges} ranges"
        )));
    }
    Ok((1..ranges).map(|r| keys.key(r * num / ranges)).collect())
}
