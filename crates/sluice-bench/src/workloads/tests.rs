use super::*;
use crate::report::BenchResult;
use sluice::{CompactionOptions, MemtableOptions, Options};

fn small_options() -> Options {
    Options {
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn config(benchmarks: &[Benchmark], num: u64, threads: usize) -> BenchConfig {
    BenchConfig {
        benchmarks: benchmarks.to_vec(),
        num,
        reads: num,
        threads,
        ..BenchConfig::default()
    }
}

#[test]
fn shares_cover_the_range_exactly() {
    for threads in 1..=7 {
        let mut next = 0;
        for t in 0..threads {
            let (lo, hi) = share(1000, threads, t);
            assert_eq!(lo, next);
            assert!(hi >= lo);
            next = hi;
        }
        assert_eq!(next, 1000);
    }
    assert_eq!(share(u64::MAX, 3, 2).1, u64::MAX);
}

#[test]
fn fillseq_then_reads_find_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    use Benchmark::*;
    let c = config(
        &[FillSeq, ReadRandom, ReadSeq, SeekRandom, Compact],
        3000,
        2,
    );
    let mut streamed = Vec::new();
    let results = run_benchmarks(&c, &db, &mut |r| streamed.push(r.name.clone())).unwrap();
    assert_eq!(
        streamed,
        ["fillseq", "readrandom", "readseq", "seekrandom", "compact"]
    );

    let fill = &results[0];
    assert_eq!(fill.ops, 3000);
    assert_eq!(fill.bytes, 3000 * (16 + 100));
    assert_eq!(fill.engine.user_bytes, 3000 * (16 + 100));
    assert!(
        fill.engine.disk_bytes_written >= fill.engine.user_bytes,
        "{fill:?}"
    );
    assert!(fill.engine.write_amp.is_some());
    assert!(fill.latency_us.p50 > 0.0);
    assert_eq!(fill.found, None);
    assert!(
        fill.wait_seconds >= 0.0 && fill.wait_seconds <= fill.seconds,
        "{fill:?}"
    );

    let read = &results[1];
    assert_eq!((read.ops, read.found), (3000, Some(3000)));
    assert_eq!(read.engine.write_amp, None);
    assert_eq!(
        results[2].ops, 3000,
        "readseq reads every entry once across threads"
    );
    assert_eq!(results[2].bytes, 3000 * 116);
    assert_eq!(results[3].found, Some(3000));

    let compact = &results[4];
    assert_eq!(compact.ops, 1);
    assert_eq!(compact.wait_seconds, 0.0, "only fills wait");
    // Sequential fills make tables that do not overlap: a background compaction may already
    // have merged them, and what is left may go down by trivial moves alone.
    let moved = compact.engine.compaction.count + compact.engine.trivial_moves;
    assert!(moved >= 1, "{compact:?}");
    assert_eq!(compact.bytes, compact.engine.compaction.input_bytes);
    let m = db.metrics();
    let nonempty: Vec<usize> = m
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| l.level)
        .collect();
    assert_eq!(nonempty.len(), 1, "compact leaves one level: {nonempty:?}");
}

#[test]
fn fillrandom_leaves_gaps_that_reads_report() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    use Benchmark::*;
    let c = config(&[FillRandom, ReadRandom, Overwrite], 2000, 1);
    let results = run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    let found = results[1].found.unwrap();
    // Uniform draws with repeats cover about 1 - 1/e of the key space.
    assert!((1000..1500).contains(&found), "found {found}");
    assert_eq!(results[2].ops, 2000);
}

