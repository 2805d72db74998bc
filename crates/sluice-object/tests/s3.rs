//! A database whose tables live in a real S3-compatible server (`s3s-fs`, Apache-2.0, started
//! here on 127.0.0.1 and stopped when the test ends; `.ci/run` installs it): writes, flushes
//! and compactions upload tables, reads and reopens find them in the bucket, `check` reads
//! every object and refuses one that is gone, and nothing but the WAL, MANIFEST and the other
//! small files is on the host's disk.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use sluice::{CompactionOptions, Db, MemtableOptions, Options};
use sluice_object::{ObjectCache, ObjectFs, list_objects};
use sluice_sst::fs::os_fs;

use common::{BUCKET, S3Server};

fn options(fs: &ObjectFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        paranoid_checks: true,
        memtable: MemtableOptions {
            write_buffer_size: 256 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 256 << 10,
            max_bytes_for_level_base: 1 << 20,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Table files (`.sst`) in `dir` on the local disk.
fn local_tables(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

#[test]
fn a_database_keeps_its_tables_in_the_bucket() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), dir.path(), "db1").unwrap();
    let mut model = BTreeMap::new();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let mut x = 7u64;
    for round in 0..4 {
        for i in 0..6000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let k = format!("key{:06}", (x >> 40) % 20_000).into_bytes();
            if i % 11 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{round}-{i}-{}", "v".repeat((x % 100) as usize)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    // Every upload, read and deletion went to the store, and the metrics count them.
    let m = db.metrics();
    let requests = m.object_store.unwrap();
    let table_bytes = m.total_size_bytes();
    db.close().unwrap();
    assert!(
        requests.puts >= 4,
        "a table per flush at least: {requests:?}"
    );
    assert!(requests.bytes_uploaded > table_bytes, "{requests:?}");
    assert!(
        requests.gets > 0 && requests.bytes_downloaded > 0,
        "{requests:?}"
    );
    assert!(requests.heads > 0 && requests.deletes > 0, "{requests:?}");
    assert_eq!((requests.cache_hits, requests.cache_misses), (0, 0));

    // Tables are objects under the prefix, and on the server's disk; none is local.
    let objects = list_objects(&fs).unwrap();
    assert!(!objects.is_empty());
    assert!(
        objects
            .iter()
            .all(|o| o.starts_with("db1/") && o.ends_with(".sst")),
        "{objects:?}"
    );
    assert!(
        local_tables(dir.path()).is_empty(),
        "{:?}",
        local_tables(dir.path())
    );
    assert!(
        server
            .data
            .join(BUCKET)
            .join("db1")
            .read_dir()
            .unwrap()
            .count()
            > 0
    );

    // Reopened, the data is read back from the bucket; check reads every object.
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    let report = db.check().unwrap();
    assert_eq!(report.files, objects.len());
    assert_eq!(report.file_checksums, objects.len());
    db.close().unwrap();

    // An object deleted behind the database's back: the open or check says which.
    let victim = server.data.join(BUCKET).join(&objects[0]);
    std::fs::remove_file(&victim).unwrap();
    let name = objects[0].rsplit('/').next().unwrap().to_string();
    let failure = match Db::open(dir.path(), options(&fs)) {
        Err(e) => e.to_string(),
        Ok(db) => db.check().map(|_| ()).unwrap_err().to_string(),
    };
    assert!(failure.contains(&name), "{failure}");
}

#[test]
fn a_cache_serves_reads_and_never_a_replaced_object() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let cached_in = |cache: &Path, capacity: u64| {
        ObjectFs::new(os_fs(), server.store(), dir.path(), "db2")
            .unwrap()
            .with_cache(ObjectCache::open(cache, capacity).unwrap())
            .unwrap()
    };
    let cached = |capacity: u64| cached_in(cache_dir.path(), capacity);
    let fs = cached(64 << 20);
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..20_000u32 {
        let k = format!("key{:06}", i * 7919 % 9000).into_bytes();
        let v = format!("{i}-{}", "v".repeat((i % 80) as usize)).into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.close().unwrap();
    // The tables this host uploaded were read back from the cache, never downloaded.
    let written = fs.cache_stats().unwrap();
    assert!(written.hits > 0 && written.entries > 0, "{written:?}");
    assert_eq!(written.misses, 0, "{written:?}");
    drop(fs);

    // A new process's cache (the same directory) serves a reopen and a check.
    let fs = cached(64 << 20);
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.check().unwrap();
    let counted = db.metrics().object_store.unwrap();
    db.close().unwrap();
    let reopened = fs.cache_stats().unwrap();
    assert_eq!(counted.cache_hits, reopened.hits);
    // The open's two GETs are the prefix's owner marker (`owner.rs`) and its newest epoch,
    // whose token shows that no other copy has claimed the prefix since (`fence.rs`).
    assert_eq!(counted.gets, 2, "every table read was local: {counted:?}");
    assert!(reopened.hits > 0, "{reopened:?}");
    assert_eq!(reopened.misses, 0, "{reopened:?}");
    drop(fs);

    // A cache smaller than one table (in a directory of its own) downloads every open, and
    // reads stay right.
    let tiny_dir = tempfile::tempdir().unwrap();
    let tiny = cached_in(tiny_dir.path(), 1024);
    let db = Db::open(dir.path(), options(&tiny)).unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.close().unwrap();
    assert_eq!(tiny.cache_stats().unwrap().entries, 0);
    drop(tiny);

    // An object replaced in the bucket (same name, other bytes) is not read from the cache:
    // the open or check downloads the new version and refuses it, naming the table.
    let fs = cached(64 << 20);
    let objects = list_objects(&fs).unwrap();
    // The cache holds the version about to be replaced.
    let entry_prefix = format!("{}@", objects[0].replace('/', "%2F"));
    let cached_versions = || {
        std::fs::read_dir(cache_dir.path().join("objects"))
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_str().unwrap().starts_with(&entry_prefix)
            })
            .count()
    };
    assert_eq!(cached_versions(), 1);
    let mut forged = server.get(&objects[0]);
    let middle = forged.len() / 2;
    forged[middle] ^= 0x55;
    server.put(&objects[0], forged);
    let name = objects[0].rsplit('/').next().unwrap().to_string();
    let failure = match Db::open(dir.path(), options(&fs)) {
        Err(e) => e.to_string(),
        Ok(db) => db.check().map(|_| ()).unwrap_err().to_string(),
    };
    assert!(failure.contains(&name), "{failure}");
    // A miss: the new version was downloaded beside the old one, not the old one served.
    assert_eq!(cached_versions(), 2);
}

