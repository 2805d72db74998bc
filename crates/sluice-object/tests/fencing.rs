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
enum Backend {
    S3(S3Server),
    /// `object_store`'s local backend, and the directory it keeps objects in.
    Local {
        store: Arc<dyn ObjectStore>,
        _dir: tempfile::TempDir,
    },
}

impl Backend {
    /// A client of the store. For S3 a new one each time: a client's pooled connections
    /// belong to the runtime that made them, and each `ObjectFs` (and each test's direct call)
    /// runs its own, which may be gone when another uses the client.
    fn store(&self) -> Arc<dyn ObjectStore> {
        match self {
            Backend::S3(server) => server.store(),
            Backend::Local { store, .. } => Arc::clone(store),
        }
    }
}

fn s3() -> Backend {
    Backend::S3(S3Server::start())
}

fn local_backend() -> Backend {
    let dir = tempfile::tempdir().unwrap();
    let store = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    Backend::Local {
        store: Arc::new(store),
        _dir: dir,
    }
}

/// Runs `$body` (a function of a [`Backend`]) as two tests: `$s3` on the S3 server, `$local`
/// on `object_store`'s local backend.
macro_rules! on_both_backends {
    ($body:ident, $s3:ident, $local:ident) => {
        #[test]
        fn $s3() {
            $body(&s3());
        }

        #[test]
        fn $local() {
            $body(&local_backend());
        }
    };
}

/// The database directory `dir` with its tables under `prefix` of the backend's store.
fn fs_at(backend: &Backend, dir: &Path, prefix: &str) -> ObjectFs {
    std::fs::create_dir_all(dir).unwrap();
    ObjectFs::new(os_fs(), backend.store(), dir, prefix).unwrap()
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

/// Every object under `prefix`, in order.
fn list_all(backend: &Backend, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let at = object_store::path::Path::from(prefix);
    let store = backend.store();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listed =
        runtime.block_on(async move { store.list(Some(&at)).try_collect::<Vec<_>>().await });
    let mut names: Vec<String> = listed
        .unwrap()
        .into_iter()
        .map(|m| m.location.to_string())
        .collect();
    names.sort();
    names
}

/// The epochs under `prefix`, as object names.
fn epochs(backend: &Backend, prefix: &str) -> Vec<String> {
    list_all(backend, &format!("{prefix}/{EPOCHS}"))
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

    // The copy works as the owner. The first is stale: opening it again is refused (its sweep
    // would delete the copy's tables), until its record of its last epoch is deleted on
    // purpose; then it takes the prefix back, and the copy is fenced in turn.
    upload(&fs_b, &b, "000006.sst", b"the copy's table").unwrap();
    fs_b.remove(&b.join("000001.sst")).unwrap();
    drop(held_a);
    let Err(stale) = lock(&fs_a, &a) else {
        panic!("a stale copy took the prefix back");
    };
    assert_eq!(stale.kind(), ErrorKind::PermissionDenied, "{stale}");
    let stale = stale.to_string();
    assert!(
        stale.contains("this copy is stale") && stale.contains("epoch 2 is the newest"),
        "{stale}"
    );
    assert_eq!(
        epochs(backend, "db"),
        ["db/SLUICE-EPOCH/00000000000000000002"]
    );
    let record = a.join(sluice_object::LOCAL_ID);
    let kept: String = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("epoch "))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&record, kept).unwrap();
    let _held_a = lock(&fs_a, &a).unwrap();
    assert_eq!(
        epochs(backend, "db"),
        ["db/SLUICE-EPOCH/00000000000000000003"]
    );
    assert_fenced(fs_b.remove(&b.join("000006.sst")), "the copy, now earlier");
    fs_a.remove(&a.join("000006.sst")).unwrap();
    drop(held_b);
}

on_both_backends!(
    a_later_copy_fences_the_earlier_open,
    a_later_copy_fences_the_earlier_open_on_s3,
    a_later_copy_fences_the_earlier_open_on_the_local_backend
);

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
    let store = backend.store();
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

on_both_backends!(
    an_epoch_is_its_object_not_its_number,
    an_epoch_is_its_object_not_its_number_on_s3,
    an_epoch_is_its_object_not_its_number_on_the_local_backend
);

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
    // Reopened, or destroyed, the first is refused as stale: either would sweep the copy's
    // tables away.
    for refused in [
        Db::open(&a, options(&fs_at(&backend, &a, "db"))).map(drop),
        Db::destroy(&a, &options(&fs_at(&backend, &a, "db"))),
    ] {
        let refused = refused.unwrap_err().to_string();
        assert!(refused.contains("this copy is stale"), "{refused}");
    }
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

on_both_backends!(
    prefixes_do_not_nest,
    prefixes_do_not_nest_on_s3,
    prefixes_do_not_nest_on_the_local_backend
);

