use super::*;
use crate::coding::put_varint64;
use crate::key::make_internal_key;

fn ikey(k: &str, seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    make_internal_key(k.as_bytes(), seq, kind)
}

/// One entry of a compaction's merged order: written, or dropped for a reason.
type Entry = (Vec<u8>, Option<DropReason>);

fn shadowed(by: SeqNo) -> Option<DropReason> {
    Some(DropReason::Shadowed { by })
}

/// A compaction's entries in the merged order: written versions, shadowed ones (with and
/// without a key of their own), a tombstone with nothing written, a merge fold, a covered
/// blob reference, and a value zeroed at the bottom with the version it shadowed.
fn sample() -> Vec<Entry> {
    use ValueKind::{BlobIndex, Deletion, Merge, Value};
    vec![
        (ikey("apple", 12, Value), None),
        (ikey("apple", 9, Value), shadowed(12)),
        (
            ikey("apple", 3, Deletion),
            Some(DropReason::BottomTombstone),
        ),
        (ikey("apricot", 8, Value), None),
        (
            ikey("apricot", 7, Merge),
            Some(DropReason::MergeFolded { into: 8 }),
        ),
        (ikey("b", 1, BlobIndex), Some(DropReason::RangeCovered)),
        (
            ikey("banana", 30, Deletion),
            Some(DropReason::BottomTombstone),
        ),
        (ikey("banana", 20, Value), shadowed(30)),
        (ikey("cherry", 5, Value), None),
        (ikey("date", 4, Value), shadowed(7)),
        (ikey("date", 0, Value), None),
        (ikey("fig", 2, Value), None),
    ]
}

fn written(entries: &[Entry]) -> Vec<Vec<u8>> {
    entries
        .iter()
        .filter(|(_, r)| r.is_none())
        .map(|(k, _)| k.clone())
        .collect()
}

fn drops(entries: &[Entry]) -> Vec<(Vec<u8>, DropReason)> {
    entries
        .iter()
        .filter_map(|(k, r)| r.map(|r| (k.clone(), r)))
        .collect()
}

fn encode(entries: &[Entry]) -> DropLog {
    let mut w = DropLogWriter::default();
    for (k, r) in entries {
        match r {
            Some(r) => w.push(k, *r),
            None => w.written(k),
        }
    }
    w.take()
}

#[test]
fn records_round_trip_against_the_written_entries() {
    let entries = sample();
    let log = encode(&entries);
    assert_eq!(log.records(), 7);
    assert_eq!(
        decode_with_written(log.as_bytes(), &written(&entries)).unwrap(),
        drops(&entries)
    );
    assert!(decode_with_written(&[], &[]).unwrap().is_empty());
}

#[test]
fn a_version_dropped_after_its_key_was_written_costs_a_few_bytes() {
    let entries = vec![
        (ikey("0000000000000001", 4_000_000, ValueKind::Value), None),
        (
            ikey("0000000000000001", 3_999_000, ValueKind::Value),
            shadowed(4_000_000),
        ),
    ];
    // Position gap, head, and the sequence number's distance below the written one's.
    assert_eq!(encode(&entries).as_bytes().len(), 4);
}

#[test]
fn drops_decided_out_of_order_are_logged_in_the_merged_order() {
    // The iterator drops the versions below an awaited tombstone before the tombstone, and
    // folds operands before it writes what they were folded into.
    let mut w = DropLogWriter::default();
    w.push(&ikey("k", 4, ValueKind::Value), shadowed(6).unwrap());
    w.push(
        &ikey("k", 6, ValueKind::Deletion),
        DropReason::BottomTombstone,
    );
    w.push(
        &ikey("m", 3, ValueKind::Merge),
        DropReason::MergeFolded { into: 5 },
    );
    w.written(&ikey("m", 5, ValueKind::Value));
    let log = w.take();
    let got = decode_with_written(log.as_bytes(), &[ikey("m", 5, ValueKind::Value)]).unwrap();
    let reasons: Vec<_> = got.iter().map(|(_, r)| *r).collect();
    assert_eq!(
        reasons,
        [
            DropReason::BottomTombstone,
            DropReason::Shadowed { by: 6 },
            DropReason::MergeFolded { into: 5 }
        ]
    );
}

