//! `Db::destroy`: a closed database's files go, in every directory it used; an open one is
//! refused whole; files that are not Sluice's stay.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{Db, Error, KeyspaceOptions, Options};

fn options(data: &std::path::Path) -> Options {
    Options {
        data_dirs: vec![data.to_path_buf()],
        ..Options::default()
    }
}

/// A database with a keyspace, tables in a data directory, WALs and logs.
fn make(dir: &std::path::Path, options: &Options) {
    let db = Db::open(dir, options.clone()).unwrap();
    let users = db
        .create_keyspace("users", &KeyspaceOptions::of_default(options))
        .unwrap();
    for i in 0..1000u32 {
        db.put(format!("k{i}"), "v").unwrap();
        users.put(format!("u{i}"), "v").unwrap();
    }
    db.flush().unwrap();
    users.flush().unwrap();
    db.put("unflushed", "v").unwrap();
    db.close().unwrap();
}

fn count_files(dir: &std::path::Path) -> usize {
    walk(dir).len()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_closed_database_is_gone_from_every_directory_it_used() {
    let root = tempfile::tempdir().unwrap();
    let (dir, data) = (root.path().join("db"), root.path().join("data"));
    let options = options(&data);
    make(&dir, &options);
    assert!(count_files(&dir) > 5 && count_files(&data) > 0);
    Db::destroy(&dir, &options).unwrap();
    assert!(!dir.exists(), "{:?}", walk(&dir));
    assert!(!data.exists(), "{:?}", walk(&data));
    // Nothing left to destroy is not an error, and a new database can be made there.
    Db::destroy(&dir, &options).unwrap();
    let db = Db::open(&dir, options.clone()).unwrap();
    assert_eq!(db.get("k1").unwrap(), None);
}

#[test]
fn an_open_database_is_refused_and_kept() {
    let root = tempfile::tempdir().unwrap();
    let (dir, data) = (root.path().join("db"), root.path().join("data"));
    let options = options(&data);
    make(&dir, &options);
    let before = walk(&dir).len() + walk(&data).len();
    let db = Db::open(&dir, options.clone()).unwrap();
    let refused = Db::destroy(&dir, &options);
    assert!(matches!(refused, Err(Error::Busy(_))), "{refused:?}");
    assert_eq!(db.get("k1").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
    assert!(walk(&dir).len() + walk(&data).len() >= before);
}

#[test]
fn files_that_are_not_sluices_stay() {
    let root = tempfile::tempdir().unwrap();
    let (dir, data) = (root.path().join("db"), root.path().join("data"));
    let options = options(&data);
    make(&dir, &options);
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    Db::destroy(&dir, &options).unwrap();
    assert_eq!(walk(&dir), vec![dir.join("notes.txt")]);
    assert!(!data.exists());
}
