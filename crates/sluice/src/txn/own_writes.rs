//! [`TxnRange`]: a transaction's iterator, the database's entries with the transaction's own
//! writes laid over them (RocksDB's `WriteBatchWithIndex::NewIteratorWithBase`).
//!
//! Both sides are sorted and double-ended: the database's [`Range`], read at the
//! transaction's sequence number, and the transaction's writes in the range, taken when the
//! iterator is made. A key on both sides is the transaction's: its put or delete, or its merge
//! operands applied to the database's value. Each side keeps what it has taken from either end
//! but not yet yielded, so the two ends meet correctly.

use std::collections::VecDeque;
use std::sync::Arc;

use sluice_sst::merge_operator::{self, MergeOperator};

use super::write_set::{Base, Pending};
use crate::Result;
use crate::iter::Range;

/// A pair the iterator yields.
type Entry = (Vec<u8>, Vec<u8>);

/// A transaction's pending write to one key, owned so that the iterator borrows nothing.
pub(crate) struct OwnWrite {
    base: OwnBase,
    operands: Vec<Vec<u8>>,
}

enum OwnBase {
    Value(Vec<u8>),
    Deleted,
    Database,
}

impl OwnWrite {
    pub(crate) fn of(pending: &Pending<'_>) -> OwnWrite {
        OwnWrite {
            base: match pending.base {
                Base::Value(v) => OwnBase::Value(v.to_vec()),
                Base::Deleted => OwnBase::Deleted,
                Base::Database => OwnBase::Database,
            },
            operands: pending.operands.iter().map(|o| o.to_vec()).collect(),
        }
    }
}

/// Applies a transaction's pending write to what the database holds for the key (`None`:
/// nothing): the value a read in the transaction sees, `None` when deleted.
pub(crate) fn resolve(
    operator: Option<&dyn MergeOperator>,
    key: &[u8],
    base: Base<'_>,
    operands: &[&[u8]],
    database: Option<&[u8]>,
) -> Result<Option<Vec<u8>>> {
    let under = match base {
        Base::Value(v) => Some(v),
        Base::Deleted => None,
        Base::Database => database,
    };
    if operands.is_empty() {
        return Ok(under.map(<[u8]>::to_vec));
    }
    Ok(Some(merge_operator::resolve(
        operator, key, under, operands,
    )?))
}

/// One side's entries taken from either end and not yet yielded.
struct Peeked<T> {
    front: Option<T>,
    back: Option<T>,
}

impl<T> Default for Peeked<T> {
    fn default() -> Self {
        Peeked {
            front: None,
            back: None,
        }
    }
}

/// The database's entries and the transaction's writes in one range; see the module docs.
pub struct TxnRange {
    database: Range,
    peeked: Peeked<Entry>,
    own: VecDeque<(Vec<u8>, OwnWrite)>,
    operator: Option<Arc<dyn MergeOperator>>,
    /// A failure was yielded: nothing more is.
    done: bool,
}

impl TxnRange {
    pub(crate) fn new(
        database: Range,
        own: Vec<(Vec<u8>, OwnWrite)>,
        operator: Option<Arc<dyn MergeOperator>>,
    ) -> TxnRange {
        TxnRange {
            database,
            peeked: Peeked::default(),
            own: own.into(),
            operator,
            done: false,
        }
    }

    /// The database's next entry from one end, without taking it. An entry the other end
    /// took and has not yielded is the last one left.
    fn database_peek(&mut self, front: bool) -> Result<Option<&Entry>> {
        let (this, other) = match front {
            true => (&mut self.peeked.front, &mut self.peeked.back),
            false => (&mut self.peeked.back, &mut self.peeked.front),
        };
        if this.is_none() {
            let next = match front {
                true => self.database.next(),
                false => self.database.next_back(),
            };
            *this = match next.transpose()? {
                Some(entry) => Some(entry),
                None => other.take(),
            };
        }
        Ok(this.as_ref())
    }

    fn database_take(&mut self, front: bool) -> Option<Entry> {
        match front {
            true => self.peeked.front.take(),
            false => self.peeked.back.take(),
        }
    }

    /// The next pair from one end, skipping keys the transaction deleted.
    fn step(&mut self, front: bool) -> Result<Option<Entry>> {
        loop {
            let database_key = self.database_peek(front)?.map(|(k, _)| k.clone());
            let own_key = match front {
                true => self.own.front(),
                false => self.own.back(),
            }
            .map(|(k, _)| k.as_slice());
            // Which side's key comes first from this end; `true` for both when they are equal.
            let (take_database, take_own) = match (&database_key, own_key) {
                (None, None) => return Ok(None),
                (Some(_), None) => (true, false),
                (None, Some(_)) => (false, true),
                (Some(d), Some(o)) if d.as_slice() == o => (true, true),
                (Some(d), Some(o)) => {
                    let database_first = (d.as_slice() < o) == front;
                    (database_first, !database_first)
                }
            };
            let database = match take_database {
                true => self.database_take(front),
                false => None,
            };
            if !take_own {
                return Ok(database);
            }
            let own = match front {
                true => self.own.pop_front(),
                false => self.own.pop_back(),
            };
            let Some((key, write)) = own else {
                return Ok(database);
            };
            let base = match &write.base {
                OwnBase::Value(v) => Base::Value(v),
                OwnBase::Deleted => Base::Deleted,
                OwnBase::Database => Base::Database,
            };
            let operands: Vec<&[u8]> = write.operands.iter().map(Vec::as_slice).collect();
            let under = database.as_ref().map(|(_, v)| v.as_slice());
            let operator = self.operator.as_deref();
            if let Some(value) = resolve(operator, &key, base, &operands, under)? {
                return Ok(Some((key, value)));
            }
        }
    }

    fn yield_step(&mut self, front: bool) -> Option<Result<Entry>> {
        if self.done {
            return None;
        }
        match self.step(front) {
            Ok(Some(entry)) => Some(Ok(entry)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for TxnRange {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.yield_step(true)
    }
}

impl DoubleEndedIterator for TxnRange {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.yield_step(false)
    }
}

impl std::iter::FusedIterator for TxnRange {}
