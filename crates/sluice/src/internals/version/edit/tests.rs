//! Version edit round trips, validation and display.

use std::path::PathBuf;

use super::*;
use proptest::prelude::*;
use sluice_sst::key::{ValueKind, make_internal_key};

fn manifest() -> PathBuf {
    PathBuf::from("/db/MANIFEST-000001")
}

fn file(number: u64) -> FileMetaData {
    FileMetaData {
        number,
        file_size: 4096 * number,
        smallest: make_internal_key(b"apple", 10, ValueKind::Value),
        largest: make_internal_key(b"zebra\x00", 3, ValueKind::Deletion),
        smallest_seq: 3,
        largest_seq: 10,
        num_entries: 100,
        num_deletions: 7,
        raw_value_bytes: 12_345,
        dir_index: 1,
        range_clean_seq: 9,
        blob_refs: blob_refs(&[(3, 120), (3, 80), (11, 5000)]),
        file_checksum: Some(0xdead_beef),
        identity: Some(sluice_sst::table::TableIdentity::from_u64(
            0x0123_4567_89ab_cdef,
        )),
    }
}

fn blob_refs(refs: &[(u64, u64)]) -> sluice_sst::blob::BlobRefCounts {
    let mut counts = sluice_sst::blob::BlobRefCounts::default();
    for &(file_number, size) in refs {
        counts.add(&sluice_sst::blob::BlobRef {
            file_number,
            offset: 16,
            size,
        });
    }
    counts
}

fn full_edit() -> VersionEdit {
    let mut e = VersionEdit {
        comparator: Some("sluice.BytewiseComparator".into()),
        log_number: Some(12),
        next_file_number: Some(40),
        last_sequence: Some(1 << 40),
        ..VersionEdit::default()
    };
    e.compact_pointers
        .push((2, make_internal_key(b"m", 5, ValueKind::Value)));
    e.delete_file(1, 17);
    e.delete_file(0, 3);
    e.add_file(0, file(18));
    e.add_file(6, file(19));
    e.range_map = Some(
        crate::version::range_map::RangeMap::new(&[b"k".to_vec()], &[0, 1])
            .unwrap()
            .with_move(0, 1)
            .with_forwarding([(0, 0)]),
    );
    e.wals = vec![(11, 70_000), (12, 0)];
    e.value_format = Some(super::VALUE_FORMAT_TTL.into());
    e.range_tombstones = vec![sluice_sst::range_del::RangeTombstone {
        start: b"a".to_vec(),
        end: b"q".to_vec(),
        seq: 77,
    }];
    e.dropped_tombstones = vec![12];
    e.default_log_number = Some(14);
    e.keyspaces_created = vec![(1, "users".into()), (3, "événements".into())];
    e.keyspaces_dropped = vec![2];
    e.next_keyspace_id = Some(4);
    e.keyspace_log_numbers = vec![(1, 19), (3, 7)];
    e.new_blob_files = vec![BlobFileMetaData {
        number: 3,
        dir_index: 1,
        file_size: 70_000,
        records: 12,
        value_bytes: 69_000,
    }];
    e
}

fn decode(bytes: &[u8]) -> Result<VersionEdit> {
    VersionEdit::decode(bytes, &manifest(), 777)
}

