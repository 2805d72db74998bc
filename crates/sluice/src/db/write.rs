//! The write path: validation, group commit, WAL append, memtable insert, and the stalls that
//! keep L0 and the memtables from growing without bound.

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use sluice_sst::key::{MAX_SEQ, SeqNo, ValueKind};
use sluice_sst::ttl::{now_secs, with_write_time};

use super::commit::{Group, Turn};
use super::journal::{Journal, TreeRef};
use super::{Db, StallCause, Tree};
use parking_lot::MutexGuard;
use smallvec::SmallVec;

use crate::batch::{DEFAULT_KEYSPACE_ID, WriteBatch};
use crate::events::StallCondition;
use crate::memtable::MemTable;
use crate::options::WriteOptions;
use crate::{Error, Result};

/// The memtables one group writes, by keyspace id (usually one).
type KeyspaceMemtables = SmallVec<[(u32, Arc<MemTable>); 2]>;

/// Keep a thread's put/delete buffer for its next write only while it is at most this big, so
/// one huge value does not pin its memory to the thread.
const MAX_KEPT_PUT_BUFFER_BYTES: usize = 64 << 10;

thread_local! {
    /// The batch this thread's last `put`/`delete` used, cleared for reuse: a single-entry
    /// write then encodes into it instead of allocating. Taken while a write is in flight, so
    /// a write that reenters (there is none today) would just allocate.
    static PUT_BUFFER: Cell<Option<WriteBatch>> = const { Cell::new(None) };
}

