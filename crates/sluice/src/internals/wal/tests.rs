//! Writer/reader round trips, torn tails and corruption.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_sst::Error;

use super::format::{BLOCK_SIZE, HEADER_SIZE, MAX_FRAGMENT_LEN, RecordType, encode_fragment};
use super::{LogReader, LogWriter, WalRecoveryMode};

const TOLERATE: WalRecoveryMode = WalRecoveryMode::TolerateCorruptedTailRecords;
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
    read_wal(path, mode, 0, false)
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
    let mut r = LogReader::wal(open(&path), path.clone(), ABSOLUTE, 7);
    for _ in 0..3 {
        assert!(r.read_record().unwrap().is_some());
    }
    assert!(r.read_record().unwrap().is_none());
    assert!(r.read_record().unwrap().is_none());

    let mut bytes = std::fs::read(&path).unwrap();
    bytes[HEADER_SIZE + 3] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let mut r = LogReader::wal(open(&path), path.clone(), ABSOLUTE, 7);
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

    /// A follower (a secondary instance) reads a log while it grows into space reserved
    /// ahead (zeros): each reader resumes where the last one stopped, and together they read
    /// every record once, in order, even when a read stops inside a record or inside a
    /// block's trailer.
    #[test]
    fn a_follower_resuming_at_valid_len_reads_each_record_once(
        records in records_strategy(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = write_log(dir.path(), &records);
        let whole = std::fs::read(&path).unwrap();
        let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(whole.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.push(whole.len());
        let growing = dir.path().join("000008.log");
        let (mut read, mut at) = (Vec::new(), 0);
        for cut in cuts {
            let mut bytes = whole[..cut].to_vec();
            bytes.resize(cut + 1000, 0);
            std::fs::write(&growing, &bytes).unwrap();
            let mut r = LogReader::wal(open(&growing), growing.clone(), TOLERATE, 7)
                .following()
                .resume_at(at)
                .unwrap();
            while let Some(record) = r.read_record().unwrap() {
                read.push(record);
            }
            prop_assert!(r.valid_len() >= at && r.valid_len() <= cut as u64);
            at = r.valid_len();
        }
        prop_assert!(read == records);
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

const POINT_IN_TIME: WalRecoveryMode = WalRecoveryMode::PointInTime;
const SKIP: WalRecoveryMode = WalRecoveryMode::SkipAnyCorruptedRecords;

/// Writes `records` to WAL number 7 the way synced writes do: each record synced on its own,
/// so each one after the first is preceded by a sync mark. Returns the path, each record's
/// start offset (after its mark) and end offset.
fn write_synced_wal(dir: &Path, records: &[Vec<u8>]) -> (PathBuf, Vec<(u64, u64)>) {
    let path = dir.join("000007.log");
    let mut w = LogWriter::create_wal(&*sluice_sst::fs::os_fs(), path.clone(), 7).unwrap();
    let mut spans = Vec::new();
    for r in records {
        w.add_record(r).unwrap();
        let end = w.len();
        // The record is the last thing written; its payload ends the file.
        spans.push((end, end));
        w.sync().unwrap();
    }
    // Find each record's start by reading the log back.
    let mut reader = LogReader::wal(open(&path), path.clone(), ABSOLUTE, 7);
    for span in &mut spans {
        reader.read_record().unwrap().unwrap();
        span.0 = reader.last_record_offset();
    }
    (path, spans)
}

/// Reads log 7 at `path` to its end, told it was synced through `synced_through` (and whole,
/// with `whole`).
fn read_wal(path: &Path, mode: WalRecoveryMode, synced_through: u64, whole: bool) -> Outcome {
    let mut r =
        LogReader::wal(open(path), path.to_path_buf(), mode, 7).synced_through(synced_through);
    if whole {
        r = r.whole_file_synced();
    }
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

#[test]
fn synced_wal_carries_a_sync_mark_before_each_later_record() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..4).map(|i| payload(i, 100)).collect();
    let (path, spans) = write_synced_wal(dir.path(), &records);
    let bytes = std::fs::read(&path).unwrap();
    // Record 0 starts the file; each later one follows a 23-byte mark of the length before it.
    assert_eq!(spans[0].0, 0);
    for i in 1..records.len() {
        let mark_at = spans[i - 1].1 as usize;
        assert_eq!(spans[i].0 as usize, mark_at + HEADER_SIZE + 16);
        let (kind, mark) = super::format::valid_fragment_at(&bytes, mark_at).unwrap();
        assert_eq!(kind, RecordType::SyncMark);
        assert_eq!(
            super::format::decode_sync_mark(mark),
            Some((7, spans[i - 1].1))
        );
    }
    for mode in [TOLERATE, ABSOLUTE, POINT_IN_TIME, SKIP] {
        let out = read_wal(&path, mode, 0, false);
        out.end.unwrap();
        assert!(out.records == records, "{mode}");
    }
}

/// The finding of issue 18: a zeroed page in the newest WAL with synced records after it was
/// taken for a never-written gap and everything after it was silently dropped.
#[test]
fn zeroed_page_of_synced_records_is_corruption_wherever_a_later_mark_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..400).map(|i| payload(i, 90 + i % 50)).collect();
    let (path, spans) = write_synced_wal(dir.path(), &records);
    let bytes = std::fs::read(&path).unwrap();
    let page = 4096usize;
    let mut corrupt = 0;
    for start in (0..bytes.len()).step_by(page) {
        let end = (start + page).min(bytes.len());
        let mut damaged = bytes.clone();
        damaged[start..end].fill(0);
        std::fs::write(&path, &damaged).unwrap();
        // What must happen: the last record that ends after the page started is lost; if any
        // record after it survives (with its mark), the page was synced data.
        let survivor_after = spans.iter().any(|&(s, _)| s as usize >= end);
        for mode in [TOLERATE, ABSOLUTE, POINT_IN_TIME] {
            let out = read_wal(&path, mode, 0, false);
            if survivor_after {
                // Named: the first fragment the page damaged (a record, or the mark before it).
                let hit = spans.iter().find(|&&(_, e)| e as usize > start).unwrap().0;
                let lowest = hit.saturating_sub((HEADER_SIZE + 16) as u64);
                let offset = corruption_offset(&out.end, &path);
                assert!(
                    offset >= lowest && (offset as usize) < end,
                    "page {start}: {offset}"
                );
            } else if mode == ABSOLUTE {
                assert!(
                    out.end.is_err(),
                    "page {start}: absolute tolerates no torn tail"
                );
            } else {
                out.end
                    .unwrap_or_else(|e| panic!("page {start}, {mode}: {e}"));
                let kept = spans
                    .iter()
                    .take_while(|&&(_, e)| e as usize <= start)
                    .count();
                assert!(out.records == records[..kept], "page {start}, {mode}");
            }
        }
        corrupt += usize::from(survivor_after);
        // Skipping loses only what the page held, and counts it.
        let out = read_wal(&path, SKIP, 0, false);
        out.end.unwrap();
        let lost = spans
            .iter()
            .filter(|&&(s, e)| (s as usize) < end && e as usize > start)
            .count();
        assert_eq!(out.records.len(), records.len() - lost, "page {start}");
        assert!(out.dropped > 0);
    }
    assert!(corrupt > 10, "most pages are followed by synced records");
}

