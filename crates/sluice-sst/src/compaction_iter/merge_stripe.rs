//! The compaction iterator's merge of one stripe's operands (see the parent module's "Merge
//! operands").

use super::drop_log::DropReason;
use super::{CompactionIterator, Position, corrupt};
use crate::digest::entry_hash;
use crate::key::{ValueKind, append_internal_key, pack_trailer, parse_internal_key};
use crate::{InternalIterator, Result};

impl<I: InternalIterator> CompactionIterator<I> {
    /// Reads the rest of a stripe whose newest version, the input's current entry (already
    /// counted), is a merge operand, and positions on what to write for it (module docs).
    /// Leaves the input on the first entry not examined.
    pub(super) fn merge_stripe(&mut self, stripe: usize) -> Result<()> {
        self.operands.clear();
        self.operands
            .push((self.input.key().to_vec(), self.input.value().to_vec()));
        self.input.next()?;
        // Whether the key has no older version in this input (rather than in an older stripe).
        let mut key_ended = true;
        // Whether a range tombstone in the stripe deletes what the operands apply to.
        let mut covered_base = false;
        // That entry's key, for the drop log.
        let mut covered_key = None;
        while self.input.valid() {
            let ikey = self.input.key();
            let parsed = parse_internal_key(ikey).ok_or_else(|| {
                corrupt(format!("unparseable internal key of {} bytes", ikey.len()))
            })?;
            if parsed.user_key != self.current_key.as_slice()
                || self
                    .upper_bound
                    .as_deref()
                    .is_some_and(|bound| parsed.user_key >= bound)
            {
                break;
            }
            if parsed.kind == ValueKind::RangeDeletion {
                return Err(corrupt("a range tombstone among point entries"));
            }
            if self.snapshots.partition_point(|&s| s < parsed.seq) != stripe {
                key_ended = false;
                break;
            }
            let trailer = pack_trailer(parsed.seq, parsed.kind);
            if trailer > self.last_trailer
                || (parsed.seq == self.last_trailer >> 8 && self.drops.is_some())
            {
                return Err(corrupt(format!(
                    "input out of order: sequence {} after a newer-sorting version",
                    parsed.seq
                )));
            }
            self.last_trailer = trailer;
            self.stats.entries_in += 1;
            self.stats.input_key_bytes += ikey.len() as u64;
            self.stats.input_value_bytes += self.input.value().len() as u64;
            if self.covered(parsed.user_key, parsed.seq) {
                // Deleted, and so is all below it in the stripe: the operands apply to
                // nothing. The rest of the stripe is shadowed by what is written.
                self.stats.range_covered += 1;
                self.stats
                    .drop_hash(entry_hash(self.input.key(), self.input.value()));
                if self.drops.is_some() {
                    covered_key = Some(self.input.key().to_vec());
                }
                self.input.next()?;
                covered_base = true;
                break;
            }
            let kind = parsed.kind;
            super::check_blob_ref(kind, self.input.value())?;
            self.operands
                .push((ikey.to_vec(), self.input.value().to_vec()));
            self.input.next()?;
            if kind != ValueKind::Merge {
                break;
            }
        }

        self.merged.clear();
        self.merged_at = 0;
        let (newest_key, _) = &self.operands[0];
        let newest = parse_internal_key(newest_key).ok_or_else(|| corrupt("operand key"))?;
        let newest_seq = newest.seq;
        // A base in a blob file is not read here: compactions move references, and a worker
        // may have no blob files at all. The operands stay as they are; reads merge them.
        let blob_base = !covered_base
            && self
                .operands
                .last()
                .and_then(|(k, _)| parse_internal_key(k))
                .is_some_and(|p| p.kind == ValueKind::BlobIndex);
        let base = match covered_base {
            true => Some(None),
            false => self
                .operands
                .last()
                .and_then(|(k, v)| match parse_internal_key(k)?.kind {
                    ValueKind::Merge | ValueKind::RangeDeletion | ValueKind::BlobIndex => None,
                    ValueKind::Value => Some(Some(v.as_slice())),
                    ValueKind::Deletion => Some(None),
                }),
        };
        let written = match &self.merge_operator {
            None => None,
            Some(_) if blob_base => None,
            Some(op) if base.is_some() || (key_ended && self.bottommost) => {
                // The base, if read, is the last entry (a covered one was dropped instead).
                let base_read = base.is_some() && !covered_base;
                let operand_count = self.operands.len() - usize::from(base_read);
                let operands: Vec<&[u8]> = self.operands[..operand_count]
                    .iter()
                    .rev()
                    .map(|(_, v)| v.as_slice())
                    .collect();
                op.full_merge(&self.current_key, base.flatten(), &operands)
                    .ok()
                    .map(|value| {
                        let seq =
                            if self.bottommost && stripe == 0 && self.may_zero(&self.current_key) {
                                0
                            } else {
                                newest.seq
                            };
                        (seq, ValueKind::Value, value)
                    })
            }
            // A lone operand is already as combined as it gets.
            Some(_) if self.operands.len() == 1 => None,
            Some(op) => {
                let mut operands = self.operands.iter().rev().map(|(_, v)| v.as_slice());
                let first = operands.next().map(<[u8]>::to_vec);
                operands
                    .try_fold(first, |acc, newer| {
                        acc.and_then(|older| op.partial_merge(&self.current_key, &older, newer))
                            .map(Some)
                    })
                    .flatten()
                    .map(|value| (newest.seq, ValueKind::Merge, value))
            }
        };
        let zeroed_merge = matches!(written, Some((0, _, _))) && newest_seq != 0;
        match written {
            Some((seq, kind, value)) => {
                let mut key = Vec::with_capacity(self.current_key.len() + 8);
                append_internal_key(&mut key, &self.current_key, seq, kind);
                let before = entry_hash(&self.operands[0].0, &self.operands[0].1);
                self.stats.rewrite(before, entry_hash(&key, &value));
                for (k, v) in &self.operands[1..] {
                    self.stats.merge_absorbed += 1;
                    self.stats.drop_hash(entry_hash(k, v));
                }
                if let Some(log) = &mut self.drops {
                    let into = DropReason::MergeFolded { into: newest.seq };
                    for (k, _) in &self.operands[1..] {
                        log.push(k, into);
                    }
                }
                self.merged.push((key, value));
            }
            None => self.merged.append(&mut self.operands),
        }
        if let Some(key) = covered_key {
            self.log_drop(&key, DropReason::RangeCovered);
        }
        self.stats.entries_out += self.merged.len() as u64;
        if let Some(log) = &mut self.drops {
            for (key, _) in &self.merged {
                // A full merge written at 0 (zeroed at the bottom) had the newest operand's
                // number; operands written back as they are keep theirs.
                match zeroed_merge {
                    true => log.written_zeroed(key, newest_seq),
                    false => log.written(key),
                }
            }
        }
        self.position = Position::AtMerged;
        Ok(())
    }
}
