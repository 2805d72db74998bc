//! Secondary instances: a read-only open that follows a running primary through its
//! MANIFESTs and WALs, holding open every file its readers may still read.
//!
//! The long test runs the primary in another process (this test binary, re-run with
//! `SLUICE_SECONDARY_WRITER` set) writing a stream of batches that a seed decides, so the test
//! knows the primary's state after every batch and compares what the secondary reads at each
//! catch-up with it.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{contents, key, small};
use rand::{Rng, SeedableRng};
use sluice::{Db, Error, ErrorKind, KeyspaceOptions, Options, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat(40)).into_bytes()
}

fn secondary(primary: &Path, scratch: &Path) -> Db {
    Db::open_secondary(primary, scratch, small()).unwrap()
}

#[test]
fn follows_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    let mut model = Model::new();
    for i in 0..500 {
        primary.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    let follower = secondary(&path, &scratch);
    assert!(follower.is_secondary() && follower.is_read_only());
    assert_eq!(contents(&follower), model, "the open catches up once");
    for round in 1..6 {
        for i in (0..3000).step_by(round as usize) {
            primary.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        for i in (0..3000).step_by(7 * round as usize) {
            primary.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
        let stale = contents(&follower);
        assert_ne!(stale, model, "nothing moves until a catch-up");
        if round % 2 == 0 {
            primary.compact_range(None, None).unwrap();
        }
        let seq = follower.try_catch_up().unwrap();
        assert_eq!(seq, primary.snapshot().sequence());
        assert_eq!(contents(&follower), model, "round {round}");
        assert_eq!(follower.get(key(1)).unwrap(), model.get(&key(1)).cloned());
    }
    assert!(
        follower.put("k", "v").unwrap_err().kind() == ErrorKind::ReadOnly,
        "a secondary takes no writes"
    );
    assert_eq!(
        std::fs::read_dir(&scratch).unwrap().count(),
        1,
        "the scratch directory holds the secondary's LOG"
    );
}

/// An iterator made before the primary compacted its tables away, and deleted them, reads
/// them to its end: the secondary held them open.
#[test]
fn an_iterator_reads_files_the_primary_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    let mut model = Model::new();
    for i in 0..3000 {
        primary.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    primary.flush().unwrap();
    let follower = secondary(&path, &scratch);
    let before: Vec<_> = tables(&path);
    let mut old = follower.iter();
    let first = old.next().unwrap().unwrap();
    for i in 0..3000 {
        primary.put(key(i), value(i, 1)).unwrap();
    }
    primary.compact_range(None, None).unwrap();
    primary.wait_for_background_work().unwrap();
    let after = tables(&path);
    assert!(
        before.iter().all(|t| !after.contains(t)),
        "the compaction deleted every table the iterator reads: {before:?} {after:?}"
    );
    follower.try_catch_up().unwrap();
    let rest: Model = old.map(Result::unwrap).collect();
    let mut seen = rest;
    seen.insert(first.0, first.1);
    assert_eq!(
        seen, model,
        "the old iterator reads the state it was made with"
    );
    assert_eq!(
        follower.get(key(5)).unwrap(),
        Some(value(5, 1)),
        "new reads see the compaction's output"
    );
}

fn tables(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    names.sort();
    names
}

#[test]
fn follows_keyspaces_created_written_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    primary.put("a", "1").unwrap();
    let follower = secondary(&path, &scratch);
    assert_eq!(follower.keyspace_names(), vec!["default"]);

    let users = primary
        .create_keyspace("users", &KeyspaceOptions::of_default(&small()))
        .unwrap();
    let mut batch = WriteBatch::new();
    batch.put("b", "2");
    batch.put_in(&users, "alice", "x");
    primary.write(&WriteOptions::default(), batch).unwrap();
    for i in 0..2000 {
        users.put(key(i), value(i, 0)).unwrap();
    }
    users.flush().unwrap();
    users.put("late", "y").unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(follower.keyspace_names(), vec!["default", "users"]);
    let followed = follower.keyspace("users").unwrap();
    assert_eq!(followed.get("alice").unwrap(), Some(b"x".to_vec()));
    assert_eq!(followed.get("late").unwrap(), Some(b"y".to_vec()));
    assert_eq!(followed.get(key(7)).unwrap(), Some(value(7, 0)));
    assert_eq!(follower.get("b").unwrap(), Some(b"2".to_vec()));

    primary.drop_keyspace("users").unwrap();
    primary.put("c", "3").unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(follower.keyspace_names(), vec!["default"]);
    assert!(
        followed.get("alice").is_err(),
        "a dropped keyspace's handle fails"
    );
    assert_eq!(follower.get("c").unwrap(), Some(b"3".to_vec()));
}

/// The primary never sees a secondary's snapshots: one taken before a catch-up that installed
/// a compaction is refused, one taken after a catch-up of writes and flushes still reads.
#[test]
fn a_snapshot_is_refused_once_a_compaction_was_caught_up_with() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let mut options = small();
    // Only the compaction below: none may start on its own between the flushes.
    options.compaction.disable_auto_compactions = true;
    let primary = Db::open(&path, options).unwrap();
    primary.put("k", "old").unwrap();
    primary.flush().unwrap();
    let follower = secondary(&path, &scratch);
    let snapshot = follower.snapshot();
    primary.put("k", "newer").unwrap();
    primary.flush().unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(
        snapshot.get("k").unwrap(),
        Some(b"old".to_vec()),
        "a flush drops nothing"
    );
    primary.compact_range(None, None).unwrap();
    follower.try_catch_up().unwrap();
    let e = snapshot.get("k").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("take a new snapshot"), "{e}");
    assert_eq!(
        follower.snapshot().get("k").unwrap(),
        Some(b"newer".to_vec())
    );
}

