//! Changing options on a live database (RocksDB's `SetOptions`): the options a running tree
//! reads afresh at each use, by RocksDB's names. The rest (directories, formats, caches,
//! operators) are fixed at open.
//!
//! A tree keeps the options it was opened with (`Tree::options`) and the current ones
//! (`Tree::live`), which `set_options` replaces whole, validated, so every reader sees one
//! consistent set. The write path (memtable size and count, L0 stall triggers), the picker
//! (L0 trigger, level sizes, `disable_auto_compactions`) and each compaction (its target file
//! size) read the current ones; a compaction already running keeps what it started with.

use std::sync::Arc;

use super::Tree;
use crate::options::Options;
use crate::{Error, Result};

/// The options `set_options` takes, by RocksDB's names (Sluice's own, where they differ, are
/// accepted too).
pub const MUTABLE_OPTIONS: [&str; 10] = [
    "write_buffer_size",
    "max_write_buffer_number",
    "level0_file_num_compaction_trigger",
    "l0_compaction_file_threshold",
    "level0_slowdown_writes_trigger",
    "level0_stop_writes_trigger",
    "target_file_size_base",
    "max_bytes_for_level_base",
    "max_bytes_for_level_multiplier",
    "disable_auto_compactions",
];

/// Sets option `name` of `options` to `value` (a number, or `true`/`false`).
fn set(options: &mut Options, name: &str, value: &str) -> Result<()> {
    let number = || -> Result<u64> {
        value
            .trim()
            .parse()
            .map_err(|_| Error::InvalidArgument(format!("{name}: {value:?} is not a whole number")))
    };
    let size = || -> Result<usize> {
        usize::try_from(number()?)
            .map_err(|_| Error::InvalidArgument(format!("{name}: {value} is too large")))
    };
    let (memtable, compaction) = (&mut options.memtable, &mut options.compaction);
    match name {
        "write_buffer_size" => memtable.write_buffer_size = size()?,
        "max_write_buffer_number" => memtable.max_write_buffer_number = size()?,
        "level0_file_num_compaction_trigger" | "l0_compaction_trigger" => {
            compaction.l0_compaction_trigger = size()?
        }
        "l0_compaction_file_threshold" => compaction.l0_compaction_file_threshold = size()?,
        "level0_slowdown_writes_trigger" | "l0_slowdown_writes_trigger" => {
            compaction.l0_slowdown_writes_trigger = size()?
        }
        "level0_stop_writes_trigger" | "l0_stop_writes_trigger" => {
            compaction.l0_stop_writes_trigger = size()?
        }
        "target_file_size_base" => compaction.target_file_size_base = number()?,
        "max_bytes_for_level_base" => compaction.max_bytes_for_level_base = number()?,
        "max_bytes_for_level_multiplier" => compaction.max_bytes_for_level_multiplier = number()?,
        "disable_auto_compactions" => {
            compaction.disable_auto_compactions = match value.trim() {
                "true" | "1" => true,
                "false" | "0" => false,
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "{name}: {value:?} is not true or false"
                    )));
                }
            }
        }
        _ => {
            return Err(Error::InvalidArgument(format!(
                "{name:?} is not an option a live database can change; those are {}",
                MUTABLE_OPTIONS.join(", ")
            )));
        }
    }
    Ok(())
}

impl Tree {
    /// The options as [`Tree::set_options`] last left them.
    pub(crate) fn live_options(&self) -> Arc<Options> {
        Arc::clone(&self.live.read())
    }

    /// Applies `changes` (`(name, value)` pairs, in order) to the current options, all or
    /// none: the result must pass [`Options::validate`]. Wakes the background threads and
    /// stalled writers, which judge their work by the new values.
    pub(crate) fn set_options(&self, changes: &[(&str, &str)]) -> Result<()> {
        self.check_writable()?;
        let mut live = self.live.write();
        let mut options = Options::clone(&live);
        for (name, value) in changes {
            set(&mut options, name, value)?;
        }
        options.validate()?;
        *live = Arc::new(options);
        drop(live);
        for (name, value) in changes {
            tracing::info!(
                keyspace = self.keyspace_id,
                option = name,
                value,
                "option changed"
            );
        }
        self.bg_work.notify_all();
        let _st = self.state.lock();
        self.bg_done.notify_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mutable_option_parses_by_name_and_bad_input_is_refused() {
        let mut o = Options::default();
        for (name, value) in [
            ("write_buffer_size", "1048576"),
            ("max_write_buffer_number", "3"),
            ("level0_file_num_compaction_trigger", "6"),
            ("l0_compaction_file_threshold", "50"),
            ("level0_slowdown_writes_trigger", "30"),
            ("level0_stop_writes_trigger", "40"),
            ("target_file_size_base", "2097152"),
            ("max_bytes_for_level_base", "8388608"),
            ("max_bytes_for_level_multiplier", "8"),
            ("disable_auto_compactions", "true"),
        ] {
            set(&mut o, name, value).unwrap();
        }
        assert_eq!(o.memtable.write_buffer_size, 1 << 20);
        assert_eq!(o.memtable.max_write_buffer_number, 3);
        assert_eq!(o.compaction.l0_compaction_trigger, 6);
        assert_eq!(o.compaction.l0_compaction_file_threshold, 50);
        assert_eq!(o.compaction.l0_slowdown_writes_trigger, 30);
        assert_eq!(o.compaction.l0_stop_writes_trigger, 40);
        assert_eq!(o.compaction.target_file_size_base, 2 << 20);
        assert_eq!(o.compaction.max_bytes_for_level_base, 8 << 20);
        assert_eq!(o.compaction.max_bytes_for_level_multiplier, 8);
        assert!(o.compaction.disable_auto_compactions);
        set(&mut o, "l0_compaction_trigger", "5").unwrap();
        assert_eq!(o.compaction.l0_compaction_trigger, 5);
        for (name, value, says) in [
            (
                "compression",
                "zstd",
                "not an option a live database can change",
            ),
            ("write_buffer_size", "big", "not a whole number"),
            ("write_buffer_size", "-1", "not a whole number"),
            ("disable_auto_compactions", "yes", "not true or false"),
        ] {
            let e = set(&mut o, name, value).unwrap_err().to_string();
            assert!(e.contains(says), "{name}={value}: {e}");
        }
    }
}
