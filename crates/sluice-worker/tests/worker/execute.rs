//! Tasks that succeed: the worker's outputs against a local run, several roots, decisions.

use sluice_exec::CompactionMode;
use sluice_rpc::convert::mode_to_wire;
use sluice_rpc::proto::ExecutorMode;

use crate::harness::{Worker, names, root};
use crate::inputs::{all_entries, local, standard, table, task};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outputs_are_the_bytes_a_local_run_writes() {
    let (_d, dir) = root();
    let runs = standard(&[&dir]);
    let inputs = names(&dir);
    let worker = Worker::start(&[&dir], &["--threads", "2"]);
    let mut first = 100;
    let mut published = 0;
    let mut drop_log = None;
    for mode in CompactionMode::ALL {
        let sent = task(&runs, mode_to_wire(Some(mode)), first, 1000);
        let result = worker.execute(&sent).await.unwrap();
        let (_o, out) = root();
        let expected = local(&runs, mode, &out);

        assert_eq!(result.job_id, 77);
        assert_eq!(result.mode, mode_to_wire(Some(mode)) as i32, "{mode}");
        assert!(result.decision.is_none());
        assert!(result.files.len() > 1, "{mode}: want several outputs");
        assert_eq!(result.files.len(), expected.files.len(), "{mode}");
        for (i, (got, want)) in result.files.iter().zip(&expected.files).enumerate() {
            let number = first + i as u64;
            assert_eq!(got.number, number);
            assert_eq!(got.name, format!("{number:06}.sst"));
            let bytes = std::fs::read(dir.join(&got.name)).unwrap();
            assert_eq!(
                bytes,
                std::fs::read(&want.path).unwrap(),
                "{mode}: output {i}"
            );
            assert_eq!(got.size, bytes.len() as u64);
            assert_eq!(got.file_crc32c, crc32c::crc32c(&bytes));
            assert_eq!(got.entries, want.summary.properties.num_entries);
            assert_eq!(got.smallest, want.summary.smallest_key);
            assert_eq!(got.largest, want.summary.largest_key);
        }
        let profile = result.profile.unwrap();
        assert_eq!(profile.step_nanos.len(), 7);
        assert_eq!(profile.entries_out, expected.profile.entries_out);
        let stats = result.stats.unwrap();
        assert_eq!(stats.entries_in, expected.stats.entries_in);
        assert_eq!(stats.tombstones_dropped, expected.stats.tombstones_dropped);
        assert!(!result.stages.is_empty());
        // The drop log: every drop, in key order, the same bytes whichever executor ran.
        assert_eq!(result.drop_log, expected.drops.as_bytes(), "{mode}");
        assert_eq!(expected.drops.records(), expected.stats.dropped().entries);
        assert!(
            expected.drops.records() > 0,
            "{mode}: the inputs shadow nothing?"
        );
        let reference = drop_log.get_or_insert_with(|| result.drop_log.clone());
        assert_eq!(
            &result.drop_log, reference,
            "{mode}: another executor's log differs"
        );
        published += result.files.len();
        first += 1000;
    }
    // Only inputs and published tables: no temporary file is left.
    assert!(
        names(&dir).iter().all(|n| n.ends_with(".sst")),
        "{:?}",
        names(&dir)
    );
    assert_eq!(names(&dir).len(), inputs.len() + published);
    let m = worker.metrics().await;
    assert_eq!((m.tasks_ok, m.tasks_failed), (4, 0));
    assert_eq!(
        m.input_bytes,
        4 * runs.iter().flatten().map(|t| t.file_size()).sum::<u64>()
    );
    assert!(m.output_bytes > 0);
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_roots_hold_inputs_and_take_outputs_in_turn() {
    let ((_a, a), (_b, b)) = (root(), root());
    let runs = standard(&[&a, &b]);
    let worker = Worker::start(&[&a, &b], &["--mode", "pipelined"]);
    let result = worker
        .execute(&task(&runs, ExecutorMode::Decide, 500, 1000))
        .await
        .unwrap();
    // The worker's fixed --mode answers a task that lets it decide, with no decision made.
    assert_eq!(result.mode, ExecutorMode::Pipelined as i32);
    assert!(result.decision.is_none());
    assert!(result.files.len() > 2);
    let mut paths = Vec::new();
    for (i, f) in result.files.iter().enumerate() {
        let (here, other) = if i % 2 == 0 { (&a, &b) } else { (&b, &a) };
        assert!(here.join(&f.name).is_file(), "output {i} not in its root");
        assert!(!other.join(&f.name).exists());
        paths.push(here.join(&f.name));
    }
    let (_o, out) = root();
    let expected = local(&runs, CompactionMode::Pipelined, &out);
    let expected_paths: Vec<_> = expected.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(all_entries(&paths), all_entries(&expected_paths));
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_root_takes_every_output_and_others_are_refused() {
    let ((_a, a), (_b, b), (_o, outside)) = (root(), root(), root());
    let runs = standard(&[&a, &b]);
    let worker = Worker::start(&[&a, &b], &[]);
    // Partitioned mode: every output goes to the range owner's directory, here the second.
    let mut t = task(&runs, ExecutorMode::Sequential, 500, 1000);
    t.output_root = Some(b.to_str().unwrap().to_string());
    let before_a = names(&a);
    let result = worker.execute(&t).await.unwrap();
    assert!(result.files.len() > 1);
    for f in &result.files {
        assert!(
            b.join(&f.name).is_file(),
            "{} not in the output root",
            f.name
        );
    }
    assert_eq!(names(&a), before_a, "nothing written to the other root");
    // A directory the worker was not started with is refused, and nothing is written.
    t.output_root = Some(outside.to_str().unwrap().to_string());
    t.first_output_number = 2000;
    let e = worker.execute(&t).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("output root"), "{}", e.message());
    assert!(names(&outside).is_empty());
    assert!(worker.terminate().success());
}

/// A task fenced by its host's claim on a bucket is for a worker that writes into that bucket:
/// one that reads directories refuses it, before it writes anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_fenced_by_a_bucket_is_refused_by_a_worker_of_directories() {
    let (_d, dir) = root();
    let runs = standard(&[&dir]);
    let worker = Worker::start(&[&dir], &[]);
    let mut t = task(&runs, ExecutorMode::Sequential, 500, 1000);
    t.fence = Some(sluice_rpc::proto::WriteFence {
        epoch: 3,
        e_tag: None,
    });
    let before = names(&dir);
    let e = worker.execute(&t).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
    assert!(e.message().contains("--object-store"), "{}", e.message());
    assert_eq!(names(&dir), before);
    assert!(worker.terminate().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_decision_component_picks_sequential_for_large_values() {
    let (_d, dir) = root();
    // 20 KiB values: above the worker's 16 KiB, so nearly every entry is large.
    let large = vec![
        vec![table(&dir, 1, (0..60).step_by(2), 20, 20 << 10)],
        vec![table(&dir, 2, 0..60, 10, 20 << 10)],
    ];
    let small = vec![
        vec![table(&dir, 3, (0..3000).step_by(2), 20, 100)],
        vec![table(&dir, 4, 0..3000, 10, 100)],
    ];
    let worker = Worker::start(&[&dir], &[]);
    let r = worker
        .execute(&task(&large, ExecutorMode::Decide, 100, 1000))
        .await
        .unwrap();
    assert_eq!(r.mode, ExecutorMode::Sequential as i32);
    let d = r.decision.unwrap();
    assert!(d.large_value_share > 0.9, "{d:?}");
    assert!(d.f >= 0.7 && d.reason.contains("sequential"), "{d:?}");

    let r = worker
        .execute(&task(&small, ExecutorMode::Decide, 2000, 1000))
        .await
        .unwrap();
    assert_eq!(r.mode, ExecutorMode::Pipelined as i32);
    let d = r.decision.unwrap();
    assert_eq!(d.large_value_share, 0.0);
    assert!(d.reason.contains("pipelined"), "{d:?}");

    // A task naming its executor gets it, and no decision is counted.
    let r = worker
        .execute(&task(&large, ExecutorMode::Parallel, 4000, 1000))
        .await
        .unwrap();
    assert_eq!(r.mode, ExecutorMode::Parallel as i32);
    assert!(r.decision.is_none());

    let m = worker.metrics().await;
    assert_eq!((m.pipelined_decisions, m.sequential_decisions), (1, 1));
    assert_eq!(worker.log().matches("worker decision").count(), 2);
    assert!(worker.terminate().success());
}

/// Issue 19, finding 4: a worker serving several databases resolved every input name in its
/// first root, so a task of one database could read another's files of the same name and size.
/// Named roots keep each database's tasks in its own directories.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_database_is_served_from_its_own_roots() {
    use sluice_sst::key::{ValueKind, make_internal_key};
    use sluice_sst::table::{Table, TableBuilder, TableOptions, TableReadOptions};
    // The same file names, sizes and key ranges in every database; only the values differ.
    let write = |dir: &std::path::Path, number: u64, fill: u8| {
        let path = dir.join(format!("{number:06}.sst"));
        let opts = TableOptions {
            compression: sluice_sst::compression::CompressionType::None,
            block_size: 512,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&path, &opts).unwrap();
        for k in (0..2000u32).step_by(number as usize) {
            let key = make_internal_key(
                format!("key{k:06}").as_bytes(),
                100 / number,
                ValueKind::Value,
            );
            b.add(&key, &[fill; 40]).unwrap();
        }
        b.finish().unwrap();
        Table::open(&path, number, TableReadOptions::default()).unwrap()
    };
    let dbs: Vec<_> = (0..3).map(|_| root()).collect();
    let runs: Vec<Vec<Vec<std::sync::Arc<Table>>>> = dbs
        .iter()
        .enumerate()
        .map(|(i, (_, dir))| {
            vec![
                vec![write(dir, 1, b'a' + i as u8)],
                vec![write(dir, 2, b'x' + i as u8)],
            ]
        })
        .collect();
    let sizes: Vec<u64> = runs.iter().map(|r| r[0][0].file_size()).collect();
    assert!(sizes.iter().all(|&s| s == sizes[0]), "{sizes:?}");
    let roots: Vec<String> = dbs
        .iter()
        .enumerate()
        .flat_map(|(i, (_, dir))| ["--root".to_string(), format!("db{i}={}", dir.display())])
        .collect();
    let worker = Worker::start(&[], &roots.iter().map(String::as_str).collect::<Vec<_>>());
    for (i, (_, dir)) in dbs.iter().enumerate().rev() {
        let mut sent = task(
            &runs[i],
            ExecutorMode::Sequential,
            100 * (i as u64 + 1),
            100,
        );
        sent.database = format!("db{i}");
        let result = worker.execute(&sent).await.unwrap();
        let (_o, out) = root();
        let expected = local(&runs[i], CompactionMode::Sequential, &out);
        assert_eq!(result.files.len(), expected.files.len());
        for (got, want) in result.files.iter().zip(&expected.files) {
            assert_eq!(
                std::fs::read(dir.join(&got.name)).unwrap(),
                std::fs::read(&want.path).unwrap(),
                "db{i} was compacted from its own files, into its own directory"
            );
        }
    }
    // A database the worker does not serve, and the unnamed one it does not serve either.
    for name in ["db9", ""] {
        let mut sent = task(&runs[0], ExecutorMode::Sequential, 900, 100);
        sent.database = name.to_string();
        let e = worker.execute(&sent).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{name:?}");
        assert!(
            e.message().contains("serves no database"),
            "{}",
            e.message()
        );
    }
    assert!(worker.terminate().success());
}
