//! The comparator's view of one decoder: an [`InternalIterator`] over the blocks arriving on a
//! queue, so the existing [`sluice_sst::merge::MergingIterator`] can merge decoder streams the
//! way it merges tables.
//!
//! The stream only moves forward: a block is released once the cursor leaves it, and the next
//! one is taken from the queue (waiting for the decoder if it is behind). `seek` may only move
//! forward too; `seek_to_first` only at the start; `seek_to_last` and `prev` are errors.

use std::sync::Arc;

use sluice_sst::block::{Block, BlockIter};
use sluice_sst::iter::InternalIterator;
use sluice_sst::key::compare_internal;

use super::queue::Inlet;
use crate::{Error, Result};

/// A forward cursor over the entries of the blocks one decoder streams.
///
/// Invariant: once started, `current` is `None` only when the stream has ended; otherwise it is
/// positioned on an entry, unless the last movement returned an error (then it is invalid, and
/// the comparator stops).
pub(super) struct StreamIter {
    inlet: Inlet<Vec<Arc<Block>>>,
    /// The rest of the last burst received.
    burst: std::vec::IntoIter<Arc<Block>>,
    /// The block being read; its key buffer is reused for every later block.
    current: Option<BlockIter>,
    /// True once the first block has been asked for.
    started: bool,
}

impl StreamIter {
    /// A cursor over the blocks `inlet` delivers, unpositioned.
    pub(super) fn new(inlet: Inlet<Vec<Arc<Block>>>) -> Self {
        StreamIter {
            inlet,
            burst: Vec::new().into_iter(),
            current: None,
            started: false,
        }
    }

    /// Moves to the first entry of the next non-empty block, or to the end of the stream.
    fn next_block(&mut self) -> Result<()> {
        loop {
            let Some(block) = self.next_in_stream()? else {
                self.current = None;
                return Ok(());
            };
            let mut it = match self.current.take() {
                Some(mut spare) => {
                    spare.reset(block);
                    spare
                }
                None => BlockIter::new(block),
            };
            it.seek_to_first()?;
            let found = it.valid();
            self.current = Some(it);
            if found {
                return Ok(());
            }
        }
    }

    /// The next block of the stream, waiting for the next burst if this one is used up.
    fn next_in_stream(&mut self) -> Result<Option<Arc<Block>>> {
        loop {
            if let Some(block) = self.burst.next() {
                return Ok(Some(block));
            }
            match self.inlet.recv()? {
                Some(burst) => self.burst = burst.into_iter(),
                None => return Ok(None),
            }
        }
    }

    fn start(&mut self) -> Result<()> {
        if self.started {
            return Err(Error::InvalidArgument(
                "a block stream cannot be rewound to its start".into(),
            ));
        }
        self.started = true;
        self.next_block()
    }

    fn backward_unsupported() -> Error {
        Error::InvalidArgument("block streams only move forward".into())
    }
}

