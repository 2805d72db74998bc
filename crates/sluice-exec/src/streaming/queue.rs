//! The queue protocol between the streaming executor's stages.
//!
//! Every queue carries zero or more items, in key order, followed by exactly one terminator:
//! `Ok(Flow::End)` when the stage upstream finished, or `Err(e)` when it, or a stage above it,
//! failed. A queue that disconnects with no terminator means the thread upstream died (it
//! panicked): [`Inlet::recv`] reports that as an error instead of taking it for the end of the
//! input, so a dead stage can never silently truncate the output.
//!
//! A send fails only when the stage downstream has dropped its receiver, which it does when it
//! stops, finished or failed; the sender then stops too. So a failure anywhere unwinds the whole
//! pipeline: downstream through the error message, upstream through dropped receivers, and no
//! stage is left blocked on a queue nobody serves.
//!
//! Both ends can charge the time they spend blocked to a [`WaitClock`], so a stage's step time
//! can leave out the time it waited for its neighbours.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};

use crate::{Error, Result};

/// One message on a stage queue: an item, or the end of a successful stream.
#[derive(Debug)]
pub(super) enum Flow<T> {
    /// The next item in key order.
    Item(T),
    /// The stage upstream finished; nothing follows.
    End,
}

/// What a queue carries: items, then `Ok(Flow::End)` or one `Err`.
pub(super) type Msg<T> = Result<Flow<T>>;

/// Nanoseconds a stage spent blocked on its queues. Cloned into every queue end of one stage;
/// the counter is shared, so the sum is the stage's total.
#[derive(Clone, Debug, Default)]
pub(super) struct WaitClock(Arc<AtomicU64>);