#[test]
fn same_seed_writes_the_same_data() {
    let run = |seed| {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let c = BenchConfig {
            seed,
            ..config(&[Benchmark::FillRandom], 500, 1)
        };
        run_benchmarks(&c, &db, &mut |_| {}).unwrap();
        db.iter().collect::<Result<Vec<_>>>().unwrap()
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn invalid_config_is_rejected_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let c = BenchConfig {
        key_size: 2,
        ..config(&[Benchmark::FillSeq], 1000, 1)
    };
    let err = run_benchmarks(&c, &db, &mut |_| panic!("nothing should run")).unwrap_err();
    assert!(err.to_string().contains("key_size"), "{err}");
    assert_eq!(db.metrics().user_bytes_written, 0);
}

#[test]
fn deleterange_takes_the_middle_tenth_out_of_reads_and_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    use Benchmark::*;
    let c = config(&[FillSeq, DeleteRange, ReadSeq, Compact, ReadSeq], 3000, 1);
    let results = run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    assert_eq!(results[1].name, "deleterange");
    assert_eq!(results[1].ops, 1);
    assert_eq!(deleted_range(3000), 1350..1650);
    // The scan sees the other 90%, before and after compaction drops the rest.
    assert_eq!(results[2].ops, 2700);
    assert_eq!(results[4].ops, 2700);
    assert!(results[3].engine.compaction.count >= 1);
    assert_eq!(db.metrics().compaction.range_covered, 300);
}

/// Runs `c` with `w` on `db`, uninterrupted.
fn run_with(c: &BenchConfig, w: &WorkloadOptions, db: &Db) -> Result<Vec<BenchResult>> {
    run_benchmarks_with(c, w, db, &Arc::new(AtomicBool::new(false)), &mut |_| {})
}

/// Every key and value of `db`.
fn contents(db: &Db) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter().collect::<Result<_>>().unwrap()
}

#[test]
fn deleterandom_deletes_exactly_the_keys_its_streams_draw() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let (num, threads) = (2000, 2);
    let c = config(&[Benchmark::FillSeq, Benchmark::DeleteRandom], num, threads);
    let results = run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    let delete = &results[1];
    assert_eq!((delete.name.as_str(), delete.ops), ("deleterandom", num));
    assert_eq!(delete.bytes, num * 16, "a delete moves its key");
    assert_eq!((delete.found, delete.writes), (None, None));
    // Thread t draws its share of `num` keys from its stream at position 1.
    let keys = KeyFormat::new(16, num).unwrap();
    let mut deleted = std::collections::BTreeSet::new();
    for t in 0..threads {
        let mut stream = crate::stream::SplitMix64::for_benchmark(c.seed, 1, t as u64);
        let (first, end) = share(num, threads, t);
        deleted.extend((first..end).map(|_| keys.key(stream.below(num))));
    }
    let left = contents(&db);
    assert_eq!(left.len() as u64, num - deleted.len() as u64);
    assert!(left.keys().all(|k| !deleted.contains(k)));
    // Uniform draws with repeats delete about 1 - 1/e of the keys.
    assert!((600..900).contains(&left.len()), "{} left", left.len());
}

#[test]
fn updaterandom_rewrites_the_keys_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let num = 2000;
    let c = config(&[Benchmark::FillSeq], num, 1);
    run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    let before = contents(&db);
    // Position 0 of its own run: the value buffer first, then a key and a value per update.
    let c = config(&[Benchmark::UpdateRandom], num, 1);
    let results = run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    let update = &results[0];
    assert_eq!(update.ops, num);
    assert_eq!((update.found, update.writes), (Some(num), Some(num)));
    assert_eq!(
        update.bytes,
        num * 2 * 116,
        "each update reads and writes an entry"
    );
    assert_eq!(update.engine.user_bytes, num * 116);

    let keys = KeyFormat::new(16, num).unwrap();
    let mut expected = before.clone();
    let mut stream = crate::stream::SplitMix64::for_benchmark(c.seed, 0, 0);
    let mut values = crate::values::ValueGenerator::from_stream(&mut stream, 100);
    for _ in 0..num {
        let key = keys.key(stream.below(num));
        expected.insert(key, values.generate(100).to_vec());
    }
    let after = contents(&db);
    assert!(
        after == expected,
        "database differs from the updates' prediction"
    );
    let changed = after.iter().filter(|(k, v)| before[*k] != **v).count();
    assert!((1000..1500).contains(&changed), "{changed} values changed");
}

