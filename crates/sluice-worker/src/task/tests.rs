//! Tests of task checking: every rule of the module comment, one bad field at a time.

use proptest::prelude::*;
use sluice_rpc::convert::table_format;
use sluice_rpc::envelope::{open, seal};
use sluice_rpc::proto::{self, ExecutorMode, MessageKind, Origin};
use sluice_sst::key::{ValueKind, make_internal_key};
use tonic::Code;

use super::*;

fn file(number: u64) -> proto::FileRef {
    proto::FileRef {
        name: format!("{number:06}.sst"),
        number,
        level: 1,
        size: 0,
        smallest: Vec::new(),
        largest: Vec::new(),
    }
}

fn good() -> proto::CompactionTask {
    proto::CompactionTask {
        job_id: 9,
        runs: vec![
            proto::InputRun {
                files: vec![file(5)],
            },
            proto::InputRun {
                files: vec![file(3), file(4)],
            },
        ],
        lower: Some(b"a".to_vec()),
        upper: Some(b"m".to_vec()),
        snapshots: vec![3, 7, 7],
        bottommost: true,
        format: Some(table_format(&TableOptions::default())),
        target_file_size: 2 << 20,
        grandparents: vec![proto::GrandparentFile {
            smallest: make_internal_key(b"a", 5, ValueKind::Value),
            largest: make_internal_key(b"c", 5, ValueKind::Value),
            size: 100,
        }],
        max_grandparent_overlap_bytes: 1 << 30,
        mode: ExecutorMode::Decide as i32,
        sub_task_bytes: 0,
        queue_depth: 0,
        compute_threads: 0,
        log_drops: false,
        first_output_number: 100,
        output_numbers: 4,
        output_root: None,
        database: String::new(),
        merge_operator: String::new(),
        compaction_filter: String::new(),
        range_tombstones: Vec::new(),
        keyspace: 0,
        task_nonce: 0x1234_5678,
        fence: Some(proto::WriteFence {
            epoch: 7,
            e_tag: Some("\"etag\"".to_string()),
        }),
    }
}

fn refused(t: &proto::CompactionTask, word: &str) {
    let err = CheckedTask::from_wire(t).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains(word), "{word:?} not in {err}");
}

#[test]
fn a_good_task_passes_with_defaults_filled_in() {
    let t = CheckedTask::from_wire(&good()).unwrap();
    assert_eq!(t.job_id, 9);
    assert_eq!(t.runs.len(), 2);
    assert_eq!(
        t.inputs().map(|i| i.number).collect::<Vec<_>>(),
        vec![5, 3, 4]
    );
    assert_eq!(t.mode, None);
    assert_eq!(t.sub_task_bytes, ExecOptions::DEFAULT_SUB_TASK_BYTES);
    assert_eq!(t.queue_depth, ExecOptions::DEFAULT_QUEUE_DEPTH);
    assert_eq!(t.compute_threads, None);
    assert_eq!(
        t.outputs,
        OutputBlock {
            first: 100,
            count: 4
        }
    );
    assert!(t.outputs.contains(100) && t.outputs.contains(103));
    assert!(!t.outputs.contains(99) && !t.outputs.contains(104));
    let fence = t.fence.as_ref().unwrap();
    assert_eq!((fence.epoch, fence.e_tag.as_deref()), (7, Some("\"etag\"")));
    let mut unfenced = good();
    unfenced.fence = None;
    assert_eq!(CheckedTask::from_wire(&unfenced).unwrap().fence, None);

    let mut fixed = good();
    fixed.mode = ExecutorMode::Streaming as i32;
    fixed.compute_threads = 3;
    fixed.queue_depth = 2;
    fixed.sub_task_bytes = 4096;
    let t = CheckedTask::from_wire(&fixed).unwrap();
    assert_eq!(t.mode, Some(CompactionMode::Streaming));
    assert_eq!(
        (t.compute_threads, t.queue_depth, t.sub_task_bytes),
        (Some(3), 2, 4096)
    );
}

#[test]
fn bad_names_are_refused_naming_the_file() {
    for (name, word) in [
        ("../x.sst", "../x.sst"),
        ("/etc/passwd", "/etc/passwd"),
        ("", "empty"),
        ("MANIFEST-000001", "not a table name"),
        ("x.sst", "not a table name"),
        ("000006.sst", "number 6"),
        ("00000+5.sst", "not a table name"),
    ] {
        let mut t = good();
        t.runs[0].files[0].name = name.to_string();
        refused(&t, word);
    }
}

/// A change to one field of a good task.
type Edit = dyn Fn(&mut proto::CompactionTask);