#[test]
fn an_upload_never_overwrites_an_object_it_did_not_write() {
    use sluice_sst::fs::{FileSystem, IoMode};
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), dir.path(), "db3").unwrap();
    let read = |name: &str| server.get(&format!("db3/{name}"));
    let put = |name: &str, bytes: &[u8]| server.put(&format!("db3/{name}"), bytes.to_vec());

    // Another writer's object appears between `create` (which found the name free) and the
    // upload: the upload fails and leaves it alone.
    let mut file = fs
        .create(&dir.path().join("000042.sst"), IoMode::Buffered)
        .unwrap();
    put("000042.sst", b"theirs");
    file.append(b"mine").unwrap();
    let err = file.sync().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(read("000042.sst"), b"theirs");

    // A writer may upload again what it appended since (its own version is replaced)...
    let mut file = fs
        .create(&dir.path().join("000043.sst"), IoMode::Buffered)
        .unwrap();
    file.append(b"a").unwrap();
    file.sync().unwrap();
    file.append(b"b").unwrap();
    file.sync().unwrap();
    assert_eq!(read("000043.sst"), b"ab");
    // ...but not once someone else replaced it.
    put("000043.sst", b"replaced");
    file.append(b"c").unwrap();
    let err = file.sync().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists, "{err}");
    assert_eq!(read("000043.sst"), b"replaced");
}

#[test]
fn the_local_backend_uploads_a_file_again_without_conditions() {
    use sluice_sst::fs::{FileSystem, IoMode};
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("file://{}", bucket.path().display());
    let fs = ObjectFs::from_url(os_fs(), &url, dir.path()).unwrap();
    let path = dir.path().join("000007.sst");
    let mut file = fs.create(&path, IoMode::Buffered).unwrap();
    file.append(b"a").unwrap();
    file.sync().unwrap();
    file.append(b"b").unwrap();
    file.sync().unwrap();
    assert_eq!(
        std::fs::read(bucket.path().join("000007.sst")).unwrap(),
        b"ab"
    );
    // A second writer of the name is refused.
    assert_eq!(
        fs.create(&path, IoMode::Buffered).unwrap_err().kind(),
        std::io::ErrorKind::AlreadyExists
    );
}

