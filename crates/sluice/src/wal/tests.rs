//! Writer/reader round trips, torn tails and corruption.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_sst::Error;

use super::format::{BLOCK_SIZE, HEADER_SIZE, MAX_FRAGMENT_LEN, RecordType, encode_fragment};
use super::{LogReader, LogWriter, WalRecoveryMode};

const TOLERATE: WalRecoveryMode = WalRecoveryMode::TolerateCorruptedTail;
const ABSOLUTE: WalRecoveryMode = WalRecoveryMode::AbsoluteConsistency;

/// A payload whose bytes depend on `seed`, so records cannot be confused with each other.
fn payload(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ seed.wrapping_mul(131)) as u8)
        .collect()
}

/// Writes `records` to `dir/000007.log`; returns the path and each record's start offset.
fn write_log(dir: &Path, records: &[Vec<u8>]) -> (PathBuf, Vec<u64>) {
    let path = dir.join("000007.log");
    let mut w = LogWriter::create(&*sluice_sst::fs::os_fs(), path.clone()).unwrap();
    let mut offsets = Vec::new();
    for r in records {
        // A record starts at the writer's length unless that leaves no room for a header.
        let len = w.len();
        let in_block = (len % BLOCK_SIZE as u64) as usize;
        let skip = if BLOCK_SIZE - in_block < HEADER_SIZE {
            BLOCK_SIZE - in_block
        } else {
            0
        };
        offsets.push(len + skip as u64);
        w.add_record(r).unwrap();
    }
    w.sync().unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), w.len());
    (path, offsets)
}

/// Everything a reader produced: the records before it stopped, how it stopped, and counters.
struct Outcome {
    records: Vec<Vec<u8>>,
    offsets: Vec<u64>,
    end: Result<(), Error>,
    dropped: u64,
    valid_len: u64,
}

fn read_all(path: &Path, mode: WalRecoveryMode) -> Outcome {
    let mut r = LogReader::new(File::open(path).unwrap(), path.to_path_buf(), mode);
    let mut out = Outcome {
        records: vec![],
        offsets: vec![],
        end: Ok(()),
        dropped: 0,
        valid_len: 0,
    };
    loop {
        match r.read_record() {
            Ok(Some(rec)) => {
                out.records.push(rec);
                out.offsets.push(r.last_record_offset());
            }
            Ok(None) => break,
            Err(e) => {
                out.end = Err(e);
                break;
            }
        }
        assert!(out.records.len() < 100_000, "reader does not terminate");
    }
    out.dropped = r.dropped_bytes();
    out.valid_len = r.valid_len();
    out
}

fn corruption_offset(end: &Result<(), Error>, path: &Path) -> u64 {
    match end {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            *offset
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn round_trips_records_of_every_interesting_size() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [
        MAX_FRAGMENT_LEN, // exactly fills block 0
        0,
        1,
        MAX_FRAGMENT_LEN - 1,
        MAX_FRAGMENT_LEN + 1,
        3 * BLOCK_SIZE + 17, // spans several blocks
        1 << 20,
        0,
        5,
    ];
    let records: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| payload(i, n))
        .collect();
    let (path, offsets) = write_log(dir.path(), &records);
    assert_eq!(
        offsets[1], BLOCK_SIZE as u64,
        "a full block leaves no trailer"
    );
    for mode in [TOLERATE, ABSOLUTE] {
        let out = read_all(&path, mode);
        out.end.unwrap();
        assert!(out.records == records);
        assert_eq!(out.offsets, offsets);
        assert_eq!(out.dropped, 0);
        assert_eq!(out.valid_len, std::fs::metadata(&path).unwrap().len());
    }
}

#[test]
fn every_trailer_length_round_trips() {
    // leftover 0..=6 forces a zero trailer; 7 and 8 put a (possibly empty) first fragment there.
    for leftover in 0..=8 {
        let dir = tempfile::tempdir().unwrap();
        let records = vec![
            payload(1, BLOCK_SIZE - HEADER_SIZE - leftover),
            payload(2, 50_000),
            payload(3, 3),
        ];
        let (path, offsets) = write_log(dir.path(), &records);
        let expected_second = if leftover < HEADER_SIZE {
            BLOCK_SIZE
        } else {
            BLOCK_SIZE - leftover
        };
        assert_eq!(offsets[1], expected_second as u64, "leftover {leftover}");
        let out = read_all(&path, ABSOLUTE);
        out.end.unwrap();
        assert!(out.records == records, "leftover {leftover}");
        assert_eq!(out.offsets, offsets);
    }
}

#[test]
fn zero_filled_preallocated_tail_ends_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![payload(1, 100), payload(2, 40_000)];
    let (path, _) = write_log(dir.path(), &records);
    let len = std::fs::metadata(&path).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len + 100_000)
        .unwrap();
    for mode in [TOLERATE, ABSOLUTE] {
        let out = read_all(&path, mode);
        out.end.unwrap();
        assert!(out.records == records);
        assert_eq!((out.dropped, out.valid_len), (0, len));
    }
}