#[test]
fn each_bad_field_is_refused() {
    let cases: Vec<(&str, Box<Edit>)> = vec![
        ("no input runs", Box::new(|t| t.runs.clear())),
        (
            "unknown merge operator \"max\"",
            Box::new(|t| t.merge_operator = "max".into()),
        ),
        (
            "unknown compaction filter \"ttl(5)+mine\"",
            Box::new(|t| t.compaction_filter = "ttl(5)+mine".into()),
        ),
        (
            "database name",
            Box::new(|t| t.database = "../other".into()),
        ),
        ("run 1 is empty", Box::new(|t| t.runs[1].files.clear())),
        ("level 7", Box::new(|t| t.runs[0].files[0].level = 7)),
        ("twice", Box::new(|t| t.runs[1].files[1] = file(5))),
        ("lower bound", Box::new(|t| t.upper = Some(b"a".to_vec()))),
        ("snapshots", Box::new(|t| t.snapshots = vec![7, 3])),
        ("no table format", Box::new(|t| t.format = None)),
        (
            "compression",
            Box::new(|t| {
                if let Some(f) = t.format.as_mut() {
                    f.compression = 77;
                }
            }),
        ),
        ("target file size", Box::new(|t| t.target_file_size = 0)),
        ("executor mode", Box::new(|t| t.mode = 0)),
        ("executor mode", Box::new(|t| t.mode = 99)),
        ("queue depth", Box::new(|t| t.queue_depth = 100_000)),
        ("compute threads", Box::new(|t| t.compute_threads = 100_000)),
        ("no output numbers", Box::new(|t| t.output_numbers = 0)),
        (
            "overflow",
            Box::new(|t| t.first_output_number = u64::MAX - 1),
        ),
        (
            "inside the reserved",
            Box::new(|t| t.first_output_number = 2),
        ),
        (
            "shorter than a trailer",
            Box::new(|t| t.grandparents[0].largest = b"c".to_vec()),
        ),
        (
            "out of order",
            Box::new(|t| {
                let g = t.grandparents[0].clone();
                t.grandparents.push(g);
            }),
        ),
    ];
    for (word, edit) in cases {
        let mut t = good();
        edit(&mut t);
        refused(&t, word);
    }
    // Bounds: one side alone is fine.
    let mut t = good();
    t.upper = None;
    assert!(CheckedTask::from_wire(&t).is_ok());
    // A built-in merge operator is found by its name.
    t.merge_operator = "append(2c)".into();
    let checked = CheckedTask::from_wire(&t).unwrap();
    assert_eq!(
        checked
            .merge_operator
            .map(|op| op.name().to_string())
            .as_deref(),
        Some("append(2c)")
    );
    // So is the TTL's filter, which carries its cutoff in its name.
    t.compaction_filter = "ttl(1700000000)".into();
    let checked = CheckedTask::from_wire(&t).unwrap();
    assert_eq!(
        checked.filter.map(|f| f.name().to_string()).as_deref(),
        Some("ttl(1700000000)")
    );
}

proptest! {
    /// Random payloads (with a matching checksum) either fail to decode, fail the checks, or
    /// give a task that satisfies the module's invariants; nothing panics.
    #[test]
    fn random_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..400)) {
        let env = proto::Envelope {
            version: sluice_rpc::PROTOCOL_VERSION,
            kind: MessageKind::CompactionTask as i32,
            origin: Origin::Host as i32,
            payload_crc32c: crc32c::crc32c(&payload),
            payload: payload.into(),
        };
        if let Ok(task) = open::<proto::CompactionTask>(&env, MessageKind::CompactionTask)
            && let Ok(t) = CheckedTask::from_wire(&task)
        {
            prop_assert!(t.outputs.count >= 1);
            prop_assert!(t.inputs().all(|i| !t.outputs.contains(i.number)));
        }
    }

    /// Mutating one field of a good task at random never panics the checker.
    #[test]
    fn mutated_tasks_never_panic(
        job in any::<u64>(),
        level in any::<u32>(),
        first in any::<u64>(),
        count in any::<u32>(),
        mode in any::<i32>(),
        name in "[0-9a-z./]{0,12}",
        lower in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..4)),
    ) {
        let mut t = good();
        t.job_id = job;
        t.runs[0].files[0].level = level;
        t.runs[1].files[0].name = name;
        t.first_output_number = first;
        t.output_numbers = count;
        t.mode = mode;
        t.lower = lower;
        let sealed = seal(MessageKind::CompactionTask, Origin::Host, &t);
        let back: proto::CompactionTask = open(&sealed, MessageKind::CompactionTask).unwrap();
        let _ = CheckedTask::from_wire(&back);
    }
}