impl WaitClock {
    /// Runs `f`, charging its duration as waiting.
    fn time<T>(&self, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = f();
        self.0
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    /// Nanoseconds waited so far.
    pub(super) fn nanos(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The receiving end of a queue, as the stage downstream sees it.
#[derive(Debug)]
pub(super) struct Inlet<T> {
    rx: Receiver<Msg<T>>,
    /// The stage upstream, for the error raised when it dies.
    from: &'static str,
    clock: WaitClock,
    /// True once `Flow::End` has been received: later calls return `Ok(None)` again.
    ended: bool,
}

impl<T> Inlet<T> {
    /// Wraps `rx`, fed by the stage named `from`; blocking time is charged to `clock`.
    pub(super) fn new(rx: Receiver<Msg<T>>, from: &'static str, clock: WaitClock) -> Self {
        Inlet {
            rx,
            from,
            clock,
            ended: false,
        }
    }

    /// The next item; `Ok(None)` at the end of the stream; the upstream error if it failed, or
    /// an error if it died without a terminator.
    pub(super) fn recv(&mut self) -> Result<Option<T>> {
        if self.ended {
            return Ok(None);
        }
        // Only a blocking receive counts as waiting; the fast path takes no clock reading.
        let msg = match self.rx.try_recv() {
            Ok(msg) => Some(msg),
            Err(TryRecvError::Disconnected) => None,
            Err(TryRecvError::Empty) => self.clock.time(|| self.rx.recv().ok()),
        };
        match msg {
            Some(Ok(Flow::Item(item))) => Ok(Some(item)),
            Some(Ok(Flow::End)) => {
                self.ended = true;
                Ok(None)
            }
            Some(Err(e)) => Err(e),
            None => Err(Error::InvalidArgument(format!(
                "the streaming compaction's {} stopped without finishing its stream",
                self.from
            ))),
        }
    }
}

/// The sending end of a queue, as the stage upstream sees it.
#[derive(Debug)]
pub(super) struct Outlet<T> {
    tx: Sender<Msg<T>>,
    clock: WaitClock,
}

impl<T> Outlet<T> {
    /// Wraps `tx`; blocking time is charged to `clock`.
    pub(super) fn new(tx: Sender<Msg<T>>, clock: WaitClock) -> Self {
        Outlet { tx, clock }
    }

    /// Sends `msg`, waiting while the queue is full. False when the stage downstream has
    /// stopped: the caller must stop too.
    #[must_use = "a failed send means the stage downstream stopped; the caller must stop"]
    pub(super) fn send(&self, msg: Msg<T>) -> bool {
        match self.tx.try_send(msg) {
            Ok(()) => true,
            Err(TrySendError::Disconnected(_)) => false,
            Err(TrySendError::Full(msg)) => self.clock.time(|| self.tx.send(msg).is_ok()),
        }
    }

    /// Sends an item, or the error that ends the stream. False when the stage downstream has
    /// stopped, or `item` was an error: either way the caller must stop.
    #[must_use = "false means the caller must stop"]
    pub(super) fn forward(&self, item: Result<T>) -> bool {
        let failed = item.is_err();
        self.send(item.map(Flow::Item)) && !failed
    }

    /// Ends the stream: `Flow::End` after success, the error after a failure. Whether the stage
    /// downstream still listens no longer matters.
    pub(super) fn close(self, outcome: Result<()>) {
        let _ = self.send(outcome.map(|()| Flow::End));
    }
}

/// An [`Outlet`] that sends items in bursts of up to `burst` per message, so the stages pay one
/// queue operation (and at most one wake-up of a blocked neighbour) per burst, not per item.
#[derive(Debug)]
pub(super) struct BurstOutlet<T> {
    out: Outlet<Vec<T>>,
    buf: Vec<T>,
    burst: usize,
}

impl<T> BurstOutlet<T> {
    /// Bursts of up to `burst` (at least 1) items on `out`.
    pub(super) fn new(out: Outlet<Vec<T>>, burst: usize) -> Self {
        let burst = burst.max(1);
        BurstOutlet {
            out,
            buf: Vec::with_capacity(burst),
            burst,
        }
    }

    /// Adds an item, sending the burst once it is full. False when the stage downstream has
    /// stopped: the caller must stop.
    #[must_use = "a failed send means the stage downstream stopped; the caller must stop"]
    pub(super) fn push(&mut self, item: T) -> bool {
        self.buf.push(item);
        self.buf.len() < self.burst || self.flush()
    }

    /// Sends the items buffered so far, if any. False when the stage downstream has stopped.
    #[must_use = "a failed send means the stage downstream stopped; the caller must stop"]
    pub(super) fn flush(&mut self) -> bool {
        if self.buf.is_empty() {
            return true;
        }
        let burst = std::mem::replace(&mut self.buf, Vec::with_capacity(self.burst));
        self.out.send(Ok(Flow::Item(burst)))
    }

    /// Sends what is buffered, then ends the stream with `outcome` (see [`Outlet::close`]).
    pub(super) fn close(mut self, outcome: Result<()>) {
        if self.flush() {
            self.out.close(outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use crossbeam_channel::bounded;

    use super::*;

    fn pair<T>(depth: usize) -> (Outlet<T>, Inlet<T>) {
        let (tx, rx) = bounded(depth);
        let clock = WaitClock::default();
        (
            Outlet::new(tx, clock.clone()),
            Inlet::new(rx, "test stage", clock),
        )
    }

    #[test]
    fn items_then_end_then_end_again() {
        let (out, mut inlet) = pair(4);
        assert!(out.forward(Ok(1)));
        assert!(out.forward(Ok(2)));
        out.close(Ok(()));
        assert_eq!(inlet.recv().unwrap(), Some(1));
        assert_eq!(inlet.recv().unwrap(), Some(2));
        assert_eq!(inlet.recv().unwrap(), None);
        // The sender is gone, but the stream ended properly: still the end, not an error.
        assert_eq!(inlet.recv().unwrap(), None);
    }

    #[test]
    fn an_error_reaches_the_receiver_and_stops_the_sender() {
        let (out, mut inlet) = pair::<u32>(4);
        assert!(out.forward(Ok(7)));
        assert!(!out.forward(Err(Error::corruption("/x.sst", 12, "bad"))));
        assert_eq!(inlet.recv().unwrap(), Some(7));
        match inlet.recv() {
            Err(Error::Corruption { offset, .. }) => assert_eq!(offset, 12),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn a_disconnect_without_terminator_is_an_error_not_the_end() {
        let (out, mut inlet) = pair::<u32>(4);
        assert!(out.forward(Ok(1)));
        drop(out); // the upstream thread died
        assert_eq!(inlet.recv().unwrap(), Some(1));
        let err = inlet.recv().unwrap_err();
        assert!(err.to_string().contains("test stage"), "{err}");
    }

    #[test]
    fn bursts_keep_order_and_flush_before_the_terminator() {
        for outcome in [Ok(()), Err(Error::InvalidArgument("stop".into()))] {
            let failed = outcome.is_err();
            let (out, mut inlet) = pair(16);
            let mut bursts = BurstOutlet::new(out, 3);
            for i in 0..7 {
                assert!(bursts.push(i));
            }
            bursts.close(outcome);
            let mut got = Vec::new();
            let end = loop {
                match inlet.recv() {
                    Ok(Some(burst)) => got.push(burst),
                    other => break other,
                }
            };
            assert_eq!(got, [vec![0, 1, 2], vec![3, 4, 5], vec![6]]);
            assert_eq!(end.is_err(), failed);
        }
    }

    #[test]
    fn a_dropped_receiver_unblocks_a_full_sender() {
        let (out, inlet) = pair::<u32>(1);
        assert!(out.forward(Ok(1)));
        let sender = std::thread::spawn(move || out.forward(Ok(2)));
        // The sender blocks on the full queue until the receiver goes away.
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(inlet);
        assert!(!sender.join().unwrap());
    }

    #[test]
    fn blocking_time_is_charged_to_the_clock() {
        let (out, mut inlet) = pair::<u32>(1);
        let clock = inlet.clock.clone();
        let sender = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            out.close(Ok(()));
        });
        assert_eq!(inlet.recv().unwrap(), None);
        sender.join().unwrap();
        assert!(clock.nanos() >= 10_000_000, "waited {} ns", clock.nanos());
    }
}