/// Three records; the last one starts 200 bytes before a block boundary and crosses it.
fn torn_tail_fixture() -> (Vec<Vec<u8>>, Vec<u8>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let a = payload(1, 100);
    let b = payload(2, BLOCK_SIZE - 200 - 2 * HEADER_SIZE - 100);
    // No zero bytes, so zero-filling any suffix of the file changes the record.
    let c: Vec<u8> = payload(3, 600).into_iter().map(|b| b.max(1)).collect();
    let records = vec![a, b, c];
    let (path, offsets) = write_log(dir.path(), &records);
    assert_eq!(offsets[2], (BLOCK_SIZE - 200) as u64);
    (records, std::fs::read(path).unwrap(), offsets[2])
}

#[test]
fn torn_tail_at_every_byte_of_the_last_record_keeps_earlier_records() {
    let (records, bytes, start_c) = torn_tail_fixture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000009.log");
    let end_c = bytes.len() as u64;
    for t in start_c..=end_c {
        std::fs::write(&path, &bytes[..t as usize]).unwrap();
        let complete = t == end_c;
        let out = read_all(&path, TOLERATE);
        out.end.unwrap_or_else(|e| panic!("cut at {t}: {e}"));
        assert!(
            out.records == records[..if complete { 3 } else { 2 }],
            "cut at {t}"
        );
        assert_eq!(
            out.dropped,
            if complete { 0 } else { t - start_c },
            "cut at {t}"
        );
        assert_eq!(out.valid_len, if complete { end_c } else { start_c });

        let out = read_all(&path, ABSOLUTE);
        if complete || t == start_c {
            out.end.unwrap();
        } else {
            assert!(corruption_offset(&out.end, &path) >= start_c, "cut at {t}");
            assert!(out.records == records[..2]);
        }
    }
}

#[test]
fn torn_tail_followed_by_zeros_at_every_byte_keeps_earlier_records() {
    let (records, bytes, start_c) = torn_tail_fixture();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000009.log");
    for t in start_c as usize..bytes.len() {
        let mut torn = bytes.clone();
        torn[t..].fill(0);
        std::fs::write(&path, &torn).unwrap();
        let out = read_all(&path, TOLERATE);
        out.end.unwrap_or_else(|e| panic!("zeroed from {t}: {e}"));
        assert!(out.records == records[..2], "zeroed from {t}");
        let expected_drop = if t == start_c as usize {
            0
        } else {
            bytes.len() as u64 - start_c
        };
        assert_eq!(out.dropped, expected_drop, "zeroed from {t}");

        let out = read_all(&path, ABSOLUTE);
        assert_eq!(out.end.is_ok(), t == start_c as usize, "zeroed from {t}");
    }
}

#[test]
fn flipped_byte_before_valid_records_is_corruption_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![
        payload(1, 10),
        payload(2, 50),
        payload(3, 20),
        payload(4, 5),
    ];
    let (path, offsets) = write_log(dir.path(), &records);
    let bytes = std::fs::read(&path).unwrap();
    let b_start = offsets[1] as usize;
    for i in b_start..offsets[2] as usize {
        let mut damaged = bytes.clone();
        damaged[i] ^= 0x40;
        std::fs::write(&path, &damaged).unwrap();
        for mode in [TOLERATE, ABSOLUTE] {
            let out = read_all(&path, mode);
            assert_eq!(
                corruption_offset(&out.end, &path),
                b_start as u64,
                "flip at {i}"
            );
            assert_eq!(out.records, records[..1]);
            assert_eq!(out.dropped, 0);
        }
    }
}

#[test]
fn flipped_byte_in_a_middle_fragment_names_that_fragment() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![
        payload(1, 10),
        payload(2, 2 * BLOCK_SIZE + 500),
        payload(3, 20),
    ];
    let (path, offsets) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(offsets[1], (HEADER_SIZE + 10) as u64);
    bytes[BLOCK_SIZE + 1000] ^= 1; // inside the Middle fragment, which starts block 1
    std::fs::write(&path, &bytes).unwrap();
    for mode in [TOLERATE, ABSOLUTE] {
        let out = read_all(&path, mode);
        assert_eq!(corruption_offset(&out.end, &path), BLOCK_SIZE as u64);
        assert_eq!(out.records, records[..1]);
        let Err(err) = out.end else { unreachable!() };
        assert!(err.to_string().contains("checksum"), "{err}");
    }
}

#[test]
fn flipped_byte_in_the_last_record_is_a_torn_tail_only_when_tolerated() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![payload(1, 10), payload(2, 50)];
    let (path, offsets) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let out = read_all(&path, TOLERATE);
    out.end.unwrap();
    assert_eq!(out.records, records[..1]);
    assert_eq!(out.dropped, bytes.len() as u64 - offsets[1]);
    let out = read_all(&path, ABSOLUTE);
    assert_eq!(corruption_offset(&out.end, &path), offsets[1]);
}

