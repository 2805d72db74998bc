//! The dynamic split's queue: one compaction's sub-tasks handed out as contiguous chunks, in
//! key order, to whichever side asks next (self-scheduling, as in TStore/DStore's dynamic
//! split, but measured within the job rather than only from earlier jobs).
//!
//! Chunk sizes follow guided self-scheduling (Polychronopoulos and Kuck, 1987), weighted by
//! speed: a side that asks gets about `remaining / 2` bytes times its share of the sides'
//! bandwidths (`remaining / (2 * sides)` when they are equal), never less than `floor_bytes`.
//! Early chunks are large, so a job costs few round trips; late chunks are small, so when the
//! queue runs dry every side finishes within about one small chunk of the others. A side's
//! bandwidth is what it achieved on its finished chunks of this job (busy time, so round
//! trips and checks count against a worker), before that its figure from earlier jobs, before
//! that the average of the others'.
//!
//! The floor alone could hand a slow worker the last few megabytes and make everyone wait
//! for it, so at the tail a worker declines a chunk it would finish later than the other
//! sides could finish everything left without it (the fresh bytes plus, on average, half of
//! the chunks they hold); it is then done with the job.
//!
//! Invariants, checked by the tests below:
//! - every sub-task is handed out in exactly one chunk at a time, chunks are contiguous, and
//!   fresh chunks leave in key order;
//! - a chunk that failed goes back to the queue and is handed out again whole, before any
//!   fresh chunk; the side it failed on is retired and takes nothing more in this job;
//! - a worker told [`Take::Done`] stays done for the job; the host (side [`HOST`]) is never
//!   retired and never declines, and is told to [`Take::Wait`] rather than [`Take::Done`]
//!   while another side holds a chunk, since a failure would bring it back: so the job ends
//!   with every sub-task finished, or with [`Dispatcher::stop`].
//!
//! When the queue is empty and a worker still holds a chunk, the host would only wait. If it
//! could finish that chunk sooner than the worker is expected to ([`Dispatcher::worth_racing`]),
//! it [`Dispatcher::take_over`]s the chunk and runs it too; the first copy to finish is kept (a
//! backup task, as MapReduce runs for stragglers). This is what rescues a job whose first
//! worker chunk, sized before anything was measured, went to a much slower worker.
//!
//! The dispatcher is plain data with no locks or clocks; the caller serialises access and
//! reports each finished chunk's busy seconds.

use std::ops::Range;

/// The host's side number; workers are `1..`.
pub const HOST: usize = 0;

/// A contiguous run of sub-tasks handed to one side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Sub-task positions in the plan.
    pub range: Range<usize>,
    /// Their input bytes.
    pub input_bytes: u64,
}

/// What a side asking for work gets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Take {
    /// Run this chunk, then report it with [`Dispatcher::finish`] or [`Dispatcher::fail`].
    Chunk(Chunk),
    /// Host only: nothing to hand out now, but workers hold chunks that may fail and come
    /// back.
    Wait,
    /// Nothing more for this side in this job: the queue is empty (for the host: and
    /// nothing is out), the side failed a chunk or declined one, or the job was stopped.
    Done,
}

/// One side as the dispatcher sees it.
#[derive(Clone, Debug, Default)]
struct Side {
    /// Bandwidth from earlier jobs, bytes per second.
    prior: Option<f64>,
    /// Input bytes and busy seconds of its finished chunks in this job.
    done_bytes: u64,
    busy_seconds: f64,
    /// Chunks it holds now, and their input bytes.
    out: usize,
    out_bytes: u64,
    /// Told [`Take::Done`]: asks no more.
    gone: bool,
}

impl Side {
    /// Bytes per second measured in this job, else from earlier jobs.
    fn measured(&self) -> Option<f64> {
        let rate = self.done_bytes as f64 / self.busy_seconds;
        if self.done_bytes > 0 && rate.is_finite() && rate > 0.0 {
            Some(rate)
        } else {
            self.prior
        }
    }
}

