use std::io::ErrorKind;

use proptest::prelude::*;

use super::*;

/// Deterministic, non-repeating test bytes.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + i / 251) as u8).collect()
}

/// A temporary directory on a file system that takes `O_DIRECT`, or `None` (after checking the
/// refusal is the clear `Unsupported` error) where it is refused.
fn direct_dir() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    match probe_direct_io(&OsFileSystem, dir.path()) {
        Ok(()) => Some(dir),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
            None
        }
    }
}

/// Writes `data` in pieces of the given sizes (cycled), syncing after the pieces marked true.
fn write_in_pieces(file: &mut dyn WriteFile, data: &[u8], pieces: &[(usize, bool)]) {
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let (size, sync) = pieces[i % pieces.len()];
        let (now, later) = rest.split_at(size.clamp(1, rest.len()));
        file.append(now).unwrap();
        if sync {
            file.sync().unwrap();
        }
        rest = later;
        i += 1;
    }
    file.sync().unwrap();
}

#[test]
fn buffered_files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = pattern(700_000);
    let mut w = OsFileSystem.create(&path, IoMode::Buffered).unwrap();
    write_in_pieces(&mut *w, &data, &[(4096 + 37, false), (1, true)]);
    let r = OsFileSystem.open_read(&path, IoMode::Buffered).unwrap();
    assert_eq!(r.size().unwrap(), data.len() as u64);
    let mut buf = vec![0u8; 1000];
    r.read_exact_at(&mut buf, 123_456).unwrap();
    assert_eq!(buf, data[123_456..124_456]);
    let err = r.read_exact_at(&mut buf, 699_500).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
}

