//! [`Range`]: the database as a Rust iterator of owned `(key, value)` pairs, from the front
//! and from the back (`DoubleEndedIterator`), as `BTreeMap::range` and fjall's `range` give
//! them.
//!
//! One [`DbIterator`] serves both ends. Each end remembers the last key it yielded; calls from
//! the same end step the cursor once, and a call from the other end first re-seeks to where
//! that end stopped (a seek, so alternating ends costs a seek per call). The ends meet when a
//! step would yield a key the other end already yielded.

use super::DbIterator;
use crate::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    Nowhere,
    Front,
    Back,
}

/// Owned `(key, value)` pairs in key order, from either end; see [`crate::Db::range`].
///
/// A range whose cursor could not be opened (a dropped keyspace, a closed database, a
/// snapshot of another database) yields that error as its only item.
pub struct Range {
    walk: std::result::Result<Walk, Option<Error>>,
}

/// The walk of an open cursor from both ends.
struct Walk {
    it: DbIterator,
    /// The last key yielded from the front (meaningful when `front_started`).
    front: Vec<u8>,
    front_started: bool,
    /// The last key yielded from the back (meaningful when `back_started`).
    back: Vec<u8>,
    back_started: bool,
    /// The end the cursor last moved for, and still sits on.
    at: End,
    /// The ends met, or a step failed: nothing more is yielded.
    done: bool,
}

impl Range {
    /// Yields the entries of `it` (unpositioned) within its bounds, or the error that kept it
    /// from opening.
    pub(crate) fn new(it: Result<DbIterator>) -> Self {
        let walk = match it {
            Ok(it) => Ok(Walk::new(it)),
            Err(e) => Err(Some(e)),
        };
        Range { walk }
    }

    fn yield_step(&mut self, front: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        match &mut self.walk {
            Ok(walk) => walk.yield_step(front),
            Err(failure) => failure.take().map(Err),
        }
    }
}

impl Walk {
    fn new(it: DbIterator) -> Self {
        Walk {
            it,
            front: Vec::new(),
            front_started: false,
            back: Vec::new(),
            back_started: false,
            at: End::Nowhere,
            done: false,
        }
    }

    /// Moves the cursor to the next entry from the front; false when the ends met.
    fn step_front(&mut self) -> Result<bool> {
        if self.at == End::Front {
            self.it.next()?;
        } else if self.front_started {
            self.it.seek(&self.front)?;
            if self.it.valid() && self.it.key() == self.front.as_slice() {
                self.it.next()?;
            }
        } else {
            self.it.seek_to_first()?;
        }
        self.at = End::Front;
        Ok(self.it.valid() && !(self.back_started && self.it.key() >= self.back.as_slice()))
    }

    /// Moves the cursor to the next entry from the back; false when the ends met.
    fn step_back(&mut self) -> Result<bool> {
        if self.at == End::Back {
            self.it.prev()?;
        } else if self.back_started {
            self.it.seek_for_prev(&self.back)?;
            if self.it.valid() && self.it.key() == self.back.as_slice() {
                self.it.prev()?;
            }
        } else {
            self.it.seek_to_last()?;
        }
        self.at = End::Back;
        Ok(self.it.valid() && !(self.front_started && self.it.key() <= self.front.as_slice()))
    }

    /// Runs one step and turns its outcome into the next item.
    fn yield_step(&mut self, front: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.done {
            return None;
        }
        let stepped = if front {
            self.step_front()
        } else {
            self.step_back()
        };
        match stepped {
            Ok(true) => {
                let key = self.it.key().to_vec();
                let (last, started) = if front {
                    (&mut self.front, &mut self.front_started)
                } else {
                    (&mut self.back, &mut self.back_started)
                };
                last.clear();
                last.extend_from_slice(&key);
                *started = true;
                Some(Ok((key, self.it.value().to_vec())))
            }
            Ok(false) => {
                self.done = true;
                None
            }
            Err(e) => {
                // An error is returned once; retrying a damaged read would only repeat it.
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for Range {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.yield_step(true)
    }
}

impl DoubleEndedIterator for Range {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.yield_step(false)
    }
}

impl std::iter::FusedIterator for Range {}
