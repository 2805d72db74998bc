//! The database's `LOG` file (RocksDB's info log): one line per thing the engine did, in the
//! database directory, for the operator who wants to know what happened when something went
//! wrong, after the process is gone.
//!
//! ```text
//! 2026/11/26-19:20:01.123456 flush: 1 table(s), 4.2 MB from a 64.0 MB memtable in 0.31 s: #12
//! ```
//!
//! It is an [`EventListener`] like any other: flushes, compactions (with inputs and outputs),
//! files created and deleted, stall changes and background errors each become a line, and the
//! open and close add theirs. Each line is also emitted as a `tracing` event (target
//! `sluice::log`), so a program that collects tracing sees the same record.
//!
//! Every open starts a new `LOG`; the previous one becomes `LOG.old.<microseconds>` and only the
//! newest `keep_log_file_num` of those are kept. With `max_log_file_size` above 0 a `LOG` that
//! grows past it is rotated the same way (RocksDB's options of the same names). The log is
//! best effort: a failed write is reported through `tracing` and never fails the database.
//! A read-only open writes no log.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use sluice_sst::fs::{FileSystem, IoMode, WriteFile};

use crate::events::{
    BackgroundErrorInfo, CompactionInfo, EventListener, FileKind, FlushInfo, StallInfo,
    TableFileInfo,
};

/// The name of the log file in the database directory.
pub const LOG_FILE: &str = "LOG";
/// Rotated logs are named this, then the microseconds since the epoch.
pub const OLD_LOG_PREFIX: &str = "LOG.old.";

/// Settings of the `LOG` file ([`crate::Options::info_log`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfoLogOptions {
    /// Write the log at all.
    pub enabled: bool,
    /// Rotate `LOG` once it holds this many bytes; 0: only at each open (RocksDB's default).
    pub max_log_file_size: u64,
    /// Rotated logs kept (RocksDB keeps 1000; a few dozen say enough about recent opens).
    pub keep_log_file_num: usize,
    /// Every this often, a `stats:` line with the figures of the interval since the last one
    /// and of the whole session (RocksDB's `stats_dump_period_sec`, also 10 minutes by
    /// default); zero writes none.
    pub stats_dump_period: std::time::Duration,
}

impl Default for InfoLogOptions {
    fn default() -> Self {
        InfoLogOptions {
            enabled: true,
            max_log_file_size: 0,
            keep_log_file_num: 16,
            stats_dump_period: std::time::Duration::from_secs(600),
        }
    }
}

/// The open `LOG`; see the [module documentation](self).
pub(crate) struct InfoLog {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    options: InfoLogOptions,
    /// The file and the bytes written to it.
    file: Mutex<(Box<dyn WriteFile>, u64)>,
}

impl std::fmt::Debug for InfoLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InfoLog({})", self.dir.join(LOG_FILE).display())
    }
}

impl InfoLog {
    /// Starts a new `LOG` in `dir`, rotating the previous one; `None` if disabled or if the
    /// file cannot be made (said through `tracing`).
    pub(crate) fn open(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        options: &InfoLogOptions,
    ) -> Option<Arc<InfoLog>> {
        if !options.enabled {
            return None;
        }
        let file = match rotate(&*fs, dir, options.keep_log_file_num) {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot start the LOG file");
                return None;
            }
        };
        Some(Arc::new(InfoLog {
            fs,
            dir: dir.to_path_buf(),
            options: options.clone(),
            file: Mutex::new((file, 0)),
        }))
    }

    /// Appends one line, stamped with the time.
    pub(crate) fn line(&self, message: &str) {
        tracing::info!(target: "sluice::log", "{message}");
        let text = format!("{} {message}\n", timestamp(SystemTime::now()));
        let mut file = self.file.lock();
        let max = self.options.max_log_file_size;
        if max > 0 && file.1 > 0 && file.1 + text.len() as u64 > max {
            match rotate(&*self.fs, &self.dir, self.options.keep_log_file_num) {
                Ok(fresh) => *file = (fresh, 0),
                Err(e) => tracing::warn!(error = %e, "cannot rotate the LOG file"),
            }
        }
        let written = file.0.append(text.as_bytes()).and_then(|()| file.0.flush());
        match written {
            Ok(()) => file.1 += text.len() as u64,
            Err(e) => tracing::warn!(error = %e, "cannot write the LOG file"),
        }
    }
}

/// Renames `dir/LOG`, if any, to `LOG.old.<now>`, deletes all but the newest `keep` rotated
/// logs, and creates an empty `LOG`.
fn rotate(fs: &dyn FileSystem, dir: &Path, keep: usize) -> std::io::Result<Box<dyn WriteFile>> {
    let log = dir.join(LOG_FILE);
    if fs.exists(&log)? {
        let micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        fs.rename(&log, &dir.join(format!("{OLD_LOG_PREFIX}{micros}")))?;
    }
    let mut old: Vec<(u128, PathBuf)> = fs
        .list_dir(dir)?
        .into_iter()
        .filter_map(|name| {
            let name = name.to_str()?.to_string();
            let micros = name.strip_prefix(OLD_LOG_PREFIX)?.parse().ok()?;
            Some((micros, dir.join(name)))
        })
        .collect();
    old.sort_unstable();
    let excess = old.len().saturating_sub(keep);
    for (_, path) in old.into_iter().take(excess) {
        fs.remove(&path)?;
    }
    fs.create(&log, IoMode::Buffered)
}

