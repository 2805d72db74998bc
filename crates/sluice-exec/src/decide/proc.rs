//! Parsers for the three Linux `/proc` files the load sampler reads, as pure functions over the
//! file's text so that they can be tested with fixtures.
//!
//! Every parser returns [`ProcParseError`] for text it does not understand (a missing line or
//! field, a field that is not a number); none panics on any input. Fields the parsers do not
//! need are ignored, so text from newer kernels with more fields still parses.
//!
//! All CPU times in `/proc/stat` and `/proc/self/stat` are in the same unit, `USER_HZ` clock
//! ticks. The sampler only ever divides one tick count by another, so it never needs to know how
//! long a tick is (that would take `sysconf(_SC_CLK_TCK)`, an `unsafe` call).

use std::fmt;

/// A `/proc` file whose text did not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcParseError {
    /// The file, e.g. `/proc/stat`.
    pub file: &'static str,
    /// What was wrong.
    pub reason: String,
}

impl fmt::Display for ProcParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot parse {}: {}", self.file, self.reason)
    }
}

impl std::error::Error for ProcParseError {}

const STAT: &str = "/proc/stat";
const SELF_STAT: &str = "/proc/self/stat";
const MEMINFO: &str = "/proc/meminfo";

fn error(file: &'static str, reason: impl Into<String>) -> ProcParseError {
    ProcParseError {
        file,
        reason: reason.into(),
    }
}

/// Machine-wide CPU time since boot, summed over all CPUs, from the aggregate `cpu` line of
/// `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks in any state other than idle and waiting for I/O.
    pub busy: u64,
    /// Ticks in every state. `busy <= total`.
    pub total: u64,
    /// Per-CPU `cpuN` lines: the CPUs online when the file was read.
    pub cpus: u32,
}

/// Parses `/proc/stat`.
///
/// The aggregate line is `cpu user nice system idle iowait irq softirq steal guest guest_nice`.
/// `total` sums the first eight fields: `guest` and `guest_nice` are already counted in `user`
/// and `nice`, so adding them would count guest time twice. `busy = total - idle - iowait`:
/// a CPU waiting for I/O is free to run other work. Kernels before 2.6 print only the first
/// four fields; the missing ones read as 0.
pub fn parse_proc_stat(text: &str) -> Result<CpuTimes, ProcParseError> {
    let mut aggregate = None;
    let mut cpus = 0u32;
    for line in text.lines() {
        let mut words = line.split_ascii_whitespace();
        match words.next() {
            Some("cpu") => {
                let mut fields = [0u64; 8];
                let mut n = 0;
                for (slot, word) in fields.iter_mut().zip(words) {
                    *slot = word.parse().map_err(|_| {
                        error(
                            STAT,
                            format!("cpu field {} is not a number: {word:?}", n + 1),
                        )
                    })?;
                    n += 1;
                }
                if n < 4 {
                    return Err(error(STAT, format!("cpu line has {n} fields, need 4")));
                }
                aggregate = Some(fields);
            }
            Some(w)
                if w.strip_prefix("cpu")
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
            {
                cpus = cpus.saturating_add(1);
            }
            _ => {}
        }
    }
    let [user, nice, system, idle, iowait, irq, softirq, steal] =
        aggregate.ok_or_else(|| error(STAT, "no aggregate cpu line"))?;
    let total = [user, nice, system, idle, iowait, irq, softirq, steal]
        .into_iter()
        .fold(0u64, u64::saturating_add);
    Ok(CpuTimes {
        busy: total.saturating_sub(idle).saturating_sub(iowait),
        total,
        cpus,
    })
}

/// This process's CPU use from `/proc/self/stat`, in ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessTimes {
    /// User plus system ticks of every thread, live or exited (`utime + stime`).
    pub cpu: u64,
    /// Ticks from boot to the process's start (`starttime`).
    pub start: u64,
}

