//! The MANIFEST records the merge operator a tree's operands were written for, and an open
//! with another one, or none, is refused with the name to use.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;

use sluice::merge_operator::{Append, U64Add};
use sluice::{Db, Error, KeyspaceOptions, MergeOperator, Options};

fn with(operator: Option<Arc<dyn MergeOperator>>) -> Options {
    Options {
        merge_operator: operator,
        ..Options::default()
    }
}

fn refusal(result: sluice::Result<Db>) -> String {
    match result {
        Err(Error::InvalidArgument(m)) => m,
        Err(e) => panic!("expected InvalidArgument, got {e}"),
        Ok(_) => panic!("the open was not refused"),
    }
}

#[test]
fn an_open_must_name_the_operator_the_operands_were_written_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, with(Some(Arc::new(U64Add)))).unwrap();
    db.merge("hits", 5u64.to_le_bytes()).unwrap();
    db.close().unwrap();
    let fs = sluice::fs::os_fs();
    assert_eq!(
        Db::list_merge_operators(&path, &*fs).unwrap(),
        vec![("default".to_string(), Some("u64_add".to_string()))]
    );

    let m = refusal(Db::open(&path, with(None)));
    assert!(m.contains(r#"builtin("u64_add")"#), "{m}");
    let m = refusal(Db::open_read_only(&path, with(None)));
    assert!(m.contains("u64_add"), "{m}");
    let m = refusal(Db::open(&path, with(Some(Arc::new(Append::new())))));
    assert!(m.contains(r#"not "append""#), "{m}");
    let scratch = dir.path().join("follower");
    let m = refusal(Db::open_secondary(&path, &scratch, with(None)));
    assert!(m.contains("u64_add"), "{m}");

    let db = Db::open(&path, with(Some(Arc::new(U64Add)))).unwrap();
    assert_eq!(db.get("hits").unwrap(), Some(5u64.to_le_bytes().to_vec()));
    db.close().unwrap();
    // The record survives a repair, which writes a new MANIFEST; repair combines no operands,
    // so it needs no operator, but refuses another one.
    sluice::repair(&path, with(Some(Arc::new(U64Add)))).unwrap();
    assert!(refusal(Db::open(&path, with(None))).contains("u64_add"));
    sluice::repair(&path, with(None)).unwrap();
    assert!(refusal(Db::open(&path, with(None))).contains("u64_add"));
    let e = sluice::repair(&path, with(Some(Arc::new(Append::new())))).unwrap_err();
    assert!(e.to_string().contains(r#"not "append""#), "{e}");
}

#[test]
fn a_database_without_a_record_takes_the_first_operator_it_is_opened_with() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    Db::open(&path, with(None)).unwrap().close().unwrap();
    // A read-only open records nothing.
    Db::open_read_only(&path, with(Some(Arc::new(Append::new()))))
        .unwrap()
        .close()
        .unwrap();
    Db::open(&path, with(None)).unwrap().close().unwrap();
    Db::open(&path, with(Some(Arc::new(U64Add))))
        .unwrap()
        .close()
        .unwrap();
    assert!(refusal(Db::open(&path, with(None))).contains("u64_add"));
}

#[test]
fn each_keyspace_records_its_own_operator() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, with(None)).unwrap();
    let counters = KeyspaceOptions {
        merge_operator: Some(Arc::new(U64Add)),
        ..KeyspaceOptions::default()
    };
    db.create_keyspace("counters", &counters)
        .unwrap()
        .merge("n", 1u64.to_le_bytes())
        .unwrap();
    db.close().unwrap();
    let fs = sluice::fs::os_fs();
    assert_eq!(
        Db::list_merge_operators(&path, &*fs).unwrap(),
        vec![
            ("default".to_string(), None),
            ("counters".to_string(), Some("u64_add".to_string()))
        ]
    );
    let mut options = with(None);
    options
        .keyspaces
        .insert("counters".into(), KeyspaceOptions::default());
    let m = refusal(Db::open(&path, options.clone()));
    assert!(
        m.contains(r#"keyspace "counters""#) && m.contains("KeyspaceOptions::merge_operator"),
        "{m}"
    );
    options.keyspaces.insert("counters".into(), counters);
    let db = Db::open(&path, options).unwrap();
    let n = db.keyspace("counters").unwrap().get("n").unwrap();
    assert_eq!(n, Some(1u64.to_le_bytes().to_vec()));
}