#[test]
fn a_reader_never_mixes_two_versions_of_an_object() {
    use sluice_sst::fs::{FileSystem, IoMode};
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), dir.path(), "db4").unwrap();
    let path = dir.path().join("000009.sst");
    let mut file = fs.create(&path, IoMode::Buffered).unwrap();
    file.append(b"first version").unwrap();
    file.sync().unwrap();
    // Opened (and read) with no cache: every read is a ranged GET.
    let reader = fs.open_read(&path, IoMode::Buffered).unwrap();
    let mut buf = [0u8; 5];
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"first");
    // Replaced behind the reader's back, with bytes of the same length.
    server.put("db4/000009.sst", b"other version".to_vec());
    let err = reader.read_exact_at(&mut buf, 6).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
    assert!(
        err.to_string().contains("replaced since it was opened"),
        "{err}"
    );
    // A new open reads the new version.
    let reader = fs.open_read(&path, IoMode::Buffered).unwrap();
    reader.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"other");
}

#[test]
fn a_checkpoint_or_backup_of_a_database_in_a_bucket_is_a_local_database() {
    let server = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), dir.path(), "db5").unwrap();
    let db = Db::open(dir.path(), options(&fs)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..5000u32 {
        let k = format!("key{:05}", i * 7 % 3000).into_bytes();
        let v = format!("{i}-{}", "c".repeat((i % 60) as usize)).into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    // A checkpoint outside the database directory: the tables are copied out of the bucket
    // (a link between a bucket and a directory is not possible), the rest as on local disk.
    let parent = tempfile::tempdir().unwrap();
    let checkpoint = parent.path().join("checkpoint");
    db.checkpoint(&checkpoint).unwrap();
    // A backup to a local directory reads the tables from the bucket through the database's
    // file system, and restores as a local database too.
    let backups =
        sluice::backup::BackupEngine::open(parent.path().join("backups"), os_fs()).unwrap();
    let backup = backups.create(&db).unwrap();
    db.close().unwrap();
    let restored = parent.path().join("restored");
    backups.restore(backup.meta.id, &restored).unwrap();
    let db = Db::open(
        &restored,
        Options {
            fs: os_fs(),
            ..options(&fs)
        },
    )
    .unwrap();
    let scanned: BTreeMap<_, _> = db.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.close().unwrap();
    let local = Db::open(
        &checkpoint,
        Options {
            fs: os_fs(),
            ..options(&fs)
        },
    )
    .unwrap();
    let scanned: BTreeMap<_, _> = local.iter().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    local.check().unwrap();
    local.close().unwrap();
    assert!(
        !local_tables(&checkpoint).is_empty(),
        "the checkpoint holds its tables itself"
    );
}

#[test]
fn destroy_removes_the_tables_in_the_bucket_too() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    std::fs::create_dir(&dir).unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), &dir, "gone").unwrap();
    let db = Db::open(&dir, options(&fs)).unwrap();
    for i in 0..5000u32 {
        db.put(format!("key{i:06}"), "value").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    assert!(!list_objects(&fs).unwrap().is_empty());
    Db::destroy(&dir, &options(&fs)).unwrap();
    assert_eq!(list_objects(&fs).unwrap(), Vec::<String>::new());
    assert!(!dir.exists());
}

/// The error of an open that must fail, as text.
fn open_error(dir: &Path, fs: &ObjectFs) -> String {
    match Db::open(dir, options(fs)) {
        Ok(_) => panic!("{} opened on a prefix it does not own", dir.display()),
        Err(e) => e.to_string(),
    }
}

