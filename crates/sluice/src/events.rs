//! Event listeners (RocksDB's `EventListener`): a program watches the engine's background work
//! as it happens, for its own logs, alerts or metrics, without polling [`crate::Db::metrics`].
//!
//! Every callback has a default that does nothing, so a listener implements only what it
//! needs. Callbacks run on the thread that did the work, after it released the database's
//! locks, in the order the work happened on that thread: a flush's `begin` before its files'
//! `created` before its `completed`. They may read the database (`get`, `metrics`), but must
//! not wait for background work (`flush`, `compact_range`, `close`): the work they would wait
//! for is the one calling them. A slow callback delays the work it hears about.
//!
//! What is reported:
//!
//! | callback                        | when                                                        |
//! |---------------------------------|-------------------------------------------------------------|
//! | `on_flush_begin` / `_completed` | around each memtable flush; `completed` after the install   |
//! | `on_compaction_begin` / `_completed` | around each compaction, trivial moves included; `completed` also on failure, with the error |
//! | `on_table_file_created`         | each table or blob file a flush or compaction installed     |
//! | `on_table_file_deleted`         | each table or blob file deleted as obsolete                 |
//! | `on_stall_conditions_changed`   | writes become delayed, stopped, or normal again             |
//! | `on_background_error`           | a flush or compaction failed (the database turns read-only) |

use std::path::PathBuf;
use std::sync::Arc;

/// Watches the engine's background work; see the [module documentation](self).
pub trait EventListener: Send + Sync {
    /// A memtable flush starts.
    fn on_flush_begin(&self, _info: &FlushInfo) {}
    /// A memtable flush's tables are installed.
    fn on_flush_completed(&self, _info: &FlushInfo) {}
    /// A compaction starts.
    fn on_compaction_begin(&self, _info: &CompactionInfo) {}
    /// A compaction ended: installed, or failed (`info.error`).
    fn on_compaction_completed(&self, _info: &CompactionInfo) {}
    /// A flush or compaction installed a new file.
    fn on_table_file_created(&self, _info: &TableFileInfo) {}
    /// An obsolete file was deleted.
    fn on_table_file_deleted(&self, _info: &TableFileInfo) {}
    /// Writers went from `info.previous` to `info.current`.
    fn on_stall_conditions_changed(&self, _info: &StallInfo) {}
    /// A background job failed; the database accepts no more writes until reopened.
    fn on_background_error(&self, _info: &BackgroundErrorInfo) {}
}

/// Options that hold listeners print; the trait asks no `Debug` of an application's type.
impl std::fmt::Debug for dyn EventListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventListener")
    }
}

/// One flush.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlushInfo {
    /// Bytes of the memtable flushed.
    pub memtable_bytes: u64,
    /// The L0 tables written (empty in `on_flush_begin`).
    pub tables: Vec<TableFileInfo>,
    /// Wall seconds the flush took (0 in `on_flush_begin`).
    pub seconds: f64,
}

/// One compaction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompactionInfo {
    /// The level compacted, and the level its outputs go to.
    pub level: usize,
    pub output_level: usize,
    /// Why it was picked (`Reason`'s name: `level-size`, `l0-files`, `manual`, ...).
    pub reason: String,
    /// The input tables' numbers.
    pub inputs: Vec<u64>,
    /// The input tables' bytes.
    pub input_bytes: u64,
    /// The files installed (empty in `on_compaction_begin`, and after a failure).
    pub outputs: Vec<TableFileInfo>,
    /// The file was moved down a level without being rewritten.
    pub trivial_move: bool,
    /// Wall seconds (0 in `on_compaction_begin`).
    pub seconds: f64,
    /// Why it failed, in `on_compaction_completed` of a failed compaction.
    pub error: Option<String>,
}

/// What a file holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileKind {
    /// An SSTable.
    #[default]
    Table,
    /// A blob file (value separation).
    Blob,
}

/// A file created or deleted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableFileInfo {
    pub kind: FileKind,
    pub number: u64,
    pub path: PathBuf,
    /// Bytes (0 for a deleted file: it is gone).
    pub size: u64,
    /// The level a table was installed at (`None` for blob files and deleted files).
    pub level: Option<usize>,
}

