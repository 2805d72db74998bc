//! `repair`: a database whose MANIFEST, tables or WALs are damaged is rebuilt from what can be
//! read, every acknowledged write that survived on disk is back, in its newest version, and
//! what could not be read is reported and set aside in `lost/`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sluice::{CompactionOptions, Db, MemtableOptions, Options, TableOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("v{round}-{i}-{}", "x".repeat((i % 13 * 10) as usize)).into_bytes()
}

/// Versions of every key spread over every level, tombstones included, and the newest writes
/// only in the WAL: the layout in which putting tables back side by side would read an old
/// version first.
fn layered_database(dir: &Path) -> Model {
    let db = Db::open(dir, options()).unwrap();
    let mut model = Model::new();
    for i in 0..3000 {
        db.put(key(i), value(i, 1)).unwrap();
        model.insert(key(i), value(i, 1));
    }
    db.compact_range(None, None).unwrap();
    for i in (0..3000).step_by(3) {
        db.put(key(i), value(i, 2)).unwrap();
        model.insert(key(i), value(i, 2));
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    for i in (0..3000).step_by(7) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    db.flush().unwrap();
    for i in (1..3000).step_by(11) {
        db.put(key(i), value(i, 3)).unwrap();
        model.insert(key(i), value(i, 3));
    }
    db.close().unwrap();
    model
}

fn read_all(dir: &Path) -> Model {
    let db = Db::open(dir, options()).unwrap();
    let all = db.iter().map(|e| e.unwrap()).collect::<Model>();
    db.check().unwrap();
    all
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_str().unwrap().ends_with(suffix)
                || p.file_name().unwrap().to_str().unwrap().starts_with(suffix)
        })
        .collect();
    v.sort();
    v
}

fn flip(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x55;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_lost_manifest_is_rebuilt_with_every_newest_version() {
    let dir = tempfile::tempdir().unwrap();
    let model = layered_database(dir.path());
    for m in files(dir.path(), "MANIFEST-") {
        std::fs::remove_file(m).unwrap();
    }
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert!(!report.manifest_readable);
    assert!(
        report.tables_whole > 1 && report.wal_records > 0,
        "{report:?}"
    );
    assert!(
        report.dropped.is_empty() && report.missing.is_empty(),
        "{report:?}"
    );
    assert_eq!(
        report.output_entries,
        model.len() as u64,
        "tombstones and old versions gone"
    );
    assert!(read_all(dir.path()) == model);
}

#[test]
fn a_damaged_manifest_fails_open_and_repair_brings_everything_back() {
    let dir = tempfile::tempdir().unwrap();
    let model = layered_database(dir.path());
    let manifest = files(dir.path(), "MANIFEST-").pop().unwrap();
    flip(&manifest, 20);
    assert!(
        Db::open(dir.path(), options())
            .err()
            .unwrap()
            .is_corruption()
    );
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert!(!report.manifest_readable);
    assert!(
        report
            .lost
            .iter()
            .any(|l| l.path == manifest && l.moved_to.exists()),
        "the old MANIFEST is kept in lost/: {report:?}"
    );
    assert!(read_all(dir.path()) == model);
    // Running it again changes nothing.
    let again = sluice::repair(dir.path(), options()).unwrap();
    assert!(
        again.manifest_readable && again.dropped.is_empty(),
        "{again:?}"
    );
    assert!(read_all(dir.path()) == model);
}

#[test]
fn a_damaged_table_keeps_its_good_blocks_and_reports_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let model = layered_database(dir.path());
    let table = files(dir.path(), ".sst")
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    flip(&table, 100);
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert_eq!(report.tables_partial, 1, "{report:?}");
    assert_eq!(report.dropped.len(), 1, "one block lost: {report:?}");
    assert_eq!(report.dropped[0].file, table);
    assert!(report.lost.iter().any(|l| l.path == table));
    let repaired = read_all(dir.path());
    // What the damaged block held is gone (or shows an older version); everything else is
    // exactly as written.
    let differing = model
        .iter()
        .filter(|(k, v)| repaired.get(*k) != Some(v))
        .count();
    assert!(differing > 0 && differing < 40, "{differing} keys differ");
    assert!(
        repaired
            .keys()
            .all(|k| model.contains_key(k) || k < &key(100))
    );
}

#[test]
fn a_damaged_wal_keeps_every_record_around_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for i in 0..200 {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.close().unwrap();
    let wal = files(dir.path(), ".log").pop().unwrap();
    flip(&wal, 5000);
    assert!(
        Db::open(dir.path(), options())
            .err()
            .unwrap()
            .is_corruption()
    );
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert_eq!(report.dropped.len(), 1, "{report:?}");
    assert!(report.lost.iter().any(|l| l.path == wal), "{report:?}");
    let repaired = read_all(dir.path());
    assert!(
        repaired.len() >= 198 && repaired.len() < 200,
        "{}",
        repaired.len()
    );
    assert!(
        repaired.get(&key(199)) == Some(&value(199, 1)),
        "records after the damage kept"
    );
}