/// Parses `/proc/self/stat`: `pid (comm) state ppid ...`, where `comm` may itself hold spaces
/// and parentheses, so fields are counted from the last `)`. `utime`, `stime` and `starttime`
/// are fields 14, 15 and 22 (numbered from 1, as in proc(5)).
pub fn parse_self_stat(text: &str) -> Result<ProcessTimes, ProcParseError> {
    let close = text
        .rfind(')')
        .ok_or_else(|| error(SELF_STAT, "no ')' closing the command name"))?;
    let rest = text.get(close + 1..).unwrap_or_default();
    // Field 3 (`state`) is the first word after the `)`.
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    let field = |n: usize| -> Result<u64, ProcParseError> {
        let word = fields
            .get(n - 3)
            .ok_or_else(|| error(SELF_STAT, format!("field {n} missing")))?;
        word.parse()
            .map_err(|_| error(SELF_STAT, format!("field {n} is not a number: {word:?}")))
    };
    Ok(ProcessTimes {
        cpu: field(14)?.saturating_add(field(15)?),
        start: field(22)?,
    })
}

/// Memory from `/proc/meminfo`, in KiB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`.
    pub total_kib: u64,
    /// `MemAvailable`: what new work could get without swapping. Kernels before 3.14 lack the
    /// line; then it is estimated as `MemFree + Buffers + Cached`, which overstates it a little
    /// (not all cache can be dropped).
    pub available_kib: u64,
}

impl MemInfo {
    /// `1 - available / total`, in `0.0..=1.0`; 0 when the total is 0.
    pub fn use_share(&self) -> f64 {
        if self.total_kib == 0 {
            return 0.0;
        }
        (1.0 - self.available_kib as f64 / self.total_kib as f64).clamp(0.0, 1.0)
    }
}

