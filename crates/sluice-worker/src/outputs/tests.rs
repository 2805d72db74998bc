//! Tests of output numbering, publication and clean-up.

use std::path::Path;

use sluice_sst::properties::TableProperties;
use sluice_sst::table::TableSummary;

use super::*;

fn roots(dirs: &[&Path]) -> Vec<PathBuf> {
    dirs.iter()
        .map(|d| std::fs::canonicalize(d).unwrap())
        .collect()
}

fn block(first: u64, count: u32) -> OutputBlock {
    OutputBlock { first, count }
}

/// Allocates `n` outputs and writes each, as the executor would; returns what it reports.
fn write(set: &OutputSet, n: usize) -> Vec<OutputFile> {
    (0..n)
        .map(|_| {
            let (number, path) = set.allocate().unwrap();
            std::fs::write(&path, format!("table {number}")).unwrap();
            OutputFile {
                number,
                path,
                summary: TableSummary {
                    file_size: 9,
                    smallest_key: Vec::new(),
                    largest_key: Vec::new(),
                    properties: TableProperties::default(),
                    file_checksum: 0,
                    identity: Default::default(),
                },
            }
        })
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn numbers_come_in_order_dealt_over_the_roots_and_run_out() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r = roots(&[a.path(), b.path()]);
    let set = OutputSet::new(r.clone(), block(7, 3), None);
    assert_eq!(set.allocate().unwrap(), (7, r[0].join("000007.dbtmp")));
    assert_eq!(set.allocate().unwrap(), (8, r[1].join("000008.dbtmp")));
    assert_eq!(set.allocate().unwrap(), (9, r[0].join("000009.dbtmp")));
    let err = set.allocate().unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(
        err.to_string().contains("3 output numbers reserved from 7"),
        "{err}"
    );
}

#[test]
fn commit_renames_to_sst_and_reports_each_root() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let r = roots(&[a.path(), b.path()]);
    let set = OutputSet::new(r.clone(), block(1_000_000, 5), None);
    let files = write(&set, 3);
    assert_eq!(names(a.path()), vec!["1000000.dbtmp", "1000002.dbtmp"]);
    let published = set.commit(&files).unwrap();
    assert_eq!(names(a.path()), vec!["1000000.sst", "1000002.sst"]);
    assert_eq!(names(b.path()), vec!["1000001.sst"]);
    assert_eq!(
        published[1],
        Published {
            number: 1_000_001,
            name: "1000001.sst".into(),
            root: r[1].clone()
        }
    );
    // Published: nothing more is handed out.
    assert!(set.allocate().is_err());
}

#[test]
fn abandon_deletes_temporary_and_published_files_only() {
    let dir = tempfile::tempdir().unwrap();
    let r = roots(&[dir.path()]);
    std::fs::write(dir.path().join("000001.sst"), b"an input").unwrap();

    let set = OutputSet::new(r.clone(), block(10, 4), None);
    write(&set, 2);
    set.abandon();
    assert_eq!(names(dir.path()), vec!["000001.sst"]);
    assert!(matches!(set.allocate(), Err(Error::Cancelled)));
    set.abandon(); // idempotent

    let set = OutputSet::new(r, block(20, 4), None);
    let files = write(&set, 2);
    set.commit(&files).unwrap();
    set.abandon();
    assert_eq!(names(dir.path()), vec!["000001.sst"]);
}

#[test]
fn commit_refuses_to_overwrite_and_after_abandon() {
    let dir = tempfile::tempdir().unwrap();
    let r = roots(&[dir.path()]);
    let set = OutputSet::new(r.clone(), block(30, 2), None);
    let files = write(&set, 2);
    std::fs::write(dir.path().join("000031.sst"), b"not ours").unwrap();
    let err = set.commit(&files).unwrap_err();
    assert!(err.to_string().contains("000031.sst"), "{err}");
    set.abandon();
    // Ours are gone (the renamed 30 included); the file we did not write is kept.
    assert_eq!(names(dir.path()), vec!["000031.sst"]);

    let set = OutputSet::new(r, block(40, 2), None);
    let files = write(&set, 1);
    set.abandon();
    assert!(matches!(set.commit(&files), Err(Error::Cancelled)));
}

#[test]
fn commit_checks_the_executor_reported_what_was_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    let set = OutputSet::new(roots(&[dir.path()]), block(50, 3), None);
    let mut files = write(&set, 2);
    files.pop();
    assert!(set.commit(&files).is_err());
}

#[test]
fn objects_are_written_under_their_names_and_only_uploaded_ones_are_abandoned() {
    use sluice_sst::fs::{IoMode, MemFs};
    let bucket: Arc<dyn FileSystem> = Arc::new(MemFs::new());
    bucket.create_dir_all(Path::new("/db")).unwrap();
    let set = OutputSet::new(
        vec![PathBuf::from("/db")],
        block(60, 3),
        Some(Arc::clone(&bucket)),
    );
    let storage = set.storage(&Storage::default());
    // The executor writes its outputs under their final names, through the set's storage.
    let (n0, p0) = set.allocate().unwrap();
    assert_eq!(p0, Path::new("/db/000060.sst"));
    let mut f = storage.create(&p0).unwrap();
    f.append(b"ours").unwrap();
    f.sync().unwrap();
    // The next number's name is someone else's object; this set never uploads it.
    let (_, p1) = set.allocate().unwrap();
    let mut theirs = bucket.create(&p1, IoMode::Buffered).unwrap();
    theirs.append(b"theirs").unwrap();
    theirs.sync().unwrap();
    assert!(bucket.exists(&p0).unwrap());
    // Published as they are, no rename.
    let summary = |number, path: &Path| OutputFile {
        number,
        path: path.to_path_buf(),
        summary: TableSummary {
            file_size: 4,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            properties: TableProperties::default(),
            file_checksum: 0,
            identity: Default::default(),
        },
    };
    let published = set.commit(&[summary(n0, &p0), summary(61, &p1)]).unwrap();
    assert_eq!(published[0].name, "000060.sst");
    // Abandoned: what this set uploaded goes, the other object stays.
    set.abandon();
    assert!(!bucket.exists(&p0).unwrap());
    assert!(bucket.exists(&p1).unwrap());
    // An upload that lands after the abandon is deleted by the next one.
    let late = Path::new("/db/000062.sst");
    let mut f = storage.create(late).unwrap();
    f.append(b"late").unwrap();
    f.sync().unwrap();
    set.abandon();
    assert!(!bucket.exists(late).unwrap());
}