impl Db {
    /// Sets `key` to `value`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_opt(&WriteOptions::default(), key, value)
    }

    /// Sets `key` to `value` with explicit write options.
    pub fn put_opt(
        &self,
        opts: &WriteOptions,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        // Checked before the batch is built: the batch format cannot hold 4 GiB fields.
        self.tree.check_sizes(key, value)?;
        if self.tree.options.ttl.is_some() {
            let stored = with_write_time(value, now_secs());
            let user_bytes = key.len() + value.len();
            return self.journal.write_one(
                &self.tree,
                opts,
                ValueKind::Value,
                key,
                &stored,
                user_bytes,
            );
        }
        self.journal.write_one(
            &self.tree,
            opts,
            ValueKind::Value,
            key,
            value,
            key.len() + value.len(),
        )
    }

    /// Deletes `key` (a no-op if absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_opt(&WriteOptions::default(), key)
    }

    /// Deletes `key` with explicit write options.
    pub fn delete_opt(&self, opts: &WriteOptions, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        self.tree.check_sizes(key, b"")?;
        self.journal
            .write_one(&self.tree, opts, ValueKind::Deletion, key, b"", key.len())
    }

    /// Adds `operand` to `key`'s merge operands: the next read of `key` returns what the
    /// database's merge operator ([`crate::Options::merge_operator`]) makes of its value and
    /// every operand since, oldest first. No read happens now, so a counter increment or a
    /// list append costs one write.
    ///
    /// ```no_run
    /// use std::sync::Arc;
    /// let options = sluice::Options {
    ///     merge_operator: Some(Arc::new(sluice::merge_operator::U64Add)),
    ///     ..Default::default()
    /// };
    /// let db = sluice::Db::open("/tmp/sluice-doc", options)?;
    /// db.merge(b"visits", &1u64.to_le_bytes())?;
    /// db.merge(b"visits", &2u64.to_le_bytes())?;
    /// assert_eq!(db.get(b"visits")?, Some(3u64.to_le_bytes().to_vec()));
    /// # Ok::<(), sluice::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the database has no merge operator: nothing could
    /// ever read the operand back.
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.merge_opt(&WriteOptions::default(), key, operand)
    }

    /// [`Db::merge`] with explicit write options.
    pub fn merge_opt(
        &self,
        opts: &WriteOptions,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, operand) = (key.as_ref(), operand.as_ref());
        self.tree.check_sizes(key, operand)?;
        self.tree.check_merge(key, operand)?;
        self.journal.write_one(
            &self.tree,
            opts,
            ValueKind::Merge,
            key,
            operand,
            key.len() + operand.len(),
        )
    }

    /// Deletes every key in `[start, end)`, however many there are, with one range tombstone
    /// (RocksDB's `DeleteRange`): reads stop seeing them at once, and compactions drop them.
    /// Snapshots taken before keep seeing them. An empty range (`start == end`) deletes
    /// nothing.
    ///
    /// ```no_run
    /// # let db = sluice::Db::open("/tmp/sluice-doc", sluice::Options::default())?;
    /// db.delete_range(b"user:0042:", b"user:0042;")?; // every key with that prefix
    /// # Ok::<(), sluice::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `end` sorts before `start`, or a key is over
    /// [`crate::Options::max_key_size`].
    pub fn delete_range(&self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) -> Result<()> {
        self.delete_range_opt(&WriteOptions::default(), start, end)
    }

    /// [`Db::delete_range`] with explicit write options.
    pub fn delete_range_opt(
        &self,
        opts: &WriteOptions,
        start: impl AsRef<[u8]>,
        end: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (start, end) = (start.as_ref(), end.as_ref());
        self.tree.check_range(start, end)?;
        self.journal.write_one(
            &self.tree,
            opts,
            ValueKind::RangeDeletion,
            start,
            end,
            start.len() + end.len(),
        )
    }

    /// Applies `batch` atomically: after a crash either all of it or none of it is present.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.journal.write(&self.tree, opts, batch)
    }

    /// Makes every write acknowledged so far durable, in every keyspace: syncs the WAL
    /// (RocksDB's `SyncWAL`, `FlushWAL(true)`). Writes made with `sync: false` since the
    /// last sync survive a process crash already; this makes them survive a power failure.
    ///
    /// # Errors
    /// [`Error::ReadOnly`] when opened read-only; the WAL's failure otherwise, which, as a
    /// failed write, stops further writes.
    pub fn sync_wal(&self) -> Result<()> {
        self.flush_wal(true)
    }

    /// Hands the WAL's buffered bytes to the operating system, and with `sync` makes them
    /// durable (RocksDB's `FlushWAL`). Each commit already hands its record over, so without
    /// `sync` this only checks that the WAL is healthy.
    ///
    /// # Errors
    /// As [`Db::sync_wal`].
    pub fn flush_wal(&self, sync: bool) -> Result<()> {
        self.tree.check_writable()?;
        self.journal.check_wal()?;
        let mut wal = self.journal.wal.lock();
        let wal = wal.as_mut().ok_or(Error::Closed)?;
        let done = match sync {
            true => wal.sync(),
            false => wal.flush(),
        };
        if let Err(e) = done.map_err(Error::from) {
            self.journal.fail_wal(&e);
            return Err(e);
        }
        if sync {
            self.journal
                .default
                .counters
                .wal_syncs
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Tree {
    /// The sequence number reads see by default.
    pub(crate) fn latest_seq(&self) -> SeqNo {
        self.visible_seq.load(Ordering::Acquire)
    }

    /// True when opened read-only.
    pub(crate) fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Fails when opened read-only: whatever the caller was about to do changes the database.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.is_read_only() {
            return Err(self.read_only_error());
        }
        Ok(())
    }

    /// What a change refused by a read-only open returns.
    pub(crate) fn read_only_error(&self) -> Error {
        Error::ReadOnly(self.dir.clone())
    }

    /// Rejects a key or value over the configured limits.
    pub(crate) fn check_sizes(&self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > self.options.max_key_size {
            return Err(Error::InvalidArgument(format!(
                "key of {} bytes exceeds max_key_size ({})",
                key.len(),
                self.options.max_key_size
            )));
        }
        if value.len() > self.options.max_value_size {
            return Err(Error::InvalidArgument(format!(
                "value of {} bytes exceeds max_value_size ({})",
                value.len(),
                self.options.max_value_size
            )));
        }
        Ok(())
    }

    /// A range `[start, end)` a range tombstone may cover: both keys within the key size
    /// limit, and `start <= end` (an empty range deletes nothing).
    fn check_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        self.check_sizes(start, b"")?;
        self.check_sizes(end, b"")?;
        if start > end {
            return Err(Error::InvalidArgument(format!(
                "delete_range: the end key ({} bytes) sorts before the start key ({} bytes)",
                end.len(),
                start.len()
            )));
        }
        Ok(())
    }

    /// A merge operand needs an operator to ever be read back, and one it accepts
    /// ([`MergeOperator::validate_operand`]): refused now, it cannot fail every later read.
    ///
    /// [`MergeOperator::validate_operand`]: sluice_sst::merge_operator::MergeOperator::validate_operand
    pub(crate) fn check_merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let Some(operator) = &self.options.merge_operator else {
            return Err(Error::InvalidArgument(
                "merge needs a merge operator (Options::merge_operator)".into(),
            ));
        };
        operator.validate_operand(key, operand).map_err(|why| {
            Error::InvalidArgument(format!(
                "merge operator {:?} refuses the operand for key {}: {why}",
                operator.name(),
                sluice_sst::key::escape_bytes(key)
            ))
        })
    }
}

