//! Dynamic level sizing (`level_compaction_dynamic_level_bytes`) on a real database: L0
//! compacts straight into the last level of an empty tree, the base level moves up only as
//! the data grows, the levels above it stay empty, most bytes sit in the last level, turning
//! it on for a database written with static sizing moves its levels down at open, and through
//! all of it the data stays equal to a model.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::BTreeMap;
use std::path::Path;

mod common;

use sluice::{CompactionOptions, Db, Metrics, Options};

/// Small files and levels (`common::small`: L0 compacts at 2 sublevels, the base level holds
/// 256 KiB), each level four times the one above.
fn options(dynamic: bool) -> Options {
    let mut options = common::small();
    options.compaction.level_compaction_dynamic_level_bytes = dynamic;
    options.compaction.max_bytes_for_level_multiplier = 4;
    options
}

/// Writes `n` keys from the generator state `x` (a fifth of them overwrites) into `db` and
/// `model`.
fn write(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, x: &mut u64, n: usize) {
    for i in 0..n {
        *x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let k = format!("key{:08}", (*x >> 33) % (model.len() as u64 * 5 / 4 + 1000));
        let v = format!(
            "{i}-{:016x}{:016x}{}",
            *x,
            x.rotate_left(17),
            "v".repeat(60)
        );
        db.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
}

fn assert_matches(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let got: BTreeMap<Vec<u8>, Vec<u8>> = db.iter().map(|e| e.unwrap()).collect();
    assert!(&got == model, "database differs from the model");
    for (k, v) in model.iter().step_by(61) {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(&v[..]));
    }
}

/// Levels below L0 that hold tables.
fn non_empty(m: &Metrics) -> Vec<usize> {
    m.levels
        .iter()
        .filter(|l| l.level > 0 && l.files > 0)
        .map(|l| l.level)
        .collect()
}

/// The invariant: nothing above the base level, and nothing between it and the last level
/// that is empty.
fn assert_shape(m: &Metrics) {
    let levels = non_empty(m);
    if let Some(&first) = levels.first() {
        assert!(
            m.base_level <= first,
            "base L{} above {levels:?}",
            m.base_level
        );
        assert_eq!(levels, (first..7).collect::<Vec<_>>(), "{m:?}");
    }
}

fn open(dir: &Path, dynamic: bool) -> Db {
    Db::open(dir, options(dynamic)).unwrap()
}

#[test]
fn data_goes_to_the_last_level_and_the_base_level_moves_up_as_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), true);
    let (mut model, mut x) = (BTreeMap::new(), 7u64);
    assert_eq!(
        db.metrics().base_level,
        6,
        "an empty tree's base level is the last"
    );
    // A few flushes: the first L0 compaction writes into L6, not L1.
    write(&db, &mut model, &mut x, 3000);
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let m = db.metrics();
    assert!(
        m.levels[6].compactions > 0 && m.levels[6].files > 0,
        "{m:?}"
    );
    assert_eq!(non_empty(&m), vec![6], "{m:?}");
    // Grow the tree to a few MiB: the base level moves up, a level at a time.
    let mut bases = vec![m.base_level];
    for _ in 0..12 {
        write(&db, &mut model, &mut x, 4000);
        db.wait_for_background_work().unwrap();
        let m = db.metrics();
        assert_shape(&m);
        bases.push(m.base_level);
    }
    assert_matches(&db, &model);
    let m = db.metrics();
    assert!(m.base_level < 6, "bases {bases:?}");
    assert!(bases.windows(2).all(|w| w[1] <= w[0]), "{bases:?}");
    // L1..L4 took no compaction unless they were the base level at some point.
    for level in 1..m.base_level {
        assert_eq!(m.levels[level].compactions, 0, "L{level}: {m:?}");
    }
    // Most of the data is in the last level.
    let below_l0: u64 = m.levels[1..].iter().map(|l| l.size_bytes).sum();
    assert!(
        m.levels[6].size_bytes * 10 >= below_l0 * 6,
        "L6 holds {} of {below_l0}",
        m.levels[6].size_bytes
    );
    // The targets: none below max_bytes_for_level_base, none above the base level.
    for l in &m.levels[1..] {
        match l.level < m.base_level {
            true => assert_eq!(l.target_bytes, 0),
            false => assert!(l.target_bytes >= 256 << 10, "{l:?}"),
        }
    }
    db.close().unwrap();
    // Static sizing reads the same tree.
    let db = open(dir.path(), false);
    assert_matches(&db, &model);
    assert_eq!(db.metrics().base_level, 1);
}

#[test]
fn turning_it_on_moves_the_levels_down_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (mut model, mut x) = (BTreeMap::new(), 11u64);
    let db = open(dir.path(), false);
    for _ in 0..10 {
        write(&db, &mut model, &mut x, 4000);
        db.wait_for_background_work().unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background_work().unwrap();
    let before = non_empty(&db.metrics());
    assert!(before.len() >= 2 && before[0] == 1, "{before:?}");
    db.close().unwrap();

    // A read-only open changes nothing.
    let read_only = Db::open_read_only(dir.path(), options(true)).unwrap();
    assert_eq!(non_empty(&read_only.metrics()), before);
    assert_matches(&read_only, &model);
    drop(read_only);

    let db = Db::open(
        dir.path(),
        Options {
            compaction: CompactionOptions {
                disable_auto_compactions: true,
                ..options(true).compaction
            },
            ..options(true)
        },
    )
    .unwrap();
    let m = db.metrics();
    let after = non_empty(&m);
    let shift = 6 - before.last().unwrap();
    assert_eq!(
        after,
        before.iter().map(|l| l + shift).collect::<Vec<_>>(),
        "{m:?}"
    );
    assert_shape(&m);
    assert_matches(&db, &model);
    db.close().unwrap();

    // The move is in the MANIFEST, and compactions go on from the new shape.
    let db = open(dir.path(), true);
    assert_eq!(non_empty(&db.metrics()), after);
    write(&db, &mut model, &mut x, 8000);
    db.wait_for_background_work().unwrap();
    assert_shape(&db.metrics());
    assert_matches(&db, &model);
}

#[test]
fn a_manual_compaction_of_an_empty_tree_writes_into_the_last_level() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(true);
    opts.compaction.disable_auto_compactions = true;
    let db = Db::open(dir.path(), opts).unwrap();
    let (mut model, mut x) = (BTreeMap::new(), 3u64);
    write(&db, &mut model, &mut x, 3000);
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert_eq!(non_empty(&m), vec![6], "{m:?}");
    assert_eq!(m.levels[0].files, 0);
    assert_matches(&db, &model);
    // A second round merges into L6 again.
    write(&db, &mut model, &mut x, 3000);
    db.compact_range(None, None).unwrap();
    assert_eq!(non_empty(&db.metrics()), vec![6]);
    assert_matches(&db, &model);
}