/// Hands out one compaction's sub-tasks; see the module comment.
#[derive(Clone, Debug)]
pub struct Dispatcher {
    /// Input bytes of each sub-task, in key order.
    sizes: Vec<u64>,
    /// The first sub-task never handed out.
    next: usize,
    /// Bytes of `sizes[next..]`.
    fresh_bytes: u64,
    /// Chunks that failed, waiting for another side; sorted by position (key order).
    requeued: Vec<Chunk>,
    /// Host first.
    sides: Vec<Side>,
    /// Smallest fresh chunk, in bytes, except the queue's last.
    floor_bytes: u64,
    /// Sub-tasks finished.
    finished: usize,
    stopped: bool,
}

impl Dispatcher {
    /// A queue over sub-tasks of `sizes` bytes for `priors.len()` sides (host first), where
    /// `priors[i]` is side `i`'s bandwidth in bytes per second from earlier jobs, if known
    /// (a figure that is not a positive number counts as unknown).
    pub fn new(sizes: Vec<u64>, priors: &[Option<f64>], floor_bytes: u64) -> Dispatcher {
        let sides = (0..priors.len().max(1))
            .map(|i| Side {
                prior: priors
                    .get(i)
                    .copied()
                    .flatten()
                    .filter(|b| b.is_finite() && *b > 0.0),
                ..Side::default()
            })
            .collect();
        Dispatcher {
            fresh_bytes: sizes.iter().sum(),
            sizes,
            next: 0,
            requeued: Vec::new(),
            sides,
            floor_bytes: floor_bytes.max(1),
            finished: 0,
            stopped: false,
        }
    }

    /// The next chunk for `side`, or why there is none.
    pub fn take(&mut self, side: usize) -> Take {
        if self.stopped || self.sides.get(side).is_none_or(|s| s.gone) {
            return Take::Done;
        }
        let chunk = if self.requeued.is_empty() {
            self.fresh(side)
        } else {
            Some(self.requeued.remove(0))
        };
        match chunk {
            Some(chunk) => {
                if let Some(s) = self.sides.get_mut(side) {
                    s.out += 1;
                    s.out_bytes += chunk.input_bytes;
                }
                Take::Chunk(chunk)
            }
            None if side == HOST && self.sides.iter().any(|s| s.out > 0) => Take::Wait,
            None => {
                if let Some(s) = self.sides.get_mut(side) {
                    s.gone = side != HOST;
                }
                Take::Done
            }
        }
    }

    /// `side` finished `chunk` in `busy_seconds`.
    pub fn finish(&mut self, side: usize, chunk: &Chunk, busy_seconds: f64) {
        if let Some(s) = self.sides.get_mut(side) {
            release(s, side, chunk);
            if busy_seconds.is_finite() && busy_seconds > 0.0 {
                s.done_bytes += chunk.input_bytes;
                s.busy_seconds += busy_seconds;
            }
        }
        self.finished += chunk.range.len();
    }

    /// `chunk` failed on `side`: it goes back to the queue, and `side` is retired (unless it
    /// is the host, whose failures end the job instead).
    pub fn fail(&mut self, side: usize, chunk: Chunk) {
        if let Some(s) = self.sides.get_mut(side) {
            release(s, side, &chunk);
            s.gone |= side != HOST;
        }
        let at = self
            .requeued
            .partition_point(|c| c.range.start < chunk.range.start);
        self.requeued.insert(at, chunk);
    }

    /// Whether the host, with nothing left to take, should also run the chunk of `bytes` that
    /// worker `side` has held for `elapsed_seconds`: when it would finish it sooner than the
    /// worker is expected to, or when the worker's speed is not known at all (its first chunk,
    /// with no earlier job to go by, is a guess that may be far too big for it).
    pub fn worth_racing(&self, side: usize, bytes: u64, elapsed_seconds: f64) -> bool {
        if side == HOST {
            return false;
        }
        let Some(worker) = self.sides.get(side).and_then(Side::measured) else {
            return true;
        };
        let host = self.rate(HOST);
        bytes as f64 / worker - elapsed_seconds > bytes as f64 / host
    }

    /// The host takes over `chunk`, which worker `side` holds, to run it itself: the chunk is
    /// now the host's to [`Dispatcher::finish`] (whoever's copy ends first is kept), and the
    /// worker, which proved slower than thought, takes nothing more in this job.
    pub fn take_over(&mut self, side: usize, chunk: &Chunk) {
        if side == HOST {
            return;
        }
        if let Some(s) = self.sides.get_mut(side) {
            release(s, side, chunk);
            s.gone = true;
        }
        if let Some(h) = self.sides.get_mut(HOST) {
            h.out += 1;
            h.out_bytes += chunk.input_bytes;
        }
    }