#[test]
fn obsolete_tables_are_set_aside_so_deleted_keys_stay_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    db.put(b"gone", b"old").unwrap();
    db.flush().unwrap();
    let old_table = files(dir.path(), ".sst").pop().unwrap();
    let kept = dir.path().join("kept-aside");
    std::fs::copy(&old_table, &kept).unwrap();
    db.delete(b"gone").unwrap();
    db.put(b"other", b"v").unwrap();
    db.compact_range(None, None).unwrap();
    db.close().unwrap();
    // A compaction input whose deletion a crash interrupted.
    std::fs::rename(&kept, &old_table).unwrap();
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert!(report.manifest_readable);
    assert!(
        report
            .lost
            .iter()
            .any(|l| l.path == old_table && l.reason.contains("obsolete"))
    );
    let db = Db::open(dir.path(), options()).unwrap();
    assert_eq!(db.get(b"gone").unwrap(), None);
    assert_eq!(db.get(b"other").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn an_empty_or_missing_database_is_handled() {
    let dir = tempfile::tempdir().unwrap();
    assert!(sluice::repair(&dir.path().join("nothing"), options()).is_err());
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert_eq!(report.output_tables, 0);
    assert!(read_all(dir.path()).is_empty());
}

/// Every key written once (`v1`, compacted into the bottom level), then every key rewritten
/// (`v2`, flushed to L0 and left there); returns the newest table, which holds only `v2`.
fn rewritten_database(dir: &Path, n: u32) -> PathBuf {
    rewritten_every(dir, n, 1)
}

/// [`rewritten_database`], rewriting only every `step`th key.
fn rewritten_every(dir: &Path, n: u32, step: usize) -> PathBuf {
    let mut opts = options();
    opts.compaction.disable_auto_compactions = true;
    let db = Db::open(dir, opts).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, 1)).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let before = files(dir, ".sst");
    for i in (0..n).step_by(step) {
        db.put(key(i), value(i, 2)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let newest: Vec<_> = files(dir, ".sst")
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    newest.into_iter().max().unwrap()
}

/// The case issue 38 found: one flipped bit in a table whose keys have older versions deeper
/// down. Repair reports the key range it lost and how many surviving keys in it now read an
/// older value, in its report and in `lost/`; with `drop_older_in_lost_ranges`, no key reads
/// an older value (the lost ones read as absent), and every other key is untouched.
#[test]
fn repair_reports_the_ranges_that_went_back_in_time_and_can_drop_them() {
    const N: u32 = 3000;
    for drop_older in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let table = rewritten_database(dir.path(), N);
        flip(&table, 100);
        let how = sluice::RepairOptions {
            drop_older_in_lost_ranges: drop_older,
        };
        let report = sluice::repair_with(dir.path(), options(), &how).unwrap();
        assert_eq!(report.tables_partial, 1, "{report:?}");
        let [range] = &report.lost_ranges[..] else {
            panic!("one lost range: {report:?}");
        };
        assert_eq!(range.file, table);
        let lost_keys: Vec<u32> = (0..N)
            .filter(|&i| key(i) >= range.smallest && key(i) <= range.largest)
            .collect();
        assert!(
            !lost_keys.is_empty() && lost_keys.len() < 100,
            "{} keys in {range}",
            lost_keys.len()
        );
        // Every key of the lost block had a v1 below: all are at risk.
        assert_eq!(range.keys_at_risk, lost_keys.len() as u64, "{range}");
        assert_eq!(report.dropped_older_in_lost_ranges, drop_older);
        let listing = std::fs::read_to_string(report.lost_ranges_file.as_ref().unwrap()).unwrap();
        assert!(listing.contains(&range.to_string()), "{listing}");
        let repaired = read_all(dir.path());
        for i in 0..N {
            let got = repaired.get(&key(i));
            if !lost_keys.contains(&i) {
                assert_eq!(got, Some(&value(i, 2)), "key {i} outside the lost range");
            } else if drop_older {
                assert_eq!(got, None, "key {i}: its older version was dropped");
            } else {
                assert_eq!(
                    got,
                    Some(&value(i, 1)),
                    "key {i} went back in time, as reported"
                );
            }
        }
    }
}