/// Parses `/proc/meminfo` (`Name:   value kB` lines).
pub fn parse_meminfo(text: &str) -> Result<MemInfo, ProcParseError> {
    let field = |name: &str| -> Result<Option<u64>, ProcParseError> {
        let Some(line) = text
            .lines()
            .find(|l| l.split(':').next().is_some_and(|n| n.trim() == name))
        else {
            return Ok(None);
        };
        let value = line
            .split(':')
            .nth(1)
            .and_then(|v| v.split_ascii_whitespace().next())
            .ok_or_else(|| error(MEMINFO, format!("{name} has no value")))?;
        value
            .parse()
            .map(Some)
            .map_err(|_| error(MEMINFO, format!("{name} is not a number: {value:?}")))
    };
    let total_kib = field("MemTotal")?.ok_or_else(|| error(MEMINFO, "no MemTotal line"))?;
    let available_kib = match field("MemAvailable")? {
        Some(v) => v,
        None => {
            let part = |name: &str| {
                field(name)?.ok_or_else(|| {
                    error(MEMINFO, format!("neither MemAvailable nor {name} present"))
                })
            };
            part("MemFree")?
                .saturating_add(part("Buffers")?)
                .saturating_add(part("Cached")?)
        }
    };
    Ok(MemInfo {
        total_kib,
        available_kib,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const STAT_FIXTURE: &str = "\
cpu  2297016 0 301179 1051497 104880 0 7940 9464 500 0
cpu0 1118277 0 134984 596590 31521 0 287 4572 0 0
cpu1 1178738 0 166194 454907 73359 0 7653 4892 0 0
intr 22731679 0 0 0
ctxt 38900046
btime 1700000000
";

    #[test]
    fn proc_stat_aggregate_line() {
        let t = parse_proc_stat(STAT_FIXTURE).unwrap();
        let total = 2297016 + 301179 + 1051497 + 104880 + 7940 + 9464;
        // Guest time (500) is inside user time already and must not be added again.
        assert_eq!(t.total, total);
        assert_eq!(t.busy, total - 1051497 - 104880);
        assert_eq!(t.cpus, 2);
    }

    #[test]
    fn proc_stat_old_kernel_four_fields() {
        let t = parse_proc_stat("cpu 10 2 8 80\ncpu0 10 2 8 80\n").unwrap();
        assert_eq!(
            t,
            CpuTimes {
                busy: 20,
                total: 100,
                cpus: 1
            }
        );
    }

    #[test]
    fn proc_stat_malformed() {
        for bad in [
            "",
            "intr 1 2 3\n",
            "cpu 1 2 3\n",
            "cpu 1 2 x 4 5\n",
            "cpu -1 2 3 4\n",
            "cpu 99999999999999999999999 2 3 4\n",
        ] {
            let e = parse_proc_stat(bad).unwrap_err();
            assert_eq!(e.file, "/proc/stat", "{bad:?}");
        }
        // Counters near u64::MAX saturate rather than overflow.
        let big = format!("cpu {} {} 0 0\n", u64::MAX, u64::MAX);
        let t = parse_proc_stat(&big).unwrap();
        assert_eq!((t.busy, t.total), (u64::MAX, u64::MAX));
    }

    #[test]
    fn self_stat_fields_counted_from_last_paren() {
        // A command name with spaces and a ')' of its own.
        let text = "15749 (my (odd) cmd) R 15744 15744 13997 0 -1 4194304 99 0 0 0 \
                    250 70 0 0 20 0 1 0 1893828 3133440 358 18446744073709551615\n";
        let p = parse_self_stat(text).unwrap();
        assert_eq!(
            p,
            ProcessTimes {
                cpu: 320,
                start: 1893828
            }
        );
    }

    #[test]
    fn self_stat_malformed() {
        for bad in [
            "",
            "123 cat R 1 2 3",
            "123 (cat) R 1 2 3 4 5 6 7 8 9 10",
            "123 (cat) R 1 2 3 4 5 6 7 8 x 10 0 0 20 0 1 0 5",
            "123 (cat) R 1 2 3 4 5 6 7 8 9 10 0 0 20 0 1 0 -5",
        ] {
            assert!(parse_self_stat(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn meminfo_available_and_fallback() {
        let m = parse_meminfo(
            "MemTotal:       24684084 kB\nMemFree:        21895896 kB\n\
             MemAvailable:   23814408 kB\nBuffers:            5620 kB\n",
        )
        .unwrap();
        assert_eq!((m.total_kib, m.available_kib), (24684084, 23814408));
        assert!((m.use_share() - (1.0 - 23814408.0 / 24684084.0)).abs() < 1e-12);

        // Before Linux 3.14: free + buffers + cache.
        let old = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\n";
        let m = parse_meminfo(old).unwrap();
        assert_eq!(m.available_kib, 400);
        assert!((m.use_share() - 0.6).abs() < 1e-12);
    }

    #[test]
    fn meminfo_malformed() {
        for bad in [
            "",
            "MemFree: 100 kB\n",
            "MemTotal: lots kB\nMemAvailable: 1 kB\n",
            "MemTotal:\nMemAvailable: 1 kB\n",
            "MemTotal: 1000 kB\nMemFree: 100 kB\n",
        ] {
            assert_eq!(
                parse_meminfo(bad).unwrap_err().file,
                "/proc/meminfo",
                "{bad:?}"
            );
        }
        // More available than total (a racing read) still gives a share in range.
        let m = parse_meminfo("MemTotal: 10 kB\nMemAvailable: 20 kB\n").unwrap();
        assert_eq!(m.use_share(), 0.0);
        assert_eq!(MemInfo::default().use_share(), 0.0);
    }

    proptest! {
        #[test]
        fn random_text_never_panics(text in ".{0,300}") {
            let _ = parse_proc_stat(&text);
            let _ = parse_self_stat(&text);
            let _ = parse_meminfo(&text);
        }

        #[test]
        fn random_numbers_never_panic(fields in proptest::collection::vec(any::<u64>(), 0..30)) {
            let line: Vec<String> = fields.iter().map(u64::to_string).collect();
            let line = line.join(" ");
            if let Ok(t) = parse_proc_stat(&format!("cpu {line}\n")) {
                prop_assert!(t.busy <= t.total);
            }
            let _ = parse_self_stat(&format!("1 (x) R {line}"));
            let _ = parse_meminfo(&format!("MemTotal: {line}\nMemAvailable: {line}\n"));
        }
    }
}
