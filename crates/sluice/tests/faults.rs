//! Faults from the storage layer: a `FaultInjectingFs` under a real database fails or corrupts
//! one chosen read, write, sync, create or open. Whichever executor runs the compaction and
//! whichever stage the fault hits (S1 read, S2 checksum, S7 write and sync, output creation), the
//! compaction stops cleanly: the error is returned and counted, partial outputs are deleted,
//! the tree is unchanged and every key still reads back. A failed flush loses no acknowledged
//! write.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use sluice::fs::{Fault, FaultInjectingFs, FaultOp, os_fs};
use sluice::{CompactionMode, CompactionOptions, Db, Error, MemtableOptions, Options};

/// Where the database's tables go: its own directory, or `more1` and `more2` (then the
/// pipelined and parallel executors run S-PPCP, with a reader and a writer per directory).
#[derive(Clone, Copy, Debug)]
enum Dirs {
    One,
    Two,
}

fn options(
    fs: &Arc<FaultInjectingFs>,
    mode: CompactionMode,
    direct: bool,
    dir: &Path,
    dirs: Dirs,
) -> Options {
    Options {
        data_dirs: match dirs {
            Dirs::One => Vec::new(),
            Dirs::Two => vec![dir.join("more1"), dir.join("more2")],
        },
        fs: fs.clone(),
        block_cache_bytes: 0,
        memtable: MemtableOptions {
            write_buffer_size: 1 << 20,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            mode,
            compaction_threads: 2,
            // Many sub-tasks and several output files, so faults land mid-pipeline.
            sub_task_bytes: 16 << 10,
            target_file_size_base: 128 << 10,
            max_bytes_for_level_base: 1 << 30,
            disable_auto_compactions: true,
            use_direct_io_for_flush_and_compaction: direct,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// 100 bytes that compress poorly, so the output spans several files.
fn value(round: u32, i: u32) -> Vec<u8> {
    let mut x = u64::from(round) << 32 | u64::from(i);
    (0..100)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b'!' + (x >> 58) as u8
        })
        .collect()
}

/// Three overlapping L0 files of puts, overwrites and deletes.
fn seed(db: &Db) -> Model {
    let mut model = Model::new();
    for round in 0..3u32 {
        for i in 0..4000u32 {
            let k = format!("key{:06}", (i * 7 + round * 1000) % 5000).into_bytes();
            if (i + round) % 11 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = value(round, i);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
    }
    model
}

/// Table files in the database directory and its data directories.
fn table_files(dir: &Path) -> BTreeSet<String> {
    [dir.to_path_buf(), dir.join("more1"), dir.join("more2")]
        .iter()
        .filter(|d| d.exists())
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

fn shape(db: &Db) -> Vec<(usize, u64)> {
    db.metrics()
        .levels
        .iter()
        .map(|l| (l.files, l.size_bytes))
        .collect()
}

fn assert_contents(db: &Db, model: &Model) {
    let got: Model = db.iter().map(|e| e.unwrap()).collect();
    assert!(got == *model, "database differs from the model");
}

/// Reads of table metadata (footer, properties, filter, index) when three inputs are opened.
const INPUT_OPEN_READS: u64 = 3 * 4;

/// The faults a compaction meets, by the stage they hit. Buffered compactions read through
/// tables already open; direct ones open their inputs first, so the read faults skip those
/// reads to land on data blocks.
fn compaction_faults(direct: bool) -> Vec<(&'static str, Fault)> {
    let sst = ".sst";
    let open_reads = if direct { INPUT_OPEN_READS } else { 0 };
    let mut faults = vec![
        (
            "S1 read error",
            Fault::fail(FaultOp::Read)
                .on_paths_containing(sst)
                .after(open_reads + 4),
        ),
        (
            "S2 corrupt block",
            Fault::corrupt_reads()
                .on_paths_containing(sst)
                .after(open_reads + 4),
        ),
        (
            "S7 write error",
            // S-PPCP hands a file's bytes to its directory's writer in large pieces, so the
            // second append may already be the last.
            Fault::fail(FaultOp::Write)
                .on_paths_containing(sst)
                .after(1),
        ),
        (
            "S7 sync error",
            Fault::fail(FaultOp::Sync).on_paths_containing(sst).after(1),
        ),
        (
            "output creation error",
            Fault::fail(FaultOp::Create)
                .on_paths_containing(sst)
                .after(2),
        ),
    ];
    if direct {
        // Direct I/O opens a reader of its own for every input.
        faults.push((
            "input open error",
            Fault::fail(FaultOp::Open).on_paths_containing(sst).after(1),
        ));
    }
    faults
}

fn check_every_fault_fails_cleanly(mode: CompactionMode, direct: bool, dirs: Dirs) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let db = match Db::open(dir.path(), options(&fs, mode, direct, dir.path(), dirs)) {
        Ok(db) => db,
        Err(Error::InvalidArgument(msg)) if direct => {
            // The test directory's file system refuses O_DIRECT; opening said so clearly.
            assert!(msg.contains("direct I/O"), "{msg}");
            return;
        }
        Err(e) => panic!("open failed: {e}"),
    };
    let model = seed(&db);
    // Opens every table, so buffered compactions find their inputs open.
    assert_contents(&db, &model);
    let files = table_files(dir.path());
    let before = shape(&db);
    assert_eq!(before[0].0, 3, "seeding should leave three L0 files");

    for (n, (stage, fault)) in compaction_faults(direct).into_iter().enumerate() {
        let injected = fs.injected();
        fs.inject(fault);
        let err = db
            .compact_range(None, None)
            .expect_err(&format!("{mode}: {stage}: compaction succeeded"));
        fs.clear();
        assert!(fs.injected() > injected, "{mode}: {stage}: no fault hit");
        let text = err.to_string();
        assert!(text.contains(".sst"), "{mode}: {stage}: {text}");
        if stage.contains("corrupt") {
            assert!(
                matches!(&err, Error::Corruption { reason, .. } if reason.contains("checksum")),
                "{mode}: {stage}: {err:?}"
            );
        } else {
            assert!(matches!(err, Error::Io { .. }), "{mode}: {stage}: {err:?}");
        }
        assert_eq!(
            table_files(dir.path()),
            files,
            "{mode}: {stage}: partial outputs left behind"
        );
        assert_eq!(shape(&db), before, "{mode}: {stage}: the tree changed");
        assert_eq!(db.metrics().compaction.failed, n as u64 + 1);
        assert_contents(&db, &model);
    }

    // The database is still writable and the same compaction now succeeds.
    db.compact_range(None, None).unwrap();
    if matches!(dirs, Dirs::Two) {
        let stages = db.metrics().compaction.pipeline;
        assert!(
            stages
                .iter()
                .any(|s| s.stage == "dir writer" && s.threads >= 2),
            "{mode}: S-PPCP should write with a thread per directory: {stages:?}"
        );
    }
    let after = shape(&db);
    assert_eq!(after[0].0, 0, "{mode}: L0 not compacted");
    let base = db.metrics().base_level;
    assert!(after[base].0 > 1, "{mode}: expected several L{base} files");
    assert_contents(&db, &model);
    db.check().unwrap();
    db.close().unwrap();
}

#[test]
fn faults_in_a_sequential_compaction_fail_cleanly() {
    check_every_fault_fails_cleanly(CompactionMode::Sequential, false, Dirs::One);
}

#[test]
fn faults_in_a_pipelined_compaction_fail_cleanly() {
    check_every_fault_fails_cleanly(CompactionMode::Pipelined, false, Dirs::One);
}

#[test]
fn faults_in_a_parallel_compaction_fail_cleanly() {
    check_every_fault_fails_cleanly(CompactionMode::Parallel, false, Dirs::One);
}

#[test]
fn faults_in_a_streaming_compaction_fail_cleanly() {
    check_every_fault_fails_cleanly(CompactionMode::Streaming, false, Dirs::One);
}

#[test]
fn faults_under_direct_io_fail_cleanly_in_every_mode() {
    for mode in [
        CompactionMode::Sequential,
        CompactionMode::Pipelined,
        CompactionMode::Parallel,
        CompactionMode::Streaming,
    ] {
        check_every_fault_fails_cleanly(mode, true, Dirs::One);
    }
}

#[test]
fn faults_in_s_ppcp_compactions_fail_cleanly() {
    for direct in [false, true] {
        for mode in [CompactionMode::Pipelined, CompactionMode::Parallel] {
            check_every_fault_fails_cleanly(mode, direct, Dirs::Two);
        }
    }
}

#[test]
fn a_failed_flush_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let db = Db::open(
        dir.path(),
        options(
            &fs,
            CompactionMode::Sequential,
            false,
            dir.path(),
            Dirs::One,
        ),
    )
    .unwrap();
    let mut model = Model::new();
    for i in 0..2000u32 {
        let (k, v) = (format!("key{i:06}"), format!("value-{i}"));
        db.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    fs.inject(
        Fault::fail(FaultOp::Write)
            .on_paths_containing(".sst")
            .after(3),
    );
    let err = db.flush().unwrap_err();
    assert!(err.to_string().contains(".sst"), "{err}");
    assert_eq!(db.metrics().flush.failed, 1);
    // The failure is sticky: the database refuses writes rather than lose them later.
    assert!(matches!(
        db.put(b"after", b"failure"),
        Err(Error::Background(_))
    ));
    // Reads still work.
    assert_eq!(db.get(b"key000042").unwrap(), Some(b"value-42".to_vec()));
    fs.clear();
    drop(db);
    assert!(table_files(dir.path()).is_empty(), "partial table left");

    // Reopening replays the WAL: every acknowledged write is back.
    let db = Db::open(
        dir.path(),
        options(
            &fs,
            CompactionMode::Sequential,
            false,
            dir.path(),
            Dirs::One,
        ),
    )
    .unwrap();
    assert_contents(&db, &model);
    db.check().unwrap();
}

/// Options for the WAL and MANIFEST tests: small memtables so flushes (and their MANIFEST
/// edits) come often.
fn log_options(fs: &Arc<FaultInjectingFs>, dir: &Path) -> Options {
    let mut opts = options(fs, CompactionMode::Sequential, false, dir, Dirs::One);
    opts.memtable.write_buffer_size = 64 << 10;
    opts
}

/// A database with the options above and a keyspace `ks` holding `ks-before`.
fn open_with_a_keyspace() -> (
    tempfile::TempDir,
    Arc<FaultInjectingFs>,
    Db,
    sluice::Keyspace,
) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let db = Db::open(dir.path(), log_options(&fs, dir.path())).unwrap();
    let ks = db
        .create_keyspace("ks", &sluice::KeyspaceOptions::default())
        .unwrap();
    ks.put(b"ks-before", b"failure").unwrap();
    (dir, fs, db, ks)
}

#[test]
fn a_failed_wal_sync_fails_the_write_and_every_later_one_and_loses_nothing_acknowledged() {
    let (dir, fs, db, ks) = open_with_a_keyspace();
    let sync = sluice::WriteOptions { sync: true };
    let mut model = Model::new();
    for i in 0..500u32 {
        let (k, v) = (format!("key{i:06}").into_bytes(), value(0, i));
        db.put_opt(&sync, &k, &v).unwrap();
        model.insert(k, v);
    }
    fs.inject(Fault::fail(FaultOp::Sync).on_paths_containing(".log"));
    let err = db.put_opt(&sync, b"key999999", b"unsure").unwrap_err();
    assert!(
        err.to_string().contains(".log"),
        "the error names the WAL: {err}"
    );
    // After a failed fsync the WAL's tail is unknown: nothing more may be appended to it,
    // whichever keyspace writes.
    fs.clear();
    assert!(db.put(b"after", b"failure").is_err());
    let err = ks.put(b"ks-after", b"failure").unwrap_err();
    assert!(err.to_string().contains(".log"), "the WAL's failure: {err}");
    let mut batch = sluice::WriteBatch::new();
    batch.put_in(&ks, b"ks-after", b"failure");
    assert!(db.write(&sluice::WriteOptions::default(), batch).is_err());
    assert_eq!(db.get(b"key000042").unwrap(), Some(value(0, 42)));
    drop((ks, db));

    let db = Db::open(dir.path(), log_options(&fs, dir.path())).unwrap();
    let got: Model = db.iter().collect::<Result<_, _>>().unwrap();
    // The write whose sync failed reached the OS and may have survived; nothing else differs.
    let mut with_unsure = model.clone();
    with_unsure.insert(b"key999999".to_vec(), b"unsure".to_vec());
    assert!(
        got == model || got == with_unsure,
        "acknowledged writes lost or changed"
    );
    let ks = db.keyspace("ks").unwrap();
    assert_eq!(ks.get(b"ks-before").unwrap(), Some(b"failure".to_vec()));
    assert_eq!(
        ks.get(b"ks-after").unwrap(),
        None,
        "nothing followed the failure"
    );
    db.check().unwrap();
}

#[test]
fn a_failed_wal_switch_stops_the_writes_of_every_keyspace() {
    let (dir, fs, db, ks) = open_with_a_keyspace();
    // The default keyspace fills its memtable: the switch to a new WAL cannot create it.
    fs.inject(Fault::fail(FaultOp::Create).on_paths_containing(".log"));
    let mut model = Model::new();
    let err = (0..100_000u32)
        .find_map(|i| {
            let (k, v) = (format!("key{i:06}").into_bytes(), value(0, i));
            let outcome = db.put(&k, &v);
            if outcome.is_ok() {
                model.insert(k, v);
            }
            outcome.err()
        })
        .expect("a memtable switch within 100,000 writes");
    fs.clear();
    // The WAL the journal still holds was closed for the switch: no keyspace may write on.
    let ks_err = ks.put(b"ks-after", b"failure").unwrap_err();
    assert_eq!(ks_err.kind(), err.kind(), "{ks_err} vs {err}");
    assert!(db.put(b"after", b"failure").is_err());
    drop((ks, db));

    let db = Db::open(dir.path(), log_options(&fs, dir.path())).unwrap();
    let got: Model = db.iter().collect::<Result<_, _>>().unwrap();
    assert_eq!(got, model, "every acknowledged write, and nothing else");
    let ks = db.keyspace("ks").unwrap();
    assert_eq!(ks.get(b"ks-before").unwrap(), Some(b"failure".to_vec()));
    assert_eq!(ks.get(b"ks-after").unwrap(), None);
    db.check().unwrap();
}

#[test]
fn a_failed_manifest_write_stops_background_work_and_reopen_recovers_everything() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let db = Db::open(dir.path(), log_options(&fs, dir.path())).unwrap();
    let mut model = Model::new();
    for i in 0..2000u32 {
        let (k, v) = (format!("key{i:06}").into_bytes(), value(1, i));
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    // The flush writes its table, then fails to record it in the MANIFEST.
    fs.inject(Fault::fail(FaultOp::Write).on_paths_containing("MANIFEST"));
    let err = db.flush().unwrap_err();
    assert!(
        err.to_string().contains("MANIFEST"),
        "the error names the MANIFEST: {err}"
    );
    fs.clear();
    // The MANIFEST may end in a partial record: no edit is trusted after it, and no write.
    assert!(matches!(
        db.put(b"after", b"failure"),
        Err(Error::Background(_))
    ));
    assert_eq!(db.get(b"key000042").unwrap(), Some(value(1, 42)));
    drop(db);

    // Opening writes a new MANIFEST; a failure there is an error naming it, and changes nothing.
    fs.inject(Fault::fail(FaultOp::Sync).on_paths_containing("MANIFEST"));
    let err = Db::open(dir.path(), log_options(&fs, dir.path()))
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("MANIFEST"), "{err}");
    fs.clear();
    let db = Db::open(dir.path(), log_options(&fs, dir.path())).unwrap();
    assert_contents(&db, &model);
    db.check().unwrap();
}
