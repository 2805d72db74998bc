use std::io::ErrorKind;

use super::*;
use crate::fs::probe_direct_io;

fn p(s: &str) -> &Path {
    Path::new(s)
}

fn read_all(fs: &dyn FileSystem, path: &str) -> Vec<u8> {
    fs.read_prefix(p(path), u64::MAX).unwrap()
}

fn write(fs: &dyn FileSystem, path: &str, data: &[u8], sync: bool) -> Box<dyn WriteFile> {
    let mut f = fs.create(p(path), IoMode::Buffered).unwrap();
    f.append(data).unwrap();
    if sync {
        f.sync().unwrap();
    }
    f
}

fn names(fs: &dyn FileSystem, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list_dir(p(dir))
        .unwrap()
        .into_iter()
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn files_read_back_what_was_appended_synced_or_not() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/db")).unwrap();
    let mut f = write(&fs, "/db/a", b"hello ", true);
    f.append(b"world").unwrap();
    assert_eq!(read_all(&fs, "/db/a"), b"hello world");
    let r = fs.open_read(p("/db/a"), IoMode::Direct).unwrap();
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 6).unwrap();
    assert_eq!(&buf, b"world");
    let err = r.read_exact_at(&mut buf, 7).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
    assert_eq!(fs.metadata(p("/db/a")).unwrap().len, 11);
    assert!(fs.metadata(p("/db")).unwrap().is_dir);
    assert_eq!(
        fs.create(p("/db/a"), IoMode::Buffered).unwrap_err().kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs.create(p("/nodir/a"), IoMode::Buffered)
            .unwrap_err()
            .kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn a_crash_drops_unsynced_bytes_and_keeps_synced_ones() {
    let fs = MemFs::new();
    let mut f = write(&fs, "/a", b"durable", true);
    f.append(b" lost").unwrap();
    fs.sync_dir(p("/")).unwrap();
    let crashed = fs.crash_clone();
    assert_eq!(read_all(&crashed, "/a"), b"durable");
    // The original goes on unchanged, and the clone is independent of it.
    f.append(b"!").unwrap();
    assert_eq!(read_all(&fs, "/a"), b"durable lost!");
    assert_eq!(read_all(&crashed, "/a"), b"durable");
}

#[test]
fn a_crash_drops_names_whose_directory_was_not_synced() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/db")).unwrap();
    fs.sync_dir(p("/")).unwrap();
    write(&fs, "/db/synced-name", b"x", true);
    fs.sync_dir(p("/db")).unwrap();
    write(&fs, "/db/unsynced-name", b"y", true);
    let crashed = fs.crash_clone();
    assert_eq!(names(&crashed, "/db"), ["synced-name"]);

    // A directory whose own name was never made durable is lost whole.
    fs.create_dir_all(p("/other/deep")).unwrap();
    fs.sync_dir(p("/other")).unwrap();
    assert!(!fs.crash_clone().exists(p("/other")).unwrap());
}

#[test]
fn unsynced_renames_and_removes_are_undone_by_a_crash() {
    let fs = MemFs::new();
    write(&fs, "/old", b"old contents", true);
    write(&fs, "/tmp", b"new contents", true);
    write(&fs, "/gone", b"g", true);
    fs.sync_dir(p("/")).unwrap();

    fs.rename(p("/tmp"), p("/old")).unwrap();
    fs.remove(p("/gone")).unwrap();
    assert_eq!(read_all(&fs, "/old"), b"new contents");
    assert_eq!(names(&fs, "/"), ["old"]);
    let before_sync = fs.crash_clone();
    assert_eq!(read_all(&before_sync, "/old"), b"old contents");
    assert_eq!(names(&before_sync, "/"), ["gone", "old", "tmp"]);

    fs.sync_dir(p("/")).unwrap();
    let after_sync = fs.crash_clone();
    assert_eq!(read_all(&after_sync, "/old"), b"new contents");
    assert_eq!(names(&after_sync, "/"), ["old"]);
}

#[test]
fn a_removed_file_stays_readable_through_an_open_handle() {
    let fs = MemFs::new();
    write(&fs, "/f", b"abc", true);
    let r = fs.open_read(p("/f"), IoMode::Buffered).unwrap();
    fs.remove(p("/f")).unwrap();
    assert!(!fs.exists(p("/f")).unwrap());
    let mut buf = [0u8; 3];
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"abc");
    assert_eq!(fs.remove(p("/f")).unwrap_err().kind(), ErrorKind::NotFound);
}

#[test]
fn crash_clone_keeping_some_keeps_a_prefix_of_the_unsynced_tail() {
    let fs = MemFs::new();
    let mut f = write(&fs, "/f", b"synced", true);
    f.append(b"0123456789").unwrap();
    fs.sync_dir(p("/")).unwrap();
    let mut lengths = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let bytes = read_all(&fs.crash_clone_keeping_some(seed), "/f");
        assert!(b"synced0123456789".starts_with(&bytes) && bytes.len() >= 6);
        lengths.insert(bytes.len());
    }
    assert!(lengths.len() > 3, "{lengths:?}");
}

#[test]
fn locks_conflict_in_process_and_are_released_on_drop() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/db")).unwrap();
    let lock = p("/db/LOCK");
    assert_eq!(
        fs.lock(lock, LockMode::Shared).unwrap_err().kind(),
        ErrorKind::NotFound,
        "a shared lock creates nothing"
    );
    let exclusive = fs.lock(lock, LockMode::Exclusive).unwrap();
    for mode in [LockMode::Exclusive, LockMode::Shared] {
        assert_eq!(
            fs.lock(lock, mode).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
    }
    drop(exclusive);
    let a = fs.lock(lock, LockMode::Shared).unwrap();
    let b = fs.lock(lock, LockMode::Shared).unwrap();
    assert_eq!(
        fs.lock(lock, LockMode::Exclusive).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(a);
    drop(b);
    let _again = fs.lock(lock, LockMode::Exclusive).unwrap();
    // A crashed machine holds no locks.
    fs.sync_dir(p("/db")).unwrap();
    fs.sync_dir(p("/")).unwrap();
    let crashed = fs.crash_clone();
    let _theirs = crashed.lock(lock, LockMode::Exclusive).unwrap();
}

#[test]
fn direct_io_is_accepted() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/d")).unwrap();
    probe_direct_io(&fs, p("/d")).unwrap();
    assert!(names(&fs, "/d").is_empty(), "the probe file is removed");
}

#[test]
fn paths_resolve_dots_and_refuse_directory_misuse() {
    let fs = MemFs::new();
    fs.create_dir_all(p("/a/b")).unwrap();
    write(&fs, "/a/./b/../f", b"1", false);
    assert_eq!(names(&fs, "/a"), ["b", "f"]);
    assert_eq!(
        fs.remove(p("/a/b")).unwrap_err().kind(),
        ErrorKind::IsADirectory
    );
    assert_eq!(
        fs.create_dir_all(p("/a/f/x")).unwrap_err().kind(),
        ErrorKind::NotADirectory
    );
    assert_eq!(
        fs.list_dir(p("/missing")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}