fn corruption_reason(bytes: &[u8]) -> String {
    match decode(bytes) {
        Err(Error::Corruption {
            file,
            offset,
            reason,
        }) => {
            assert_eq!((file, offset), (manifest(), 777));
            reason
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn round_trip_of_every_field() {
    let e = full_edit();
    let mut buf = Vec::new();
    e.encode(&mut buf);
    assert_eq!(decode(&buf).unwrap(), e);
    assert_eq!(decode(&[]).unwrap(), VersionEdit::default());
}

#[test]
fn levels_at_or_above_num_levels_are_rejected() {
    for tag in [TAG_COMPACT_POINTER, TAG_DELETED_FILE, TAG_NEW_FILE] {
        let mut buf = Vec::new();
        put_varint32(&mut buf, tag);
        put_varint32(&mut buf, NUM_LEVELS as u32);
        buf.extend_from_slice(&[0; 4]);
        assert!(corruption_reason(&buf).contains("level 7"), "tag {tag}");
    }
}

#[test]
fn unknown_tags_and_fields() {
    assert!(corruption_reason(&[7, 0]).contains("unknown tag 7"));
    let encode_with_extra_field = |extra_tag: u32| {
        let mut e = VersionEdit::default();
        e.add_file(3, file(5));
        let mut buf = Vec::new();
        e.encode(&mut buf);
        // Rebuild the body with one more field appended.
        let mut body = buf[2..].to_vec();
        let (len, n) = get_varint32(&body).unwrap();
        assert_eq!(len as usize, body.len() - n);
        body.drain(..n);
        put_varint32(&mut body, extra_tag);
        put_length_prefixed(&mut body, b"future");
        let mut out = vec![buf[0], buf[1]];
        put_length_prefixed(&mut out, &body);
        out
    };
    // Optional unknown field: skipped.
    let decoded = decode(&encode_with_extra_field(15)).unwrap();
    assert_eq!(decoded.new_files, vec![(3, file(5))]);
    // Mandatory unknown field: refused.
    let reason = corruption_reason(&encode_with_extra_field(MANDATORY_FIELD_BIT | 15));
    assert!(reason.contains("mandatory field 79"), "{reason}");
    // A known field twice: refused.
    assert!(corruption_reason(&encode_with_extra_field(FIELD_NUMBER)).contains("twice"));
    assert!(corruption_reason(&encode_with_extra_field(FIELD_BLOB_REFS)).contains("twice"));
    assert!(corruption_reason(&encode_with_extra_field(FIELD_IDENTITY)).contains("twice"));
    // A checksum wider than 32 bits: refused.
    let mut e = VersionEdit::default();
    e.add_file(
        3,
        FileMetaData {
            file_checksum: None,
            ..file(5)
        },
    );
    let mut buf = Vec::new();
    e.encode(&mut buf);
    let mut body = buf[2..].to_vec();
    let (_, n) = get_varint32(&body).unwrap();
    body.drain(..n);
    put_varint32(&mut body, FIELD_FILE_CHECKSUM);
    let mut wide = Vec::new();
    put_varint64(&mut wide, 1 << 32);
    put_length_prefixed(&mut body, &wide);
    let mut out = vec![buf[0], buf[1]];
    put_length_prefixed(&mut out, &body);
    assert!(corruption_reason(&out).contains("exceeds u32"));
}

#[test]
fn invalid_file_records_are_rejected() {
    let body_with = |fields: &[(u32, &[u8])]| {
        let mut body = Vec::new();
        for (tag, value) in fields {
            put_varint32(&mut body, *tag);
            put_length_prefixed(&mut body, value);
        }
        let mut buf = Vec::new();
        put_varint32(&mut buf, TAG_NEW_FILE);
        put_varint32(&mut buf, 0);
        put_length_prefixed(&mut buf, &body);
        buf
    };
    let key = make_internal_key(b"k", 1, ValueKind::Value);
    let complete: Vec<(u32, &[u8])> = vec![
        (FIELD_NUMBER, &[1]),
        (FIELD_FILE_SIZE, &[2]),
        (FIELD_SMALLEST, &key),
        (FIELD_LARGEST, &key),
        (FIELD_SMALLEST_SEQ, &[1]),
        (FIELD_LARGEST_SEQ, &[1]),
    ];
    decode(&body_with(&complete)).unwrap();
    let reason = corruption_reason(&body_with(&complete[1..]));
    assert!(reason.contains("required field 1 is missing"), "{reason}");
    let mut bad_seq = complete.clone();
    bad_seq[4] = (FIELD_SMALLEST_SEQ, &[2]);
    assert!(corruption_reason(&body_with(&bad_seq)).contains("smallest_seq 2 > largest_seq 1"));
    let mut short_key = complete.clone();
    short_key[2] = (FIELD_SMALLEST, b"short");
    assert!(corruption_reason(&body_with(&short_key)).contains("not a valid internal key"));
    let mut two_varints = complete.clone();
    two_varints[0] = (FIELD_NUMBER, &[1, 1]);
    assert!(corruption_reason(&body_with(&two_varints)).contains("single varint"));
}

#[test]
fn truncation_never_panics_and_mid_field_cuts_fail() {
    let mut buf = Vec::new();
    full_edit().encode(&mut buf);
    // Only cuts at field boundaries can decode; everything else must be an error.
    let mut boundaries = 0;
    for cut in 0..buf.len() {
        if decode(&buf[..cut]).is_ok() {
            boundaries += 1;
        }
    }
    // The empty prefix, plus the end of each of the 23 fields except the last.
    assert_eq!(boundaries, 23);
}

#[test]
fn duplicate_scalars_are_rejected() {
    let e = VersionEdit {
        log_number: Some(1),
        ..VersionEdit::default()
    };
    let mut buf = Vec::new();
    e.encode(&mut buf);
    e.encode(&mut buf);
    assert!(corruption_reason(&buf).contains("tag 2 appears twice"));
}

#[test]
fn display_is_readable() {
    let text = full_edit().to_string();
    assert!(
        text.contains("comparator: sluice.BytewiseComparator\n"),
        "{text}"
    );
    assert!(text.contains("log_number: 12\n"));
    assert!(
        text.contains("compact_pointer L2: 'm' @ 5 value\n"),
        "{text}"
    );
    assert!(text.contains("delete L1 #000017\n"));
    assert!(text.contains("wal #000011 synced=70000\n"), "{text}");
    assert!(
        text.contains(
            "add L6 #000019 size=77824 ['apple' @ 10 value .. 'zebra\\x00' @ 3 delete] seq=3..=10"
        ),
        "{text}"
    );
    assert!(
        text.contains("add blob #000003 size=70000 records=12 value_bytes=69000 dir=1\n"),
        "{text}"
    );
    assert!(
        text.contains(" blob#000003=2/200B blob#000011=1/5000B\n"),
        "{text}"
    );
    let debug = format!("{:?}", full_edit());
    assert!(debug.contains("'apple' @ 10 value"), "{debug}");
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(any::<u8>(), 0..12),
        0..sluice_sst::key::MAX_SEQ,
        any::<bool>(),
    )
        .prop_map(|(k, seq, put)| {
            make_internal_key(
                &k,
                seq,
                if put {
                    ValueKind::Value
                } else {
                    ValueKind::Deletion
                },
            )
        })
}

fn file_strategy() -> impl Strategy<Value = FileMetaData> {
    (
        any::<[u64; 6]>(),
        key(),
        key(),
        any::<u32>(),
        proptest::collection::vec((0..20u64, 17..100_000u64), 0..4),
        (any::<Option<u32>>(), any::<Option<u64>>()),
    )
        .prop_map(
            |(n, smallest, largest, dir_index, refs, (crc, id))| FileMetaData {
                number: n[0],
                file_size: n[1],
                smallest,
                largest,
                smallest_seq: n[2].min(n[3]),
                largest_seq: n[2].max(n[3]),
                num_entries: n[4],
                num_deletions: n[5],
                raw_value_bytes: n[4] ^ n[5],
                dir_index,
                range_clean_seq: n[0] ^ n[2],
                blob_refs: blob_refs(&refs),
                file_checksum: crc,
                identity: id.map(sluice_sst::table::TableIdentity::from_u64),
            },
        )
}

fn edit_strategy() -> impl Strategy<Value = VersionEdit> {
    (
        proptest::option::of("[a-zA-Z.]{0,20}"),
        any::<[Option<u64>; 3]>(),
        proptest::collection::vec((0..NUM_LEVELS, key()), 0..3),
        proptest::collection::btree_set((0..NUM_LEVELS, any::<u64>()), 0..5),
        proptest::collection::vec((0..NUM_LEVELS, file_strategy()), 0..5),
        proptest::option::of(range_map_strategy()),
        proptest::collection::vec(any::<(u64, u64)>(), 0..3),
        (
            any::<Option<u64>>(),
            proptest::collection::vec((1..u32::MAX, ".{0,8}"), 0..3),
            proptest::collection::vec(any::<u32>(), 0..3),
            any::<Option<u32>>(),
            proptest::collection::vec(any::<(u64, u32, u64, u64, u64)>(), 0..3),
            proptest::collection::vec((1..u32::MAX, any::<u64>()), 0..3),
        ),
    )
        .prop_map(
            |(
                comparator,
                [log_number, next_file_number, last_sequence],
                compact_pointers,
                deleted_files,
                new_files,
                range_map,
                wals,
                (
                    default_log_number,
                    keyspaces_created,
                    keyspaces_dropped,
                    next_keyspace_id,
                    blobs,
                    keyspace_log_numbers,
                ),
            )| {
                let new_blob_files = blobs
                    .into_iter()
                    .map(
                        |(number, dir_index, file_size, records, value_bytes)| BlobFileMetaData {
                            number,
                            dir_index,
                            file_size,
                            records,
                            value_bytes,
                        },
                    )
                    .collect();
                VersionEdit {
                    new_blob_files,
                    default_log_number,
                    keyspaces_created,
                    keyspaces_dropped,
                    next_keyspace_id,
                    keyspace_log_numbers,
                    value_format: comparator.as_ref().map(|_| "ttl".to_string()),
                    merge_operator: next_file_number.map(|n| format!("op-{n}")),
                    range_tombstones: Vec::new(),
                    dropped_tombstones: Vec::new(),
                    comparator,
                    log_number,
                    next_file_number,
                    last_sequence,
                    compact_pointers,
                    deleted_files,
                    new_files,
                    range_map,
                    wals,
                }
            },
        )
}

fn range_map_strategy() -> impl Strategy<Value = crate::version::range_map::RangeMap> {
    (
        proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..6), 0..5),
        proptest::collection::vec((0u32..4, any::<bool>()), 5),
    )
        .prop_map(|(starts, moves)| {
            let boundaries: Vec<Vec<u8>> = starts.into_iter().collect();
            let owners = vec![0; boundaries.len() + 1];
            let mut map = crate::version::range_map::RangeMap::new(&boundaries, &owners).unwrap();
            for (i, (to, _)) in moves.iter().enumerate().take(map.len()) {
                map = map.with_move(i, *to);
            }
            let entries: Vec<(usize, u32)> = moves
                .iter()
                .enumerate()
                .filter(|(_, m)| m.1)
                .map(|(i, _)| (i, 1))
                .collect();
            map.with_forwarding(entries)
        })
}