/// `2026/11/26-19:20:01.123456`, in UTC (RocksDB's layout): the `LOG`'s stamps, and the times
/// the command line prints.
pub fn timestamp(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}/{m:02}/{d:02}-{:02}:{:02}:{:02}.{:06}",
        day_secs / 3600,
        day_secs % 3600 / 60,
        day_secs % 60,
        since.subsec_micros()
    )
}

/// The (year, month, day) of `days` since 1970-01-01 in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}

fn numbers(files: &[TableFileInfo]) -> String {
    files
        .iter()
        .map(|f| format!("#{}", f.number))
        .collect::<Vec<_>>()
        .join(" ")
}

impl EventListener for InfoLog {
    fn on_flush_completed(&self, info: &FlushInfo) {
        let bytes = info.tables.iter().map(|t| t.size).sum();
        self.line(&format!(
            "flush: {} table(s), {} from a {} memtable in {:.3} s: {}",
            info.tables.len(),
            mb(bytes),
            mb(info.memtable_bytes),
            info.seconds,
            numbers(&info.tables)
        ));
    }

    fn on_compaction_begin(&self, info: &CompactionInfo) {
        let inputs: Vec<String> = info.inputs.iter().map(|n| format!("#{n}")).collect();
        self.line(&format!(
            "compaction begins: L{} -> L{} ({}), {} input(s), {}: {}",
            info.level,
            info.output_level,
            info.reason,
            info.inputs.len(),
            mb(info.input_bytes),
            inputs.join(" ")
        ));
    }

    fn on_compaction_completed(&self, info: &CompactionInfo) {
        let line = match (&info.error, info.trivial_move) {
            (Some(e), _) => format!(
                "compaction failed: L{} -> L{} after {:.3} s: {e}",
                info.level, info.output_level, info.seconds
            ),
            (None, true) => format!(
                "compaction: L{} -> L{} trivial move of {}",
                info.level,
                info.output_level,
                info.inputs
                    .iter()
                    .map(|n| format!("#{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            (None, false) => format!(
                "compaction: L{} -> L{} wrote {} in {} file(s) in {:.3} s: {}",
                info.level,
                info.output_level,
                mb(info.outputs.iter().map(|o| o.size).sum()),
                info.outputs.len(),
                info.seconds,
                numbers(&info.outputs)
            ),
        };
        self.line(&line);
    }

    fn on_table_file_deleted(&self, info: &TableFileInfo) {
        let kind = match info.kind {
            FileKind::Table => "table",
            FileKind::Blob => "blob file",
        };
        self.line(&format!("deleted {kind} #{}", info.number));
    }

    fn on_stall_conditions_changed(&self, info: &StallInfo) {
        self.line(&format!(
            "write stall: {:?} -> {:?}",
            info.previous, info.current
        ));
    }

    fn on_background_error(&self, info: &BackgroundErrorInfo) {
        self.line(&format!(
            "background error in {}: {}; the database is read-only until reopened",
            info.job, info.error
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        let at = |secs: u64, micros: u32| {
            timestamp(UNIX_EPOCH + std::time::Duration::new(secs, micros * 1000))
        };
        assert_eq!(at(0, 0), "1970/01/01-00:00:00.000000");
        // 2024-02-29 (a leap day) 23:59:59.5.
        assert_eq!(at(1_709_251_199, 500_000), "2024/02/29-23:59:59.500000");
        assert_eq!(at(1_796_083_200, 1), "2026/12/01-00:00:00.000001");
    }

    #[test]
    fn each_open_rotates_and_old_logs_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let fs = sluice_sst::fs::os_fs();
        let options = InfoLogOptions {
            keep_log_file_num: 2,
            ..InfoLogOptions::default()
        };
        for i in 0..4 {
            let log = InfoLog::open(fs.clone(), dir.path(), &options).unwrap();
            log.line(&format!("open {i}"));
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let text = std::fs::read_to_string(dir.path().join(LOG_FILE)).unwrap();
        assert!(text.ends_with(" open 3\n"), "{text}");
        let old: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(OLD_LOG_PREFIX))
            .collect();
        assert_eq!(old.len(), 2, "{old:?}");
    }

    #[test]
    fn a_log_past_its_size_is_rotated() {
        let dir = tempfile::tempdir().unwrap();
        let options = InfoLogOptions {
            max_log_file_size: 200,
            ..InfoLogOptions::default()
        };
        let log = InfoLog::open(sluice_sst::fs::os_fs(), dir.path(), &options).unwrap();
        for i in 0..10 {
            log.line(&format!("line {i} of some length"));
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let size = std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len();
        assert!(size <= 200, "{size}");
        let rotated = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .starts_with(OLD_LOG_PREFIX)
            })
            .count();
        assert!(rotated >= 2, "{rotated}");
    }
}