#[test]
fn randomtransaction_moves_pairs_of_keys_atomically_in_both_modes() {
    use Benchmark::*;
    for transaction in [
        sluice::Concurrency::Optimistic,
        sluice::Concurrency::Pessimistic,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path(), small_options()).unwrap();
        let num = 500;
        let workload = WorkloadOptions {
            transaction,
            ..WorkloadOptions::default()
        };
        let c = BenchConfig {
            reads: 2000,
            ..config(&[FillSeq, RandomTransaction], num, 2)
        };
        let results = run_with(&c, &workload, &db).unwrap();
        let txn = &results[1];
        assert_eq!(txn.name, "randomtransaction");
        assert_eq!(txn.ops, 2000);
        assert_eq!(
            (txn.found, txn.writes),
            (Some(4000), Some(4000)),
            "{transaction:?}"
        );
        assert!(txn.conflicts.is_some());
        // Each transaction reads two entries and writes two (116 bytes each), however often
        // it ran again.
        assert_eq!(txn.bytes, 2000 * 4 * 116);
        assert_eq!(
            txn.engine.user_bytes,
            2000 * 2 * 116,
            "a conflict wrote nothing"
        );
        assert_eq!(contents(&db).len(), num as usize, "no key made or lost");
    }
    assert_eq!("txn".parse::<Benchmark>(), Ok(RandomTransaction));
}

#[test]
fn readrandomwriterandom_reads_its_percent_and_writes_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let num = 1000;
    use Benchmark::*;
    let c = BenchConfig {
        reads: 2000,
        ..config(&[FillSeq, ReadRandomWriteRandom], num, 2)
    };
    let results = run_with(&c, &WorkloadOptions::default(), &db).unwrap();
    let mixed = &results[1];
    assert_eq!(mixed.ops, 2000);
    // Each thread's 1000 operations are ten rounds of 90 gets, then 10 puts; every key exists.
    assert_eq!((mixed.found, mixed.writes), (Some(1800), Some(200)));
    assert_eq!(mixed.engine.user_bytes, 200 * 116);
    assert_eq!(mixed.bytes, 2000 * 116);
    assert_eq!(mixed.options.read_write_percent, 90);

    let writes_only = WorkloadOptions {
        read_write_percent: 0,
        ..WorkloadOptions::default()
    };
    let c = BenchConfig {
        benchmarks: vec![ReadRandomWriteRandom],
        ..c
    };
    let results = run_with(&c, &writes_only, &db).unwrap();
    assert_eq!((results[0].found, results[0].writes), (Some(0), Some(2000)));
    assert_eq!(results[0].engine.user_bytes, 2000 * 116);
}

#[test]
fn readwhilewriting_reports_the_readers_and_counts_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let num = 2000;
    use Benchmark::*;
    // Two readers, and the writer db_bench adds.
    let c = config(&[FillSeq, ReadWhileWriting], num, 2);
    let results = run_benchmarks(&c, &db, &mut |_| {}).unwrap();
    let r = &results[1];
    assert_eq!((r.name.as_str(), r.threads), ("readwhilewriting", 3));
    // The two readers share the reads; overwrites never remove a key.
    assert_eq!((r.ops, r.found), (num, Some(num)));
    assert_eq!(r.bytes, num * 116, "bytes are the readers'");
    assert_eq!(r.per_second.iter().sum::<u64>(), num);
    let writes = r.writes.unwrap();
    assert!(writes >= 1, "the writer wrote");
    assert_eq!(r.engine.user_bytes, writes * 116, "only the writer wrote");
    assert_eq!(contents(&db).len() as u64, num);
    // Each thread's part: the writer's puts (thread 0), then the readers' shares of the reads.
    let parts: Vec<(u64, u64)> = r.per_thread.iter().map(|t| (t.ops, t.writes)).collect();
    assert_eq!(parts, [(0, writes), (num / 2, 0), (num / 2, 0)]);
    assert!(r.per_thread[1].latency_us.p50 > 0.0);

    // One client thread: one reader and the writer.
    let one = run_benchmark(
        &config(&[ReadWhileWriting], num, 1),
        &db,
        ReadWhileWriting,
        0,
    )
    .unwrap();
    assert_eq!((one.threads, one.ops), (2, num));
    assert!(one.writes.unwrap() >= 1);
}

