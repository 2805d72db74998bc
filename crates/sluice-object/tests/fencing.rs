//! Copies of one database directory fence each other through the prefix's epochs: the later
//! open owns the prefix, and the earlier one can no longer upload, delete or copy there. And no
//! database claims a prefix nested inside another's. Each runs against the real S3 server
//! (`s3s-fs`, see `common`) and against `object_store`'s local backend, whose conditional
//! create is atomic and whose entity tags come from the file's metadata.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use object_store::{ObjectStore, ObjectStoreExt};
use sluice::{Db, Options};
use sluice_object::{EPOCHS, ObjectFs, list_objects};
use sluice_sst::fs::{FileLock, FileSystem, IoMode, LockMode, os_fs};

use common::S3Server;

/// A store to run each test on, and what keeps it running.
struct Backend {
    store: Arc<dyn ObjectStore>,
    _server: Option<S3Server>,
    _dir: Option<tempfile::TempDir>,
}

fn s3() -> Backend {
    let server = S3Server::start();
    Backend {
        store: server.store(),
        _server: Some(server),
        _dir: None,
    }
}

fn local_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    Backend {
        store: Arc::new(store),
        _server: None,
        _dir: Some(dir),
    }
}

/// The database directory `dir` with its tables under `prefix` of the backend's store.
fn fs_at(backend: &Backend, dir: &Path, prefix: &str) -> ObjectFs {
    std::fs::create_dir_all(dir).unwrap();
    ObjectFs::new(os_fs(), Arc::clone(&backend.store), dir, prefix).unwrap()
}

/// Takes the database's lock in `dir` exclusively, as a read-write open does.
fn lock(fs: &ObjectFs, dir: &Path) -> std::io::Result<Box<dyn FileLock>> {
    fs.lock(&dir.join("LOCK"), LockMode::Exclusive)
}

/// Uploads `bytes` as table `name` of `dir`.
fn upload(fs: &ObjectFs, dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = fs.create(&dir.join(name), IoMode::Buffered)?;
    file.append(bytes)?;
    file.sync()
}

/// The epochs under `prefix`, as object names.
fn epochs(backend: &Backend, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let at = object_store::path::Path::from(prefix).join(EPOCHS);
    let store = Arc::clone(&backend.store);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut names: Vec<String> = runtime
        .block_on(async move { store.list(Some(&at)).try_collect::<Vec<_>>().await })
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string())
        .collect();
    names.sort();
    names
}

/// Copies the files of directory `from` into a new directory `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
}

fn assert_fenced(result: std::io::Result<()>, what: &str) -> String {
    let e = result.expect_err(what);
    assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{what}: {e}");
    let text = e.to_string();
    assert!(text.starts_with("fenced: "), "{what}: {text}");
    text
}