/// A table the MANIFEST names that is gone: its whole key range is reported lost, and every
/// key of it that has an older version below is at risk.
#[test]
fn a_missing_table_is_a_lost_range_too() {
    let dir = tempfile::tempdir().unwrap();
    let table = rewritten_database(dir.path(), 3000);
    std::fs::remove_file(&table).unwrap();
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert_eq!(report.missing, std::slice::from_ref(&table));
    let [range] = &report.lost_ranges[..] else {
        panic!("one lost range: {report:?}");
    };
    assert_eq!(range.file, table);
    let repaired = read_all(dir.path());
    let older: Vec<_> = (0..3000u32)
        .filter(|&i| repaired.get(&key(i)) == Some(&value(i, 1)))
        .collect();
    assert!(!older.is_empty());
    assert_eq!(range.keys_at_risk, older.len() as u64, "{range}");
    assert!(
        older
            .iter()
            .all(|&i| key(i) >= range.smallest && key(i) <= range.largest)
    );
}

/// Only the even keys rewritten: a lost block of the newer table held no odd key, so the odd
/// keys in its range read their only value and are neither counted nor deleted (its filter
/// rules them out), while the even ones went back in time.
#[test]
fn keys_the_damaged_table_never_held_are_not_at_risk() {
    const N: u32 = 3000;
    let dir = tempfile::tempdir().unwrap();
    let table = rewritten_every(dir.path(), N, 2);
    flip(&table, 100);
    let how = sluice::RepairOptions {
        drop_older_in_lost_ranges: true,
    };
    let report = sluice::repair_with(dir.path(), options(), &how).unwrap();
    let [range] = &report.lost_ranges[..] else {
        panic!("one lost range: {report:?}");
    };
    let in_range = |i: &u32| key(*i) >= range.smallest && key(*i) <= range.largest;
    let even: Vec<u32> = (0..N).step_by(2).filter(in_range).collect();
    let odd: Vec<u32> = (1..N).step_by(2).filter(in_range).collect();
    assert!(!even.is_empty() && !odd.is_empty(), "{range}");
    assert_eq!(range.keys_at_risk, even.len() as u64, "{range}");
    let repaired = read_all(dir.path());
    for i in odd {
        assert_eq!(
            repaired.get(&key(i)),
            Some(&value(i, 1)),
            "odd key {i} kept"
        );
    }
    for i in even {
        assert_eq!(
            repaired.get(&key(i)),
            None,
            "even key {i}: its older version dropped"
        );
    }
}

/// Options with keyspaces `a`, `b` and `c`, created by the first open.
fn with_keyspaces() -> Options {
    let mut o = options();
    o.compaction.disable_auto_compactions = true;
    let ks = sluice::KeyspaceOptions::of_default(&o);
    for name in ["a", "b", "c"] {
        o.keyspaces.insert(name.to_string(), ks.clone());
    }
    o.create_missing_keyspaces = true;
    o
}

/// Every key and value of keyspace `name` (the default one for `"default"`).
fn keyspace_contents(db: &Db, name: &str) -> Model {
    let ks = db.keyspace(name).unwrap();
    ks.range(..).map(|e| e.unwrap()).collect()
}

/// A database with three keyspaces besides the default one: in each, tables in the bottom
/// level, a flushed L0 table of newer versions, and the newest writes only in the WAL.
fn keyspaced_database(dir: &Path) -> BTreeMap<String, Model> {
    let db = Db::open(dir, with_keyspaces()).unwrap();
    let mut models = BTreeMap::new();
    for (n, name) in ["default", "a", "b", "c"].into_iter().enumerate() {
        let ks = db.keyspace(name).unwrap();
        let mut model = Model::new();
        let offset = n as u32 * 10_000;
        for i in 0..1500 {
            ks.put(key(offset + i), value(i, 1)).unwrap();
            model.insert(key(offset + i), value(i, 1));
        }
        ks.compact_range(None, None).unwrap();
        for i in (0..1500).step_by(3) {
            ks.put(key(offset + i), value(i, 2)).unwrap();
            model.insert(key(offset + i), value(i, 2));
        }
        ks.flush().unwrap();
        for i in (0..1500).step_by(7) {
            ks.delete(key(offset + i)).unwrap();
            model.remove(&key(offset + i));
        }
        models.insert(name.to_string(), model);
    }
    db.close().unwrap();
    models
}

