//! Event listeners as a program uses them: registered in `Options::listeners`, told of every
//! step of a flush and a compaction, of the files they create and delete, of write stalls
//! and of a failed flush.

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice::events::{
    BackgroundErrorInfo, CompactionInfo, EventListener, FileKind, FlushInfo, StallCondition,
    StallInfo, TableFileInfo,
};
use sluice::fs::{Fault, FaultInjectingFs, FaultOp, os_fs};
use sluice::{CompactionOptions, Db, MemtableOptions, Options};

/// Every event, in the order it came.
#[derive(Debug, Default)]
struct Recorder {
    events: Mutex<Vec<Event>>,
    /// Each flush waits this long first, so writers catch up with it.
    slow_flush: Option<Duration>,
}

#[derive(Clone, Debug)]
enum Event {
    FlushBegin(FlushInfo),
    FlushCompleted(FlushInfo),
    CompactionBegin(CompactionInfo),
    CompactionCompleted(CompactionInfo),
    Created(TableFileInfo),
    Deleted(TableFileInfo),
    Stall(StallInfo),
    Error(BackgroundErrorInfo),
}

impl EventListener for Recorder {
    fn on_flush_begin(&self, info: &FlushInfo) {
        self.events.lock().push(Event::FlushBegin(info.clone()));
        if let Some(pause) = self.slow_flush {
            std::thread::sleep(pause);
        }
    }
    fn on_flush_completed(&self, info: &FlushInfo) {
        self.events.lock().push(Event::FlushCompleted(info.clone()));
    }
    fn on_compaction_begin(&self, info: &CompactionInfo) {
        self.events
            .lock()
            .push(Event::CompactionBegin(info.clone()));
    }
    fn on_compaction_completed(&self, info: &CompactionInfo) {
        self.events
            .lock()
            .push(Event::CompactionCompleted(info.clone()));
    }
    fn on_table_file_created(&self, info: &TableFileInfo) {
        self.events.lock().push(Event::Created(info.clone()));
    }
    fn on_table_file_deleted(&self, info: &TableFileInfo) {
        self.events.lock().push(Event::Deleted(info.clone()));
    }
    fn on_stall_conditions_changed(&self, info: &StallInfo) {
        self.events.lock().push(Event::Stall(*info));
    }
    fn on_background_error(&self, info: &BackgroundErrorInfo) {
        self.events.lock().push(Event::Error(info.clone()));
    }
}

impl Recorder {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock())
    }
}

