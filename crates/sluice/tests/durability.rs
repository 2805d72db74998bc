//! Nothing acknowledged is silently lost: the attacks of issue 18, each a regression test.
//!
//! For every kind of damage to the logs (a zeroed page of a WAL, a MANIFEST cut short or with
//! a byte changed), opening the database either fails with `Corruption` naming the damaged
//! file, or returns every acknowledged write. Unreferenced tables are swept whatever their
//! number, new files never take a number already on disk, and a read-only open changes no
//! byte of the directory.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice::{CompactionOptions, Db, Error, ErrorKind, MemtableOptions, Options, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("{i:016}").into_bytes()
}

/// A value like db_bench's: 100 bytes, different per key and per round.
fn value(i: u32, round: u32) -> Vec<u8> {
    format!("{i}-{round}-{}", "v".repeat(90)).into_bytes()
}

fn files_named(dir: &Path, pred: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| pred(p.file_name().unwrap().to_str().unwrap()))
        .collect();
    v.sort();
    v
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap();
        if path.is_file() && name != "LOCK" {
            std::fs::copy(&path, to.join(name)).unwrap();
        }
    }
}

/// Every key and value, read through a read-only open.
fn contents(dir: &Path) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    let db = Db::open_read_only(dir, Options::default())?;
    let mut all = BTreeMap::new();
    for entry in db.iter() {
        let (k, v) = entry?;
        all.insert(k, v);
    }
    db.check()?;
    Ok(all)
}

/// Opening `dir` must fail with corruption in `file`, or give exactly `expected`.
fn corruption_or_intact(dir: &Path, file: &Path, expected: &BTreeMap<Vec<u8>, Vec<u8>>) -> bool {
    corruption_in_or_intact(dir, file, Some(file), expected)
}

/// Opening `dir` after damage to `damaged` must fail with corruption (naming `named`, when
/// given), or give exactly `expected`.
fn corruption_in_or_intact(
    dir: &Path,
    damaged: &Path,
    named: Option<&Path>,
    expected: &BTreeMap<Vec<u8>, Vec<u8>>,
) -> bool {
    match contents(dir) {
        Ok(found) => {
            assert!(
                found == *expected,
                "damage to {} went unreported: {} keys instead of {}",
                damaged.display(),
                found.len(),
                expected.len()
            );
            false
        }
        Err(Error::Corruption { file: found, .. }) => {
            if let Some(named) = named {
                assert_eq!(found.file_name(), named.file_name(), "the file is named");
            }
            true
        }
        Err(e) => panic!(
            "expected corruption after damage to {}, got {e}",
            damaged.display()
        ),
    }
}

/// `sluice bench --benchmarks fillseq --num 3000 --sync`: every write synced, then closed.
fn fillseq_synced(dir: &Path, keys: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open(dir, Options::default()).unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..keys {
        db.put_opt(&WriteOptions { sync: true }, key(i), value(i, 0))
            .unwrap();
        expected.insert(key(i), value(i, 0));
    }
    db.close().unwrap();
    expected
}

/// Finding 1: zeroing 4 KiB at offset 32768 of the newest WAL returned 237 of 3000 synced
/// keys while `check` said ok. Every page of it is tried here.
#[test]
fn a_zeroed_page_of_a_synced_wal_is_corruption_wherever_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let expected = fillseq_synced(dir.path(), 3000);
    let wal = files_named(dir.path(), |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    let bytes = std::fs::read(&wal).unwrap();
    assert!(bytes.len() > 100_000);
    let work = tempfile::tempdir().unwrap();
    for start in (0..bytes.len()).step_by(4096) {
        copy_dir(dir.path(), work.path());
        let mut damaged = bytes.clone();
        let end = (start + 4096).min(bytes.len());
        damaged[start..end].fill(0);
        std::fs::write(work.path().join(wal.file_name().unwrap()), &damaged).unwrap();
        assert!(
            corruption_or_intact(work.path(), &wal, &expected),
            "zeroed page at {start} lost synced writes silently"
        );
    }
}

/// The bytes of a log up to its last non-zero one: a crash image of a live WAL ends in the
/// zeros of the space reserved ahead of its writer.
fn written_len(log: &[u8]) -> usize {
    log.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
}