#[test]
fn broken_fragment_sequences_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000011.log");
    type Fragments<'a> = &'a [(RecordType, &'a [u8])];
    let cases: [(Fragments<'_>, u64); 3] = [
        (&[(RecordType::First, b"ab"), (RecordType::Full, b"cd")], 0),
        (
            &[(RecordType::Full, b"ok"), (RecordType::Middle, b"x")],
            (HEADER_SIZE + 2) as u64,
        ),
        (&[(RecordType::Last, b"x"), (RecordType::Full, b"ok")], 0),
    ];
    for (fragments, bad_offset) in cases {
        let mut bytes = Vec::new();
        for (kind, data) in fragments {
            encode_fragment(&mut bytes, *kind, data);
        }
        std::fs::write(&path, &bytes).unwrap();
        for mode in [TOLERATE, ABSOLUTE] {
            let out = read_all(&path, mode);
            assert_eq!(
                corruption_offset(&out.end, &path),
                bad_offset,
                "{fragments:?}"
            );
        }
    }
}

#[test]
fn non_zero_block_trailer_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let records = vec![payload(1, BLOCK_SIZE - HEADER_SIZE - 3), payload(2, 10)];
    let (path, _) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[BLOCK_SIZE - 2] = 9;
    std::fs::write(&path, &bytes).unwrap();
    let out = read_all(&path, TOLERATE);
    assert_eq!(corruption_offset(&out.end, &path), (BLOCK_SIZE - 3) as u64);
    // Without the following record, the same bytes are a torn tail.
    std::fs::write(&path, &bytes[..BLOCK_SIZE]).unwrap();
    let out = read_all(&path, TOLERATE);
    out.end.unwrap();
    assert_eq!((out.records.len(), out.dropped), (1, 3));
}

#[test]
fn outcome_repeats_after_the_end_and_after_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_log(
        dir.path(),
        &[payload(1, 10), payload(2, 10), payload(3, 10)],
    );
    let mut r = LogReader::new(File::open(&path).unwrap(), path.clone(), ABSOLUTE);
    for _ in 0..3 {
        assert!(r.read_record().unwrap().is_some());
    }
    assert!(r.read_record().unwrap().is_none());
    assert!(r.read_record().unwrap().is_none());

    let mut bytes = std::fs::read(&path).unwrap();
    bytes[HEADER_SIZE + 3] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut r = LogReader::new(File::open(&path).unwrap(), path.clone(), ABSOLUTE);
    let first = r.read_record().unwrap_err();
    let again = r.read_record().unwrap_err();
    assert!(first.is_corruption() && again.is_corruption());
    assert_eq!(first.to_string(), again.to_string());
}

fn records_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let record = prop_oneof![
        4 => proptest::collection::vec(any::<u8>(), 0..200),
        1 => proptest::collection::vec(any::<u8>(), BLOCK_SIZE - 50..BLOCK_SIZE + 50),
        1 => (0..3 * BLOCK_SIZE).prop_map(|n| payload(n, n)),
    ];
    proptest::collection::vec(record, 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn any_records_round_trip(records in records_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        let (path, offsets) = write_log(dir.path(), &records);
        let out = read_all(&path, ABSOLUTE);
        prop_assert!(out.end.is_ok());
        prop_assert!(out.records == records);
        prop_assert_eq!(out.offsets, offsets);
    }

    #[test]
    fn truncation_yields_a_prefix_and_never_an_error(records in records_strategy(), cut in any::<prop::sample::Index>()) {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = write_log(dir.path(), &records);
        let len = std::fs::metadata(&path).unwrap().len() as usize;
        let cut = cut.index(len + 1);
        OpenOptions::new().write(true).open(&path).unwrap().set_len(cut as u64).unwrap();
        let out = read_all(&path, TOLERATE);
        prop_assert!(out.end.is_ok());
        prop_assert!(records.starts_with(&out.records));
        prop_assert!(out.valid_len + out.dropped <= cut as u64);
    }

    #[test]
    fn damaged_logs_never_panic_and_never_invent_records(
        records in records_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = write_log(dir.path(), &records);
        let mut bytes = std::fs::read(&path).unwrap();
        if !bytes.is_empty() {
            for (at, mask) in flips {
                let i = at.index(bytes.len());
                bytes[i] ^= mask;
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        for mode in [TOLERATE, ABSOLUTE] {
            let out = read_all(&path, mode);
            prop_assert!(records.starts_with(&out.records));
        }
    }

    #[test]
    fn random_bytes_never_panic_the_reader(bytes in proptest::collection::vec(any::<u8>(), 0..3 * BLOCK_SIZE)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000013.log");
        std::fs::write(&path, &bytes).unwrap();
        for mode in [TOLERATE, ABSOLUTE] {
            let out = read_all(&path, mode);
            prop_assert!(out.valid_len <= bytes.len() as u64);
        }
    }
}
