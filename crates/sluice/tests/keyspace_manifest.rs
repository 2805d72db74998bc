//! A keyspace's MANIFEST ending in a torn record: dropped when it was never acknowledged (a
//! crash at any point of the keyspace's flush loses nothing acknowledged), refused with an
//! error naming the MANIFEST when it was (the database deleted the WALs it covered), and an
//! older copy of a keyspace's MANIFEST put in place of the latest is refused too.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{key, small};
use sluice::{Db, Error, KeyspaceOptions, Options, WriteBatch, WriteOptions};
use sluice_sst::fs::{Fault, FaultInjectingFs, FaultOp, FileSystem, MemFs};

const DB: &str = "/data/db";
const KEYS: u32 = 300;

/// Options on `fs` with keyspace `ks`, created by the first open.
fn options(fs: Arc<dyn FileSystem>) -> Options {
    let mut options = Options { fs, ..small() };
    let ks = KeyspaceOptions::of_default(&options);
    options.keyspaces.insert("ks".into(), ks);
    options.create_missing_keyspaces = true;
    options
}

/// Writes keys `from..to` to keyspace `ks`, each write synced (acknowledged as durable).
fn write_synced(db: &Db, from: u32, to: u32) {
    let ks = db.keyspace("ks").unwrap();
    for i in from..to {
        let mut batch = WriteBatch::new();
        batch.put_in(&ks, key(i), format!("value {i}").as_bytes());
        db.write(&WriteOptions { sync: true }, batch).unwrap();
    }
}

/// Panics unless keyspace `ks` of `db` holds exactly keys `0..n`.
fn assert_holds(db: &Db, n: u32, at: &str) {
    let ks = db.keyspace("ks").unwrap();
    let found: Vec<_> = ks.range(..).map(Result::unwrap).collect();
    let want: Vec<_> = (0..n)
        .map(|i| (key(i), format!("value {i}").into_bytes()))
        .collect();
    assert!(found == want, "{at}: {} keys, want {n}", found.len());
}

/// Crashes at every write, sync, create, rename and directory sync of the keyspace's flush
/// (the operation fails, then the file system is cloned as a power failure would leave it,
/// with and without some of each file's unsynced bytes): every clone opens with every
/// acknowledged write, and a torn record of the keyspace's MANIFEST is reported as dropped.
#[test]
fn a_crash_at_any_point_of_a_keyspace_flush_loses_nothing_acknowledged() {
    let mut points = 0;
    let mut torn_dropped = 0;
    for op in [
        FaultOp::Create,
        FaultOp::Write,
        FaultOp::Sync,
        FaultOp::Rename,
        FaultOp::SyncDir,
    ] {
        for n in 0.. {
            let mem = MemFs::new();
            let faulty = FaultInjectingFs::new(Arc::new(mem.clone()));
            let db = Db::open(DB, options(faulty.clone())).unwrap();
            // A first flush, so the keyspace's MANIFEST has records to tear after it.
            write_synced(&db, 0, KEYS / 2);
            db.keyspace("ks").unwrap().flush().unwrap();
            write_synced(&db, KEYS / 2, KEYS);
            faulty.inject(
                Fault::fail(op)
                    .on_paths_containing("keyspaces")
                    .after(n)
                    .times(1),
            );
            let flushed = db.keyspace("ks").unwrap().flush();
            if faulty.injected() == 0 {
                flushed.unwrap();
                break;
            }
            for seed in [None, Some(n), Some(n ^ 0x9e37_79b9)] {
                let crashed = match seed {
                    None => mem.crash_clone(),
                    Some(s) => mem.crash_clone_keeping_some(s),
                };
                let at = format!("{op:?} #{n} seed {seed:?}");
                let reopened = Db::open(DB, options(Arc::new(crashed)))
                    .unwrap_or_else(|e| panic!("{at}: open after crash: {e}"));
                reopened
                    .check()
                    .unwrap_or_else(|e| panic!("{at}: check: {e}"));
                assert_holds(&reopened, KEYS, &at);
                let report = reopened.recovery_report();
                torn_dropped += report
                    .dropped
                    .iter()
                    .filter(|d| d.file.to_string_lossy().contains("keyspaces"))
                    .count();
                points += 1;
            }
            drop(db);
        }
    }
    eprintln!("{points} crash points, {torn_dropped} torn keyspace MANIFEST records dropped");
    assert!(points > 20, "only {points} crash points");
    assert!(
        torn_dropped > 0,
        "no crash point tore the keyspace's MANIFEST: the test does not test the drop"
    );
}