#[test]
fn direct_writes_leave_exactly_the_bytes_appended() {
    let Some(dir) = direct_dir() else { return };
    let path = dir.path().join("f");
    // Past two write buffers, with syncs that leave partial pages to be completed.
    let data = pattern(2 * (1 << 20) + 12_345);
    let mut w = OsFileSystem.create(&path, IoMode::Direct).unwrap();
    write_in_pieces(
        &mut *w,
        &data,
        &[(5000, true), (4096, false), (1, true), (300_001, false)],
    );
    drop(w);
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

#[test]
fn direct_reads_at_any_offset_and_length() {
    let Some(dir) = direct_dir() else { return };
    let path = dir.path().join("f");
    let data = pattern(3 * 4096 + 100);
    std::fs::write(&path, &data).unwrap();
    let r = OsFileSystem.open_read(&path, IoMode::Direct).unwrap();
    assert_eq!(r.size().unwrap(), data.len() as u64);
    for (offset, len) in [
        (0, 1),
        (1, 4096),
        (4095, 2),
        (4096, 8192),
        (5000, 7388),
        (0, 12388),
    ] {
        let mut buf = vec![0u8; len];
        r.read_exact_at(&mut buf, offset as u64).unwrap();
        assert_eq!(buf, data[offset..offset + len], "offset {offset} len {len}");
    }
    let mut buf = vec![0u8; 200];
    let err = r.read_exact_at(&mut buf, 12_300).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
}

#[test]
fn direct_reads_across_and_beyond_the_readahead_window() {
    let Some(dir) = direct_dir() else { return };
    let path = dir.path().join("f");
    let data = pattern(5 * (1 << 20) + 777);
    std::fs::write(&path, &data).unwrap();
    let r = OsFileSystem.open_read(&path, IoMode::Direct).unwrap();
    let window = READAHEAD_BYTES;
    let reads = [
        (0, 100),
        (100, 5000),                 // inside the window just filled
        (window - 10, 20),           // straddles the window's end
        (window + 5, 3 * (1 << 20)), // larger than a window
        (data.len() - 700, 700),     // the tail, shorter than a window
        (10, 10),                    // back to the start
    ];
    for (offset, len) in reads {
        let mut buf = vec![0u8; len];
        r.read_exact_at(&mut buf, offset as u64).unwrap();
        assert!(
            buf == data[offset..offset + len],
            "offset {offset} len {len}"
        );
    }
    let mut buf = vec![0u8; 800];
    let err = r
        .read_exact_at(&mut buf, data.len() as u64 - 700)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
    // A failed read leaves no stale window behind.
    r.read_exact_at(&mut buf, 4096).unwrap();
    assert!(buf == data[4096..4896]);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn direct_and_buffered_reads_agree(
        len in 1usize..40_000,
        reads in proptest::collection::vec((0usize..40_000, 0usize..9000), 1..20),
    ) {
        let Some(dir) = direct_dir() else { return Ok(()) };
        let path = dir.path().join("f");
        let data = pattern(len);
        std::fs::write(&path, &data).unwrap();
        let direct = OsFileSystem.open_read(&path, IoMode::Direct).unwrap();
        let buffered = OsFileSystem.open_read(&path, IoMode::Buffered).unwrap();
        for (offset, n) in reads {
            let (mut a, mut b) = (vec![0u8; n], vec![0u8; n]);
            let ra = direct.read_exact_at(&mut a, offset as u64).map_err(|e| e.kind());
            let rb = buffered.read_exact_at(&mut b, offset as u64).map_err(|e| e.kind());
            prop_assert_eq!(ra, rb);
            if ra.is_ok() {
                prop_assert_eq!(a, b);
            }
        }
    }
}

#[test]
fn faults_hit_the_chosen_operations_only() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let (sst, log) = (dir.path().join("1.sst"), dir.path().join("2.log"));
    fs.inject(
        Fault::fail(FaultOp::Write)
            .on_paths_containing(".sst")
            .after(2)
            .times(1),
    );
    let mut w = fs.create(&sst, IoMode::Buffered).unwrap();
    w.append(b"a").unwrap();
    w.append(b"b").unwrap();
    let err = w.append(b"c").unwrap_err();
    assert!(err.to_string().contains("injected fault: Write"), "{err}");
    assert!(err.to_string().contains("1.sst"), "{err}");
    w.append(b"d").unwrap();
    w.sync().unwrap();
    // Another file is not matched.
    let mut l = fs.create(&log, IoMode::Buffered).unwrap();
    for _ in 0..5 {
        l.append(b"x").unwrap();
    }
    assert_eq!(fs.injected(), 1);
    assert_eq!(std::fs::read(&sst).unwrap(), b"abd");

    fs.inject(Fault::fail(FaultOp::Sync));
    assert!(l.sync().is_err());
    fs.clear();
    l.sync().unwrap();
    assert_eq!(fs.injected(), 2);

    fs.inject(Fault::fail(FaultOp::Open).on_paths_containing("2.log"));
    assert!(fs.open_read(&log, IoMode::Buffered).is_err());
    assert!(fs.open_read(&sst, IoMode::Buffered).is_ok());
    fs.inject(Fault::fail(FaultOp::Remove));
    assert!(fs.remove(&sst).is_err());
    assert!(sst.exists());
}

#[test]
fn corrupted_reads_flip_one_byte_and_leave_the_file_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    let data = pattern(100);
    std::fs::write(&path, &data).unwrap();
    let fs = FaultInjectingFs::new(os_fs());
    let r = fs.open_read(&path, IoMode::Buffered).unwrap();
    fs.inject(Fault::corrupt_reads().times(1));
    let mut buf = vec![0u8; 100];
    r.read_exact_at(&mut buf, 0).unwrap();
    let differing: Vec<usize> = (0..100).filter(|&i| buf[i] != data[i]).collect();
    assert_eq!(differing, vec![50]);
    r.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(buf, data);
    assert_eq!(std::fs::read(&path).unwrap(), data);
}