/// The same attack on a crash image (no close, so the MANIFEST does not know the WAL's
/// final length): the sync marks inside the WAL make every zeroed page that later synced
/// records survive an error. Only the very last group of records, with no mark after it, can
/// vanish, which a crash during its write could also have caused.
#[test]
fn a_zeroed_page_of_a_crashed_synced_wal_is_corruption_unless_it_holds_the_last_write() {
    let live = tempfile::tempdir().unwrap();
    let image = tempfile::tempdir().unwrap();
    let db = Db::open(live.path(), Options::default()).unwrap();
    let mut expected = BTreeMap::new();
    for i in 0..3000 {
        db.put_opt(&WriteOptions { sync: true }, key(i), value(i, 0))
            .unwrap();
        expected.insert(key(i), value(i, 0));
    }
    copy_dir(live.path(), image.path());
    drop(db);
    let wal = files_named(image.path(), |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    let bytes = std::fs::read(&wal).unwrap();
    // A live WAL is reserved ahead of its records; the zeros after them are no data to attack.
    let written = written_len(&bytes);
    let work = tempfile::tempdir().unwrap();
    let last_page = (written - 1) / 4096 * 4096;
    for start in (0..written).step_by(4096) {
        copy_dir(image.path(), work.path());
        let mut damaged = bytes.clone();
        let end = (start + 4096).min(bytes.len());
        damaged[start..end].fill(0);
        std::fs::write(work.path().join(wal.file_name().unwrap()), &damaged).unwrap();
        match contents(work.path()) {
            Err(e) => assert!(e.is_corruption(), "page {start}: {e}"),
            Ok(found) => {
                assert_eq!(start, last_page, "page {start} lost synced writes silently");
                // A prefix of the writes, missing only those the last page held.
                let missing = expected.len() - found.len();
                assert!(missing < 40, "page {start}: {missing} keys lost");
                assert!(found.iter().all(|(k, v)| expected.get(k) == Some(v)));
            }
        }
    }
}

/// Two `fillrandom` runs with a 256 KiB write buffer on one directory, as in finding 2.
fn two_fillrandom_runs(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let options = || Options {
        memtable: MemtableOptions {
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    };
    let mut expected = BTreeMap::new();
    let mut rng = 12345u64;
    for round in 0..2 {
        let db = Db::open(dir, options()).unwrap();
        for _ in 0..6000 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let i = (rng >> 33) as u32 % 9000;
            db.put(key(i), value(i, round)).unwrap();
            expected.insert(key(i), value(i, round));
        }
        db.close().unwrap();
    }
    expected
}

fn manifest(dir: &Path) -> PathBuf {
    files_named(dir, |n| n.starts_with("MANIFEST-"))
        .pop()
        .unwrap()
}

/// Finding 2: a byte changed 5 bytes before the end of the MANIFEST was dropped as a torn
/// tail; 1,289 of 17,679 keys came back older or missing and `check` said ok. A changed byte
/// anywhere in a complete record is corruption.
#[test]
fn a_changed_byte_anywhere_in_the_manifest_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_fillrandom_runs(dir.path());
    let path = manifest(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut corrupt = 0;
    for at in (0..bytes.len()).rev().step_by(3) {
        copy_dir(dir.path(), work.path());
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        std::fs::write(work.path().join(path.file_name().unwrap()), &damaged).unwrap();
        corrupt += usize::from(corruption_or_intact(work.path(), &path, &expected));
    }
    // A flip in a length field can make the last record run past the end of the file, which
    // reads as cut short; everything else is reported.
    assert!(
        corrupt + 3 >= bytes.len() / 3,
        "{corrupt} of {}",
        bytes.len() / 3
    );
}

/// Finding 2, truncation: cutting the MANIFEST to 1597 of 1600 bytes, or to half, brought
/// back an older state. A MANIFEST cut short may lose only an edit nothing depended on.
#[test]
fn a_manifest_cut_short_anywhere_is_corruption_or_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let expected = two_fillrandom_runs(dir.path());
    let path = manifest(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    let work = tempfile::tempdir().unwrap();
    for cut in (0..bytes.len()).rev().step_by(5) {
        copy_dir(dir.path(), work.path());
        std::fs::write(work.path().join(path.file_name().unwrap()), &bytes[..cut]).unwrap();
        // A cut inside a record names the MANIFEST; a cut between two records leaves a
        // well-formed, older MANIFEST, and the error names a file that state needs and lacks.
        corruption_in_or_intact(work.path(), &path, None, &expected);
    }
}

/// Finding 2's second half: the reopen after a dropped MANIFEST record wrote the replayed WAL
/// to a table with the number the dropped record had named, destroying that table.
#[test]
fn new_files_never_take_a_number_already_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    drop(Db::open(dir.path(), Options::default()).unwrap());
    let stray = dir.path().join("000777.sst");
    std::fs::write(&stray, b"a table some lost edit named").unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    let numbers: Vec<u64> = files_named(dir.path(), |n| n.ends_with(".sst") || n.ends_with(".log"))
        .iter()
        .map(|p| p.file_stem().unwrap().to_str().unwrap().parse().unwrap())
        .collect();
    assert!(numbers.iter().all(|&n| n > 777), "{numbers:?}");
}

/// Finding 3: unreferenced tables numbered above the MANIFEST's next file number (left by a
/// kill during compaction) stayed forever. They are swept at open in every table directory.
#[test]
fn orphan_tables_are_swept_at_open_whatever_their_number_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let options = || Options {
        data_dirs: vec![data.path().to_path_buf()],
        ..Options::default()
    };
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let live: Vec<PathBuf> = [dir.path(), data.path()]
        .iter()
        .flat_map(|d| files_named(d, |n| n.ends_with(".sst")))
        .collect();
    assert!(!live.is_empty());
    let orphans = [
        dir.path().join("000000.sst"), // below every number handed out
        dir.path().join("009999.sst"),
        data.path().join("123456.sst"),
        data.path().join("000999.dbtmp"),
    ];
    for o in &orphans {
        std::fs::copy(&live[0], o).unwrap();
    }
    let db = Db::open(dir.path(), options()).unwrap();
    for o in &orphans {
        assert!(!o.exists(), "{} survived the open", o.display());
    }
    for f in &live {
        assert!(f.exists(), "{} is live", f.display());
    }
    assert_eq!(db.recovery_report().orphans_deleted, orphans.len());
    assert_eq!(db.metrics().orphans_deleted_at_open, orphans.len() as u64);
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)));
    }
}