/// A copy of a database directory opened later takes the prefix: the earlier open's uploads,
/// deletions and copies there all fail, naming the copy, and the objects stay as they were.
fn a_later_copy_fences_the_earlier_open(backend: &Backend) {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let fs_a = fs_at(backend, &a, "db");
    let held_a = lock(&fs_a, &a).unwrap();
    upload(&fs_a, &a, "000001.sst", b"the first table").unwrap();
    assert_eq!(
        epochs(backend, "db"),
        ["db/SLUICE-EPOCH/00000000000000000001"]
    );

    // The copy carries the database's id, so the marker lets it in; it takes epoch 2.
    copy_dir(&a, &b);
    let fs_b = fs_at(backend, &b, "db");
    let held_b = lock(&fs_b, &b).unwrap();
    assert_eq!(
        epochs(backend, "db"),
        ["db/SLUICE-EPOCH/00000000000000000002"]
    );

    let before = list_objects(&fs_a).unwrap();
    let why = assert_fenced(fs_a.remove(&a.join("000001.sst")), "delete");
    assert!(
        why.contains("took epoch 1") && why.contains("epoch 2 is the newest"),
        "{why}"
    );
    assert!(
        why.contains(&b.display().to_string()),
        "names the copy: {why}"
    );
    assert_fenced(upload(&fs_a, &a, "000002.sst", b"late"), "upload");
    assert_fenced(
        fs_a.rename(&a.join("000001.sst"), &a.join("000003.sst")),
        "rename",
    );
    assert_fenced(
        fs_a.hard_link(&a.join("000001.sst"), &a.join("000004.sst")),
        "copy",
    );
    // A table large enough for a multipart upload is refused before its first part.
    let large = vec![7u8; sluice_object::MULTIPART_BYTES + 1];
    assert_fenced(upload(&fs_a, &a, "000005.sst", &large), "multipart upload");
    assert_eq!(list_objects(&fs_a).unwrap(), before);

    // The copy works as the owner; a reopen of the first takes the prefix back.
    upload(&fs_b, &b, "000006.sst", b"the copy's table").unwrap();
    fs_b.remove(&b.join("000001.sst")).unwrap();
    drop(held_a);
    let _held_a = lock(&fs_a, &a).unwrap();
    assert_eq!(
        epochs(backend, "db"),
        ["db/SLUICE-EPOCH/00000000000000000003"]
    );
    assert_fenced(fs_b.remove(&b.join("000006.sst")), "the copy, now earlier");
    fs_a.remove(&a.join("000006.sst")).unwrap();
    drop(held_b);
}

#[test]
fn a_later_copy_fences_the_earlier_open_on_s3() {
    a_later_copy_fences_the_earlier_open(&s3());
}

#[test]
fn a_later_copy_fences_the_earlier_open_on_the_local_backend() {
    a_later_copy_fences_the_earlier_open(&local_backend());
}

/// An open whose epoch object is gone is fenced, even when another epoch with its number was
/// created since (the prefix released and claimed again): the store's tag tells them apart.
/// Objects under the epochs' directory that are not epochs fence no one.
fn an_epoch_is_its_object_not_its_number(backend: &Backend) {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::clone(&backend.store);
    let delete = |name: &str| {
        let at = object_store::path::Path::from(name);
        runtime.block_on(store.delete(&at)).unwrap();
    };
    let fs_a = fs_at(backend, &a, "db");
    let _held_a = lock(&fs_a, &a).unwrap();
    copy_dir(&a, &b);
    let fs_b = fs_at(backend, &b, "db");

    // A stray object among the epochs is not one.
    let stray = object_store::path::Path::from("db")
        .join(EPOCHS)
        .join("zzz");
    let put = store.put(&stray, b"not an epoch".to_vec().into());
    runtime.block_on(put).unwrap();
    upload(&fs_a, &a, "000001.sst", b"x").unwrap();

    // Epoch 1 deleted behind the holder's back and made again by the copy: the same name,
    // another object.
    delete("db/SLUICE-EPOCH/00000000000000000001");
    let _held_b = lock(&fs_b, &b).unwrap();
    assert_eq!(
        epochs(backend, "db"),
        [
            "db/SLUICE-EPOCH/00000000000000000001",
            "db/SLUICE-EPOCH/zzz"
        ]
    );
    let why = assert_fenced(upload(&fs_a, &a, "000002.sst", b"y"), "same number");
    assert!(why.contains("epoch 1 is the newest"), "{why}");
    upload(&fs_b, &b, "000003.sst", b"z").unwrap();

    // No epoch at all: the holder holds nothing.
    delete("db/SLUICE-EPOCH/00000000000000000001");
    let why = assert_fenced(upload(&fs_b, &b, "000004.sst", b"w"), "no epoch");
    assert!(why.contains("no epoch is left"), "{why}");
}

#[test]
fn an_epoch_is_its_object_not_its_number_on_s3() {
    an_epoch_is_its_object_not_its_number(&s3());
}