/// A keyspace that never flushes keeps an old WAL boundary while the database's floor moves
/// past it and the WALs below the floor are deleted: catch-ups go on.
#[test]
fn an_idle_keyspace_does_not_hold_catch_ups_back() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    primary
        .create_keyspace("idle", &KeyspaceOptions::of_default(&small()))
        .unwrap();
    let follower = secondary(&path, &scratch);
    for round in 0..3 {
        primary.put("k", format!("{round}")).unwrap();
        primary.flush().unwrap();
        follower.try_catch_up().unwrap();
        assert_eq!(
            follower.get("k").unwrap(),
            Some(round.to_string().into_bytes())
        );
    }
}

/// An ingest the primary places without a sequence number (it had no snapshot to protect)
/// carries sequence number 0: a secondary's older snapshot must not read it.
#[test]
fn an_ingest_at_sequence_zero_is_not_read_by_an_older_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    primary.put("a", "1").unwrap();
    let follower = secondary(&path, &scratch);
    let snapshot = follower.snapshot();
    let file = dir.path().join("bulk.sst");
    let mut writer =
        sluice::SstFileWriter::create(&file, &sluice::TableOptions::default()).unwrap();
    writer.put(b"zzz", b"bulk").unwrap();
    writer.finish().unwrap();
    primary
        .ingest(&[file], &sluice::IngestOptions::default())
        .unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(follower.get("zzz").unwrap(), Some(b"bulk".to_vec()));
    match snapshot.get("zzz") {
        Err(Error::InvalidArgument(_)) | Ok(None) => {}
        other => panic!("an older snapshot read an ingest made after it: {other:?}"),
    }
}