proptest! {
    #[test]
    fn encode_decode_round_trip(edit in edit_strategy()) {
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        prop_assert_eq!(decode(&buf).unwrap(), edit);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(edit) = decode(&bytes) {
            // Whatever decodes re-encodes to something that decodes to the same edit.
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            prop_assert_eq!(decode(&buf).unwrap(), edit);
        }
    }

    #[test]
    fn damaged_encodings_never_panic(edit in edit_strategy(), flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 1..4)) {
        let mut buf = Vec::new();
        edit.encode(&mut buf);
        if !buf.is_empty() {
            for (at, mask) in flips {
                let i = at.index(buf.len());
                buf[i] ^= mask;
            }
        }
        let _ = decode(&buf);
    }
}

#[test]
fn encoding_is_frozen() {
    let mut e = VersionEdit {
        log_number: Some(5),
        ..VersionEdit::default()
    };
    e.delete_file(1, 2);
    let key = make_internal_key(b"a", 1, ValueKind::Value);
    e.add_file(
        0,
        FileMetaData {
            number: 5,
            file_size: 1000,
            smallest: key.clone(),
            largest: key,
            smallest_seq: 1,
            largest_seq: 1,
            ..FileMetaData::default()
        },
    );
    let mut buf = Vec::new();
    e.encode(&mut buf);
    let ikey = [b'a', 0x01, 0x01, 0, 0, 0, 0, 0, 0];
    let mut expected = vec![0x02, 0x05, 0x06, 0x01, 0x02, 0x14, 0x00, 47];
    expected.extend_from_slice(&[0x01, 0x01, 0x05, 0x02, 0x02, 0xe8, 0x07, 0x03, 0x09]);
    expected.extend_from_slice(&ikey);
    expected.extend_from_slice(&[0x04, 0x09]);
    expected.extend_from_slice(&ikey);
    for tag in 5..=6 {
        expected.extend_from_slice(&[tag, 0x01, 0x01]);
    }
    for tag in 7..=10 {
        expected.extend_from_slice(&[tag, 0x01, 0x00]);
    }
    assert_eq!(buf, expected);

    // The range map: tag 21, then the length-prefixed map body.
    let map = crate::version::range_map::RangeMap::new(&[b"m".to_vec()], &[0, 1])
        .unwrap()
        .with_move(1, 2)
        .with_forwarding([(1, 1)]);
    let e = VersionEdit {
        range_map: Some(map),
        ..VersionEdit::default()
    };
    let mut buf = Vec::new();
    e.encode(&mut buf);
    // count 2; range 0: start "", owner 0, no forwarding; range 1: start "m", owner 2,
    // forwarded from [1].
    let body = [0x02, 0x00, 0x00, 0x00, 0x01, b'm', 0x02, 0x01, 0x01];
    let mut expected = vec![21, body.len() as u8];
    expected.extend_from_slice(&body);
    assert_eq!(buf, expected);

    // A tracked WAL: tag 22, the log number, the synced bytes (300 = 0xac 0x02).
    let e = VersionEdit {
        wals: vec![(5, 300)],
        ..VersionEdit::default()
    };
    let mut buf = Vec::new();
    e.encode(&mut buf);
    assert_eq!(buf, [22, 5, 0xac, 0x02]);
}
