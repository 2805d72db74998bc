//! The group-commit queue.
//!
//! Writers queue up; the writer at the front becomes the *leader*, takes the batches of the
//! writers behind it (up to a size limit), appends them to the WAL as one record, syncs once if
//! any of them asked for it, applies them to the memtable, and hands every follower its result.
//! Concurrent writers thus share one WAL write and one fsync, as in LevelDB's `DBImpl::Write`.

use std::collections::{HashMap, VecDeque};

use parking_lot::{Condvar, Mutex};

use crate::batch::WriteBatch;
use crate::{Error, Result};

/// Largest group a leader assembles, in batch bytes; bounds the latency a follower adds to a
/// small leader's write.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// One queued write.
struct Pending {
    ticket: u64,
    batch: WriteBatch,
    sync: bool,
}

#[derive(Default)]
struct QueueState {
    next_ticket: u64,
    waiting: VecDeque<Pending>,
    /// True while a leader is committing a group.
    leader_active: bool,
    /// Outcomes for followers whose group has been committed, by ticket.
    results: HashMap<u64, std::result::Result<(), Error>>,
}

/// A group the current leader must commit.
pub(crate) struct Group {
    /// Tickets of every writer in the group, the leader's first.
    pub tickets: Vec<u64>,
    /// The batches, in queue order.
    pub batches: Vec<WriteBatch>,
    /// Whether any writer asked for a sync.
    pub sync: bool,
}

/// What a writer learns when it wakes up.
pub(crate) enum Turn {
    /// Someone else committed this write.
    Done(Result<()>),
    /// This writer leads: commit the group, then call [`CommitQueue::finish`].
    Lead(Group),
}

/// The queue itself.
#[derive(Default)]
pub(crate) struct CommitQueue {
    queue: Mutex<QueueState>,
    cv: Condvar,
}

impl CommitQueue {
    /// Enqueues `batch` and blocks until this writer either becomes leader or has been served.
    pub fn join(&self, batch: WriteBatch, sync: bool) -> Turn {
        let mut q = self.queue.lock();
        let ticket = q.next_ticket;
        q.next_ticket += 1;
        q.waiting.push_back(Pending {
            ticket,
            batch,
            sync,
        });
        loop {
            if let Some(outcome) = q.results.remove(&ticket) {
                return Turn::Done(outcome.map_err(|e| Error::Background(Box::new(e))));
            }
            let at_front = q.waiting.front().is_some_and(|p| p.ticket == ticket);
            if at_front && !q.leader_active {
                q.leader_active = true;
                return Turn::Lead(Self::take_group(&mut q));
            }
            self.cv.wait(&mut q);
        }
    }

    /// Waits for leadership with an empty batch and returns an empty group, so the caller can
    /// act on the memtable knowing no leader is inserting into it. Call [`CommitQueue::finish`]
    /// afterwards.
    pub fn join_barrier(&self) -> Group {
        match self.join(WriteBatch::new(), false) {
            Turn::Lead(group) => group,
            // Nobody takes an empty batch into their group (see `take_group`).
            Turn::Done(_) => Group {
                tickets: Vec::new(),
                batches: Vec::new(),
                sync: false,
            },
        }
    }

    /// REQUIRES: the queue lock, and the caller is at the front.
    fn take_group(q: &mut QueueState) -> Group {
        let mut group = Group {
            tickets: Vec::new(),
            batches: Vec::new(),
            sync: false,
        };
        let mut bytes = 0;
        while let Some(front) = q.waiting.front() {
            let leader = group.tickets.is_empty();
            // A barrier (empty batch) leads alone and is never taken as a follower.
            if !leader && (front.batch.is_empty() || group.batches.iter().all(WriteBatch::is_empty))
            {
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
            group.tickets.push(p.ticket);
            group.batches.push(p.batch);
        }
        group
    }

    /// Publishes the leader's outcome to its followers and lets the next leader go.
    pub fn finish(&self, group: &Group, outcome: &Result<()>) {
        let mut q = self.queue.lock();
        for &ticket in group.tickets.iter().skip(1) {
            let shared = outcome.as_ref().map(|_| ()).map_err(Error::duplicate);
            q.results.insert(ticket, shared);
        }
        q.leader_active = false;
        self.cv.notify_all();
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
        match q.join(b, false) {
            Turn::Lead(g) => {
                assert_eq!(g.tickets.len(), 1);
                q.finish(&g, &Ok(()));
            }
            Turn::Done(_) => panic!("a lone writer must lead"),
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
                    match q.join(b, i % 2 == 0) {
                        Turn::Lead(g) => {
                            std::thread::sleep(std::time::Duration::from_millis(5));
                            let n = g.batches.len();
                            q.finish(&g, &Ok(()));
                            (true, n)
                        }
                        Turn::Done(r) => {
                            r.unwrap();
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
}