/// The primary closes and opens again: it starts a new MANIFEST and WAL and deletes the old
/// ones, and the secondary follows it there.
#[test]
fn follows_a_primary_that_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let primary = Db::open(&path, small()).unwrap();
    primary.put("a", "1").unwrap();
    let follower = secondary(&path, &scratch);
    primary.put("b", "2").unwrap();
    primary.close().unwrap();
    let primary = Db::open(&path, small()).unwrap();
    primary.put("c", "3").unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(contents(&follower), contents(&primary));
    assert_eq!(follower.get("b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn bad_opens_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let e = Db::open_secondary(dir.path(), dir.path().join("s"), Options::default())
        .err()
        .unwrap();
    assert!(e.to_string().contains("holds no database"), "{e}");
    let path = dir.path().join("db");
    Db::open(&path, Options::default())
        .unwrap()
        .close()
        .unwrap();
    for inside in [path.clone(), path.join("follower"), path.join("../db/./x")] {
        let e = Db::open_secondary(&path, &inside, Options::default())
            .err()
            .unwrap();
        assert!(e.to_string().contains("directory of its own"), "{e}");
    }
    assert!(!path.join("follower").exists() && !path.join("x").exists());
    let plain = Db::open(&path, Options::default()).unwrap();
    assert!(plain.try_catch_up().is_err(), "only a secondary catches up");
}

// ---------------------------------------------------------------------------------------
// A primary in another process, followed for a while.

/// Keys the stream writes, in the default keyspace and in `side`.
const STREAM_KEYS: u32 = 2000;

fn stream_options() -> Options {
    Options {
        create_missing_keyspaces: true,
        keyspaces: BTreeMap::from([("side".to_string(), KeyspaceOptions::of_default(&small()))]),
        ..small()
    }
}

/// Batch `b` of the stream: what it writes to the default keyspace and to `side`
/// (`None`: a delete), and a range it deletes from the default keyspace.
struct StreamBatch {
    default: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    side: (Vec<u8>, Vec<u8>),
    delete_range: Option<(Vec<u8>, Vec<u8>)>,
}

fn stream_batch(b: u64) -> StreamBatch {
    let mut rng = rand::rngs::StdRng::seed_from_u64(b);
    let default = (0..4)
        .map(|_| {
            let k = rng.gen_range(0..STREAM_KEYS);
            let v = rng.gen_bool(0.8).then(|| value(k, b as u32));
            (key(k), v)
        })
        .collect();
    let side_key = rng.gen_range(0..STREAM_KEYS);
    let delete_range = (b % 97 == 96).then(|| {
        let from = rng.gen_range(0..STREAM_KEYS - 20);
        (key(from), key(from + 20))
    });
    StreamBatch {
        default,
        side: (key(side_key), value(side_key, b as u32)),
        delete_range,
    }
}

/// The marker every batch writes: the number of the last batch applied.
const MARKER: &[u8] = b"~batch";

fn apply(b: u64, default: &mut Model, side: &mut Model) {
    let batch = stream_batch(b);
    if let Some((from, to)) = &batch.delete_range {
        default.retain(|k, _| k < from || k >= to);
    }
    for (k, v) in batch.default {
        match v {
            Some(v) => default.insert(k, v),
            None => default.remove(&k),
        };
    }
    default.insert(MARKER.to_vec(), b.to_string().into_bytes());
    side.insert(batch.side.0, batch.side.1);
}

/// The writer: applies the stream until it is killed, a few batches per millisecond.
#[test]
fn secondary_writer_child() {
    let Ok(dir) = std::env::var("SLUICE_SECONDARY_WRITER") else {
        return;
    };
    let db = Db::open(&dir, stream_options()).unwrap();
    let side = db.keyspace("side").unwrap();
    for b in 0.. {
        let stream = stream_batch(b);
        let mut batch = WriteBatch::new();
        if let Some((from, to)) = &stream.delete_range {
            batch.delete_range(from, to);
        }
        for (k, v) in &stream.default {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        batch.put(MARKER, b.to_string());
        batch.put_in(&side, &stream.side.0, &stream.side.1);
        db.write(&WriteOptions::default(), batch).unwrap();
        if b == 0 {
            println!("ready");
        }
        if b % 8 == 7 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Follows a primary writing in another process for `SLUICE_SECONDARY_SECS` seconds (15 by
/// default: about 4,500 catch-ups over some 700 tables here; set it higher for a long run): at
/// every catch-up, both keyspaces read exactly the primary's state after the
/// batch the marker names, and an iterator made at the previous catch-up still reads that
/// one's state, whatever the flushes and compactions between deleted.
#[test]
fn follows_a_writer_in_another_process() {
    let secs: u64 = std::env::var("SLUICE_SECONDARY_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    let dir = tempfile::tempdir().unwrap();
    let (path, scratch) = (dir.path().join("db"), dir.path().join("scratch"));
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "secondary_writer_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SLUICE_SECONDARY_WRITER", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(
            std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0,
            "the writer exited"
        );
    }
    let follower = Db::open_secondary(&path, &scratch, stream_options()).unwrap();
    let side = || follower.keyspace("side").unwrap();
    let (mut default, mut side_model) = (Model::new(), Model::new());
    let mut applied: Option<u64> = None;
    let mut held: Option<(sluice::Range, sluice::Range, Model, Model)> = None;
    let (mut checks, mut last_seq) = (0u64, 0);
    // Tables the primary had at some catch-up, and catch-ups that installed a compaction
    // (a snapshot of the one before is refused).
    let mut tables_seen = std::collections::BTreeSet::new();
    let (mut compactions_seen, mut previous): (u64, Option<sluice::Snapshot>) = (0, None);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) {
        let seq = follower.try_catch_up().unwrap();
        assert!(seq >= last_seq, "catch-ups never go back");
        tables_seen.extend(tables(&path));
        if let Some(previous) = previous.take() {
            match previous.get(MARKER) {
                Ok(_) => {}
                Err(Error::InvalidArgument(_)) => compactions_seen += 1,
                Err(e) => panic!("{e}"),
            }
        }
        last_seq = seq;
        // Read through one snapshot: every read at the caught-up sequence number.
        let snapshot = follower.snapshot();
        assert_eq!(snapshot.sequence(), seq);
        let Some(marker) = snapshot.get(MARKER).unwrap() else {
            continue;
        };
        let b: u64 = String::from_utf8(marker).unwrap().parse().unwrap();
        assert!(applied.is_none_or(|a| a <= b), "the marker went back");
        let from = applied.map_or(0, |a| a + 1);
        for next in from..=b {
            apply(next, &mut default, &mut side_model);
        }
        applied = Some(b);
        let read: Model = snapshot.iter().map(Result::unwrap).collect();
        assert_eq!(
            read, default,
            "default keyspace after batch {b} (sequence {seq})"
        );
        let side_read: Model = side()
            .range_opt(&snapshot.read_options(), ..)
            .map(Result::unwrap)
            .collect();
        assert_eq!(side_read, side_model, "keyspace side after batch {b}");
        if let Some((it, side_it, want, side_want)) = held.take() {
            let got: Model = it.map(Result::unwrap).collect();
            assert_eq!(got, want, "an iterator of the previous catch-up");
            let side_got: Model = side_it.map(Result::unwrap).collect();
            assert_eq!(side_got, side_want);
        }
        held = Some((
            follower.iter(),
            side().iter(),
            default.clone(),
            side_model.clone(),
        ));
        previous = Some(snapshot);
        checks += 1;
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let b = applied.expect("the secondary saw the writer's batches");
    eprintln!(
        "{checks} catch-ups checked, {b} batches, {} tables seen, {compactions_seen} \
         catch-ups installed compactions",
        tables_seen.len()
    );
    assert!(checks >= 10 && b > 1000, "{checks} checks, {b} batches");
    assert!(
        tables_seen.len() >= 10 && compactions_seen >= 2,
        "the secondary followed flushes and compactions"
    );

    // The primary was killed: open it again (a new MANIFEST and WAL, the old ones deleted) and
    // follow it there.
    let primary = Db::open(&path, stream_options()).unwrap();
    follower.try_catch_up().unwrap();
    assert_eq!(contents(&follower), contents(&primary));
    let side_primary: Model = primary
        .keyspace("side")
        .unwrap()
        .iter()
        .map(Result::unwrap)
        .collect();
    let side_follower: Model = side().iter().map(Result::unwrap).collect();
    assert_eq!(side_follower, side_primary);
}
