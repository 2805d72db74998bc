//! The group-commit queue.
//!
//! Writers queue up; the writer at the front becomes the *leader*, takes the batches of the
//! writers behind it (up to a size limit), appends them to the WAL as one record, syncs once if
//! any of them asked for it, applies them to the memtable, and hands every follower its result.
//! Concurrent writers thus share one WAL write and one fsync, as in LevelDB's `DBImpl::Write`.
//!
//! **One leader at a time.** `leader_active` is set, under the queue lock, by the only writer
//! that [`CommitQueue::join`] makes leader, and cleared only by [`CommitQueue::finish`]; a
//! writer becomes leader only while it is clear. Everything between the two calls (the WAL
//! append, the memtable inserts, switching memtables) therefore has a single writer: the
//! memtable's skiplist relies on it (its writer lock is then never contended), and so does the
//! WAL switch in `make_room_for_write`.
//!
//! **Checked writes lead alone.** A write with a precondition (a transaction's commit, whose
//! reads must still hold) is never taken into another's group and takes nobody into its own:
//! when it leads, every earlier group is applied and visible, and no other write lands
//! between its check and its own append (RocksDB's `WriteCallback` without batching).
//!
//! **No allocation per write.** Batches travel by value and come back to their writers
//! ([`Turn::Done`] hands a follower its batch, [`CommitQueue::finish`] the leader's), so a
//! writer can reuse one buffer for all its writes; the group's member list and the buffer that
//! combines a multi-writer group are kept in the queue and reused by every leader.

use std::collections::{HashMap, VecDeque};

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::batch::WriteBatch;
use crate::{Error, Result};

/// Largest group a leader assembles, in batch bytes; bounds the latency a follower adds to a
/// small leader's write. (Followers are taken only while the group is under this, so a group
/// of several writers holds at most twice this many bytes.)
const MAX_GROUP_BYTES: usize = 1 << 20;

/// How long a queued writer watches for the group ahead of it to finish before it sleeps.
const MAX_WATCH: Duration = Duration::from_micros(50);

/// One queued write.
pub(crate) struct Pending {
    ticket: u64,
    /// The writer's batch; the leader sets its sequence number when it commits it alone.
    pub batch: WriteBatch,
    sync: bool,
    /// Leads a group of its own (see the module docs).
    alone: bool,
}

#[derive(Default)]
struct QueueState {
    next_ticket: u64,
    waiting: VecDeque<Pending>,
    /// True while a leader is committing a group (see the module docs).
    leader_active: bool,
    /// The group being committed syncs the WAL: it takes milliseconds, not microseconds, so
    /// waiters sleep at once.
    group_syncs: bool,
    /// Outcomes for followers whose group has been committed, with their batches, by ticket.
    results: HashMap<u64, (std::result::Result<(), Error>, WriteBatch)>,
    /// An empty member list with capacity, lent to each group (an unallocated one while lent).
    spare_members: Vec<Pending>,
    /// The buffer that combines a group of several batches, lent likewise.
    spare_combined: Option<WriteBatch>,
}

/// A group the current leader must commit.
pub(crate) struct Group {
    /// The writes, in queue order, the leader's first.
    pub members: Vec<Pending>,
    /// Whether any writer asked for a sync.
    pub sync: bool,
    /// A buffer for combining the members' batches when there are several (reused across
    /// groups; `None` until first needed).
    pub combined: Option<WriteBatch>,
}

/// What a writer learns when it wakes up.
pub(crate) enum Turn {
    /// Someone else committed this write; here is its outcome and the writer's batch back.
    Done(Result<()>, WriteBatch),
    /// This writer leads: commit the group, then call [`CommitQueue::finish`].
    Lead(Group),
}

/// The queue itself.
#[derive(Default)]
pub(crate) struct CommitQueue {
    queue: Mutex<QueueState>,
    cv: Condvar,
    /// Groups finished so far: a waiter watches it change before it sleeps (see `join`).
    finished: AtomicU64,
}

impl CommitQueue {
    /// Enqueues `batch` and blocks until this writer either becomes leader or has been served.
    /// With `alone`, its group holds only it (see the module docs).
    pub fn join(&self, batch: WriteBatch, sync: bool, alone: bool) -> Turn {
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(Pending {
            ticket,
            batch,
            sync,
            alone,
        });
        loop {
            if let Some((outcome, batch)) = q.results.remove(&ticket) {
                let outcome = outcome.map_err(|e| Error::Background(Box::new(e)));
                return Turn::Done(outcome, batch);
            }
            let at_front = q.waiting.front().is_some_and(|p| p.ticket == ticket);
            if at_front && !q.leader_active {
                q.leader_active = true;
                let group = Self::take_group(&mut q);
                q.group_syncs = group.sync;
                return Turn::Lead(group);
            }
            // A group takes a few microseconds; waking from a sleep takes longer. So a writer
            // whose turn comes when this group finishes (it is in the group, or next in line)
            // first watches for that, yielding the core, for a bounded time (RocksDB's
            // WriteThread::AwaitState), and sleeps only if it has not; the others, and every
            // writer behind a group that syncs, sleep at once. The count changes only under
            // the queue lock, so rechecking it under the lock before sleeping misses no finish.
            let place = q.waiting.iter().position(|p| p.ticket == ticket);
            let seen = self.finished.load(Ordering::Acquire);
            if place.is_none_or(|at| at == 0) && !q.group_syncs {
                MutexGuard::unlocked(&mut q, || self.watch_for_finish(seen));
            }
            if self.finished.load(Ordering::Acquire) == seen {
                self.cv.wait(&mut q);
            }
        }
    }

