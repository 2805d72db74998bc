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
use sluice_object::{ObjectFs, list_objects};
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
    let scanned: BTreeMap<_, _> = db.scan(None, None).unwrap().map(|e| e.unwrap()).collect();
    assert_eq!(scanned, model);
    db.close().unwrap();

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
    let scanned: BTreeMap<_, _> = db.scan(None, None).unwrap().map(|e| e.unwrap()).collect();
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