fn options(listener: Arc<Recorder>) -> Options {
    Options {
        listeners: vec![listener],
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        compaction: CompactionOptions {
            disable_auto_compactions: true,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

fn fill(db: &Db, round: u32) {
    for i in 0..300u32 {
        db.put(format!("key{i:05}").as_bytes(), [round as u8; 100])
            .unwrap();
    }
    db.flush().unwrap();
}

#[test]
fn a_listener_sees_every_step_of_a_flush_and_a_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let db = Db::open(dir.path(), options(recorder.clone())).unwrap();
    fill(&db, 1);
    let events = recorder.take();
    // begin, then the table, then completed naming that same table.
    let [
        Event::FlushBegin(begin),
        Event::Created(table),
        Event::FlushCompleted(done),
    ] = &events[..]
    else {
        panic!("{events:#?}")
    };
    assert!(begin.memtable_bytes > 30_000 && begin.tables.is_empty());
    assert_eq!(table.kind, FileKind::Table);
    assert_eq!(table.level, Some(0));
    assert!(table.path.exists() && table.size > 0, "{table:?}");
    assert_eq!(std::fs::metadata(&table.path).unwrap().len(), table.size);
    assert_eq!(done.tables, vec![table.clone()]);
    assert_eq!(done.memtable_bytes, begin.memtable_bytes);

    fill(&db, 2);
    recorder.take();
    db.compact_range(None, None).unwrap();
    let events = recorder.take();
    let begin = events
        .iter()
        .find_map(|e| match e {
            Event::CompactionBegin(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{events:#?}"));
    // Into the last level: the base level of a tree with nothing below L0.
    assert_eq!((begin.level, begin.output_level), (0, 6));
    assert_eq!(begin.reason, "manual");
    assert_eq!(begin.inputs.len(), 2);
    let done = events
        .iter()
        .find_map(|e| match e {
            Event::CompactionCompleted(c) => Some(c.clone()),
            _ => None,
        })
        .unwrap();
    assert!(done.error.is_none() && !done.trivial_move);
    assert!(!done.outputs.is_empty());
    let created: Vec<&TableFileInfo> = events
        .iter()
        .filter_map(|e| match e {
            Event::Created(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(created, done.outputs.iter().collect::<Vec<_>>());
    assert!(
        done.outputs
            .iter()
            .all(|t| t.level == Some(6) && t.path.exists())
    );
    // The inputs were deleted, and told as such, after the compaction completed.
    let deleted: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Deleted(t) => Some(t.number),
            _ => None,
        })
        .collect();
    let mut inputs = begin.inputs.clone();
    inputs.sort_unstable();
    let mut gone = deleted.clone();
    gone.sort_unstable();
    assert_eq!(gone, inputs, "{events:#?}");
    let completed_at = events
        .iter()
        .position(|e| matches!(e, Event::CompactionCompleted(_)))
        .unwrap();
    let first_deleted = events
        .iter()
        .position(|e| matches!(e, Event::Deleted(_)))
        .unwrap();
    assert!(completed_at < first_deleted);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::Stall(_) | Event::Error(_))),
        "{events:#?}"
    );
}

#[test]
fn writers_waiting_for_a_slow_flush_are_a_stall_and_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder {
        slow_flush: Some(Duration::from_millis(100)),
        ..Recorder::default()
    });
    let db = Db::open(dir.path(), options(recorder.clone())).unwrap();
    // Each memtable holds about 600 of these; two are allowed, the flush takes 100 ms.
    for i in 0..3000u32 {
        db.put(format!("key{i:05}").as_bytes(), [7; 100]).unwrap();
    }
    let stalls: Vec<(StallCondition, StallCondition)> = recorder
        .take()
        .iter()
        .filter_map(|e| match e {
            Event::Stall(s) => Some((s.previous, s.current)),
            _ => None,
        })
        .collect();
    assert!(!stalls.is_empty());
    assert_eq!(
        stalls[..2],
        [
            (StallCondition::Normal, StallCondition::Stopped),
            (StallCondition::Stopped, StallCondition::Normal)
        ]
    );
    assert!(stalls.windows(2).all(|w| w[0].1 == w[1].0), "{stalls:?}");
    // The metrics name the cause: full memtables (L0 never fills without compactions here,
    // as its triggers count only when automatic compactions run).
    let m = db.metrics();
    assert!(m.write_stall_micros > 0);
    let s = m.stalls;
    assert!(s.memtable_limit.count > 0, "{s:?}");
    assert_eq!(s.memtable_limit.micros, m.write_stall_micros, "{s:?}");
}

#[test]
fn a_failed_flush_is_a_background_error() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let fs = FaultInjectingFs::new(os_fs());
    let db = Db::open(
        dir.path(),
        Options {
            fs: fs.clone(),
            ..options(recorder.clone())
        },
    )
    .unwrap();
    recorder.take();
    fs.inject(Fault::fail(FaultOp::Sync).on_paths_containing(".sst"));
    for i in 0..300u32 {
        db.put(format!("key{i:05}").as_bytes(), [1; 100]).unwrap();
    }
    assert!(db.flush().is_err());
    let events = recorder.take();
    let errors: Vec<&BackgroundErrorInfo> = events
        .iter()
        .filter_map(|e| match e {
            Event::Error(info) => Some(info),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert_eq!(errors[0].job, "flush");
    assert!(errors[0].error.contains(".sst"), "{}", errors[0].error);
    assert!(matches!(events[0], Event::FlushBegin(_)));
    assert!(
        !events.iter().any(|e| matches!(e, Event::FlushCompleted(_))),
        "{events:#?}"
    );
}

#[test]
fn the_directory_keeps_a_log_the_options_and_the_last_session_s_counters() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let mut opts = options(recorder.clone());
    opts.info_log.stats_dump_period = Duration::from_millis(20);
    let db = Db::open(dir.path(), opts).unwrap();
    fill(&db, 1);
    fill(&db, 2);
    db.compact_range(None, None).unwrap();
    // Long enough for a few `stats:` lines, however slow the machine.
    let log_path = dir.path().join(sluice::info_log::LOG_FILE);
    while !std::fs::read_to_string(&log_path)
        .unwrap()
        .contains("compaction(s) read")
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    db.close().unwrap();

    let log = std::fs::read_to_string(dir.path().join(sluice::info_log::LOG_FILE)).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    for (i, needle) in [
        "open: ",
        "flush: ",
        "compaction begins: L0 -> L6 (manual)",
        "compaction: L0 -> L6 wrote",
        "deleted table #",
        "stats: interval ",
        "cumulative over ",
        "close: ",
    ]
    .iter()
    .enumerate()
    {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "{i}: {needle:?} missing from LOG:\n{log}"
        );
    }
    // Every line is stamped `YYYY/MM/DD-HH:MM:SS.ffffff `.
    assert!(
        lines
            .iter()
            .all(|l| l.len() > 27 && &l[4..5] == "/" && &l[26..27] == " "),
        "{log}"
    );
    let opts = std::fs::read_to_string(dir.path().join(sluice::OPTIONS_FILE)).unwrap();
    assert!(opts.contains("write_buffer_size: 65536"), "{opts}");
    let stats: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(sluice::STATS_FILE)).unwrap())
            .unwrap();
    assert_eq!(stats["metrics"]["flush"]["count"], 2, "{stats}");
    assert_eq!(stats["metrics"]["compaction"]["count"], 1, "{stats}");
    assert!(stats["closed_at"].as_str().unwrap().starts_with("20"));

    // The next open starts a new LOG and keeps the old one; a read-only open writes nothing.
    let before = std::fs::read(dir.path().join(sluice::STATS_FILE)).unwrap();
    let ro = Db::open_read_only(dir.path(), Options::default()).unwrap();
    ro.close().unwrap();
    assert_eq!(
        std::fs::read(dir.path().join(sluice::STATS_FILE)).unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join(sluice::info_log::LOG_FILE)).unwrap(),
        log
    );
    Db::open(dir.path(), Options::default())
        .unwrap()
        .close()
        .unwrap();
    let old_logs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(sluice::info_log::OLD_LOG_PREFIX)
        })
        .count();
    assert_eq!(old_logs, 1);
}

