//! Value separation: large values in blob files, references in the tables.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{contents, key, small};
use sluice::{BlobOptions, Db, Error, KeyspaceOptions, Options, ReadOptions};

const MIN_BLOB: usize = 1000;

fn blob_options() -> Options {
    Options {
        blob: BlobOptions {
            min_blob_size: MIN_BLOB,
            blob_file_size: 256 << 10,
            ..BlobOptions::default()
        },
        paranoid_checks: true,
        ..small()
    }
}

/// A value of `len` bytes that names its key and version, so a value read under the wrong
/// key or from the wrong version is caught.
fn value(i: u32, version: u32, len: usize) -> Vec<u8> {
    let mut v = format!("{i}:{version}:").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn files_with(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    files.sort();
    files
}

fn bytes_of(files: &[PathBuf]) -> u64 {
    files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum()
}

/// Writes 600 keys, every third with a value too small to separate.
fn fill(db: &Db, version: u32, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..600u32 {
        let len = if i % 3 == 0 {
            100
        } else {
            1500 + (i as usize % 7) * 300
        };
        let v = value(i, version, len);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
}

/// A database with blob options in `dir`, [`fill`]ed once and flushed, and its model.
fn filled(dir: &Path) -> (Db, BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open(dir, blob_options()).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 1, &mut model);
    db.flush().unwrap();
    (db, model)
}

#[test]
fn blob_values_are_cached_in_the_block_cache_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = filled(dir.path());
    let (k, v) = model.iter().find(|(_, v)| v.len() >= MIN_BLOB).unwrap();
    // Off by default: every read goes to the blob file, uncounted.
    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    let m = db.metrics().blob;
    assert_eq!((m.cache_hits, m.cache_misses), (0, 0));
    drop(db);
    let mut options = blob_options();
    options.blob.cache_values = true;
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let before = db.metrics().blob;
    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    let after = db.metrics().blob;
    assert_eq!(after.cache_misses - before.cache_misses, 1);
    assert_eq!(after.cache_hits - before.cache_hits, 1);
    drop(db);
    // Without a block cache every read goes to the blob file.
    options.block_cache_bytes = 0;
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    let m = db.metrics().blob;
    assert_eq!((m.cache_hits, m.cache_misses), (0, 0));
    assert_eq!(contents(&db), model);
}

#[test]
fn large_values_are_kept_in_blob_files_and_read_back_every_way() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = filled(dir.path());
    let blobs = files_with(dir.path(), "blob");
    assert!(!blobs.is_empty(), "large values were separated");
    let tables = files_with(dir.path(), "sst");
    assert!(
        bytes_of(&tables) * 5 < bytes_of(&blobs),
        "tables hold references, not values: {} table bytes, {} blob bytes",
        bytes_of(&tables),
        bytes_of(&blobs)
    );

    let snapshot = db.snapshot();
    for i in (0..600).step_by(5) {
        db.put(key(i), value(i, 2, 5000)).unwrap();
    }
    db.flush().unwrap();
    // The snapshot still reads version 1 from the first blob file.
    let at_snapshot = ReadOptions {
        snapshot: Some(&snapshot),
        ..ReadOptions::default()
    };
    for i in (0..600).step_by(5) {
        let got = db.get_opt(&at_snapshot, key(i)).unwrap();
        assert_eq!(got.as_deref(), Some(&model[&key(i)][..]), "key {i}");
        model.insert(key(i), value(i, 2, 5000));
    }
    drop(snapshot);

    assert_eq!(contents(&db), model, "forward scan");
    let backward: Vec<_> = db.iter().rev().map(Result::unwrap).collect();
    let forward: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(backward.into_iter().rev().eq(forward), "backward scan");
    let keys: Vec<_> = (0..600).step_by(7).map(key).collect();
    let got = db.multi_get(&ReadOptions::default(), &keys);
    for (k, v) in keys.iter().zip(got) {
        assert_eq!(v.unwrap().as_ref(), model.get(k), "multi_get {k:?}");
    }
    db.close().unwrap();

    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert_eq!(contents(&db), model, "after reopening");
    drop(db);
    // A database with blob files reads them whatever its blob options say.
    let db = Db::open(dir.path(), small()).unwrap();
    assert_eq!(contents(&db), model, "reopened without separation");
}

#[test]
fn compactions_move_references_and_delete_blob_files_nothing_references() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = filled(dir.path());
    let first = files_with(dir.path(), "blob");
    fill(&db, 2, &mut model);
    db.flush().unwrap();
    let value_bytes: u64 = model.values().map(|v| v.len() as u64).sum();

    let before = db.metrics().compaction.output_bytes;
    db.compact_range(None, None).unwrap();
    let written = db.metrics().compaction.output_bytes - before;
    assert!(
        written * 5 < value_bytes,
        "the compaction wrote {written} bytes for {value_bytes} bytes of values"
    );
    assert_eq!(contents(&db), model);
    for f in &first {
        assert!(!f.exists(), "{} holds only overwritten values", f.display());
    }
    assert!(!files_with(dir.path(), "blob").is_empty());

    // Deleting every key leaves nothing referenced.
    for k in model.keys() {
        db.delete(k).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(contents(&db).is_empty());
    assert_eq!(files_with(dir.path(), "blob"), Vec::<PathBuf>::new());
}