#[test]
fn damage_past_the_synced_point_is_dropped_by_point_in_time_even_before_valid_records() {
    // Unsynced records (no marks): a hole in the middle of them is what a power loss can leave.
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..6).map(|i| payload(i, 200)).collect();
    let (path, offsets) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[offsets[2] as usize + 9] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let out = read_wal(&path, POINT_IN_TIME, 0, false);
    out.end.unwrap();
    assert!(out.records == records[..2]);
    assert_eq!(out.dropped, bytes.len() as u64 - offsets[2]);
    // Tolerating only a torn tail, the valid records after the damage make it corruption.
    let out = read_wal(&path, TOLERATE, 0, false);
    assert_eq!(corruption_offset(&out.end, &path), offsets[2]);
    // The MANIFEST said the log was synced past the damage: corruption in every mode.
    for mode in [TOLERATE, ABSOLUTE, POINT_IN_TIME] {
        let out = read_wal(&path, mode, offsets[3], false);
        assert_eq!(corruption_offset(&out.end, &path), offsets[2], "{mode}");
        let out = read_wal(&path, mode, 0, true);
        assert_eq!(corruption_offset(&out.end, &path), offsets[2], "{mode}");
    }
    // Skipping keeps every record but the damaged one.
    let out = read_wal(&path, SKIP, offsets[3], true);
    out.end.unwrap();
    let mut expected = records.clone();
    expected.remove(2);
    assert!(out.records == expected);
    assert_eq!(out.dropped, offsets[3] - offsets[2]);
}