impl Journal {
    /// Checks every entry against its keyspace's limits. Returns the batch's key and value
    /// bytes, and whether any entry is a value of a keyspace with a TTL (it then needs its
    /// write time).
    fn validate_batch(&self, batch: &WriteBatch) -> Result<(u64, bool)> {
        let mut user_bytes = 0u64;
        let mut needs_write_times = false;
        // The tree of the last entry's keyspace: batches mostly write one keyspace at a time.
        let mut last: Option<(u32, TreeRef<'_>)> = None;
        for entry in batch.iter() {
            let entry = entry?;
            if last.as_ref().is_none_or(|(id, _)| *id != entry.keyspace) {
                let tree = self.tree(entry.keyspace).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "the batch writes to keyspace id {}, which this database does not have",
                        entry.keyspace
                    ))
                })?;
                last = Some((entry.keyspace, tree));
            }
            let Some((_, tree)) = &last else {
                continue;
            };
            match entry.kind {
                ValueKind::RangeDeletion => tree.check_range(entry.key, entry.value)?,
                ValueKind::Merge => {
                    tree.check_sizes(entry.key, entry.value)?;
                    tree.check_merge(entry.key, entry.value)?;
                }
                // Decoding refuses blob references in a batch.
                ValueKind::Value | ValueKind::Deletion | ValueKind::BlobIndex => {
                    tree.check_sizes(entry.key, entry.value)?;
                }
            }
            needs_write_times |= entry.kind == ValueKind::Value && tree.options.ttl.is_some();
            user_bytes += (entry.key.len() + entry.value.len()) as u64;
        }
        Ok((user_bytes, needs_write_times))
    }

    /// Applies `batch`, written through the handle of `tree` (whose metrics count its bytes).
    pub(crate) fn write(&self, tree: &Tree, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.write_checked(tree, opts, batch, None)
    }

    /// [`Journal::write`], and with `check` a precondition run by the commit leader just
    /// before the append, with every earlier write visible and no other landing in between:
    /// an `Err` from it is the write's outcome, and nothing is written.
    pub(crate) fn write_checked(
        &self,
        tree: &Tree,
        opts: &WriteOptions,
        batch: WriteBatch,
        check: Option<&dyn Fn() -> Result<()>>,
    ) -> Result<()> {
        tree.check_writable()?;
        batch.check_handles(&self.open_id)?;
        if batch.is_empty() {
            return Ok(());
        }
        let (user_bytes, needs_write_times) = self.validate_batch(&batch)?;
        let batch = match needs_write_times {
            true => self.with_write_times(&batch)?,
            false => batch,
        };
        self.commit(tree, opts, batch, user_bytes, check).0
    }

    /// Runs `check` as the commit leader of an empty group, with every earlier write visible
    /// and none landing meanwhile; returns the last visible sequence number it ran at.
    pub(crate) fn check_alone(&self, check: &dyn Fn() -> Result<()>) -> Result<SeqNo> {
        let group = self.commit.join_barrier();
        let seq = self.visible_seq.load(Ordering::Acquire);
        let outcome = check();
        self.commit.finish(group, &outcome);
        outcome.map(|()| seq)
    }

    /// `batch` with the write time (now) after every value of a keyspace with a TTL.
    fn with_write_times(&self, batch: &WriteBatch) -> Result<WriteBatch> {
        let now = now_secs();
        let mut stamped = WriteBatch::new();
        for entry in batch.iter() {
            let entry = entry?;
            let ttl = self
                .tree(entry.keyspace)
                .is_some_and(|tree| tree.options.ttl.is_some());
            if entry.kind == ValueKind::Value && ttl {
                let value = with_write_time(entry.value, now);
                stamped.add(entry.keyspace, entry.kind, entry.key, &value);
            } else {
                stamped.add(entry.keyspace, entry.kind, entry.key, entry.value);
            }
        }
        Ok(stamped)
    }

    /// A write of one entry of `tree`'s keyspace, encoded into this thread's reusable batch,
    /// whose sizes the caller checked. `user_bytes`: its key and value bytes.
    pub(crate) fn write_one(
        &self,
        tree: &Tree,
        opts: &WriteOptions,
        kind: ValueKind,
        key: &[u8],
        value: &[u8],
        user_bytes: usize,
    ) -> Result<()> {
        tree.check_writable()?;
        let mut batch = PUT_BUFFER.take().unwrap_or_default();
        batch.clear();
        batch.add(tree.keyspace_id, kind, key, value);
        let (outcome, batch) = self.commit(tree, opts, batch, user_bytes as u64, None);
        if batch.capacity() <= MAX_KEPT_PUT_BUFFER_BYTES {
            PUT_BUFFER.set(Some(batch));
        }
        outcome
    }

    /// Commits a validated, non-empty batch through the group-commit queue; returns the
    /// outcome and the batch, for reuse. `tree`'s metrics count `user_bytes`. A batch with a
    /// `check` leads a group of its own, and the check runs first.
    fn commit(
        &self,
        tree: &Tree,
        opts: &WriteOptions,
        batch: WriteBatch,
        user_bytes: u64,
        check: Option<&dyn Fn() -> Result<()>>,
    ) -> (Result<()>, WriteBatch) {
        let (outcome, batch) = match self.commit.join(batch, opts.sync, check.is_some()) {
            Turn::Done(outcome, batch) => (outcome, batch),
            Turn::Lead(mut group) => {
                let outcome = match check {
                    Some(check) => check().and_then(|()| self.commit_group(&mut group)),
                    None => self.commit_group(&mut group),
                };
                let batch = self.commit.finish(group, &outcome);
                (outcome, batch)
            }
        };
        if outcome.is_ok() {
            tree.counters
                .user_bytes
                .fetch_add(user_bytes, Ordering::Relaxed);
        }
        (outcome, batch)
    }

    /// Leader only: logs and applies a group. Runs without the state lock except to make room.
    /// A group of one batch is logged as it is; several are combined in the group's reusable
    /// buffer, so the WAL record is the same either way.
    fn commit_group(&self, group: &mut Group) -> Result<()> {
        self.check_wal()?;
        let first_seq = self.visible_seq.load(Ordering::Acquire) + 1;
        let combined = match group.members.as_mut_slice() {
            [only] => &mut only.batch,
            members => {
                let combined = group.combined.get_or_insert_with(WriteBatch::new);
                combined.clear();
                for m in members.iter() {
                    combined.append(&m.batch);
                }
                combined
            }
        };
        let count = u64::from(combined.count());
        if first_seq + count > MAX_SEQ {
            return Err(Error::ResourceExhausted(
                "sequence numbers: the database has used every one of 2^56".into(),
            ));
        }
        combined.set_sequence(first_seq);
        let combined = &*combined;
        let mems = self.memtables_for(combined)?;
        {
            let mut wal = self.wal.lock();
            let wal = wal.as_mut().ok_or(Error::Closed)?;
            let before = wal.len();
            // If the process dies after this write reaches the OS, recovery replays the whole
            // group; if it dies before, none of it was acknowledged.
            let logged = wal.add_record(combined.data()).and_then(|()| {
                if group.sync {
                    self.default
                        .counters
                        .wal_syncs
                        .fetch_add(1, Ordering::Relaxed);
                    wal.sync()
                } else {
                    wal.flush()
                }
            });
            let logged = logged.map_err(Error::from);
            self.default
                .counters
                .wal_bytes
                .fetch_add(wal.len().saturating_sub(before), Ordering::Relaxed);
            if let Err(e) = logged {
                // A WAL we failed to write may hold a partial record: refuse further writes.
                self.fail_wal(&e);
                return Err(e);
            }
        }
        // The leader is the memtables' only writer (see `commit`'s module docs): their writer
        // locks, held for the whole group, are never contended. An entry whose keyspace was
        // dropped after the batch was checked has no memtable: it is skipped, as replay
        // skips it.
        let mut writers: SmallVec<[_; 2]> =
            mems.iter().map(|(id, mem)| (*id, mem.writer())).collect();
        for (seq, entry) in (first_seq..).zip(combined.iter()) {
            let entry = entry?;
            if let Some((_, writer)) = writers.iter_mut().find(|(id, _)| *id == entry.keyspace) {
                writer.add(seq, entry.kind, entry.key, entry.value);
            }
        }
        drop(writers);
        self.visible_seq
            .store(first_seq + count - 1, Ordering::Release);
        Ok(())
    }

    /// The memtables a group's batch goes to, by keyspace id, each with room made for it (see
    /// [`Tree::make_room_for_write`]). A database without keyspaces writes only its own.
    fn memtables_for(&self, batch: &WriteBatch) -> Result<KeyspaceMemtables> {
        let mut ids: SmallVec<[u32; 2]> = SmallVec::new();
        if self.keyspaces.read().is_empty() {
            ids.push(DEFAULT_KEYSPACE_ID);
        } else {
            for entry in batch.iter() {
                let id = entry?.keyspace;
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
        let mut mems = SmallVec::new();
        for id in ids {
            if let Some(tree) = self.tree(id) {
                mems.push((id, tree.make_room_for_write(self, false)?));
            }
        }
        Ok(mems)
    }
}

impl Tree {
    /// Returns the memtable to write into, first waiting or switching memtables as needed.
    /// `force` freezes the current memtable even if it has room (used by `flush`).
    /// Only the commit leader of `journal` (or the holder of its barrier) calls this.
    pub(crate) fn make_room_for_write(
        &self,
        journal: &Journal,
        mut force: bool,
    ) -> Result<Arc<MemTable>> {
        let mut slowed = false;
        let mut st = self.state.lock();
        loop {
            Self::check_bg_error(&st)?;
            if st.closing {
                return Err(Error::Closed);
            }
            // Read each time round: a stalled writer wakes to options set meanwhile.
            let options = self.live_options();
            let l0_files = st.versions.current().l0_depth();
            let l0_stalls = !options.compaction.disable_auto_compactions;
            if l0_stalls && !slowed && l0_files >= options.compaction.l0_slowdown_writes_trigger {
                // Delay this write by a millisecond rather than stopping later for seconds:
                // it hands the CPU to compaction and spreads the delay over many writes.
                let start = Instant::now();
                drop(st);
                std::thread::sleep(Duration::from_millis(1));
                self.note_stall(StallCause::L0Slowdown, start);
                slowed = true;
                st = self.state.lock();
                continue;
            }
            let full = st.mem.approximate_bytes() >= options.memtable.write_buffer_size;
            if (!force && !full) || (force && st.mem.is_empty()) {
                let mem = Arc::clone(&st.mem);
                drop(st);
                let delayed =
                    l0_stalls && l0_files >= options.compaction.l0_slowdown_writes_trigger;
                self.events.stall_condition(match delayed {
                    true => StallCondition::Delayed,
                    false => StallCondition::Normal,
                });
                return Ok(mem);
            }
            let memtables_full = st.imm.len() + 1 >= options.memtable.max_write_buffer_number;
            let l0_full = l0_stalls && l0_files >= options.compaction.l0_stop_writes_trigger;
            if (memtables_full || l0_full) && self.events.stall_changes_to(StallCondition::Stopped)
            {
                // Told without the lock; then every condition is checked again, since the
                // work that ends the stop may have finished meanwhile.
                MutexGuard::unlocked(&mut st, || {
                    self.events.stall_condition(StallCondition::Stopped)
                });
                continue;
            }
            if memtables_full {
                let start = Instant::now();
                tracing::debug!("memtables full; waiting for flush");
                self.bg_done.wait(&mut st);
                self.note_stall(StallCause::MemtableLimit, start);
                continue;
            }
            if l0_full {
                let start = Instant::now();
                tracing::debug!(l0_files, "too many L0 files; waiting for compaction");
                self.bg_work.notify_all();
                self.bg_done.wait(&mut st);
                self.note_stall(StallCause::L0Stop, start);
                continue;
            }
            // Switch to a new memtable and WAL (the database's, for a keyspace's tree). Only
            // the group-commit leader gets here, and nobody else touches the WAL, so the file
            // work happens without the state lock.
            drop(st);
            let switched = journal.rotate_wal();
            st = self.state.lock();
            let log_number = match switched {
                Ok(number) => number,
                Err(e) => {
                    self.set_bg_error(&mut st, &e);
                    return Err(e);
                }
            };
            let frozen = std::mem::replace(
                &mut st.mem,
                Arc::new(MemTable::for_write_buffer(
                    log_number,
                    options.memtable.write_buffer_size,
                )),
            );
            st.imm.push_back(frozen);
            force = false;
            self.bg_work.notify_all();
        }
    }

    fn note_stall(&self, cause: StallCause, start: Instant) {
        let micros = start.elapsed().as_micros() as u64;
        let (count, total) = &self.counters.stalls[cause as usize];
        count.fetch_add(1, Ordering::Relaxed);
        total.fetch_add(micros, Ordering::Relaxed);
    }

    /// Freezes the memtable and waits for all frozen memtables to reach L0.
    pub(crate) fn flush_and_wait(&self, journal: &Journal) -> Result<()> {
        self.check_writable()?;
        // Lead an empty group so no leader is mid-insert into the memtable we freeze.
        let group = journal.commit.join_barrier();
        let outcome = self.make_room_for_write(journal, true).map(|_| ());
        journal.commit.finish(group, &outcome);
        outcome?;
        self.wait_for_frozen_memtables()
    }

    /// As the commit leader (or holding its barrier): freezes the memtable and waits until
    /// every frozen memtable is in L0, so that no write made so far is left outside a table.
    pub(crate) fn flush_as_leader(&self, journal: &Journal) -> Result<()> {
        self.make_room_for_write(journal, true)?;
        self.wait_for_frozen_memtables()
    }

    /// Waits until no frozen memtable awaits its flush.
    fn wait_for_frozen_memtables(&self) -> Result<()> {
        let mut st = self.state.lock();
        while !st.imm.is_empty() {
            Self::check_bg_error(&st)?;
            if st.closing {
                return Err(Error::Closed);
            }
            self.bg_work.notify_all();
            self.bg_done.wait(&mut st);
        }
        Self::check_bg_error(&st)
    }
}