#[test]
fn seek_nexts_reads_the_entries_after_each_seek() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let num: u64 = 3000;
    run_benchmarks(&config(&[Benchmark::FillSeq], num, 1), &db, &mut |_| {}).unwrap();
    // Both runs seek to the same keys: the same seed and position 0.
    let c = config(&[Benchmark::SeekRandom], num, 1);
    let plain = run_with(&c, &WorkloadOptions::default(), &db).unwrap();
    assert_eq!((plain[0].bytes, plain[0].found), (num * 116, Some(num)));
    let nexts = WorkloadOptions {
        seek_nexts: 4,
        ..WorkloadOptions::default()
    };
    let scans = run_with(&c, &nexts, &db).unwrap();
    assert_eq!((scans[0].ops, scans[0].found), (num, Some(num)));
    assert_eq!(scans[0].options.seek_nexts, 4);
    // A seek to key k reads it and the (at most 4) keys after it.
    let mut stream = crate::stream::SplitMix64::for_benchmark(c.seed, 0, 0);
    let entries: u64 = (0..num)
        .map(|_| 1 + 4.min(num - 1 - stream.below(num)))
        .sum();
    assert_eq!(scans[0].bytes, entries * 116);
    assert!(entries > 4 * num, "{entries}");
}

#[test]
fn duration_ends_a_benchmark_before_its_operations_are_done() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    let num = 1000;
    use Benchmark::*;
    run_benchmarks(&config(&[FillSeq], num, 1), &db, &mut |_| {}).unwrap();
    // More reads than any machine does in a second: only the time limit can end readrandom.
    let c = BenchConfig {
        reads: 1 << 40,
        ..config(&[ReadRandom, ReadSeq], num, 2)
    };
    let w = WorkloadOptions {
        duration: Some(std::time::Duration::from_secs(1)),
        ..WorkloadOptions::default()
    };
    let results = run_with(&c, &w, &db).unwrap();
    let read = &results[0];
    assert!(read.ops > 0 && read.ops < c.reads, "{} ops", read.ops);
    assert_eq!(read.found, Some(read.ops));
    assert!(!read.stopped, "a time limit is not an interruption");
    assert_eq!(read.options.duration_seconds, 1.0);
    // The next benchmark runs, with its own limit.
    assert_eq!(results[1].ops, num);
}

#[test]
fn keys_spread_over_keyspaces_are_written_and_found_round_robin() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), small_options()).unwrap();
    use Benchmark::*;
    let c = config(&[FillSeq, ReadRandom, Compact], 3000, 2);
    let spread = WorkloadOptions {
        keyspaces: 3,
        ..WorkloadOptions::default()
    };
    let results = run_with(&c, &spread, &db).unwrap();
    assert_eq!(
        results[1].found,
        Some(3000),
        "every key found in its keyspace"
    );
    assert_eq!(db.keyspace_names(), ["default", "bench-1", "bench-2"]);
    let keys = KeyFormat::new(c.key_size, c.num).unwrap();
    for (i, name) in ["default", "bench-1", "bench-2"].into_iter().enumerate() {
        let ks = db.keyspace(name).unwrap();
        let held = ks.range(..).map(Result::unwrap).count();
        assert_eq!(held, 1000, "{name}");
        assert!(ks.get(keys.key(i as u64)).unwrap().is_some(), "{name}");
    }
    let seek = BenchConfig {
        benchmarks: vec![SeekRandom],
        ..c
    };
    let refused = run_with(&seek, &spread, &db).unwrap_err();
    assert!(refused.to_string().contains("--keyspaces"), "{refused}");
}