/// Repair of a database with keyspaces: every keyspace's tree is rebuilt from its tables and
/// its entries in the shared WALs; a damaged table of one keyspace loses only that keyspace's
/// keys; without the database's MANIFEST the keyspaces come back under `keyspace-<id>`.
#[test]
fn a_database_with_keyspaces_is_repaired_keyspace_by_keyspace() {
    // A damaged table in keyspace `b` (id 2), the MANIFESTs readable.
    let dir = tempfile::tempdir().unwrap();
    let models = keyspaced_database(dir.path());
    let b_tables = files(&dir.path().join("keyspaces").join("2"), ".sst");
    let damaged = b_tables.iter().max().unwrap();
    flip(damaged, 100);
    let report = sluice::repair(dir.path(), with_keyspaces()).unwrap();
    assert!(report.manifest_readable);
    assert_eq!(
        report.keyspaces,
        [
            (1, "a".to_string()),
            (2, "b".to_string()),
            (3, "c".to_string())
        ]
    );
    assert_eq!(report.tables_partial, 1, "{report:?}");
    assert!(
        report.lost_ranges.iter().all(|r| &r.file == damaged),
        "{report:?}"
    );
    // The damaged table is b's L0, over a bottom level holding older versions of its keys.
    let at_risk: u64 = report.lost_ranges.iter().map(|r| r.keys_at_risk).sum();
    assert!(at_risk > 0, "{report:?}");
    let db = Db::open(dir.path(), with_keyspaces()).unwrap();
    db.check().unwrap();
    for (name, model) in &models {
        let found = keyspace_contents(&db, name);
        if name == "b" {
            let differing = model
                .iter()
                .filter(|(k, v)| found.get(*k) != Some(v))
                .count();
            assert!(
                differing > 0 && differing < 60,
                "{differing} keys of b differ"
            );
        } else {
            assert!(found == *model, "keyspace {name} changed");
        }
    }
    drop(db);

    // The database's MANIFEST lost: its keyspaces' own MANIFESTs and directories remain.
    let dir = tempfile::tempdir().unwrap();
    let models = keyspaced_database(dir.path());
    for m in files(dir.path(), "MANIFEST-") {
        std::fs::remove_file(m).unwrap();
    }
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let report = sluice::repair(dir.path(), options()).unwrap();
    assert!(!report.manifest_readable);
    let names = ["keyspace-1", "keyspace-2", "keyspace-3"];
    let got: Vec<&str> = report.keyspaces.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(got, names);
    let db = Db::open(dir.path(), options()).unwrap();
    db.check().unwrap();
    for (name, new_name) in ["default", "a", "b", "c"]
        .iter()
        .zip(["default"].iter().chain(&names))
    {
        assert!(
            keyspace_contents(&db, new_name) == models[*name],
            "keyspace {name}"
        );
    }
}

/// A TTL keyspace keeps its value format through a repair without the database's MANIFEST
/// when its options are given under its new name, and the repair is refused when they are
/// not; a keyspace whose directory is gone is rebuilt from the WALs.
#[test]
fn a_keyspaces_value_format_and_a_lost_keyspace_directory() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = sluice::KeyspaceOptions {
        ttl: Some(std::time::Duration::from_secs(3600)),
        ..sluice::KeyspaceOptions::of_default(&options())
    };
    {
        let mut o = options();
        o.keyspaces.insert("t".into(), ttl.clone());
        o.create_missing_keyspaces = true;
        let db = Db::open(dir.path(), o).unwrap();
        let t = db.keyspace("t").unwrap();
        for i in 0..200 {
            t.put(key(i), value(i, 1)).unwrap();
        }
        t.flush().unwrap();
        t.put(b"in-the-wal", b"v").unwrap();
        db.close().unwrap();
    }
    for m in files(dir.path(), "MANIFEST-") {
        std::fs::remove_file(m).unwrap();
    }
    std::fs::remove_file(dir.path().join("CURRENT")).unwrap();
    let without = sluice::repair(dir.path(), options()).unwrap_err();
    assert!(without.to_string().contains("ttl"), "{without}");
    let mut o = options();
    o.keyspaces.insert("keyspace-1".into(), ttl);
    let report = sluice::repair(dir.path(), o.clone()).unwrap();
    assert_eq!(report.keyspaces, [(1, "keyspace-1".to_string())]);
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let t = db.keyspace("keyspace-1").unwrap();
    assert_eq!(t.get(key(7)).unwrap(), Some(value(7, 1)));
    assert_eq!(t.get(b"in-the-wal").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();

    // Its directory gone, the database's MANIFEST still naming it: rebuilt from the WALs.
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        db.keyspace("keyspace-1")
            .unwrap()
            .put(b"later", b"w")
            .unwrap();
        db.close().unwrap();
    }
    std::fs::remove_dir_all(dir.path().join("keyspaces").join("1")).unwrap();
    let report = sluice::repair(dir.path(), o.clone()).unwrap();
    assert!(report.manifest_readable, "{report:?}");
    let db = Db::open(dir.path(), o).unwrap();
    let t = db.keyspace("keyspace-1").unwrap();
    assert_eq!(t.get(b"later").unwrap(), Some(b"w".to_vec()));
    assert_eq!(
        t.get(key(7)).unwrap(),
        None,
        "its tables went with the directory"
    );
}
