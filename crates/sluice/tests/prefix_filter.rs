//! Prefix bloom filters: a prefix scan skips the tables whose filter lacks its prefix, returns
//! exactly what a scan without filters returns, and never trusts a filter written with another
//! extractor.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use sluice::{CompactionOptions, Db, Options, PrefixExtractor, TableOptions};

/// Keys `user0042:item07`: the first 8 bytes are the user, the prefix.
fn key(user: u32, item: u32) -> Vec<u8> {
    format!("user{user:04}:item{item:02}").into_bytes()
}

fn options(extractor: Option<PrefixExtractor>) -> Options {
    Options {
        table: TableOptions {
            prefix_extractor: extractor,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// Four L0 tables over the same key range, table `t` holding the users `u % 4 == t`.
fn write(db: &Db) {
    for t in 0..4 {
        for user in (t..400).step_by(4) {
            for item in 0..5 {
                db.put(key(user, item), format!("{user}/{item}").as_bytes())
                    .unwrap();
            }
        }
        db.flush().unwrap();
    }
}

fn scan(db: &Db, prefix: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.prefix(prefix).map(Result::unwrap).collect()
}

#[test]
fn a_prefix_scan_reads_only_the_tables_that_may_hold_its_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let fixed = Some(PrefixExtractor::Fixed(8));
    let db = Db::open(dir.path(), options(fixed)).unwrap();
    write(&db);
    assert_eq!(db.metrics().levels[0].files, 4);
    let got = scan(&db, b"user0123");
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(k, _)| k.starts_with(b"user0123")));
    // Three of the four tables span user0123's keys but lack the user.
    let skipped = db.metrics().prefix_filter_skips;
    assert!(skipped >= 2, "{skipped} tables skipped");
    // A longer scan prefix still pins the 8-byte prefix; a shorter one cannot use it.
    assert_eq!(scan(&db, b"user0123:item0").len(), 5);
    let before = db.metrics().prefix_filter_skips;
    assert_eq!(scan(&db, b"user01").len(), 500);
    assert_eq!(db.metrics().prefix_filter_skips, before);
    // An absent prefix reads nothing at all.
    assert!(scan(&db, b"user9999").is_empty());
    // Reverse iteration sees the same keys.
    let mut back: Vec<_> = db.prefix(b"user0200").rev().map(Result::unwrap).collect();
    back.reverse();
    assert_eq!(back, scan(&db, b"user0200"));
    db.close().unwrap();

    // Reopened with another extractor, the old filters are not trusted; results agree.
    let db = Db::open(dir.path(), options(Some(PrefixExtractor::Capped(8)))).unwrap();
    assert_eq!(scan(&db, b"user0123"), got);
    assert_eq!(db.metrics().prefix_filter_skips, 0);
    // Once compaction rewrites the tables with it, they are.
    db.compact_range(None, None).unwrap();
    assert_eq!(scan(&db, b"user0123"), got);
    db.close().unwrap();

    let db = Db::open(dir.path(), options(None)).unwrap();
    assert_eq!(scan(&db, b"user0123"), got);
    assert_eq!(db.metrics().prefix_filter_skips, 0);
}

#[test]
fn a_zero_length_extractor_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let Err(err) = Db::open(dir.path(), options(Some(PrefixExtractor::Fixed(0)))) else {
        panic!("a zero-length prefix extractor was accepted");
    };
    assert!(err.to_string().contains("length 0"), "{err}");
}