/// Every file name and its bytes.
fn snapshot_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p.file_name().unwrap().to_str().unwrap().to_string(), bytes)
        })
        .collect()
}

/// Finding 4: `get`, `scan`, `stats` and `check` replayed the WAL into a new table and wrote
/// a new MANIFEST. A read-only open changes nothing, even with a WAL to replay and a torn
/// tail to drop, and serves the WAL's records from memory.
#[test]
fn a_read_only_open_leaves_every_file_byte_identical() {
    let live = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(
        live.path(),
        Options {
            memtable: MemtableOptions {
                write_buffer_size: 64 << 10,
                ..MemtableOptions::default()
            },
            ..Options::default()
        },
    )
    .unwrap();
    for i in 0..2000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    for i in 0..500 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    // A copy is a crash image only with no flush or compaction writing meanwhile: a table
    // copied half-written, then a MANIFEST copied after it was installed, is no state a
    // crash can leave.
    db.wait_for_background_work().unwrap();
    copy_dir(live.path(), dir.path()); // a crash image: the last writes only in the WAL
    drop(db);
    let wal = files_named(dir.path(), |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    let len = written_len(&std::fs::read(&wal).unwrap()) as u64;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .unwrap()
        .set_len(len - 50)
        .unwrap();
    let before = snapshot_files(dir.path());
    for _ in 0..2 {
        let db = Db::open_read_only(dir.path(), Options::default()).unwrap();
        assert!(db.is_read_only());
        assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)));
        assert_eq!(db.get(key(1500)).unwrap(), Some(value(1500, 0)));
        assert_eq!(db.iter().map(Result::unwrap).count(), 2000);
        let report = db.check().unwrap();
        assert!(report.files > 0);
        assert!(report.recovery.wal_records > 0);
        assert_eq!(
            report.recovery.dropped.len(),
            1,
            "the torn tail is reported"
        );
        assert!(db.metrics().recovery_dropped_bytes > 0);
        for refused in [
            db.put(b"k", b"v"),
            db.delete(b"k"),
            db.flush(),
            db.compact_range(None, None),
        ] {
            let err = refused.expect_err("a read-only open refuses changes");
            assert_eq!(err.kind(), ErrorKind::ReadOnly, "{err}");
            assert!(err.to_string().contains("read-only"), "{err}");
        }
        db.wait_for_background_work().unwrap();
        db.close().unwrap();
        assert!(
            before == snapshot_files(dir.path()),
            "a read-only open changed a file"
        );
    }
    // A read-write open then applies the same data.
    let db = Db::open(dir.path(), Options::default()).unwrap();
    assert_eq!(db.get(key(7)).unwrap(), Some(value(7, 1)));
}

#[test]
fn a_read_only_open_needs_an_existing_database_and_no_writer() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    assert!(matches!(
        Db::open_read_only(&missing, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!missing.exists(), "a read-only open creates nothing");
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let err = Db::open_read_only(dir.path(), Options::default())
        .err()
        .expect("a writer holds the lock");
    assert!(err.to_string().contains("locked"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    // A second handle in the same process is refused the same way.
    let err = Db::open(dir.path(), Options::default())
        .err()
        .expect("the first handle holds the lock");
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    drop(db);
    let a = Db::open_read_only(dir.path(), Options::default()).unwrap();
    let b = Db::open_read_only(dir.path(), Options::default()).unwrap();
    assert!(
        Db::open(dir.path(), Options::default()).is_err(),
        "readers keep writers out"
    );
    drop((a, b));
    Db::open(dir.path(), Options::default()).unwrap();
}

/// A WAL the MANIFEST tracks cannot disappear unnoticed, and a closed WAL cannot shrink.
#[test]
fn a_missing_or_shortened_wal_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let options = || Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    };
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..300 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.close().unwrap();
    let wal = files_named(dir.path(), |n| n.ends_with(".log"))
        .pop()
        .unwrap();
    let bytes = std::fs::read(&wal).unwrap();
    std::fs::remove_file(&wal).unwrap();
    let err = Db::open_read_only(dir.path(), options()).err().unwrap();
    assert!(
        err.is_corruption() && err.to_string().contains("missing"),
        "{err}"
    );
    std::fs::write(&wal, &bytes[..bytes.len() / 2]).unwrap();
    let err = Db::open(dir.path(), options()).err().unwrap();
    assert!(err.is_corruption(), "{err}");
    std::fs::write(&wal, &bytes).unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(key(299)).unwrap(), Some(value(299, 0)));
}
