//! Handles belong to the database open that made them: a keyspace handle, a batch entry added
//! through one, or a snapshot of another database (or of an earlier open of this one) is
//! refused, naming both, and nothing is written. Names in `Options::keyspaces` that the
//! database lacks fail the open unless it is told to create them.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::small;
use sluice::{Db, Error, KeyspaceOptions, Options, ReadOptions, WriteBatch, WriteOptions};

fn ks_options() -> KeyspaceOptions {
    KeyspaceOptions::of_default(&small())
}

/// The message of an `InvalidArgument`, or a failed test.
fn invalid_argument<T>(result: sluice::Result<T>) -> String {
    match result {
        Err(Error::InvalidArgument(m)) => m,
        Err(e) => panic!("expected InvalidArgument, got {e}"),
        Ok(_) => panic!("expected InvalidArgument, got Ok"),
    }
}

/// The message of a range that failed to open, whose only item is the error.
fn failed_range(mut range: sluice::Range) -> String {
    let message = invalid_argument(range.next().expect("a failed range yields its error"));
    assert!(range.next().is_none(), "nothing after the error");
    message
}

/// A keyspace's entries, in order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Everything in every keyspace of `db`, by keyspace name.
fn everything(db: &Db) -> BTreeMap<String, Entries> {
    db.keyspace_names()
        .into_iter()
        .map(|name| {
            let ks = db.keyspace(&name).unwrap();
            let all = ks.range(..).map(Result::unwrap);
            (name, all.collect())
        })
        .collect()
}

#[test]
fn a_batch_with_another_databases_keyspace_handle_writes_nothing() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db1 = Db::open(d1.path(), small()).unwrap();
    let db2 = Db::open(d2.path(), small()).unwrap();
    // The same ids in both: d1's `orders` is what d2's `users` id names in d1.
    let orders = db1.create_keyspace("orders", &ks_options()).unwrap();
    let users = db2.create_keyspace("users", &ks_options()).unwrap();
    assert_eq!(orders.id(), users.id());
    db1.put(b"k", b"before").unwrap();
    let before = everything(&db1);

    let mut batch = WriteBatch::new();
    batch.put(b"k", b"after");
    batch.put_in(&orders, b"o-1", b"ada");
    batch.put_in(&users, b"42", b"Ada");
    // Every kind of entry of a foreign handle counts alike.
    for add in [
        |b: &mut WriteBatch, ks: &sluice::Keyspace| b.delete_in(ks, b"42"),
        |b: &mut WriteBatch, ks: &sluice::Keyspace| b.merge_in(ks, b"42", b"+1"),
        |b: &mut WriteBatch, ks: &sluice::Keyspace| b.delete_range_in(ks, b"0", b"9"),
    ] {
        let mut one = WriteBatch::new();
        add(&mut one, &users);
        invalid_argument(db1.write(&WriteOptions::default(), one));
    }
    let message = invalid_argument(db1.write(&WriteOptions::default(), batch.clone()));
    let (p1, p2) = (d1.path().display(), d2.path().display());
    assert!(
        message.contains("keyspace \"users\"")
            && message.contains(&format!("belongs to the database in {p2}"))
            && message.contains(&format!("not to the database in {p1}")),
        "{message}"
    );
    assert_eq!(everything(&db1), before, "nothing of the batch was written");
    // The batch is fine where its handles belong... once its other entries are too.
    let mut theirs = WriteBatch::new();
    theirs.put_in(&users, b"42", b"Ada");
    db2.write(&WriteOptions::default(), theirs.clone()).unwrap();
    assert_eq!(users.get(b"42").unwrap(), Some(b"Ada".to_vec()));
    assert!(db1.write(&WriteOptions::default(), theirs).is_err());

    // The default keyspace's handle is a handle too: d2's does not write d1.
    let mut defaults = WriteBatch::new();
    defaults.put_in(&db2.keyspace("default").unwrap(), b"k", b"theirs");
    invalid_argument(db1.write(&WriteOptions::default(), defaults));
    // Appending carries the handles along; clearing forgets them.
    let mut appended = WriteBatch::new();
    appended.append(&batch);
    invalid_argument(db1.write(&WriteOptions::default(), appended.clone()));
    appended.clear();
    appended.put_in(&orders, b"o-2", b"alan");
    db1.write(&WriteOptions::default(), appended).unwrap();
    assert_eq!(orders.get(b"o-2").unwrap(), Some(b"alan".to_vec()));
    assert_eq!(db1.get(b"k").unwrap(), Some(b"before".to_vec()));
}

#[test]
fn a_handle_of_an_earlier_open_is_refused_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small()).unwrap();
    let old = db.create_keyspace("users", &ks_options()).unwrap();
    db.put(b"k", b"v").unwrap();
    let old_snapshot = db.snapshot();
    db.close().unwrap();
    let options = Options {
        keyspaces: [("users".to_string(), ks_options())].into(),
        ..small()
    };
    let db = Db::open(dir.path(), options).unwrap();
    let mut batch = WriteBatch::new();
    batch.put_in(&old, b"42", b"Ada");
    let message = invalid_argument(db.write(&WriteOptions::default(), batch));
    assert!(
        message.contains("another open of the database in"),
        "{message}"
    );
    let users = db.keyspace("users").unwrap();
    assert_eq!(users.get(b"42").unwrap(), None);
    let opts = ReadOptions {
        snapshot: Some(&old_snapshot),
        ..ReadOptions::default()
    };
    let message = invalid_argument(db.get_opt(&opts, b"k"));
    assert!(
        message.contains("another open of the database in"),
        "{message}"
    );
}

