//! What the process used while a benchmark or phase ran: CPU time (user and system, split by
//! thread group), peak resident memory, and the bytes the kernel counted as read from and
//! written to storage. Shared by `sluice bench` and `sluice ycsb`.
//!
//! Sources, all Linux `/proc` text files read without `unsafe` (so not `getrusage`, whose
//! figures are the same kernel counters):
//!
//! | figure                         | source                                        | unit        |
//! |--------------------------------|-----------------------------------------------|-------------|
//! | user, system CPU               | `/proc/self/stat` fields 14 and 15            | USER_HZ tick |
//! | total CPU (fallback)           | `CLOCK_PROCESS_CPUTIME_ID` (`cpu-time` crate) | ns          |
//! | peak resident memory           | `VmHWM` of `/proc/self/status`                | KiB         |
//! | storage reads and writes       | `read_bytes`, `write_bytes` of `/proc/self/io` | bytes      |
//!
//! USER_HZ is 100 on every Linux architecture this code targets (the kernel converts to it
//! for user space whatever its internal tick), so user and system seconds have a resolution
//! of 10 ms: read them over runs of seconds, not milliseconds. A figure whose source cannot be
//! read (no `/proc`, a sandbox hiding `/proc/self/io`) is `None`, serialized as `null`.
//!
//! Peak memory is the process's high-water mark since it started, not per benchmark: a later
//! benchmark reports at least the peak of an earlier one.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::delta::MetricsDelta;

/// Ticks per second of the CPU times in `/proc/self/stat` (USER_HZ).
pub const USER_HZ: u64 = 100;

/// CPU time of the whole process (every thread, live or exited).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Time in user mode.
    pub user: Duration,
    /// Time in the kernel on the process's behalf.
    pub system: Duration,
}

/// Bytes the kernel counted as fetched from or sent to storage for the process (page cache
/// hits and writes later truncated are counted as `/proc/<pid>/io` documents).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCounters {
    /// `read_bytes`.
    pub read_bytes: u64,
    /// `write_bytes`.
    pub write_bytes: u64,
}

/// CPU seconds used during a run, in total and per thread group.
///
/// `flush_seconds` and `compaction_seconds` are the engine's own thread-clock figures for the
/// jobs that completed during the run ([`sluice::metrics::JobMetrics::cpu_seconds`]).
/// `foreground_seconds` is everything else: `total_seconds - flush_seconds -
/// compaction_seconds`, clamped at 0. It is mostly the client threads, plus the background
/// threads' bookkeeping outside jobs; it reads low (and may clamp to 0) when a job that began
/// before the run completes during it, since all of that job's CPU is then charged to the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuUsage {
    /// Process CPU in user mode; `None` without `/proc/self/stat`.
    pub user_seconds: Option<f64>,
    /// Process CPU in the kernel; `None` without `/proc/self/stat`.
    pub system_seconds: Option<f64>,
    /// User plus system; `None` when no process clock could be read.
    pub total_seconds: Option<f64>,
    /// `total - flush - compaction`, at least 0; `None` when `total_seconds` is.
    pub foreground_seconds: Option<f64>,
    /// CPU of flushes completed during the run.
    pub flush_seconds: f64,
    /// CPU of compactions completed during the run.
    pub compaction_seconds: f64,
}

/// What the process used during a run. Flattened into the run's JSON object.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct ProcessUsage {
    /// CPU seconds, in total and per thread group.
    pub cpu: CpuUsage,
    /// Peak resident set size of the process so far (`VmHWM`), bytes.
    pub peak_rss_bytes: Option<u64>,
    /// Bytes sent to storage during the run (`/proc/self/io` `write_bytes`): tables, WAL and
    /// MANIFEST as the kernel saw them, a check on the engine's `disk_bytes_written`.
    pub io_write_bytes: Option<u64>,
    /// Bytes fetched from storage during the run (`/proc/self/io` `read_bytes`): page cache
    /// hits are not counted.
    pub io_read_bytes: Option<u64>,
}

/// The process's counters at one instant.
#[derive(Clone, Copy, Debug)]
pub struct ResourceSample {
    /// When the sample was taken.
    pub at: Instant,
    /// User and system time, from `/proc/self/stat`.
    pub cpu: Option<CpuTimes>,
    /// User plus system time from the process CPU clock, the fallback when `cpu` is `None`.
    pub cpu_clock: Option<Duration>,
    /// Storage bytes so far.
    pub io: Option<IoCounters>,
}

impl ResourceSample {
    /// Reads the counters now.
    pub fn now() -> Self {
        ResourceSample {
            at: Instant::now(),
            cpu: process_cpu_times(),
            cpu_clock: cpu_time::ProcessTime::try_now()
                .ok()
                .map(|t| t.as_duration()),
            io: io_counters(),
        }
    }