#[test]
fn log_shorter_than_its_synced_length_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..5).map(|i| payload(i, 300)).collect();
    let (path, offsets) = write_log(dir.path(), &records);
    let len = std::fs::metadata(&path).unwrap().len();
    // Cut at a record boundary: the file still parses cleanly, but it was synced further.
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(offsets[3])
        .unwrap();
    for mode in [TOLERATE, ABSOLUTE, POINT_IN_TIME] {
        let out = read_wal(&path, mode, len, false);
        assert_eq!(corruption_offset(&out.end, &path), offsets[3], "{mode}");
        let Err(e) = out.end else { unreachable!() };
        assert!(e.to_string().contains("synced through"), "{e}");
        // Without the MANIFEST's length the same file is a clean, shorter log.
        read_wal(&path, mode, 0, false).end.unwrap();
    }
    let out = read_wal(&path, SKIP, len, false);
    out.end.unwrap();
    assert_eq!(out.dropped, len - offsets[3]);
}

#[test]
fn a_zeroed_tail_below_the_synced_length_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..5).map(|i| payload(i, 300)).collect();
    let (path, offsets) = write_log(dir.path(), &records);
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len() as u64;
    bytes[offsets[4] as usize..].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    // Alone, an all-zero tail is space the writer never wrote: a clean end.
    read_wal(&path, POINT_IN_TIME, offsets[4], false)
        .end
        .unwrap();
    for mode in [TOLERATE, ABSOLUTE, POINT_IN_TIME] {
        let out = read_wal(&path, mode, len, false);
        assert_eq!(corruption_offset(&out.end, &path), offsets[4], "{mode}");
    }
}

#[test]
fn a_sync_mark_of_another_log_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = write_synced_wal(dir.path(), &[payload(1, 10), payload(2, 10)]);
    // Read it as log 8: the file holds log 7's marks.
    let mut r = LogReader::wal(open(&path), path.clone(), POINT_IN_TIME, 8);
    assert!(r.read_record().unwrap().is_some());
    let err = r.read_record().unwrap_err();
    assert!(
        err.to_string().contains("sync mark of log 7 in log 8"),
        "{err}"
    );
}

#[test]
fn recovery_modes_have_rocksdb_names() {
    for mode in WalRecoveryMode::ALL {
        assert_eq!(mode.name().parse::<WalRecoveryMode>(), Ok(mode));
    }
    assert_eq!(WalRecoveryMode::default(), POINT_IN_TIME);
    assert_eq!(POINT_IN_TIME.to_string(), "point_in_time");
    assert!("tolerate".parse::<WalRecoveryMode>().is_err());
}

/// Opens `path` for a [`LogReader`], as recovery does.
fn open(path: &Path) -> Box<dyn sluice_sst::fs::ReadFile> {
    sluice_sst::fs::os_fs()
        .open_read(path, sluice_sst::fs::IoMode::Buffered)
        .unwrap()
}