#[test]
fn os_directory_operations_list_rename_sync_and_stat() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = OsFileSystem;
    let dir = tmp.path().join("a/b");
    fs.create_dir_all(&dir).unwrap();
    fs.create_dir_all(&dir).unwrap();
    assert!(fs.metadata(&dir).unwrap().is_dir);
    let mut w = fs.create(&dir.join("x"), IoMode::Buffered).unwrap();
    w.append(b"contents").unwrap();
    w.sync().unwrap();
    drop(w);
    fs.create(&dir.join("y"), IoMode::Buffered).unwrap();
    fs.sync_dir(&dir).unwrap();
    let mut names = fs.list_dir(&dir).unwrap();
    names.sort();
    assert_eq!(names, ["x", "y"]);
    // rename replaces the target atomically.
    fs.rename(&dir.join("x"), &dir.join("y")).unwrap();
    assert_eq!(fs.list_dir(&dir).unwrap(), ["y"]);
    assert_eq!(fs.read_prefix(&dir.join("y"), 100).unwrap(), b"contents");
    assert_eq!(fs.read_prefix(&dir.join("y"), 3).unwrap(), b"con");
    let meta = fs.metadata(&dir.join("y")).unwrap();
    assert_eq!((meta.len, meta.is_dir), (8, false));
    assert!(!fs.exists(&dir.join("x")).unwrap());
    assert_eq!(
        fs.metadata(&dir.join("x")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    assert_eq!(
        fs.list_dir(&tmp.path().join("none")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn os_locks_conflict_within_one_process() {
    let tmp = tempfile::tempdir().unwrap();
    let fs = OsFileSystem;
    let path = tmp.path().join("LOCK");
    assert_eq!(
        fs.lock(&path, LockMode::Shared).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    let held = fs.lock(&path, LockMode::Exclusive).unwrap();
    assert_eq!(
        fs.lock(&path, LockMode::Shared).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(held);
    let a = fs.lock(&path, LockMode::Shared).unwrap();
    let _b = fs.lock(&path, LockMode::Shared).unwrap();
    assert_eq!(
        fs.lock(&path, LockMode::Exclusive).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(a);
}

/// With `SLUICE_LOCK_CHILD` set to a path, this test is the child of
/// `os_locks_conflict_between_processes`: it locks the path, says so, and holds the lock
/// until its standard input closes.
#[test]
fn os_lock_child() {
    let Some(path) = std::env::var_os("SLUICE_LOCK_CHILD") else {
        return;
    };
    let _held = OsFileSystem
        .lock(Path::new(&path), LockMode::Exclusive)
        .unwrap();
    println!("locked");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new()).unwrap();
}

#[test]
fn os_locks_conflict_between_processes() {
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("LOCK");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fs::tests::os_lock_child", "--nocapture"])
        .env("SLUICE_LOCK_CHILD", &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("locked") {
        line.clear();
        assert_ne!(
            out.read_line(&mut line).unwrap(),
            0,
            "the child never locked"
        );
    }
    let fs = OsFileSystem;
    for mode in [LockMode::Exclusive, LockMode::Shared] {
        assert_eq!(
            fs.lock(&path, mode).unwrap_err().kind(),
            ErrorKind::WouldBlock
        );
    }
    // The child exits when its input closes, and its lock goes with it.
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    fs.lock(&path, LockMode::Exclusive).unwrap();
}

#[test]
fn faults_hit_renames_directory_syncs_and_listings() {
    let fs = FaultInjectingFs::new(Arc::new(MemFs::new()));
    fs.create_dir_all(Path::new("/d")).unwrap();
    fs.create(Path::new("/d/a"), IoMode::Buffered).unwrap();
    fs.inject(Fault::fail(FaultOp::Rename).times(1));
    fs.inject(Fault::fail(FaultOp::SyncDir).times(1));
    fs.inject(Fault::fail(FaultOp::List).times(1));
    assert!(fs.rename(Path::new("/d/a"), Path::new("/d/b")).is_err());
    assert!(fs.sync_dir(Path::new("/d")).is_err());
    assert!(fs.list_dir(Path::new("/d")).is_err());
    assert_eq!(fs.injected(), 3);
    fs.rename(Path::new("/d/a"), Path::new("/d/b")).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    assert_eq!(fs.list_dir(Path::new("/d")).unwrap(), ["b"]);
}