/// Panics at every key it is shown: the compaction filter of keyspace `panicky` only.
#[derive(Debug)]
struct PanickingFilter;

impl sluice::CompactionFilter for PanickingFilter {
    fn name(&self) -> &str {
        "panics"
    }

    fn filter(&self, _key: &[u8], _value: &[u8]) -> sluice::FilterDecision {
        panic!("a compaction filter that panics");
    }
}

/// A compaction filter that panics in the database's shared compaction threads: its keyspace
/// takes no more writes (the panic is its background error, of kind `Panicked`), every other
/// keyspace goes on flushing and compacting, and close returns.
#[test]
fn a_panicking_callback_fails_its_keyspace_only_and_close_returns() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    let panicky = sluice::KeyspaceOptions {
        compaction_filter: Some(Arc::new(PanickingFilter)),
        ..sluice::KeyspaceOptions::of_default(db.options())
    };
    let bad = db.create_keyspace("panicky", &panicky).unwrap();
    let good = db
        .create_keyspace("good", &sluice::KeyspaceOptions::of_default(db.options()))
        .unwrap();
    // Past the L0 trigger in both: the shared threads compact them on their own.
    let trigger = db.options().compaction.l0_compaction_trigger;
    for ks in [&bad, &good] {
        for round in 0..=trigger {
            ks.put(b"k", format!("v{round}").as_bytes()).unwrap();
            ks.flush().unwrap();
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let refused = loop {
        match bad.put(b"later", b"v") {
            Err(e) => break e,
            Ok(()) if std::time::Instant::now() > deadline => panic!("the panic went unnoticed"),
            Ok(()) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    assert_eq!(refused.kind(), sluice::ErrorKind::Panicked, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("a compaction filter that panics"),
        "{refused}"
    );
    good.put(b"k", b"v-last").unwrap();
    good.flush().unwrap();
    db.wait_for_background_work().ok();
    assert_eq!(good.get(b"k").unwrap(), Some(b"v-last".to_vec()));
    assert!(
        good.metrics().unwrap().compaction.count > 0,
        "the good keyspace compacted"
    );
    db.close().unwrap_or_else(|e| panic!("close: {e}"));
}