    /// Returns once a group finishes (the count moves past `seen`), or after [`MAX_WATCH`].
    fn watch_for_finish(&self, seen: u64) {
        let start = Instant::now();
        for i in 0u32.. {
            if self.finished.load(Ordering::Acquire) != seen {
                return;
            }
            if i < 64 {
                std::hint::spin_loop();
            } else if i % 16 == 0 && start.elapsed() > MAX_WATCH {
                return;
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Waits for leadership with an empty batch and returns an empty group, so the caller can
    /// act on the memtable knowing no leader is inserting into it. Call [`CommitQueue::finish`]
    /// afterwards.
    pub fn join_barrier(&self) -> Group {
        match self.join(WriteBatch::new(), false, false) {
            Turn::Lead(group) => group,
            // Nobody takes an empty batch into their group (see `take_group`).
            Turn::Done(..) => Group {
                members: Vec::new(),
                sync: false,
                combined: None,
            },
        }
    }

    /// REQUIRES: the queue lock, and the caller is at the front.
    fn take_group(q: &mut QueueState) -> Group {
        let mut group = Group {
            members: std::mem::take(&mut q.spare_members),
            sync: false,
            combined: q.spare_combined.take(),
        };
        debug_assert!(group.members.is_empty());
        let mut bytes = 0;
        while let Some(front) = q.waiting.front() {
            let leader = group.members.is_empty();
            // A barrier (empty batch) or a checked write leads alone and is never taken as a
            // follower.
            let alone = |p: &Pending| p.batch.is_empty() || p.alone;
            if !leader && (alone(front) || group.members.iter().any(alone)) {
                break;
            }
            // A non-syncing leader must not take a writer that wants a sync: it would skip the
            // fsync that writer was promised (LevelDB's rule).
            let too_big = bytes + front.batch.approximate_size() > MAX_GROUP_BYTES;
            if !leader && ((front.sync && !group.sync) || too_big) {
                break;
            }
            let Some(p) = q.waiting.pop_front() else {
                break;
            };
            bytes += p.batch.approximate_size();
            group.sync |= p.sync;
            group.members.push(p);
        }
        group
    }

    /// Publishes the leader's outcome to its followers, with their batches, and lets the next
    /// leader go. Returns the leader's own batch (an empty one for a barrier's empty group).
    pub fn finish(&self, mut group: Group, outcome: &Result<()>) -> WriteBatch {
        let mut q = self.queue.lock();
        let mut members = group.members.drain(..);
        let own = members.next().map(|m| m.batch);
        for follower in members {
            let shared = outcome.as_ref().map(|_| ()).map_err(Error::duplicate);
            q.results.insert(follower.ticket, (shared, follower.batch));
        }
        q.spare_members = group.members;
        if group.combined.is_some() {
            q.spare_combined = group.combined;
        }
        q.leader_active = false;
        q.group_syncs = false;
        self.finished.fetch_add(1, Ordering::Release);
        self.cv.notify_all();
        drop(q);
        own.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_lone_writer_leads_its_own_group() {
        let q = CommitQueue::default();
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        match q.join(b, false, false) {
            Turn::Lead(g) => {
                assert_eq!(g.members.len(), 1);
                let back = q.finish(g, &Ok(()));
                assert_eq!(back.count(), 1, "the leader gets its batch back");
            }
            Turn::Done(..) => panic!("a lone writer must lead"),
        }
    }

    #[test]
    fn followers_get_the_leaders_outcome() {
        let q = Arc::new(CommitQueue::default());
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let q = Arc::clone(&q);
                std::thread::spawn(move || {
                    let mut b = WriteBatch::new();
                    b.put(format!("k{i}").as_bytes(), b"v");
                    match q.join(b, i % 2 == 0, false) {
                        Turn::Lead(g) => {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            let n = g.members.len();
                            let back = q.finish(g, &Ok(()));
                            assert_eq!(back.count(), 1);
                            (true, n)
                        }
                        Turn::Done(r, back) => {
                            r.unwrap();
                            assert_eq!(back.count(), 1, "a follower gets its batch back");
                            (false, 0)
                        }
                    }
                })
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let committed: usize = results.iter().map(|r| r.1).sum();
        assert_eq!(committed, 8, "every write committed exactly once");
    }

    #[test]
    fn a_checked_write_leads_alone_and_is_never_a_follower() {
        let q = Arc::new(CommitQueue::default());
        let batch = |k: &str| {
            let mut b = WriteBatch::new();
            b.put(k, "v");
            b
        };
        // Hold leadership so that the others queue up behind it.
        let Turn::Lead(first) = q.join(batch("first"), false, false) else {
            panic!("a lone writer must lead")
        };
        let spawn = |k: &'static str, alone: bool| {
            let q = Arc::clone(&q);
            std::thread::spawn(move || match q.join(batch(k), false, alone) {
                Turn::Lead(g) => {
                    let n = g.members.len();
                    q.finish(g, &Ok(()));
                    Some(n)
                }
                Turn::Done(r, _) => {
                    r.unwrap();
                    None
                }
            })
        };
        let queued = |n| {
            while q.queue.lock().waiting.len() < n {
                std::thread::yield_now();
            }
        };
        let plain = spawn("plain", false);
        queued(1);
        let checked = spawn("checked", true);
        queued(2);
        let after = spawn("after", false);
        queued(3);
        q.finish(first, &Ok(()));
        assert_eq!(
            plain.join().unwrap(),
            Some(1),
            "the checked write is not its follower"
        );
        assert_eq!(checked.join().unwrap(), Some(1), "it leads a group of one");
        assert_eq!(after.join().unwrap(), Some(1), "and takes nobody into it");
    }
}