impl InternalIterator for StreamIter {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(BlockIter::valid)
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.start()
    }

    /// REQUIRES: `target` is not before the current entry (the stream cannot go back).
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if !self.started {
            self.start()?;
        } else if self.valid() && compare_internal(target, self.key()).is_lt() {
            return Err(Self::backward_unsupported());
        }
        // Skip whole blocks until one holds an entry >= target; the block seek then lands on it.
        while let Some(it) = self.current.as_mut() {
            it.seek(target)?;
            if it.valid() {
                return Ok(());
            }
            self.next_block()?;
        }
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        Err(Self::backward_unsupported())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(it) = self.current.as_mut() {
            it.next()?;
            if !it.valid() {
                self.next_block()?;
            }
        }
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        Err(Self::backward_unsupported())
    }

    fn key(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(BlockIter::key)
            .unwrap_or_default()
    }

    fn value(&self) -> &[u8] {
        self.current
            .as_ref()
            .map(BlockIter::value)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crossbeam_channel::bounded;
    use proptest::prelude::*;
    use sluice_sst::block::BlockBuilder;
    use sluice_sst::key::{ValueKind, make_internal_key};

    use super::super::queue::{BurstOutlet, Outlet, WaitClock};
    use super::*;

    fn ikey(i: u32) -> Vec<u8> {
        make_internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Value)
    }

    /// Blocks holding keys `0..n`, `per_block` to a block (plus one empty block in front).
    fn blocks(n: u32, per_block: u32) -> Vec<Arc<Block>> {
        let path: Arc<Path> = Arc::from(Path::new("/test.sst"));
        let mut out = vec![Arc::new(
            Block::new(BlockBuilder::new(4).finish(0), Arc::clone(&path), 0).unwrap(),
        )];
        let mut b = BlockBuilder::new(4);
        for i in 0..n {
            b.add(&ikey(i), &i.to_le_bytes());
            if (i + 1) % per_block == 0 || i + 1 == n {
                out.push(Arc::new(
                    Block::new(b.finish(0), Arc::clone(&path), u64::from(i)).unwrap(),
                ));
            }
        }
        out
    }

    /// A stream fed by a thread with `blocks`, ended by `end` (None: the feeder dies).
    fn stream(blocks: Vec<Arc<Block>>, end: Option<Result<()>>) -> StreamIter {
        let (tx, rx) = bounded(2);
        std::thread::spawn(move || {
            let mut out = BurstOutlet::new(Outlet::new(tx, WaitClock::default()), 2);
            for b in blocks {
                if !out.push(b) {
                    return;
                }
            }
            match end {
                Some(end) => out.close(end),
                None => {
                    let _ = out.flush(); // then die without a terminator
                }
            }
        });
        StreamIter::new(Inlet::new(rx, "feeder", WaitClock::default()))
    }

    fn drain(it: &mut StreamIter) -> Result<Vec<Vec<u8>>> {
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().to_vec());
            it.next()?;
        }
        Ok(keys)
    }

    #[test]
    fn yields_every_entry_across_blocks_in_order() {
        let mut it = stream(blocks(50, 7), Some(Ok(())));
        it.seek_to_first().unwrap();
        let keys = drain(&mut it).unwrap();
        assert_eq!(keys, (0..50).map(ikey).collect::<Vec<_>>());
        assert!(!it.valid());
        it.next().unwrap(); // at the end: stays at the end
        assert!(!it.valid());
        assert!(it.seek_to_first().is_err(), "a stream cannot be rewound");
    }

    #[test]
    fn seek_skips_whole_blocks_and_rejects_going_back() {
        let mut it = stream(blocks(50, 7), Some(Ok(())));
        it.seek(&ikey(23)).unwrap();
        assert_eq!(it.key(), ikey(23));
        assert_eq!(it.value(), 23u32.to_le_bytes());
        it.seek(&ikey(30)).unwrap();
        assert_eq!(it.key(), ikey(30));
        assert!(it.seek(&ikey(3)).is_err());
        assert!(it.prev().is_err());
        assert!(it.seek_to_last().is_err());
    }

    #[test]
    fn seek_past_the_end_and_empty_streams_are_exhausted() {
        let mut it = stream(blocks(10, 3), Some(Ok(())));
        it.seek(&ikey(99)).unwrap();
        assert!(!it.valid());
        let mut empty = stream(Vec::new(), Some(Ok(())));
        empty.seek_to_first().unwrap();
        assert!(!empty.valid());
    }

    #[test]
    fn upstream_failure_and_death_are_errors() {
        let mut failed = stream(
            blocks(20, 5),
            Some(Err(Error::corruption("/in.sst", 99, "bad block"))),
        );
        failed.seek_to_first().unwrap();
        match drain(&mut failed) {
            Err(Error::Corruption { offset: 99, .. }) => {}
            other => panic!("expected the decoder's corruption, got {other:?}"),
        }
        assert!(!failed.valid());

        let mut died = stream(blocks(20, 5), None);
        died.seek_to_first().unwrap();
        assert!(drain(&mut died).is_err(), "a dead decoder is not the end");
    }

    proptest! {
        /// Any block sizes and any forward seek: the stream lands where a sorted list would.
        #[test]
        fn seek_agrees_with_a_sorted_list(n in 0u32..200, per in 1u32..40, target in 0u32..220) {
            let mut it = stream(blocks(n, per), Some(Ok(())));
            it.seek(&ikey(target)).unwrap();
            let keys = drain(&mut it).unwrap();
            let expected: Vec<Vec<u8>> = (target.min(n)..n).map(ikey).collect();
            prop_assert_eq!(keys, expected);
        }
    }
}