    /// Ends the job early: every side is told [`Take::Done`] from now on.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// True once [`Dispatcher::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// True when every sub-task has been finished (and none is out or queued).
    pub fn is_complete(&self) -> bool {
        self.finished == self.sizes.len()
    }

    /// Side `side`'s bandwidth, bytes per second: measured in this job, else from earlier
    /// jobs, else the average of the sides that have a figure (1 when none has).
    fn rate(&self, side: usize) -> f64 {
        if let Some(r) = self.sides.get(side).and_then(Side::measured) {
            return r;
        }
        let known: Vec<f64> = self.sides.iter().filter_map(Side::measured).collect();
        if known.is_empty() {
            1.0
        } else {
            known.iter().sum::<f64>() / known.len() as f64
        }
    }

    /// The next fresh chunk for `side`: about half the remaining bytes times the side's
    /// share of the bandwidth of the sides still taking work, at least `floor_bytes` and one
    /// sub-task; a remainder under half the floor joins the chunk rather than travel alone.
    /// `None` if nothing is fresh, or if `side` is a worker that declines (module comment).
    fn fresh(&mut self, side: usize) -> Option<Chunk> {
        if self.next >= self.sizes.len() {
            return None;
        }
        let mine = self.rate(side);
        let (mut others, mut others_held) = (0.0, 0.0);
        for (i, s) in self.sides.iter().enumerate() {
            if i != side && !s.gone {
                others += self.rate(i);
                others_held += s.out_bytes as f64;
            }
        }
        let remaining = self.fresh_bytes as f64;
        let target = ((remaining * mine / (mine + others) / 2.0) as u64).max(self.floor_bytes);
        let start = self.next;
        let mut end = start;
        let mut bytes = 0u64;
        for size in self.sizes.get(start..).unwrap_or_default() {
            if bytes >= target && self.fresh_bytes - bytes >= self.floor_bytes / 2 {
                break;
            }
            bytes += size;
            end += 1;
        }
        // Would this worker finish the chunk later than the others could finish all that is
        // left without it (the fresh bytes, and on average half of what they hold)? Then
        // leaving it to them ends the job sooner.
        if side != HOST
            && others > 0.0
            && bytes as f64 / mine > (remaining + others_held / 2.0) / others
        {
            return None;
        }
        self.next = end;
        self.fresh_bytes -= bytes;
        Some(Chunk {
            range: start..end,
            input_bytes: bytes,
        })
    }
}