/// How writers are held back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum StallCondition {
    /// Writes go through.
    #[default]
    Normal = 0,
    /// Writes are slowed (L0 at its slowdown trigger).
    Delayed = 1,
    /// Writes wait (memtables full, or L0 at its stop trigger).
    Stopped = 2,
}

/// A change of [`StallCondition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallInfo {
    pub previous: StallCondition,
    pub current: StallCondition,
}

/// A failed background job.
#[derive(Clone, Debug, PartialEq)]
pub struct BackgroundErrorInfo {
    /// `flush` or `compaction`.
    pub job: &'static str,
    /// The error, as displayed.
    pub error: String,
}

/// The listeners of one tree: the options', then the database's `LOG` ([`crate::info_log`],
/// set once the open has the directory locked), and the stall condition last reported.
#[derive(Default)]
pub(crate) struct Listeners {
    listeners: Vec<Arc<dyn EventListener>>,
    log: std::sync::OnceLock<Arc<crate::info_log::InfoLog>>,
    /// A [`StallCondition`] as `u8`: checked on every write, so an atomic, not a lock.
    stall: std::sync::atomic::AtomicU8,
}

impl Listeners {
    pub(crate) fn new(listeners: Vec<Arc<dyn EventListener>>) -> Self {
        Listeners {
            listeners,
            ..Listeners::default()
        }
    }

    /// Adds the database's log as the last listener (only the first call counts).
    pub(crate) fn set_log(&self, log: Arc<crate::info_log::InfoLog>) {
        let _ = self.log.set(log);
    }

    /// The log [`Listeners::set_log`] added.
    pub(crate) fn log(&self) -> Option<Arc<crate::info_log::InfoLog>> {
        self.log.get().cloned()
    }

    /// True when nobody listens: callers skip building the event.
    pub(crate) fn is_empty(&self) -> bool {
        self.listeners.is_empty() && self.log.get().is_none()
    }

    /// Calls `f` on every listener, in registration order, the log last.
    pub(crate) fn each(&self, f: impl Fn(&dyn EventListener)) {
        for listener in &self.listeners {
            f(listener.as_ref());
        }
        if let Some(log) = self.log.get() {
            f(log.as_ref());
        }
    }

    /// True if reporting `current` would be a change (false when nobody listens).
    pub(crate) fn stall_changes_to(&self, current: StallCondition) -> bool {
        !self.is_empty() && self.stall.load(std::sync::atomic::Ordering::Relaxed) != current as u8
    }

    /// Reports a change to `current`, if it is one. Call without the state lock.
    pub(crate) fn stall_condition(&self, current: StallCondition) {
        // Every write group's leader gets here: a load, and no store, when nothing changed.
        if !self.stall_changes_to(current) {
            return;
        }
        let previous = self
            .stall
            .swap(current as u8, std::sync::atomic::Ordering::Relaxed);
        let previous = match previous {
            1 => StallCondition::Delayed,
            2 => StallCondition::Stopped,
            _ => StallCondition::Normal,
        };
        if previous != current {
            let info = StallInfo { previous, current };
            self.each(|l| l.on_stall_conditions_changed(&info));
        }
    }
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} listener(s)", self.listeners.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct Stalls(parking_lot::Mutex<Vec<StallInfo>>);

    impl EventListener for Stalls {
        fn on_stall_conditions_changed(&self, info: &StallInfo) {
            self.0.lock().push(*info);
        }
    }

    #[test]
    fn only_changes_of_the_stall_condition_are_reported() {
        let stalls = Arc::new(Stalls::default());
        let listeners = Listeners::new(vec![stalls.clone()]);
        use StallCondition::*;
        for c in [Normal, Delayed, Delayed, Stopped, Normal, Normal] {
            listeners.stall_condition(c);
        }
        let seen: Vec<(StallCondition, StallCondition)> = stalls
            .0
            .lock()
            .iter()
            .map(|i| (i.previous, i.current))
            .collect();
        assert_eq!(
            seen,
            vec![(Normal, Delayed), (Delayed, Stopped), (Stopped, Normal)]
        );
    }
}