#[test]
fn merge_operands_apply_to_values_in_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        merge_operator: Some(Arc::new(sluice::merge_operator::Append::with_delimiter(
            b",",
        ))),
        ..blob_options()
    };
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let base = value(1, 1, 3000);
    db.put(b"k", &base).unwrap();
    db.flush().unwrap();
    db.merge(b"k", b"x").unwrap();
    db.flush().unwrap();
    db.merge(b"k", b"y").unwrap();
    let mut expected = base.clone();
    expected.extend_from_slice(b",x,y");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&expected[..]));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&expected[..]));
    let scanned = contents(&db);
    assert_eq!(scanned.get(&b"k"[..]), Some(&expected));
    let backward: Vec<_> = db.iter().rev().map(Result::unwrap).collect();
    assert_eq!(backward, vec![(b"k".to_vec(), expected.clone())]);
    drop(db);
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&expected[..]));
}

/// A closed database in `dir` holding key `k` with a 4000-byte value in a blob file, whose
/// path this returns.
fn one_blob_value(dir: &Path) -> PathBuf {
    let db = Db::open(dir, blob_options()).unwrap();
    db.put(b"k", value(1, 1, 4000)).unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    files_with(dir, "blob").pop().unwrap()
}

#[test]
fn a_damaged_blob_record_is_corruption_naming_the_blob_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let blob = one_blob_value(dir.path());
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[16 + 17 + 1 + 100] ^= 0x40; // a byte of the value of the first record
    std::fs::write(&blob, &bytes).unwrap();

    let db = Db::open(dir.path(), blob_options()).unwrap();
    match db.get(b"k") {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, blob);
            assert_eq!(offset, 16);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let scanned: Result<Vec<_>, _> = db.iter().collect();
    assert!(
        matches!(scanned, Err(Error::Corruption { .. })),
        "{scanned:?}"
    );
}

#[test]
fn a_missing_blob_file_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let blob = one_blob_value(dir.path());
    std::fs::remove_file(&blob).unwrap();
    match Db::open(dir.path(), blob_options()) {
        Err(Error::Corruption { file, reason, .. }) => {
            assert_eq!(file, blob);
            assert!(
                reason.contains("blob file listed in the MANIFEST is missing"),
                "{reason}"
            );
        }
        other => panic!("expected corruption, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn values_replayed_from_the_wal_are_separated_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = blob_options();
    options.memtable.write_buffer_size = 16 << 20;
    let db = Db::open(dir.path(), options.clone()).unwrap();
    let mut model = BTreeMap::new();
    fill(&db, 1, &mut model);
    // Closing does not flush: the reopen replays the WAL into L0, separating as a flush does.
    db.close().unwrap();
    assert!(files_with(dir.path(), "blob").is_empty());
    let db = Db::open(dir.path(), options).unwrap();
    assert!(!files_with(dir.path(), "blob").is_empty());
    assert_eq!(contents(&db), model);
}

#[test]
fn separation_refuses_what_would_need_values_in_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let ttl = Options {
        ttl: Some(std::time::Duration::from_secs(60)),
        ..blob_options()
    };
    let err = Db::open(dir.path(), ttl).err().unwrap().to_string();
    assert!(err.contains("min_blob_size and ttl"), "{err}");
    let tiny = Options {
        blob: BlobOptions {
            min_blob_size: 10,
            blob_file_size: 10,
            ..BlobOptions::default()
        },
        ..small()
    };
    let err = Db::open(dir.path(), tiny).err().unwrap().to_string();
    assert!(err.contains("blob_file_size"), "{err}");
}

#[test]
fn keyspaces_separate_values_by_their_own_options() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let ks_options = KeyspaceOptions {
        blob: blob_options().blob,
        ..KeyspaceOptions::of_default(&small())
    };
    let ks = db.create_keyspace("large", &ks_options).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 1, 3000)).unwrap();
        ks.put(key(i), value(i, 2, 3000)).unwrap();
    }
    db.flush().unwrap();
    ks.flush().unwrap();
    assert!(
        files_with(dir.path(), "blob").is_empty(),
        "the default keyspace keeps values"
    );
    let ks_dir = dir.path().join("keyspaces").join(ks.id().to_string());
    assert!(!files_with(&ks_dir, "blob").is_empty());
    drop(ks);
    db.close().unwrap();

    let options = Options {
        keyspaces: [("large".to_string(), ks_options)].into(),
        ..small()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let ks = db.keyspace("large").unwrap();
    for i in 0..100 {
        assert_eq!(ks.get(key(i)).unwrap(), Some(value(i, 2, 3000)));
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 1, 3000)));
    }
}