/// Two databases in two directories never share a prefix: the first to open claims it with a
/// marker, and the other is refused before it writes or deletes anything there. A database
/// from before markers (a `CURRENT` and no marker) claims its own prefix; a new one never
/// claims a prefix that holds objects; `destroy` releases it.
#[test]
fn a_prefix_belongs_to_one_database() {
    let server = S3Server::start();
    let root = tempfile::tempdir().unwrap();
    let (a, b, c) = (
        root.path().join("a"),
        root.path().join("b"),
        root.path().join("c"),
    );
    let fs_of = |dir: &Path| {
        std::fs::create_dir_all(dir).unwrap();
        ObjectFs::new(os_fs(), server.store(), dir, "shared").unwrap()
    };
    let (fs_a, fs_b, fs_c) = (fs_of(&a), fs_of(&b), fs_of(&c));
    let marker = format!("shared/{}", sluice_object::MARKER);
    let db = Db::open(&a, options(&fs_a)).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:06}"), "a").unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let a_id = std::fs::read_to_string(a.join(sluice_object::LOCAL_ID)).unwrap();
    let marked = String::from_utf8(server.get(&marker)).unwrap();
    assert!(marked.contains(a_id.lines().nth(1).unwrap()), "{marked}");
    let objects = list_objects(&fs_a).unwrap();
    assert!(!objects.is_empty());

    // Another database on the prefix: refused, read-write, naming the marker; nothing moved.
    let refused = open_error(&b, &fs_b);
    assert!(
        refused.contains(&marker) && refused.contains("another database"),
        "{refused}"
    );
    assert_eq!(list_objects(&fs_b).unwrap(), objects);
    assert!(!b.join(sluice_object::LOCAL_ID).exists());

    // Nor may it destroy the prefix's tables, or remove them as a tool would.
    let refused = Db::destroy(&b, &options(&fs_b)).unwrap_err().to_string();
    assert!(refused.contains("another database"), "{refused}");
    let refused = sluice_object::remove_objects(&fs_b).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::PermissionDenied);
    assert_eq!(list_objects(&fs_b).unwrap(), objects);

    // The owner reopens and reads its data.
    let db = Db::open(&a, options(&fs_a)).unwrap();
    assert_eq!(db.get("key002999").unwrap().as_deref(), Some(&b"a"[..]));
    db.close().unwrap();

    // A database from before markers, or whose marker was deleted, claims its prefix again.
    server.delete(&marker);
    std::fs::remove_file(a.join(sluice_object::LOCAL_ID)).unwrap();
    let reclaimed = open_error(&c, &fs_c);
    assert!(reclaimed.contains("holds objects"), "{reclaimed}");
    assert!(
        !server.exists(&marker),
        "a refused new database claims nothing"
    );
    let db = Db::open(&a, options(&fs_a)).unwrap();
    db.close().unwrap();
    let new_id = std::fs::read_to_string(a.join(sluice_object::LOCAL_ID)).unwrap();
    assert_ne!(new_id, a_id, "a fresh id for a fresh claim");
    assert!(open_error(&b, &fs_b).contains("another database"));

    // A marker that is not one is an error, not a claim.
    let honest = server.get(&marker);
    server.put(&marker, b"not a marker".to_vec());
    let garbled = open_error(&a, &fs_a);
    assert!(garbled.contains("not a prefix owner marker"), "{garbled}");
    // Nor is one too large to be read: the honest marker padded to 8 KiB.
    let mut padded = honest.clone();
    padded.resize(8 << 10, b'x');
    server.put(&marker, padded);
    let oversized = open_error(&a, &fs_a);
    assert!(
        oversized.contains("not a prefix owner marker"),
        "{oversized}"
    );
    server.put(&marker, honest);

    // Destroying the owner releases the prefix, and another database may take it, even one
    // whose first claim a crash cut short (its temporary id file is still there).
    Db::destroy(&a, &options(&fs_a)).unwrap();
    assert!(!server.exists(&marker));
    assert!(!a.exists());
    let stale = b.join(format!("{}.new", sluice_object::LOCAL_ID));
    std::fs::write(&stale, "half a claim").unwrap();
    let db = Db::open(&b, options(&fs_b)).unwrap();
    db.put("b", "b").unwrap();
    db.close().unwrap();
    assert!(!stale.exists());
    assert!(open_error(&c, &fs_c).contains("another database"));
}

/// Two new databases opening one empty prefix at the same moment: the conditional PUT of the
/// marker lets exactly one of them in.
///
/// This runs on `object_store`'s local backend, whose create is atomic (a hard link that fails
/// if the name exists), as AWS S3's, R2's or GCS's conditional create is. `s3s-fs` 0.14 is not
/// such a store: it checks that the object is absent and then renames the upload into place, so
/// two PUTs inside that window both succeed and the later one wins (CI saw both opens succeed).
#[test]
fn two_databases_claiming_one_prefix_at_once_get_one_owner() {
    let bucket = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    for round in 0..8 {
        let url = format!("file://{}/race{round}", bucket.path().display());
        let barrier = std::sync::Barrier::new(2);
        let opened: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|side| {
                    let dir = root.path().join(format!("race{round}-{side}"));
                    std::fs::create_dir_all(&dir).unwrap();
                    let fs = ObjectFs::from_url(os_fs(), &url, &dir).unwrap();
                    let barrier = &barrier;
                    scope.spawn(move || {
                        barrier.wait();
                        Db::open(&dir, options(&fs))
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            opened.iter().filter(|o| o.is_ok()).count(),
            1,
            "round {round}: {opened:?}"
        );
        // The other one is told whose the prefix is, however the two claims interleaved.
        let refused = opened.iter().find_map(|o| o.as_ref().err()).unwrap();
        assert!(refused.contains("names another database"), "{refused}");
    }
}
