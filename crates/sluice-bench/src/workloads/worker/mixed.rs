//! The operation loops of the benchmarks that mix reads and writes, or delete: readwhilewriting,
//! updaterandom, readrandomwriterandom and deleterandom.
//!
//! The peers' programs do not run these, so STREAM.md says nothing about them; they follow its
//! rule all the same: a benchmark that writes values builds its value buffer from the stream
//! first, and each operation then draws exactly one key number. readrandomwriterandom chooses
//! between read and write by position, not by a draw (db_bench's interleaving), so its keys are
//! the same whatever `read_write_percent` is.

use std::sync::atomic::Ordering;
use std::time::Instant;

use sluice::{Result, TransactionOptions};

use super::Worker;
use crate::values::ValueGenerator;
use crate::workloads::share;

impl Worker<'_> {
    /// readwhilewriting: thread 0 is the writer, the `threads` others readers doing their share
    /// of `reads` lookups as readrandom does. The reader's count of those still reading goes down
    /// as each ends, even on an error, so the writer never waits for a reader that is gone.
    pub(super) fn read_while_writing(&mut self) -> Result<()> {
        if self.index == 0 {
            return self.write_until_readers_done();
        }
        let readers = self.config.threads;
        let outcome = self.read_random(share(self.config.reads, readers, self.index - 1));
        self.shared.readers_left.fetch_sub(1, Ordering::Release);
        outcome
    }

    /// readwhilewriting's writer: overwrites uniform keys, as overwrite does, until no reader is
    /// left (or the benchmark is stopped). It writes at least once unless stopped first, so a
    /// result always shows the writer ran. Its puts count only in `writes`: the operations,
    /// bytes, latency and progress are the readers'.
    fn write_until_readers_done(&mut self) -> Result<()> {
        let num = self.config.num;
        let value_size = self.config.value_size;
        let mut values = ValueGenerator::from_stream(&mut self.stream, value_size);
        let opts = self.write_options();
        while !self.stopped() {
            let n = self.stream.below(num);
            self.keys.write(n, &mut self.key);
            self.db
                .put_opt(&opts, &self.key, values.generate(value_size))?;
            self.tally.writes += 1;
            // Acquire pairs with the readers' Release: once this reads 0 every read is done.
            if self.shared.readers_left.load(Ordering::Acquire) == 0 {
                break;
            }
        }
        Ok(())
    }

    /// updaterandom: this thread's share of `reads` read-modify-writes of uniform keys, each a
    /// get and then a put of a new value, timed as one operation. Bytes count the value read
    /// (if found) and the entry written.
    pub(super) fn update_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        let value_size = self.config.value_size;
        let mut values = ValueGenerator::from_stream(&mut self.stream, value_size);
        let opts = self.write_options();
        for _ in first..end {
            if self.next_random_key().is_none() {
                break;
            }
            let value = values.generate(value_size);
            let start = Instant::now();
            let old = self.db.get(&self.key)?;
            self.db.put_opt(&opts, &self.key, value)?;
            let read = old.as_ref().map_or(0, |v| self.key.len() + v.len());
            self.tally.found += u64::from(old.is_some());
            self.tally.writes += 1;
            self.done(start, read + self.key.len() + value.len());
        }
        Ok(())
    }

    /// readrandomwriterandom: this thread's share of `reads` operations on uniform keys. Every
    /// 100 operations are `read_write_percent` gets and then the rest puts, as db_bench
    /// interleaves them, so a thread with a multiple of 100 operations does exactly that share
    /// of reads.
    pub(super) fn read_random_write_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        let percent = u64::from(self.shared.workload.read_write_percent);
        let value_size = self.config.value_size;
        let mut values = ValueGenerator::from_stream(&mut self.stream, value_size);
        let opts = self.write_options();
        for i in 0..end - first {
            if self.next_random_key().is_none() {
                break;
            }
            let (start, bytes) = if i % 100 < percent {
                let start = Instant::now();
                let value = self.db.get(&self.key)?;
                self.tally.found += u64::from(value.is_some());
                (start, value.map_or(0, |v| self.key.len() + v.len()))
            } else {
                let value = values.generate(value_size);
                let start = Instant::now();
                self.db.put_opt(&opts, &self.key, value)?;
                self.tally.writes += 1;
                (start, self.key.len() + value.len())
            };
            self.done(start, bytes);
        }
        Ok(())
    }

    /// randomtransaction: this thread's share of `reads` transactions, each drawing two
    /// uniform keys, reading both for update, writing a new value to each and committing,
    /// timed as one operation with its retries. A commit that fails with `Busy` runs again
    /// with the same keys and values, and counts in `conflicts`. Bytes count the values read
    /// and the entries written.
    pub(super) fn random_transaction(&mut self) -> Result<()> {
        let (first, end) = share(self.config.reads, self.config.threads, self.index);
        let value_size = self.config.value_size;
        let mut values = ValueGenerator::from_stream(&mut self.stream, value_size);
        let options = TransactionOptions {
            concurrency: self.shared.workload.transaction,
            write: self.write_options(),
            ..TransactionOptions::default()
        };
        let mut second = self.key.clone();
        for _ in first..end {
            if self.next_random_key().is_none() {
                break;
            }
            std::mem::swap(&mut self.key, &mut second);
            if self.next_random_key().is_none() {
                break;
            }
            let a = values.generate(value_size).to_vec();
            let b = values.generate(value_size);
            let start = Instant::now();
            let (read, found) = loop {
                let mut txn = self.db.transaction_with(options.clone());
                let attempt = (|| {
                    let old = [txn.get_for_update(&second)?, txn.get_for_update(&self.key)?];
                    txn.put(&second, &a)?;
                    txn.put(&self.key, b)?;
                    Ok(old)
                })();
                match attempt.and_then(|old| txn.commit().map(|_| old)) {
                    Ok(old) => {
                        let found = old.iter().flatten();
                        let read: usize = found.clone().map(|v| self.key.len() + v.len()).sum();
                        break (read, found.count());
                    }
                    Err(sluice::Error::Busy(_)) => self.tally.conflicts += 1,
                    Err(e) => return Err(e),
                }
            };
            self.tally.found += found as u64;
            self.tally.writes += 2;
            self.done(
                start,
                read + second.len() + self.key.len() + a.len() + b.len(),
            );
        }
        Ok(())
    }

    /// deleterandom: this thread's share of `num` deletes of uniform keys from `[0, num)`.
    /// Bytes count the keys.
    pub(super) fn delete_random(&mut self) -> Result<()> {
        let (first, end) = share(self.config.num, self.config.threads, self.index);
        let opts = self.write_options();
        for _ in first..end {
            if self.next_random_key().is_none() {
                break;
            }
            let start = Instant::now();
            self.db.delete_opt(&opts, &self.key)?;
            let bytes = self.key.len();
            self.done(start, bytes);
        }
        Ok(())
    }
}