#[test]
fn a_read_only_open_reads_blob_values_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = filled(dir.path());
    db.close().unwrap();
    let before = files_with(dir.path(), "blob");
    let db = Db::open_read_only(dir.path(), blob_options()).unwrap();
    assert_eq!(contents(&db), model);
    drop(db);
    assert_eq!(files_with(dir.path(), "blob"), before);
}

#[test]
fn a_blob_file_no_manifest_names_is_deleted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (db, model) = filled(dir.path());
    db.close().unwrap();
    // What a flush that crashed before its edit leaves: a finished blob file nothing names.
    let live = files_with(dir.path(), "blob").pop().unwrap();
    let stray = dir.path().join("000900.blob");
    std::fs::copy(&live, &stray).unwrap();
    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert!(!stray.exists());
    assert!(db.recovery_report().orphans_deleted >= 1);
    assert_eq!(contents(&db), model);
    let report = db.check().unwrap();
    assert_eq!(report.blob_files, files_with(dir.path(), "blob").len());
    assert!(report.blob_references >= 400, "{report:?}");
}

/// Garbage collection of the oldest `cutoff` of the blob files, whatever their garbage
/// (RocksDB's rule), forced at `force`; each round of writes below is one flush and one blob
/// file.
fn gc_options(cutoff: f64, force: f64) -> Options {
    let mut options = blob_options();
    options.blob.gc_age_cutoff = cutoff;
    options.blob.gc_min_garbage_ratio = 0.0;
    options.blob.gc_force_threshold = force;
    options.blob.blob_file_size = 16 << 20;
    options.memtable.write_buffer_size = 16 << 20;
    options
}

/// Writes version `version` of keys `range` with 1000-byte values.
fn write_keys(
    db: &Db,
    range: std::ops::Range<u32>,
    version: u32,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    for i in range {
        let v = value(i, version, 1000);
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
}

#[test]
fn compactions_move_live_values_out_of_the_oldest_blob_files() {
    for collect in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = gc_options(0.5, 1.0);
        options.blob.garbage_collection = collect;
        let db = Db::open(dir.path(), options).unwrap();
        let mut model = BTreeMap::new();
        write_keys(&db, 0..200, 1, &mut model);
        db.flush().unwrap();
        let first = files_with(dir.path(), "blob");
        // Half the keys are overwritten: the other half stay live in the first files.
        write_keys(&db, 0..100, 2, &mut model);
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(contents(&db), model);
        let m = db.metrics();
        if collect {
            for f in &first {
                assert!(!f.exists(), "{} was collected", f.display());
            }
            assert_eq!(m.blob.garbage_bytes, 0, "{:?}", m.blob);
        } else {
            assert!(first.iter().all(|f| f.exists()));
            let ratio = m.blob.garbage_ratio();
            assert!(
                (0.3..0.7).contains(&ratio),
                "half of the first files is garbage: {ratio}"
            );
        }
        db.check().unwrap();
        drop(db);
        let db = Db::open(dir.path(), blob_options()).unwrap();
        assert_eq!(contents(&db), model, "after reopening");
    }
}

