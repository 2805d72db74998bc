//! The calls as fjall and rust-rocksdb users write them compile and mean what they say: keys
//! and values as anything that is bytes, `range(..)`, `iter()` as a Rust iterator, reads
//! through a snapshot, and user traits without `Debug`.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;

use sluice::merge_operator::MergeFailure;
use sluice::{
    CompactionFilter, Db, Error, EventListener, FilterDecision, KeyspaceOptions, MergeOperator,
    Options, WriteBatch,
};

fn open(dir: &tempfile::TempDir) -> Db {
    Db::open(dir.path(), Options::default()).unwrap()
}

/// Every pair of `entries`, unwrapped, with keys and values as text.
fn text(
    entries: impl Iterator<Item = sluice::Result<(Vec<u8>, Vec<u8>)>>,
) -> Vec<(String, String)> {
    entries
        .map(|e| {
            let (k, v) = e.unwrap();
            (String::from_utf8(k).unwrap(), String::from_utf8(v).unwrap())
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn keys_and_values_are_anything_that_is_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    db.put("a", "1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.put(vec![b'c'], String::from("3")).unwrap();
    db.put([b'd'], &[b'4'][..]).unwrap();
    assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(String::from("c")).unwrap(), Some(b"3".to_vec()));
    db.delete("d").unwrap();
    db.delete_range("b", "c").unwrap();
    let mut batch = WriteBatch::new();
    batch.put("e", "5");
    batch.delete(String::from("a"));
    db.write(&Default::default(), batch).unwrap();
    assert_eq!(text(db.iter()), pairs(&[("c", "3"), ("e", "5")]));
}

#[test]
fn every_range_form_reads_what_btreemap_would() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    for k in ["a", "b", "c", "d"] {
        db.put(k, k.to_uppercase()).unwrap();
    }
    let keys = |r: sluice::Range| -> String { text(r).into_iter().map(|(k, _)| k).collect() };
    assert_eq!(keys(db.range(..)), "abcd");
    assert_eq!(keys(db.range("b".."d")), "bc");
    assert_eq!(keys(db.range("b"..="d")), "bcd");
    assert_eq!(keys(db.range(b"c".to_vec()..)), "cd");
    assert_eq!(keys(db.range(.."b")), "a");
    assert_eq!(keys(db.range(..="b")), "ab");
    assert_eq!(keys(db.range("c".."a")), "", "an inverted range is empty");
    assert_eq!(keys(db.prefix("c")), "c");
    let backwards: String = db.iter().rev().map(|e| e.unwrap().0[0] as char).collect();
    assert_eq!(backwards, "dcba");
    let mut n = 0;
    for kv in db.iter() {
        let (_key, _value) = kv.unwrap();
        n += 1;
    }
    assert_eq!(n, 4);
}

#[test]
fn a_snapshot_reads_its_keyspace_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let users = db
        .create_keyspace("users", &KeyspaceOptions::default())
        .unwrap();
    db.put("k", "old").unwrap();
    users.put("u1", "ada").unwrap();
    let snapshot = db.snapshot();
    let in_users = users.snapshot();
    db.put("k", "new").unwrap();
    db.put("k2", "later").unwrap();
    users.put("u1", "grace").unwrap();
    users.put("u2", "alan").unwrap();
    db.flush().unwrap();
    users.flush().unwrap();

    assert_eq!(snapshot.get("k").unwrap(), Some(b"old".to_vec()));
    assert_eq!(snapshot.get("k2").unwrap(), None);
    assert_eq!(text(snapshot.iter()), pairs(&[("k", "old")]));
    assert_eq!(text(snapshot.range("k"..)), pairs(&[("k", "old")]));
    assert_eq!(text(snapshot.prefix("k")), pairs(&[("k", "old")]));
    assert_eq!(in_users.get("u1").unwrap(), Some(b"ada".to_vec()));
    assert_eq!(text(in_users.iter()), pairs(&[("u1", "ada")]));
    // One point in time across keyspaces: the default snapshot reads `users` too.
    let at = snapshot.read_options();
    assert_eq!(users.get_opt(&at, "u2").unwrap(), None);
    assert_eq!(db.get("k").unwrap(), Some(b"new".to_vec()));
}

