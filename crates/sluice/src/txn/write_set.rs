//! [`WriteSet`]: a transaction's own writes, in order, with savepoints, an index by key for
//! reading them back, and the batch they become at commit.

use std::collections::BTreeMap;
use std::ops::Bound;

use sluice_sst::key::ValueKind;

use crate::batch::WriteBatch;

/// One write of the transaction.
struct Write {
    keyspace: u32,
    kind: ValueKind,
    key: Vec<u8>,
    /// The value or merge operand (empty for a deletion).
    value: Vec<u8>,
}

/// What the transaction wrote to one key, oldest first from its last put or delete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Pending<'a> {
    /// The key's value under `operands`.
    pub base: Base<'a>,
    /// Merge operands written since, oldest first (empty for none).
    pub operands: Vec<&'a [u8]>,
}

/// What lies under a key's pending merge operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Base<'a> {
    /// The transaction put this value.
    Value(&'a [u8]),
    /// The transaction deleted the key.
    Deleted,
    /// The transaction only merged: the database's value is under the operands.
    Database,
}

/// The writes of a transaction. Reads find a key's pending state through `index`; a rollback
/// to a savepoint cuts the log and rebuilds the index.
#[derive(Default)]
pub(crate) struct WriteSet {
    log: Vec<Write>,
    /// Per key, the positions in `log` of its writes from the last put or delete on.
    index: BTreeMap<(u32, Vec<u8>), Vec<usize>>,
    /// The log's length at each savepoint, oldest first.
    savepoints: Vec<usize>,
}

impl WriteSet {
    /// Records a write.
    pub fn add(&mut self, keyspace: u32, kind: ValueKind, key: &[u8], value: &[u8]) {
        let at = self.log.len();
        self.log.push(Write {
            keyspace,
            kind,
            key: key.to_vec(),
            value: value.to_vec(),
        });
        self.index_write(at);
    }

    fn index_write(&mut self, at: usize) {
        let write = &self.log[at];
        let positions = self
            .index
            .entry((write.keyspace, write.key.clone()))
            .or_default();
        // A put or delete hides whatever came before it.
        if write.kind != ValueKind::Merge {
            positions.clear();
        }
        positions.push(at);
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.log.is_empty()
    }

    /// The number of writes.
    pub fn len(&self) -> usize {
        self.log.len()
    }