    /// What the process used from `self` to `end`, with the engine's job CPU taken from
    /// `engine` (the metrics delta over the same interval).
    pub fn usage_until(&self, end: &ResourceSample, engine: &MetricsDelta) -> ProcessUsage {
        let secs = |d: Duration| d.as_secs_f64();
        let (user, system) = match (self.cpu, end.cpu) {
            (Some(a), Some(b)) => (
                Some(secs(b.user.saturating_sub(a.user))),
                Some(secs(b.system.saturating_sub(a.system))),
            ),
            _ => (None, None),
        };
        let total = match (user, system) {
            (Some(u), Some(s)) => Some(u + s),
            _ => match (self.cpu_clock, end.cpu_clock) {
                (Some(a), Some(b)) => Some(secs(b.saturating_sub(a))),
                _ => None,
            },
        };
        let flush = engine.flush.cpu_seconds;
        let compaction = engine.compaction.cpu_seconds;
        let io = self.io.zip(end.io);
        ProcessUsage {
            cpu: CpuUsage {
                user_seconds: user,
                system_seconds: system,
                total_seconds: total,
                foreground_seconds: total.map(|t| (t - flush - compaction).max(0.0)),
                flush_seconds: flush,
                compaction_seconds: compaction,
            },
            peak_rss_bytes: peak_rss_bytes(),
            io_write_bytes: io.map(|(a, b)| b.write_bytes.saturating_sub(a.write_bytes)),
            io_read_bytes: io.map(|(a, b)| b.read_bytes.saturating_sub(a.read_bytes)),
        }
    }
}