#[test]
fn a_failure_to_open_a_range_is_its_only_item() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir);
    let gone = db
        .create_keyspace("gone", &KeyspaceOptions::default())
        .unwrap();
    gone.put("x", "1").unwrap();
    let snapshot = gone.snapshot();
    db.drop_keyspace("gone").unwrap();
    for mut range in [
        gone.iter(),
        gone.range("a"..),
        gone.prefix("x"),
        snapshot.iter(),
    ] {
        assert!(
            matches!(range.next(), Some(Err(Error::InvalidArgument(m))) if m.contains("dropped"))
        );
        assert!(range.next().is_none());
    }
    assert!(matches!(snapshot.get("x"), Err(Error::InvalidArgument(_))));
}

/// A merge operator, compaction filter and listener with no `Debug`: an application's types
/// need none.
struct Concat;
impl MergeOperator for Concat {
    fn name(&self) -> &str {
        "concat"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, MergeFailure> {
        let mut out = existing.unwrap_or_default().to_vec();
        operands.iter().for_each(|o| out.extend_from_slice(o));
        Ok(out)
    }
}
struct KeepAll;
impl CompactionFilter for KeepAll {
    fn name(&self) -> &str {
        "keep-all"
    }
    fn filter(&self, _key: &[u8], _value: &[u8]) -> FilterDecision {
        FilterDecision::Keep
    }
}
struct Quiet;
impl EventListener for Quiet {}

#[test]
fn user_traits_need_no_debug() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        merge_operator: Some(Arc::new(Concat)),
        compaction_filter: Some(Arc::new(KeepAll)),
        listeners: vec![Arc::new(Quiet)],
        ..Options::default()
    };
    let shown = format!("{options:?}");
    assert!(shown.contains("MergeOperator(\"concat\")"), "{shown}");
    assert!(shown.contains("CompactionFilter(\"keep-all\")"), "{shown}");
    let db = Db::open(dir.path(), options).unwrap();
    db.merge("k", "a").unwrap();
    db.merge("k", "b").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get("k").unwrap(), Some(b"ab".to_vec()));
}

#[test]
fn an_operand_the_operator_refuses_is_refused_at_write_time() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        merge_operator: Some(Arc::new(sluice::merge_operator::U64Add)),
        ..Options::default()
    };
    let db = Db::open(dir.path(), options).unwrap();
    db.merge("n", 1u64.to_le_bytes()).unwrap();
    let refused = |result: sluice::Result<()>| match result {
        Err(Error::InvalidArgument(m)) => {
            assert!(m.contains("u64_add") && m.contains("key n"), "{m}")
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    refused(db.merge("n", "seven"));
    let mut batch = WriteBatch::new();
    batch.put("other", "x");
    batch.merge("n", [1u8, 2]);
    refused(db.write(&Default::default(), batch));
    let mut txn = db.transaction();
    refused(txn.merge("n", ""));
    txn.merge("n", 2u64.to_le_bytes()).unwrap();
    txn.commit().unwrap();
    assert_eq!(
        db.get("other").unwrap(),
        None,
        "the refused batch wrote nothing"
    );
    assert_eq!(db.get("n").unwrap(), Some(3u64.to_le_bytes().to_vec()));
}

#[test]
fn databases_share_one_block_cache_without_mixing_their_blocks() {
    let cache = Arc::new(sluice::BlockCache::new(8 << 20));
    let options = Options {
        block_cache: Some(Arc::clone(&cache)),
        ..Options::default()
    };
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    // The same keys, file numbers and block offsets in both: only the values differ.
    let dbs: Vec<Db> = dirs
        .iter()
        .enumerate()
        .map(|(n, dir)| {
            let db = Db::open(dir.path(), options.clone()).unwrap();
            for i in 0..2000u32 {
                db.put(format!("key{i:05}"), format!("db{n}-{i:0100}"))
                    .unwrap();
            }
            db.flush().unwrap();
            db
        })
        .collect();
    for _ in 0..2 {
        for (n, db) in dbs.iter().enumerate() {
            for i in (0..2000u32).step_by(7) {
                let want = format!("db{n}-{i:0100}").into_bytes();
                assert_eq!(db.get(format!("key{i:05}")).unwrap(), Some(want));
            }
        }
    }
    assert!(cache.hits() > 0 && cache.usage_bytes() > 0);
    let m = dbs[0].metrics();
    assert_eq!(
        m.block_cache_bytes,
        cache.usage_bytes() as u64,
        "the shared cache's figure"
    );
}
