use super::*;
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
    assert!(compact.engine.compaction.count >= 1, "{compact:?}");
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
        db.scan(None, None)
            .unwrap()
            .collect::<Result<Vec<_>>>()
            .unwrap()
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