/// `s` (side `side`) gave back `chunk`, which it held.
fn release(s: &mut Side, side: usize, chunk: &Chunk) {
    debug_assert!(s.out > 0, "side {side} reported a chunk it did not hold");
    s.out = s.out.saturating_sub(1);
    s.out_bytes = s.out_bytes.saturating_sub(chunk.input_bytes);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const MIB: u64 = 1 << 20;

    fn chunk(t: Take) -> Chunk {
        match t {
            Take::Chunk(c) => c,
            other => panic!("expected a chunk, got {other:?}"),
        }
    }

    #[test]
    fn chunks_shrink_geometrically_down_to_the_floor() {
        // 100 sub-tasks of 1 MiB, two sides as fast as each other, a 4 MiB floor.
        let mut d = Dispatcher::new(vec![MIB; 100], &[None, None], 4 * MIB);
        let mut lens = Vec::new();
        let mut worker_done = false;
        loop {
            let side = if worker_done { HOST } else { lens.len() % 2 };
            match d.take(side) {
                Take::Chunk(c) => {
                    lens.push(c.range.len());
                    d.finish(side, &c, c.input_bytes as f64 / 1e6);
                }
                // With the last chunk, the worker may leave it to the host: a tie.
                Take::Done if side != HOST => worker_done = true,
                Take::Done => break,
                Take::Wait => panic!("nothing is out"),
            }
        }
        // remaining / 4, rounded up to whole sub-tasks, until the floor takes over.
        assert_eq!(lens, vec![25, 19, 14, 11, 8, 6, 5, 4, 4, 4]);
        assert!(d.is_complete());
    }

    #[test]
    fn earlier_jobs_size_the_first_chunks() {
        // The host measured twice as fast as the worker: it gets two thirds of half.
        let mut d = Dispatcher::new(vec![MIB; 60], &[Some(2.0), Some(1.0)], MIB);
        assert_eq!(chunk(d.take(HOST)).range, 0..20);
        assert_eq!(chunk(d.take(1)).range, 20..27);
        // An unmeasured side counts as the average of the measured ones.
        let mut d = Dispatcher::new(vec![MIB; 60], &[Some(3.0), Some(f64::NAN), Some(1.0)], MIB);
        assert_eq!(chunk(d.take(1)).range, 0..10);
        // None measured: all equal.
        let mut d = Dispatcher::new(vec![MIB; 60], &[Some(0.0), None], MIB);
        assert_eq!(chunk(d.take(1)).range, 0..15);
    }

    #[test]
    fn this_jobs_chunks_size_the_next_ones() {
        let mut d = Dispatcher::new(vec![MIB; 100], &[None, None], MIB);
        let h = chunk(d.take(HOST));
        let w = chunk(d.take(1));
        assert_eq!((h.range.len(), w.range.len()), (25, 19));
        // The host did 25 MiB in 1 s; the worker, not measured yet, counts as fast.
        d.finish(HOST, &h, 1.0);
        assert_eq!(chunk(d.take(HOST)).range, 44..58);
        // The worker did 19 MiB in 3.8 s: five times slower, it now gets a twelfth of the
        // 42 MiB left, not a quarter.
        d.finish(1, &w, 3.8);
        assert_eq!(chunk(d.take(1)).range, 58..62);
    }

    #[test]
    fn a_slow_worker_declines_the_tail() {
        let mut d = Dispatcher::new(vec![MIB; 20], &[None, None], 4 * MIB);
        let h = chunk(d.take(HOST));
        d.finish(HOST, &h, h.input_bytes as f64 / (100.0 * MIB as f64));
        let w = chunk(d.take(1));
        d.finish(1, &w, w.input_bytes as f64 / (10.0 * MIB as f64));
        // 11 MiB left: the worker would need 0.4 s for a 4 MiB chunk, the host 0.11 s for
        // all of it. The worker is done with the job, even if asked again.
        assert_eq!(d.take(1), Take::Done);
        assert_eq!(d.take(1), Take::Done);
        let mut rest = 0;
        while let Take::Chunk(c) = d.take(HOST) {
            rest += c.range.len();
            d.finish(HOST, &c, 0.01);
        }
        assert_eq!(rest, 11);
        assert!(d.is_complete());
    }

    #[test]
    fn a_worker_takes_the_tail_while_the_host_is_busy() {
        let rate = |c: &Chunk, mib_s: f64| c.input_bytes as f64 / (mib_s * MIB as f64);
        let mut d = Dispatcher::new(vec![MIB; 24], &[None, None], 4 * MIB);
        let h = chunk(d.take(HOST));
        d.finish(HOST, &h, rate(&h, 100.0));
        let w = chunk(d.take(1));
        d.finish(1, &w, rate(&w, 40.0));
        let held = chunk(d.take(HOST));
        assert_eq!(held.range, 11..16);
        // 8 MiB left: the worker needs 0.1 s for 4 of them; the host 0.08 s for all 8, but
        // it is still busy with about half of its 5 MiB chunk.
        let mut idle_host = d.clone();
        assert_eq!(chunk(d.take(1)).range, 16..20);
        idle_host.finish(HOST, &held, rate(&held, 100.0));
        assert_eq!(idle_host.take(1), Take::Done);
    }

    #[test]
    fn a_small_job_is_one_chunk_and_a_tiny_tail_is_not_left_alone() {
        let mut d = Dispatcher::new(vec![MIB; 3], &[None, None], 4 * MIB);
        assert_eq!(chunk(d.take(1)).range, 0..3);
        assert_eq!(d.take(HOST), Take::Wait);
        // 9 MiB, floor 4: the first chunk takes 4, the second would leave 1 MiB (under half
        // the floor) alone, so it takes the rest.
        let mut d = Dispatcher::new(vec![MIB; 9], &[None, None], 4 * MIB);
        assert_eq!(chunk(d.take(HOST)).range, 0..4);
        assert_eq!(chunk(d.take(1)).range, 4..9);
        // No sub-tasks at all.
        let mut d = Dispatcher::new(Vec::new(), &[None, None], MIB);
        assert_eq!(d.take(HOST), Take::Done);
        assert!(d.is_complete());
    }

    #[test]
    fn a_failed_chunk_returns_first_and_retires_its_side() {
        let mut d = Dispatcher::new(vec![MIB; 40], &[None, None, None], MIB);
        let a = chunk(d.take(1));
        let b = chunk(d.take(2));
        let h = chunk(d.take(HOST));
        assert_eq!((a.range.start, b.range.start), (0, a.range.end));
        assert_eq!(h.range.start, b.range.end);
        d.fail(2, b.clone());
        d.fail(1, a.clone());
        // Retired sides take nothing more, even with work left.
        assert_eq!(d.take(1), Take::Done);
        assert_eq!(d.take(2), Take::Done);
        // The failed chunks come back whole, in key order, before fresh ones.
        d.finish(HOST, &h, 1.0);
        assert_eq!(chunk(d.take(HOST)), a);
        assert_eq!(chunk(d.take(HOST)), b);
        assert_eq!(chunk(d.take(HOST)).range.start, h.range.end);
        assert!(!d.is_complete());
    }

    #[test]
    fn the_host_waits_while_a_worker_holds_the_last_chunk() {
        let mut d = Dispatcher::new(vec![MIB; 4], &[None, None], 8 * MIB);
        let c = chunk(d.take(1));
        assert_eq!(d.take(HOST), Take::Wait);
        d.fail(1, c.clone());
        assert_eq!(chunk(d.take(HOST)), c);
        d.finish(HOST, &c, 1.0);
        assert_eq!(d.take(HOST), Take::Done);
        assert!(d.is_complete());
    }

    #[test]
    fn the_host_races_a_straggler_only_when_it_would_finish_first() {
        let mut d = Dispatcher::new(vec![MIB; 40], &[None, None], 4 * MIB);
        let w = chunk(d.take(1));
        let h = chunk(d.take(HOST));
        // The worker's speed is unknown: its chunk is worth racing at once.
        assert!(d.worth_racing(1, w.input_bytes, 0.0));
        assert!(!d.worth_racing(HOST, h.input_bytes, 0.0));
        d.finish(HOST, &h, 0.1);
        // The host does its first 10 MiB in 0.1 s (100 MiB/s). A worker known at 10 MiB/s
        // needs 1 s for 10 MiB, the host 0.1 s: worth racing until the worker is 0.9 s in.
        let mut known = Dispatcher::new(vec![MIB; 40], &[None, Some(10.0 * MIB as f64)], MIB);
        let first = chunk(known.take(HOST));
        assert_eq!(first.input_bytes, 10 * MIB);
        known.finish(HOST, &first, 0.1);
        let ten = 10 * MIB;
        assert!(known.worth_racing(1, ten, 0.5));
        assert!(!known.worth_racing(1, ten, 0.95));
        // Taken over, the chunk is the host's: the worker is done, the host finishes it.
        d.take_over(1, &w);
        assert_eq!(d.take(1), Take::Done);
        d.finish(HOST, &w, 0.0);
        while let Take::Chunk(c) = d.take(HOST) {
            d.finish(HOST, &c, 0.01);
        }
        assert!(d.is_complete());
    }

    #[test]
    fn stop_ends_every_side() {
        let mut d = Dispatcher::new(vec![MIB; 40], &[None, None], MIB);
        let c = chunk(d.take(1));
        d.stop();
        assert!(d.is_stopped());
        assert_eq!(d.take(HOST), Take::Done);
        d.fail(1, c);
        assert_eq!(d.take(HOST), Take::Done);
        assert!(!d.is_complete());
    }

    /// One step of a random schedule: which side asks, and whether a held chunk fails.
    #[derive(Clone, Debug)]
    enum Step {
        Take(usize),
        /// Finish the side's last chunk at this many bytes per second.
        Finish(usize, f64),
        Fail(usize),
        /// The host takes over the side's last chunk.
        Race(usize),
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0usize..3).prop_map(Step::Take),
            (0usize..3, 1.0f64..1e9).prop_map(|(s, r)| Step::Finish(s, r)),
            (0usize..3).prop_map(Step::Fail),
            (1usize..3).prop_map(Step::Race),
        ]
    }

    proptest! {
        /// Under any interleaving of takes, finishes and failures, each sub-task is finished
        /// exactly once, fresh chunks leave in key order and respect the floor (but for the
        /// queue's last), a worker once done gets nothing more, and the host drains the queue.
        #[test]
        fn every_sub_task_is_finished_exactly_once(
            sizes in proptest::collection::vec(1u64..3000, 0..60),
            priors in proptest::collection::vec(proptest::option::of(0.0f64..1e9), 3),
            floor in 1u64..5000,
            steps in proptest::collection::vec(step(), 0..200),
        ) {
            let total: u64 = sizes.iter().sum();
            let mut d = Dispatcher::new(sizes.clone(), &priors, floor);
            let mut held: Vec<Vec<Chunk>> = vec![Vec::new(); 3];
            let mut done = vec![0u32; sizes.len()];
            let mut gone = [false; 3];
            let mut fresh_end = 0usize;
            let mut handed = 0u64;
            let mut check_take = |side: usize, t: Take, held: &mut Vec<Vec<Chunk>>, gone: &mut [bool; 3]| {
                if side != HOST && t == Take::Done {
                    gone[side] = true;
                }
                assert!(side == HOST || t != Take::Wait, "a worker was told to wait");
                if let Take::Chunk(c) = t {
                    assert!(!gone[side], "side {side}, done with the job, got {c:?}");
                    assert!(!c.range.is_empty());
                    let bytes: u64 = sizes[c.range.clone()].iter().sum();
                    assert_eq!(bytes, c.input_bytes);
                    if c.range.start == fresh_end {
                        // A fresh chunk: in key order, and at least the floor unless it ends
                        // the queue.
                        assert!(c.input_bytes >= floor || c.range.end == sizes.len());
                        fresh_end = c.range.end;
                        handed += c.input_bytes;
                    } else {
                        assert!(c.range.end <= fresh_end, "chunk {c:?} skips ahead");
                    }
                    held[side].push(c);
                }
            };
            for s in steps {
                match s {
                    Step::Take(side) => {
                        let t = d.take(side);
                        check_take(side, t, &mut held, &mut gone);
                    }
                    Step::Finish(side, rate) => {
                        if let Some(c) = held[side].pop() {
                            for i in c.range.clone() { done[i] += 1; }
                            d.finish(side, &c, c.input_bytes as f64 / rate);
                        }
                    }
                    Step::Race(side) => {
                        if let Some(c) = held[side].pop() {
                            d.take_over(side, &c);
                            gone[side] = true;
                            held[HOST].push(c);
                            // The rest of what the retired side holds fails (the harder
                            // case: a driver may also still finish a chunk it is checking).
                            while let Some(c) = held[side].pop() {
                                d.fail(side, c);
                            }
                        }
                    }
                    Step::Fail(side) => {
                        if let Some(c) = held[side].pop() {
                            d.fail(side, c);
                            if side != HOST {
                                gone[side] = true;
                                // A retired side's other chunks fail too, as a driver does.
                                while let Some(c) = held[side].pop() {
                                    d.fail(side, c);
                                }
                            }
                        }
                    }
                }
            }
            // Whatever is still held finishes; then the host drains the queue.
            for (side, chunks) in held.iter_mut().enumerate() {
                while let Some(c) = chunks.pop() {
                    for i in c.range.clone() { done[i] += 1; }
                    d.finish(side, &c, 1.0);
                }
            }
            loop {
                match d.take(HOST) {
                    Take::Chunk(c) => {
                        for i in c.range.clone() { done[i] += 1; }
                        d.finish(HOST, &c, 1.0);
                    }
                    Take::Wait => panic!("the host waits with nothing out"),
                    Take::Done => break,
                }
            }
            prop_assert!(done.iter().all(|n| *n == 1), "{done:?}");
            prop_assert!(d.is_complete());
            prop_assert!(handed <= total);
        }
    }
}