#[test]
fn a_blob_file_is_collected_only_once_it_is_garbage_enough() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = gc_options(0.5, 1.0);
    options.blob.gc_min_garbage_ratio = 0.5;
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = BTreeMap::new();
    write_keys(&db, 0..200, 1, &mut model);
    db.flush().unwrap();
    let first = files_with(dir.path(), "blob");
    assert_eq!(first.len(), 1);
    // A quarter of its values overwritten: moving the other three quarters to free one is
    // not worth it, so the file stays although it is the oldest.
    write_keys(&db, 0..50, 2, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(first[0].exists());
    let ratio = db.metrics().blob.garbage_ratio();
    assert!(ratio > 0.1, "{ratio}");
    assert_eq!(contents(&db), model);
    // Past half garbage, which the version shows once the compaction that drops the
    // overwritten references is installed, the next compaction that reads the file's
    // references moves the rest out.
    write_keys(&db, 50..120, 2, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(first[0].exists());
    write_keys(&db, 120..130, 2, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(!first[0].exists(), "{} was collected", first[0].display());
    assert_eq!(contents(&db), model);
    db.check().unwrap();
}

/// Version 1 of keys 0..8000: even keys, then odd ones (a flush, and so a blob file, each),
/// merged into tables of the base level (L6 of this small tree) that each reference both
/// files. Needs uncompressed tables, so that the references fill several.
fn interleaved_below_l0(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for parity in 0..2 {
        for i in (parity..8000).step_by(2) {
            write_keys(db, i..i + 1, 1, model);
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert!(m.levels[m.base_level].files >= 2);
}

#[test]
fn collected_files_past_the_force_threshold_are_emptied_without_other_compactions() {
    for force in [0.3, 1.0] {
        let dir = tempfile::tempdir().unwrap();
        let mut options = gc_options(0.5, force);
        // Big levels: nothing but the forced collection is ever due. Uncompressed tables:
        // the references fill several.
        options.compaction.max_bytes_for_level_base = 1 << 30;
        options.table.compression = sluice::CompressionType::None;
        options.compaction.l0_compaction_trigger = 100;
        options.compaction.l0_slowdown_writes_trigger = 200;
        options.compaction.l0_stop_writes_trigger = 300;
        let mut model = BTreeMap::new();
        {
            // Without collection: even keys, odd keys (a blob file each), merged into L6
            // tables that each reference both files, then an overwrite of keys 0..3000.
            let mut setup = options.clone();
            setup.blob.garbage_collection = false;
            let db = Db::open(dir.path(), setup).unwrap();
            interleaved_below_l0(&db, &mut model);
            write_keys(&db, 0..3000, 2, &mut model);
            db.flush().unwrap();
        }
        // With collection, the oldest file of three is collected. Compacting keys 0..3000
        // moves its values those tables keep; it is then more than a third garbage, the rest
        // referenced by tables no compaction is due for.
        let first = files_with(dir.path(), "blob").remove(0);
        let db = Db::open(dir.path(), options.clone()).unwrap();
        db.compact_range(None, Some(&key(2999))).unwrap();
        db.wait_for_background_work().unwrap();
        if force < 1.0 {
            assert!(!first.exists(), "the forced collection never ran");
        } else {
            assert!(first.exists());
            assert!(db.metrics().blob.garbage_bytes > 0);
        }
        assert_eq!(contents(&db), model);
        db.check().unwrap();
    }
}

#[test]
fn checkpoints_and_backups_hold_the_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = filled(dir.path());
    let copies = tempfile::tempdir().unwrap();
    let checkpoint = copies.path().join("checkpoint");
    db.checkpoint(&checkpoint).unwrap();
    let engine =
        sluice::backup::BackupEngine::open(copies.path().join("backups"), sluice::fs::os_fs())
            .unwrap();
    let first = engine.create(&db).unwrap();
    fill(&db, 2, &mut model);
    db.flush().unwrap();
    let second = engine.create(&db).unwrap();
    assert!(
        second.tables_shared > 0,
        "the first backup's blob files are not copied again"
    );
    drop(db);

    let at_checkpoint = Db::open(&checkpoint, blob_options()).unwrap();
    assert!(!files_with(&checkpoint, "blob").is_empty());
    assert_eq!(
        at_checkpoint.check().unwrap().blob_files,
        files_with(&checkpoint, "blob").len()
    );
    for i in [1u32, 2, 599] {
        let v = at_checkpoint.get(key(i)).unwrap().unwrap();
        assert!(
            v.starts_with(format!("{i}:1:").as_bytes()),
            "version 1 at the checkpoint"
        );
    }
    let restored = copies.path().join("restored");
    engine.restore(second.meta.id, &restored).unwrap();
    let db = Db::open(&restored, blob_options()).unwrap();
    assert_eq!(contents(&db), model);
    db.check().unwrap();
    assert!(first.meta.id < second.meta.id);
}

#[test]
fn files_an_iterator_held_are_deleted_by_close() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut model) = filled(dir.path());
    let first = files_with(dir.path(), "blob");
    let mut it = db.raw_iter(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    fill(&db, 2, &mut model);
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(
        first.iter().all(|f| f.exists()),
        "the iterator's version holds them"
    );
    assert!(it.valid());
    drop(it);
    db.close().unwrap();
    assert!(first.iter().all(|f| !f.exists()), "obsolete at close");
    let db = Db::open(dir.path(), blob_options()).unwrap();
    assert_eq!(contents(&db), model);
}

#[test]
fn a_flush_cut_in_pieces_writes_one_blob_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = gc_options(0.25, 1.0);
    options.table.compression = sluice::CompressionType::None;
    // Flushes are cut at every file of the base level.
    options.compaction.l0_flush_split_bytes = 1;
    let db = Db::open(dir.path(), options).unwrap();
    let mut model = BTreeMap::new();
    interleaved_below_l0(&db, &mut model);
    let before = files_with(dir.path(), "blob").len();
    write_keys(&db, 0..8000, 2, &mut model);
    db.flush().unwrap();
    assert!(
        db.metrics().levels[0].files >= 2,
        "the flush was cut in pieces"
    );
    assert_eq!(files_with(dir.path(), "blob").len(), before + 1);
    assert_eq!(contents(&db), model);
}
