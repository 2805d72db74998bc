//! What an open database leaves in its directory for the operator, besides its data: the `LOG`
//! ([`crate::info_log`]), the `OPTIONS` it was last opened with, and at close the `STATS` of
//! that session, so `sluice stats` on a closed database can say what its last process did
//! (its counters live in memory and end with it).
//!
//! All three are written atomically enough for their purpose (`OPTIONS` and `STATS` through
//! a temporary name and a rename) and are best effort: a failure is said through `tracing`
//! and never fails the open or the close. The engine never reads them; a read-only open
//! writes none.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use sluice_sst::fs::{FileSystem, IoMode};

use super::journal::Journal;
use crate::Metrics;
use crate::info_log::{InfoLog, timestamp};

/// The options file in the database directory.
pub const OPTIONS_FILE: &str = "OPTIONS";
/// The last session's metrics, written at close.
pub const STATS_FILE: &str = "STATS";

/// After a read-write open: starts the `LOG` (for every tree) and writes `OPTIONS`.
pub(super) fn opened(journal: &Journal) {
    let inner = &*journal.default;
    let options = &inner.options;
    if let Some(log) = InfoLog::open(options.fs.clone(), &inner.dir, &options.info_log) {
        let r = inner.recovery.lock().clone();
        log.line(&format!(
            "open: {} (sluice {}); recovery replayed {} WAL record(s), dropped {} byte(s)",
            inner.dir.display(),
            env!("CARGO_PKG_VERSION"),
            r.wal_records,
            r.dropped.iter().map(|d| d.bytes).sum::<u64>()
        ));
        for tree in journal.trees() {
            tree.tree.events.set_log(log.clone());
        }
        inner.events.set_log(log);
    }
    write_options(&inner.dir, options);
}

/// Writes `OPTIONS` in `dir` with `options`: at open, and after `Db::set_options`.
pub(super) fn write_options(dir: &Path, options: &crate::Options) {
    let text = format!(
        "# The options this database runs with, by sluice {} at {} UTC.\n\
         # Written at every open and set_options for the operator; the engine does not read it.\n{:#?}\n",
        env!("CARGO_PKG_VERSION"),
        timestamp(SystemTime::now()),
        options
    );
    write_atomically(&*options.fs, dir, OPTIONS_FILE, text.as_bytes());
}

/// Before the close releases the directory: writes `STATS` from `metrics` and logs the close.
pub(super) fn closing(journal: &Journal, metrics: &Metrics) {
    let inner = &*journal.default;
    if inner.read_only {
        return;
    }
    let now = SystemTime::now();
    let record = serde_json::json!({
        "closed_at": timestamp(now),
        "closed_at_unix_micros": now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64),
        "metrics": metrics,
    });
    write_atomically(
        &*inner.options.fs,
        &inner.dir,
        STATS_FILE,
        record.to_string().as_bytes(),
    );
    if let Some(log) = inner.events.log() {
        let (f, c) = (&metrics.flush, &metrics.compaction);
        log.line(&format!(
            "close: this session took {:.1} MB from users; {} flush(es) wrote {:.1} MB, {} \
             compaction(s) read {:.1} MB and wrote {:.1} MB; writers stalled {:.3} s",
            metrics.user_bytes_written as f64 / 1e6,
            f.count,
            f.output_bytes as f64 / 1e6,
            c.count,
            c.input_bytes as f64 / 1e6,
            c.output_bytes as f64 / 1e6,
            metrics.write_stall_micros as f64 / 1e6
        ));
    }
}

/// Writes `dir/name` with `bytes` by way of `name.new` and a rename.
fn write_atomically(fs: &dyn FileSystem, dir: &Path, name: &str, bytes: &[u8]) {
    let tmp = dir.join(format!("{name}.new"));
    let written = (|| -> std::io::Result<()> {
        if fs.exists(&tmp)? {
            fs.remove(&tmp)?;
        }
        let mut file = fs.create(&tmp, IoMode::Buffered)?;
        file.append(bytes)?;
        file.sync()?;
        drop(file);
        fs.rename(&tmp, &dir.join(name))
    })();
    if let Err(e) = written {
        tracing::warn!(file = name, error = %e, "cannot write the file");
    }
}