    /// What the transaction wrote to `key` in `keyspace`, or `None` if nothing.
    pub fn pending(&self, keyspace: u32, key: &[u8]) -> Option<Pending<'_>> {
        // The index's keys are owned pairs: the lookup builds one.
        let lookup = (keyspace, key.to_vec());
        self.index
            .get(&lookup)
            .map(|positions| self.pending_at(positions))
    }

    fn pending_at(&self, positions: &[usize]) -> Pending<'_> {
        let writes: Vec<&Write> = positions.iter().map(|&at| &self.log[at]).collect();
        let (base, operands) = match writes.split_first() {
            Some((first, rest)) if first.kind == ValueKind::Deletion => (Base::Deleted, rest),
            Some((first, rest)) if first.kind != ValueKind::Merge => {
                (Base::Value(first.value.as_slice()), rest)
            }
            _ => (Base::Database, &writes[..]),
        };
        Pending {
            base,
            operands: operands.iter().map(|w| w.value.as_slice()).collect(),
        }
    }

    /// Every key of `keyspace` the transaction wrote within `[lower, upper)`, in key order,
    /// with its pending state.
    pub fn in_range(
        &self,
        keyspace: u32,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Vec<(Vec<u8>, Pending<'_>)> {
        let start = (keyspace, lower.unwrap_or_default().to_vec());
        self.index
            .range((Bound::Included(start), Bound::Unbounded))
            .take_while(|((ks, key), _)| {
                *ks == keyspace && upper.is_none_or(|upper| key.as_slice() < upper)
            })
            .map(|((_, key), positions)| (key.clone(), self.pending_at(positions)))
            .collect()
    }

    /// Marks the current state; [`WriteSet::rollback_to_savepoint`] returns to it.
    pub fn set_savepoint(&mut self) {
        self.savepoints.push(self.log.len());
    }

    /// Undoes every write since the last savepoint and forgets it; false if there is none.
    pub fn rollback_to_savepoint(&mut self) -> bool {
        let Some(len) = self.savepoints.pop() else {
            return false;
        };
        self.log.truncate(len);
        self.index.clear();
        for at in 0..self.log.len() {
            self.index_write(at);
        }
        true
    }

    /// Forgets the last savepoint, keeping the writes since; false if there is none.
    pub fn pop_savepoint(&mut self) -> bool {
        self.savepoints.pop().is_some()
    }

    /// The writes as one batch, in the order they were made.
    pub fn to_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for w in &self.log {
            batch.add(w.keyspace, w.kind, &w.key, &w.value);
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_or_delete_hides_what_came_before_and_merges_stack_on_it() {
        let mut ws = WriteSet::default();
        ws.add(0, ValueKind::Merge, b"k", b"1");
        let p = ws.pending(0, b"k").unwrap();
        assert_eq!((p.base, p.operands), (Base::Database, vec![&b"1"[..]]));
        ws.add(0, ValueKind::Value, b"k", b"v");
        ws.add(0, ValueKind::Merge, b"k", b"2");
        let p = ws.pending(0, b"k").unwrap();
        assert_eq!((p.base, p.operands), (Base::Value(b"v"), vec![&b"2"[..]]));
        ws.add(0, ValueKind::Deletion, b"k", b"");
        let p = ws.pending(0, b"k").unwrap();
        assert_eq!((p.base, p.operands.len()), (Base::Deleted, 0));
        assert_eq!(ws.pending(1, b"k"), None, "another keyspace's key");
        assert_eq!(ws.pending(0, b"j"), None);
    }

    #[test]
    fn savepoints_undo_exactly_the_writes_since() {
        let mut ws = WriteSet::default();
        ws.add(0, ValueKind::Value, b"a", b"1");
        ws.set_savepoint();
        ws.add(0, ValueKind::Value, b"a", b"2");
        ws.add(0, ValueKind::Value, b"b", b"3");
        ws.set_savepoint();
        ws.add(0, ValueKind::Deletion, b"a", b"");
        assert!(ws.rollback_to_savepoint());
        assert_eq!(ws.pending(0, b"a").unwrap().base, Base::Value(b"2"));
        assert!(ws.rollback_to_savepoint());
        assert_eq!(ws.pending(0, b"a").unwrap().base, Base::Value(b"1"));
        assert_eq!(ws.pending(0, b"b"), None);
        assert!(!ws.rollback_to_savepoint(), "no savepoint left");
        ws.set_savepoint();
        assert!(ws.pop_savepoint());
        assert!(!ws.pop_savepoint());
        assert_eq!(ws.to_batch().count(), 1);
    }

    #[test]
    fn ranges_stay_in_their_keyspace_and_bounds() {
        let mut ws = WriteSet::default();
        for (ks, k) in [(0, "a"), (0, "b"), (0, "c"), (1, "a"), (2, "b")] {
            ws.add(ks, ValueKind::Value, k.as_bytes(), b"v");
        }
        let keys = |ks, lo: Option<&[u8]>, hi: Option<&[u8]>| -> Vec<Vec<u8>> {
            ws.in_range(ks, lo, hi)
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        assert_eq!(keys(0, None, None), [b"a", b"b", b"c"]);
        assert_eq!(keys(0, Some(b"b"), Some(b"c")), [b"b"]);
        assert_eq!(keys(1, None, None), [b"a"]);
        assert_eq!(keys(2, Some(b"c"), None), Vec::<Vec<u8>>::new());
    }
}