#[test]
fn a_snapshot_of_another_database_is_refused_by_every_read() {
    let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db1 = Db::open(d1.path(), small()).unwrap();
    let db2 = Db::open(d2.path(), small()).unwrap();
    for i in 0..50u32 {
        db2.put(i.to_be_bytes(), b"v").unwrap();
    }
    db1.put(b"k", b"v").unwrap();
    // d2's snapshot is at a sequence number d1 never published.
    let theirs = db2.snapshot();
    assert!(theirs.sequence() > db1.snapshot().sequence());
    let opts = ReadOptions {
        snapshot: Some(&theirs),
        ..ReadOptions::default()
    };
    let message = invalid_argument(db1.get_opt(&opts, b"k"));
    assert!(
        message.contains("a snapshot")
            && message.contains(&d2.path().display().to_string())
            && message.contains(&d1.path().display().to_string()),
        "{message}"
    );
    invalid_argument(db1.raw_iter(&opts));
    failed_range(db1.range_opt(&opts, ..));
    let all = db1.multi_get(&opts, [b"k", b"x"]);
    assert!(
        all.iter()
            .all(|r| matches!(r, Err(Error::InvalidArgument(_))))
    );
    let orders = db1.create_keyspace("orders", &ks_options()).unwrap();
    invalid_argument(orders.get_opt(&opts, b"k"));
    invalid_argument(orders.raw_iter(&opts));
    failed_range(orders.range_opt(&opts, ..));
    assert!(matches!(
        &orders.multi_get(&opts, [b"k"])[..],
        [Err(Error::InvalidArgument(_))]
    ));
    // A snapshot of d1 itself works in every keyspace of d1.
    let own = db1.snapshot();
    let opts = ReadOptions {
        snapshot: Some(&own),
        ..ReadOptions::default()
    };
    assert_eq!(db1.get_opt(&opts, b"k").unwrap(), Some(b"v".to_vec()));
    assert_eq!(orders.get_opt(&opts, b"k").unwrap(), None);
}

#[test]
fn unknown_names_in_options_keyspaces_fail_the_open() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        db.create_keyspace("users", &ks_options()).unwrap();
        db.close().unwrap();
    }
    let typo = || Options {
        keyspaces: [
            ("users".to_string(), ks_options()),
            ("userz".to_string(), ks_options()),
        ]
        .into(),
        ..small()
    };
    let message = invalid_argument(Db::open(dir.path(), typo()));
    assert!(
        message.contains("[\"userz\"]") && message.contains("it has default, users"),
        "{message}"
    );
    let message = invalid_argument(Db::open_read_only(dir.path(), typo()));
    assert!(message.contains("read-only"), "{message}");
    // Even told to create missing keyspaces, a read-only open creates nothing.
    let create = Options {
        create_missing_keyspaces: true,
        ..typo()
    };
    invalid_argument(Db::open_read_only(dir.path(), create.clone()));
    assert_eq!(
        Db::list_keyspaces(dir.path(), &*small().fs).unwrap(),
        ["default", "users"]
    );
    // "default" is not a keyspace Options::keyspaces may name.
    let default = Options {
        keyspaces: [("default".to_string(), ks_options())].into(),
        ..small()
    };
    let message = invalid_argument(Db::open(dir.path(), default));
    assert!(message.contains("the database's own keyspace"), "{message}");
    // A name no keyspace may have fails the open before any keyspace is created.
    let too_long = Options {
        keyspaces: [
            ("a".to_string(), ks_options()),
            ("z".repeat(300), ks_options()),
        ]
        .into(),
        create_missing_keyspaces: true,
        ..small()
    };
    invalid_argument(Db::open(dir.path(), too_long));
    assert_eq!(
        Db::list_keyspaces(dir.path(), &*small().fs).unwrap(),
        ["default", "users"]
    );
    // Told to, the open creates the missing one with its options.
    let counters = KeyspaceOptions {
        merge_operator: Some(Arc::new(sluice::merge_operator::U64Add)),
        ..ks_options()
    };
    let create = Options {
        keyspaces: [
            ("users".to_string(), ks_options()),
            ("counters".to_string(), counters),
        ]
        .into(),
        create_missing_keyspaces: true,
        ..small()
    };
    let db = Db::open(dir.path(), create.clone()).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "users", "counters"]);
    let c = db.keyspace("counters").unwrap();
    c.merge(b"hits", 2u64.to_le_bytes()).unwrap();
    c.merge(b"hits", 3u64.to_le_bytes()).unwrap();
    assert_eq!(c.get(b"hits").unwrap(), Some(5u64.to_le_bytes().to_vec()));
    db.close().unwrap();
    // Created once: the next open finds it.
    let db = Db::open(dir.path(), create).unwrap();
    assert_eq!(db.keyspace_names(), ["default", "users", "counters"]);
    let c = db.keyspace("counters").unwrap();
    assert_eq!(c.get(b"hits").unwrap(), Some(5u64.to_le_bytes().to_vec()));
}