/// The keyspace's MANIFEST, named by its `CURRENT`.
fn keyspace_manifest(db_dir: &Path, id: u32) -> PathBuf {
    let dir = db_dir.join("keyspaces").join(id.to_string());
    let current = std::fs::read_to_string(dir.join("CURRENT")).unwrap();
    dir.join(current.trim())
}

/// Copies a database directory that no process has open.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_dir(&path, &target);
        } else {
            std::fs::copy(&path, target).unwrap();
        }
    }
}

fn corruption_file(result: sluice::Result<Db>) -> (PathBuf, String) {
    match result {
        Err(Error::Corruption { file, reason, .. }) => (file, reason),
        Err(e) => panic!("expected Corruption, got {e}"),
        Ok(_) => panic!("expected Corruption, the database opened"),
    }
}

/// After the keyspace's flush record was acknowledged, the database moved its WAL floor and
/// deleted the WAL holding the flushed writes: at the keyspace's flush, or (when the default
/// keyspace held the floor) at the default keyspace's own flush after it. Cutting that record
/// (as a torn append would look) or putting the MANIFEST from before it back must not open
/// as an older state with those writes silently gone: the open fails naming the keyspace's
/// MANIFEST.
#[test]
fn a_lost_acknowledged_record_or_an_older_manifest_is_refused() {
    for default_holds_the_floor in [false, true] {
        lost_record_refused(default_holds_the_floor);
    }
}

fn lost_record_refused(default_holds_the_floor: bool) {
    let root = tempfile::tempdir().unwrap();
    let live = root.path().join("live");
    let os = sluice_sst::fs::os_fs();
    let id = {
        let db = Db::open(&live, options(os.clone())).unwrap();
        let id = db.keyspace("ks").unwrap().id();
        write_synced(&db, 0, KEYS / 2);
        db.keyspace("ks").unwrap().flush().unwrap();
        db.close().unwrap();
        id
    };
    let before = root.path().join("before");
    copy_dir(&live, &before);
    {
        let db = Db::open(&live, options(os.clone())).unwrap();
        if default_holds_the_floor {
            db.put(b"default", b"holds the oldest WAL").unwrap();
        }
        write_synced(&db, KEYS / 2, KEYS);
        db.keyspace("ks").unwrap().flush().unwrap();
        if default_holds_the_floor {
            db.flush().unwrap();
        }
        db.close().unwrap();
    }
    let manifest = keyspace_manifest(&live, id);
    let full = std::fs::read(&manifest).unwrap();

    // The last record (the second flush's) without its last byte: torn, as far as the
    // MANIFEST's format can tell.
    let cut = root.path().join("cut");
    copy_dir(&live, &cut);
    std::fs::write(keyspace_manifest(&cut, id), &full[..full.len() - 1]).unwrap();
    let (file, reason) = corruption_file(Db::open(&cut, options(os.clone())));
    assert!(
        file.ends_with(manifest.strip_prefix(&live).unwrap()),
        "{file:?}: {reason}"
    );
    assert!(
        reason.contains("keyspace \"ks\"") && reason.contains("acknowledged"),
        "{reason}"
    );

    // The MANIFEST of before the second flush, in place of the latest.
    let older = root.path().join("older");
    copy_dir(&live, &older);
    let older_manifest = keyspace_manifest(&before, id);
    let name = older_manifest.file_name().unwrap();
    let ks_dir = older.join("keyspaces").join(id.to_string());
    std::fs::copy(&older_manifest, ks_dir.join(name)).unwrap();
    std::fs::write(
        ks_dir.join("CURRENT"),
        format!("{}\n", name.to_string_lossy()),
    )
    .unwrap();
    let (file, reason) = corruption_file(Db::open(&older, options(os.clone())));
    assert!(file.ends_with(name), "{file:?}: {reason}");
    assert!(reason.contains("not the latest"), "{reason}");
    // A read-only open refuses them the same way, and changes nothing.
    let listing = |dir: &Path| -> Vec<_> {
        let mut names: Vec<_> = walk(dir);
        names.sort();
        names
    };
    let files = listing(&older);
    assert!(matches!(
        Db::open_read_only(&older, options(os.clone())),
        Err(Error::Corruption { .. })
    ));
    assert_eq!(listing(&older), files);

    // The untouched database has every write.
    let db = Db::open(&live, options(os)).unwrap();
    assert_holds(&db, KEYS, "live");
}

/// Every file under `dir` with its size.
fn walk(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            let len = std::fs::metadata(&path).unwrap().len();
            out.push((path, len));
        }
    }
    out
}