/// A worker's view of the bucket, fenced by its host's epoch (what a task carries): it writes
/// while the host holds the prefix, and stops once a later claim has taken it.
fn a_worker_stops_with_its_host(backend: &Backend) {
    let root = tempfile::tempdir().unwrap();
    let (a, b, w) = (
        root.path().join("a"),
        root.path().join("b"),
        root.path().join("worker"),
    );
    let fs_a = fs_at(backend, &a, "db");
    let _held = lock(&fs_a, &a).unwrap();
    let epoch = fs_a.write_fence().unwrap();
    let worker = fs_at(backend, &w, "db").fenced_by(epoch.clone());
    upload(&worker, &w, "000010.sst", b"an output").unwrap();

    copy_dir(&a, &b);
    let fs_b = fs_at(backend, &b, "db");
    let _copy = lock(&fs_b, &b).unwrap();
    let why = assert_fenced(upload(&worker, &w, "000011.sst", b"late"), "upload");
    assert!(
        why.contains(&format!("took epoch {}", epoch.epoch)),
        "{why}"
    );
    assert_fenced(worker.remove(&w.join("000010.sst")), "delete");
    // The host, fenced too, still names the epoch it held: its next tasks carry it, and fail.
    assert_fenced(fs_a.remove(&a.join("000010.sst")), "the host");
    assert_eq!(fs_a.write_fence(), Some(epoch));
    assert!(fs_b.write_fence().unwrap().epoch > fs_a.write_fence().unwrap().epoch);
}

on_both_backends!(
    a_worker_stops_with_its_host,
    a_worker_stops_with_its_host_on_s3,
    a_worker_stops_with_its_host_on_the_local_backend
);

/// A multipart upload checks the fence again before its completion, since its parts can take
/// long: a copy that takes the prefix while they upload (every response of the first open
/// delayed by 500 ms here) stops the upload short of its completion, and no object appears.
#[test]
fn a_multipart_upload_fenced_while_its_parts_upload_is_not_completed() {
    use std::time::Duration;

    use sluice_object::proxy::LatencyProxy;

    let server = S3Server::start();
    let target = format!("127.0.0.1:{}", server.port()).parse().unwrap();
    let delay = Duration::from_millis(500);
    let proxy = LatencyProxy::start("127.0.0.1:0".parse().unwrap(), target, delay).unwrap();
    let slow = common::store_at(&format!("http://{}", proxy.addr()));
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    let fs_a = ObjectFs::new(os_fs(), slow, &a, "db").unwrap();
    let _held = lock(&fs_a, &a).unwrap();
    copy_dir(&a, &b);
    let fs_b = ObjectFs::new(os_fs(), server.store(), &b, "db").unwrap();

    let before = fs_a.store_requests().unwrap();
    let large = vec![7u8; sluice_object::MULTIPART_BYTES + 1];
    let uploaded = std::thread::scope(|scope| {
        let upload = scope.spawn(|| upload(&fs_a, &a, "000001.sst", &large));
        // Each request is answered a delay after it reaches the server. Before the parts:
        // `create`'s HEAD, then the check's LIST and (`s3s-fs` lists no tags) HEAD, done by
        // 3 delays; then the upload's start and its parts, so that the check before the
        // completion reaches the server after 5. The copy takes the prefix between the two.
        std::thread::sleep(delay * 4);
        let copy = lock(&fs_b, &b).unwrap();
        (upload.join().unwrap(), copy)
    });
    assert_fenced(uploaded.0, "the multipart upload");
    let requests = fs_a.store_requests().unwrap().since(&before);
    assert!(
        requests.puts >= 2,
        "the upload passed the first check and sent its parts: {requests:?}"
    );
    assert!(!server.exists("db/000001.sst"));
}

/// A database whose marker is gone claims its own prefix back, but not another unmarked one
/// that holds objects: its id file records which prefix it claimed.
fn a_database_reclaims_only_its_own_unmarked_prefix(backend: &Backend) {
    let root = tempfile::tempdir().unwrap();
    let (a, b) = (root.path().join("a"), root.path().join("b"));
    for (dir, prefix) in [(&a, "one"), (&b, "two")] {
        let fs = fs_at(backend, dir, prefix);
        let db = Db::open(dir, options(&fs)).unwrap();
        db.put("k", prefix).unwrap();
        db.close().unwrap();
    }
    let id = std::fs::read_to_string(a.join(sluice_object::LOCAL_ID)).unwrap();
    assert!(id.contains("prefix ") && id.contains("/one"), "{id}");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for prefix in ["one", "two"] {
        let marker = object_store::path::Path::from(prefix).join(sluice_object::MARKER);
        runtime.block_on(backend.store().delete(&marker)).unwrap();
    }

    // Pointed at the other database's prefix by mistake: refused, nothing taken.
    let two = list_all(backend, "two");
    let wrong = fs_at(backend, &a, "two");
    let Err(refused) = Db::open(&a, options(&wrong)) else {
        panic!("opened on another database's prefix");
    };
    let refused = refused.to_string();
    assert!(
        refused.contains("tables are under") && refused.contains("/one"),
        "{refused}"
    );
    assert_eq!(list_all(backend, "two"), two);
    let db = Db::open(&b, options(&fs_at(backend, &b, "two"))).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"two"[..]));
    db.close().unwrap();

    // Its own prefix, unmarked: claimed back.
    let db = Db::open(&a, options(&fs_at(backend, &a, "one"))).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"one"[..]));
    db.close().unwrap();
}

on_both_backends!(
    a_database_reclaims_only_its_own_unmarked_prefix,
    a_database_reclaims_only_its_own_unmarked_prefix_on_s3,
    a_database_reclaims_only_its_own_unmarked_prefix_on_the_local_backend
);
