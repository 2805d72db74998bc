//! The periodic `stats:` line of the `LOG` ([`crate::InfoLogOptions::stats_dump_period`]):
//! what the database did in the last interval and in the whole session, and the shape of the
//! tree now, as RocksDB's info log carries its "Interval" and "Cumulative" figures. The
//! interval is the difference of two [`Metrics`] reports ([`Metrics::since`]).
//!
//! ```text
//! 2026/11/26-22:10:00.000001 stats: interval 600.0 s: 61.4 MB from users (0.10 MB/s), ...
//! ```

use std::time::{Duration, Instant};

use super::journal::Journal;
use crate::Metrics;

/// The body of the `sluice-stats` thread: a `stats:` line every period until the database
/// closes. Started only when the database writes a `LOG` and the period is not zero.
pub(super) fn stats_dump_loop(journal: &Journal) {
    let inner = &*journal.default;
    let period = inner.options.info_log.stats_dump_period;
    let opened = Instant::now();
    let mut last = inner.metrics();
    let mut last_at = opened;
    loop {
        let due = last_at + period;
        loop {
            let seen = inner.bg_work.generation();
            if inner.state.lock().closing {
                return;
            }
            if Instant::now() >= due {
                break;
            }
            // Woken early by background work too (and by close); the deadline stays.
            inner.bg_work.wait_past(seen, Some(due));
        }
        let now = inner.metrics();
        let now_at = Instant::now();
        if let Some(log) = inner.events.log() {
            log.line(&stats_line(
                &now,
                &now.since(&last),
                now_at - last_at,
                now_at - opened,
            ));
        }
        (last, last_at) = (now, now_at);
    }
}

/// One `stats:` line: the interval's traffic, the tree now, and the session's totals.
fn stats_line(total: &Metrics, interval: &Metrics, length: Duration, uptime: Duration) -> String {
    let mb = |bytes: u64| bytes as f64 / 1e6;
    let secs = length.as_secs_f64().max(1e-9);
    let traffic = |m: &Metrics| {
        format!(
            "{:.1} MB from users, {:.1} MB to the WAL; {} flush(es) wrote {:.1} MB; {} \
             compaction(s) read {:.1} MB, wrote {:.1} MB, dropped {} entries; w-amp {:.2}; \
             stalls {:.3} s (L0 slowdown {}, L0 stop {}, memtable limit {})",
            mb(m.user_bytes_written),
            mb(m.wal_bytes_written),
            m.flush.count,
            mb(m.flush.output_bytes),
            m.compaction.count,
            mb(m.compaction.input_bytes),
            mb(m.compaction.output_bytes),
            m.compaction
                .entries_in
                .saturating_sub(m.compaction.entries_out),
            m.write_amp(),
            m.write_stall_micros as f64 / 1e6,
            m.stalls.l0_slowdown.count,
            m.stalls.l0_stop.count,
            m.stalls.memtable_limit.count,
        )
    };
    let levels: Vec<String> = total
        .levels
        .iter()
        .filter(|l| l.files > 0)
        .map(|l| format!("L{} {} ({:.1} MB)", l.level, l.files, mb(l.size_bytes)))
        .collect();
    format!(
        "stats: interval {:.1} s: {} ({:.2} MB/s from users); now: tables {}, read amp {}, \
         compaction debt {:.1} MB, space amp {:.2}, table cache {} open; cumulative over {:.1} \
         s: {}",
        length.as_secs_f64(),
        traffic(interval),
        mb(interval.user_bytes_written) / secs,
        match levels.is_empty() {
            true => "none".to_string(),
            false => levels.join(", "),
        },
        total.read_amp(),
        mb(total.compaction_debt_bytes),
        total.space_amp(),
        total.table_cache.open_tables,
        uptime.as_secs_f64(),
        traffic(total),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_has_the_interval_the_tree_and_the_session() {
        let mut total = Metrics {
            user_bytes_written: 30_000_000,
            ..Metrics::of_empty_tree()
        };
        total.levels[1].files = 4;
        total.levels[1].size_bytes = 8_000_000;
        total.levels[1].read_amp = 1;
        total.stalls.l0_stop.count = 2;
        let interval = Metrics {
            user_bytes_written: 10_000_000,
            ..total.clone()
        };
        let line = stats_line(
            &total,
            &interval,
            Duration::from_secs(5),
            Duration::from_secs(60),
        );
        assert!(
            line.starts_with("stats: interval 5.0 s: 10.0 MB from users"),
            "{line}"
        );
        assert!(line.contains("(2.00 MB/s from users)"), "{line}");
        assert!(
            line.contains("now: tables L1 4 (8.0 MB), read amp 1"),
            "{line}"
        );
        assert!(
            line.contains("cumulative over 60.0 s: 30.0 MB from users"),
            "{line}"
        );
        assert!(line.contains("L0 stop 2"), "{line}");
    }
}