#[test]
fn an_epoch_is_its_object_not_its_number_on_the_local_backend() {
    an_epoch_is_its_object_not_its_number(&local_backend());
}

fn options(fs: &ObjectFs) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        paranoid_checks: true,
        ..Options::default()
    }
}

/// A database directory copied while the database runs, and the copy opened on the same
/// prefix: the copy owns the prefix from then on. The first can no longer flush (its upload is
/// refused, which stops it as any failed flush does), and every table the copy's MANIFEST
/// names stays in the bucket through the first one's last attempts.
#[test]
fn a_running_database_copied_and_opened_stops_writing_to_the_bucket() {
    let backend = s3();
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    let fs_a = fs_at(&backend, &a, "db");
    let first = Db::open(&a, options(&fs_a)).unwrap();
    for i in 0..2000u32 {
        first.put(format!("key{i:05}"), "first").unwrap();
    }
    first.flush().unwrap();

    copy_dir(&a, &b);
    let fs_b = fs_at(&backend, &b, "db");
    let copy = Db::open(&b, options(&fs_b)).unwrap();
    for i in 1000..3000u32 {
        copy.put(format!("key{i:05}"), "copy").unwrap();
    }
    copy.flush().unwrap();
    copy.compact_range(None, None).unwrap();
    let owned = list_objects(&fs_b).unwrap();

    // The first database's memtable flush would upload a table: refused, naming the copy.
    first.put("late", "first").unwrap();
    let refused = first.flush().unwrap_err().to_string();
    assert!(refused.contains("fenced"), "{refused}");
    assert!(refused.contains(&b.display().to_string()), "{refused}");
    let _ = first.compact_range(None, None);
    drop(first);
    assert_eq!(list_objects(&fs_b).unwrap(), owned);

    copy.close().unwrap();
    let copy = Db::open(&b, options(&fs_b)).unwrap();
    for i in 0..3000u32 {
        let want = if i < 1000 { "first" } else { "copy" };
        let got = copy.get(format!("key{i:05}")).unwrap();
        assert_eq!(got.as_deref(), Some(want.as_bytes()), "key{i:05}");
    }
    assert_eq!(copy.get("late").unwrap(), None);
    copy.verify_file_checksums().unwrap();
    copy.close().unwrap();
}

/// No database claims a prefix inside another's, nor one that holds another's inside it; a
/// prefix beside another's whose name starts the same is its own.
fn prefixes_do_not_nest(backend: &Backend) {
    let root = tempfile::tempdir().unwrap();
    let dir = |name: &str| root.path().join(name);
    let outer = fs_at(backend, &dir("outer"), "dbs/one");
    let _held = lock(&outer, &dir("outer")).unwrap();
    upload(&outer, &dir("outer"), "000001.sst", b"outer").unwrap();

    for (name, prefix) in [("inner", "dbs/one/two"), ("deeper", "dbs/one/keyspaces/1")] {
        let inner = fs_at(backend, &dir(name), prefix);
        let e = lock(&inner, &dir(name)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
        let text = e.to_string();
        assert!(
            text.contains("inside the prefix of another database"),
            "{text}"
        );
        assert!(text.contains("dbs/one/SLUICE-OWNER"), "{text}");
        assert!(list_objects(&inner).unwrap().is_empty(), "{prefix}");
    }
    let around = fs_at(backend, &dir("around"), "dbs");
    let e = lock(&around, &dir("around")).unwrap_err();
    assert!(e.to_string().contains("holds objects"), "{e}");

    let beside = fs_at(backend, &dir("beside"), "dbs/one2");
    let _beside = lock(&beside, &dir("beside")).unwrap();
    upload(&beside, &dir("beside"), "000001.sst", b"beside").unwrap();
}

#[test]
fn prefixes_do_not_nest_on_s3() {
    prefixes_do_not_nest(&s3());
}

#[test]
fn prefixes_do_not_nest_on_the_local_backend() {
    prefixes_do_not_nest(&local_backend());
}