/// The process's user and system CPU time, or `None` where `/proc/self/stat` is unreadable.
pub fn process_cpu_times() -> Option<CpuTimes> {
    parse_stat_cpu(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// CPU time every core of the machine has spent busy since boot (any process, and the
/// kernel's own threads), or `None` where `/proc/stat` is unreadable.
pub fn machine_busy_times() -> Option<Duration> {
    parse_proc_stat_busy(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The busy time of the aggregate `cpu` line of a `/proc/stat` text: user, nice, system, irq,
/// softirq and steal ticks (not idle or iowait; guest time is already in user).
pub fn parse_proc_stat_busy(stat: &str) -> Option<Duration> {
    let line = stat.lines().find_map(|l| l.strip_prefix("cpu "))?;
    let ticks: Vec<u64> = line
        .split_ascii_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let field = |i: usize| ticks.get(i).copied().unwrap_or(0);
    let busy = [0, 1, 2, 5, 6, 7]
        .into_iter()
        .try_fold(0u64, |sum, i| sum.checked_add(field(i)))?;
    Some(Duration::from_nanos(
        busy.checked_mul(1_000_000_000 / USER_HZ)?,
    ))
}

/// The process's peak resident set size in bytes, or `None` where `/proc/self/status` is
/// unreadable or has no `VmHWM`.
pub fn peak_rss_bytes() -> Option<u64> {
    parse_status_hwm(&std::fs::read_to_string("/proc/self/status").ok()?)
}

/// The process's storage byte counters, or `None` where `/proc/self/io` is unreadable.
pub fn io_counters() -> Option<IoCounters> {
    parse_io(&std::fs::read_to_string("/proc/self/io").ok()?)
}

/// `utime` and `stime` of a `/proc/<pid>/stat` line. The command name (field 2) is in
/// parentheses and may itself hold spaces and parentheses, so fields are counted after the
/// last `)`: the state is field 3 there, `utime` field 14 and `stime` field 15.
pub fn parse_stat_cpu(stat: &str) -> Option<CpuTimes> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_ascii_whitespace().skip(14 - 3);
    let ticks = |f: Option<&str>| -> Option<Duration> {
        let t: u64 = f?.parse().ok()?;
        Some(Duration::from_nanos(
            t.checked_mul(1_000_000_000 / USER_HZ)?,
        ))
    };
    let user = ticks(fields.next())?;
    let system = ticks(fields.next())?;
    Some(CpuTimes { user, system })
}

/// `VmHWM` of a `/proc/<pid>/status` text, in bytes (the file gives KiB).
pub fn parse_status_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    let kib: u64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// `read_bytes` and `write_bytes` of a `/proc/<pid>/io` text.
pub fn parse_io(io: &str) -> Option<IoCounters> {
    let field = |name: &str| -> Option<u64> {
        io.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some(IoCounters {
        read_bytes: field("read_bytes")?,
        write_bytes: field("write_bytes")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT: &str = "4242 (sluice (x) y) R 1 4242 4242 0 -1 4194304 2710 0 0 0 \
                        153 27 0 0 20 0 9 0 123456 987654321 4321 18446744073709551615";

    #[test]
    fn machine_busy_time_leaves_out_idle_and_iowait() {
        let stat = "cpu  100 20 30 4000 50 6 7 8 0 0\ncpu0 50 10 15 2000 25 3 3 4 0 0\n";
        // user + nice + system + irq + softirq + steal = 171 ticks.
        assert_eq!(
            parse_proc_stat_busy(stat),
            Some(Duration::from_millis(1710))
        );
        assert_eq!(parse_proc_stat_busy("cpu0 1 2 3\n"), None);
        assert_eq!(parse_proc_stat_busy("cpu  1 x 3\n"), None);
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let cpu = parse_stat_cpu(STAT).unwrap();
        assert_eq!(cpu.user, Duration::from_millis(1530));
        assert_eq!(cpu.system, Duration::from_millis(270));
        assert_eq!(parse_stat_cpu("1 (x) R 1 2"), None);
        assert_eq!(parse_stat_cpu("no parenthesis"), None);
    }

    #[test]
    fn status_and_io_parse() {
        let status = "Name:\tsluice\nVmPeak:\t  300000 kB\nVmHWM:\t   81234 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_status_hwm(status), Some(81_234 * 1024));
        assert_eq!(parse_status_hwm("VmRSS:\t1 kB\n"), None);
        assert_eq!(parse_status_hwm("VmHWM:\tlots kB\n"), None);
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\n\
                  write_bytes: 8192\ncancelled_write_bytes: 0\n";
        let c = parse_io(io).unwrap();
        assert_eq!((c.read_bytes, c.write_bytes), (4096, 8192));
        assert_eq!(parse_io("read_bytes: 1\n"), None);
    }

    /// Spins until the process CPU clock has advanced by `at_least` (not a timing assertion:
    /// the loop ends whenever the work is done, however long it takes).
    fn burn_cpu(at_least: Duration) {
        let start = cpu_time::ProcessTime::now();
        let mut x = 1u64;
        while start.elapsed() < at_least {
            for _ in 0..10_000 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
            }
        }
        std::hint::black_box(x);
    }

    #[test]
    fn sampler_sees_busy_work_and_memory() {
        let before = ResourceSample::now();
        // Five USER_HZ ticks of work and then some: enough for a 10 ms-resolution counter.
        burn_cpu(Duration::from_millis(120));
        let after = ResourceSample::now();
        let usage = before.usage_until(&after, &MetricsDelta::default());
        let total = usage.cpu.total_seconds.unwrap();
        assert!(total > 0.0, "{usage:?}");
        assert_eq!(usage.cpu.foreground_seconds, Some(total));
        if cfg!(target_os = "linux") {
            assert!(usage.cpu.user_seconds.unwrap() > 0.0, "{usage:?}");
            assert!(usage.peak_rss_bytes.unwrap() > 0, "{usage:?}");
        }
    }

    #[test]
    fn foreground_is_what_the_jobs_did_not_use_and_never_negative() {
        let at = |user_ms: u64| ResourceSample {
            at: Instant::now(),
            cpu: Some(CpuTimes {
                user: Duration::from_millis(user_ms),
                system: Duration::from_millis(100),
            }),
            cpu_clock: None,
            io: Some(IoCounters {
                read_bytes: user_ms,
                write_bytes: 2 * user_ms,
            }),
        };
        let mut engine = MetricsDelta::default();
        engine.flush.cpu_seconds = 0.25;
        engine.compaction.cpu_seconds = 0.5;
        let usage = at(1_000).usage_until(&at(3_000), &engine);
        assert_eq!(usage.cpu.user_seconds, Some(2.0));
        assert_eq!(usage.cpu.system_seconds, Some(0.0));
        assert_eq!(usage.cpu.total_seconds, Some(2.0));
        assert_eq!(usage.cpu.foreground_seconds, Some(1.25));
        assert_eq!(usage.io_write_bytes, Some(4_000));
        assert_eq!(usage.io_read_bytes, Some(2_000));
        engine.compaction.cpu_seconds = 5.0;
        let usage = at(1_000).usage_until(&at(3_000), &engine);
        assert_eq!(usage.cpu.foreground_seconds, Some(0.0));
        let none = ResourceSample {
            cpu: None,
            io: None,
            ..at(0)
        };
        let usage = none.usage_until(&none, &engine);
        assert_eq!(usage.cpu.total_seconds, None);
        assert_eq!(usage.cpu.foreground_seconds, None);
        assert_eq!(usage.io_write_bytes, None);
        let v = serde_json::to_value(usage).unwrap();
        assert!(v["cpu"]["user_seconds"].is_null() && v["io_write_bytes"].is_null());
        assert_eq!(v["cpu"]["compaction_seconds"], 5.0);
    }

    proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,300}") {
            let _ = parse_stat_cpu(&s);
            let _ = parse_status_hwm(&s);
            let _ = parse_io(&s);
        }

        #[test]
        fn large_tick_counts_do_not_overflow(user in any::<u64>(), system in any::<u64>()) {
            let line = format!("1 (a) R {} {user} {system}", "0 ".repeat(10));
            let cpu = parse_stat_cpu(&line);
            let fits = |t: u64| t.checked_mul(1_000_000_000 / USER_HZ).is_some();
            prop_assert_eq!(cpu.is_some(), fits(user) && fits(system));
        }
    }
}