#[test]
fn logs_of_consecutive_ranges_join_into_one_writers_bytes() {
    let entries = sample();
    let one = encode(&entries);
    // Every cut between two user keys, as sub-tasks cut.
    for cut in 1..entries.len() {
        let (a, b) = entries.split_at(cut);
        if user_key_of(&a[a.len() - 1].0) == user_key_of(&b[0].0) {
            continue;
        }
        let mut joined = encode(a);
        joined.append(encode(b));
        assert_eq!(joined.as_bytes(), one.as_bytes(), "cut at {cut}");
        assert_eq!(joined.records(), one.records());
        // Joined again after it: positions and shared prefixes still carry over.
        let mut twice = joined.clone();
        twice.append(encode(&[(
            ikey("zz", 1, ValueKind::Deletion),
            Some(DropReason::BottomTombstone),
        )]));
        let mut all = entries.clone();
        all.push((
            ikey("zz", 1, ValueKind::Deletion),
            Some(DropReason::BottomTombstone),
        ));
        assert_eq!(twice.as_bytes(), encode(&all).as_bytes(), "cut at {cut}");
    }
    // An empty range, and a range with no drops, join too.
    let no_drops = [(ikey("0", 1, ValueKind::Value), None)];
    let mut joined = encode(&[]);
    joined.append(encode(&no_drops));
    joined.append(encode(&entries));
    let all: Vec<Entry> = no_drops.iter().cloned().chain(entries).collect();
    assert_eq!(joined.as_bytes(), encode(&all).as_bytes());
}

fn user_key_of(ikey: &[u8]) -> &[u8] {
    crate::key::user_key(ikey)
}

#[test]
fn every_malformed_log_is_corruption_at_its_record() {
    let entries = sample();
    let good = encode(&entries).into_bytes();
    let w = written(&entries);
    // Every truncation fails cleanly (or, at a record boundary, reads fewer records).
    for cut in 0..good.len() {
        if let Ok(records) = decode_with_written(&good[..cut], &w) {
            assert!(records.len() < 7);
        }
    }
    // Every flipped bit fails cleanly or decodes to other records: never a panic.
    for at in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[at / 8] ^= 1 << (at % 8);
        let _ = decode_with_written(&bad, &w);
    }
    let record = |gap: u64, head: u8, key: Option<&[u8]>, tail: &[u64]| {
        let mut b = Vec::new();
        put_varint64(&mut b, gap);
        b.push(head);
        if let Some(key) = key {
            put_varint32(&mut b, 0);
            put_varint32(&mut b, key.len() as u32);
            b.extend_from_slice(key);
        }
        for &v in tail {
            put_varint64(&mut b, v);
        }
        b
    };
    let value = (kind_code(ValueKind::Value)) << 3;
    let one = [ikey("k", 9, ValueKind::Value)];
    for (bytes, expect) in [
        (
            record(1, 1 | value | head::CITES_PREVIOUS, None, &[9]),
            "not newer",
        ),
        (
            record(0, 7 | value | head::OWN_KEY, Some(b"a"), &[5]),
            "unknown drop reason",
        ),
        (
            record(
                0,
                2 | value | head::OWN_KEY | head::SEQ_BELOW_PREVIOUS,
                Some(b"a"),
                &[1],
            ),
            "below an entry of another key",
        ),
        (
            record(
                0,
                1 | value | head::OWN_KEY | head::CITES_PREVIOUS,
                Some(b"a"),
                &[1],
            ),
            "cites an entry of another key",
        ),
        (
            record(0, 2 | value | head::CITES_PREVIOUS, None, &[1]),
            "cites none",
        ),
        (record(0, 2 | value, None, &[1]), "no previous entry"),
        (
            record(1, 2 | value | head::SEQ_BELOW_PREVIOUS, None, &[10]),
            "below one no entry",
        ),
        (
            record(1, 2 | value | head::SEQ_BELOW_PREVIOUS, None, &[0]),
            "sequence number 0",
        ),
        (
            record(2, 2 | value | head::OWN_KEY, Some(b"z"), &[1]),
            "past the last written",
        ),
        (
            record(0, 2 | value | head::OWN_KEY, Some(b"a"), &[1 << 57]),
            "overflows 56 bits",
        ),
    ] {
        let err = decode_with_written(&bytes, &one).unwrap_err().to_string();
        assert!(err.contains(expect), "{err} (wanted {expect:?})");
        assert!(err.contains(DROP_LOG), "{err}");
    }
    // Sharing more than the previous key has.
    let mut b = Vec::new();
    put_varint64(&mut b, 0);
    b.push(2 | value | head::OWN_KEY);
    put_varint32(&mut b, 3);
    put_varint32(&mut b, 0);
    let err = decode_with_written(&b, &one).unwrap_err().to_string();
    assert!(err.contains("shares more"), "{err}");
    // A position past 2^64.
    let mut b = record(u64::MAX, 2 | value | head::OWN_KEY, Some(b"a"), &[1]);
    b.extend(record(1, 2 | value | head::OWN_KEY, Some(b"b"), &[1]));
    let err = decode_with_written(&b, &one).unwrap_err().to_string();
    assert!(err.contains("past"), "{err}");
}
