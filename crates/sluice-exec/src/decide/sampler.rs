//! The load sampler: CPU and memory use read from `/proc`, as shares over the interval since
//! the previous sample.
//!
//! - system CPU use: busy over total ticks of the aggregate `cpu` line of `/proc/stat`;
//! - process CPU use: this process's `utime + stime` (`/proc/self/stat`) over the same total,
//!   i.e. a share of all cores (1.0 = every core busy in this process);
//! - memory use: `1 - MemAvailable / MemTotal` from `/proc/meminfo`, as of the sample.
//!
//! The first sample has no previous one: system CPU use is then taken over the totals since
//! boot, and process CPU use over the process's lifetime, estimated as `total - starttime * cpus`
//! ticks of all CPUs (the per-CPU tick sums of `/proc/stat` advance with uptime, so this is the
//! machine's ticks since the process started, give or take CPUs brought online later). Every
//! figure is a ratio of tick counts, so the length of a tick never matters.
//!
//! An interval too short to see a tick (two samples within one `USER_HZ` period) repeats the
//! previous shares instead of reporting 0/0. A file that cannot be read or parsed (not Linux,
//! `/proc` not mounted, a format this code does not know) gives 0 for the figures that need it,
//! and [`LoadSampler::unavailable_reason`] says which and why; the next sample tries again.

use std::path::{Path, PathBuf};

use super::Measurements;
use super::proc::{
    CpuTimes, ProcParseError, ProcessTimes, parse_meminfo, parse_proc_stat, parse_self_stat,
};

/// Reads the machine's and this process's load from `/proc`.
///
/// Not shared: each decision site (the host, a worker) owns one, usually behind a mutex, and
/// its intervals run from one of its samples to the next.
#[derive(Debug)]
pub struct LoadSampler {
    proc_root: PathBuf,
    /// Machine totals of the last sample that read `/proc/stat`.
    prev_machine: Option<CpuTimes>,
    /// Machine and process totals of the last sample that read both stat files.
    prev_process: Option<(CpuTimes, ProcessTimes)>,
    /// The shares the last sample returned, repeated for an interval with no ticks.
    last: Measurements,
    unavailable: Option<String>,
}

impl Default for LoadSampler {
    fn default() -> Self {
        LoadSampler::new()
    }
}

impl LoadSampler {
    /// A sampler reading `/proc`.
    pub fn new() -> Self {
        LoadSampler::with_proc_root("/proc")
    }

    /// A sampler reading `stat`, `self/stat` and `meminfo` under `root` instead of `/proc`
    /// (for tests, or a host `/proc` mounted elsewhere in a container).
    pub fn with_proc_root(root: impl Into<PathBuf>) -> Self {
        LoadSampler {
            proc_root: root.into(),
            prev_machine: None,
            prev_process: None,
            last: Measurements::default(),
            unavailable: None,
        }
    }

    /// Measures CPU and memory use since the previous sample (see the module comment). The
    /// returned `large_value_share` is 0: the caller fills it from the compaction's inputs
    /// ([`super::large_value_share`]). Never fails: what cannot be measured reads as 0.
    pub fn sample(&mut self) -> Measurements {
        let mut problems = Vec::new();
        let root = self.proc_root.as_path();
        let machine = load(root, "stat", parse_proc_stat, &mut problems);
        let process = load(root, "self/stat", parse_self_stat, &mut problems);
        let mem = load(root, "meminfo", parse_meminfo, &mut problems);

        let cpu_use = match machine {
            Some(cur) => self.system_share(cur),
            None => 0.0,
        };
        let process_cpu_use = match (machine, process) {
            (Some(m), Some(p)) => self.process_share(m, p),
            _ => 0.0,
        };
        let m = Measurements {
            cpu_use,
            process_cpu_use,
            mem_use: mem.map_or(0.0, |m| m.use_share()),
            large_value_share: 0.0,
        };
        self.prev_machine = machine.or(self.prev_machine);
        if let (Some(mc), Some(p)) = (machine, process) {
            self.prev_process = Some((mc, p));
        }
        self.last = m;
        self.unavailable = (!problems.is_empty()).then(|| problems.join("; "));
        m
    }

    /// True unless the last sample failed to read or parse one of the files.
    pub fn is_available(&self) -> bool {
        self.unavailable.is_none()
    }

    /// Why the last sample could not measure everything (`None` when it could).
    pub fn unavailable_reason(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    fn system_share(&self, cur: CpuTimes) -> f64 {
        let (busy, total) = match self.prev_machine {
            Some(prev) => (
                cur.busy.saturating_sub(prev.busy),
                cur.total.saturating_sub(prev.total),
            ),
            None => (cur.busy, cur.total),
        };
        if total == 0 {
            return self.last.cpu_use;
        }
        ratio(busy, total)
    }

    fn process_share(&self, machine: CpuTimes, process: ProcessTimes) -> f64 {
        let (cpu, total) = match self.prev_process {
            Some((prev_machine, prev_process)) => (
                process.cpu.saturating_sub(prev_process.cpu),
                machine.total.saturating_sub(prev_machine.total),
            ),
            None => {
                let cpus = u64::from(machine.cpus.max(1));
                (
                    process.cpu,
                    machine
                        .total
                        .saturating_sub(process.start.saturating_mul(cpus)),
                )
            }
        };
        if total == 0 {
            return self.last.process_cpu_use;
        }
        ratio(cpu, total)
    }
}

/// Reads and parses `root/name`, noting in `problems` why not when it cannot.
fn load<T>(
    root: &Path,
    name: &str,
    parse: fn(&str) -> Result<T, ProcParseError>,
    problems: &mut Vec<String>,
) -> Option<T> {
    let path = root.join(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| problems.push(format!("cannot read {}: {e}", path.display())))
        .ok()?;
    parse(&text).map_err(|e| problems.push(e.to_string())).ok()
}

/// `part / whole` clamped to `0.0..=1.0`. REQUIRES: `whole > 0`.
fn ratio(part: u64, whole: u64) -> f64 {
    (part as f64 / whole as f64).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a fake `/proc` under `root`: aggregate `busy`/`idle` ticks on two CPUs, the
    /// process's `cpu` ticks (all utime) and start tick, and memory in KiB.
    fn write_proc(root: &Path, busy: u64, idle: u64, cpu: u64, start: u64, mem: (u64, u64)) {
        std::fs::create_dir_all(root.join("self")).unwrap();
        std::fs::write(
            root.join("stat"),
            format!("cpu {busy} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1\ncpu1 1 0 0 1\nctxt 5\n"),
        )
        .unwrap();
        std::fs::write(
            root.join("self/stat"),
            format!("7 (sluice worker) S 1 7 7 0 -1 0 0 0 0 0 {cpu} 0 0 0 20 0 4 0 {start} 1 2\n"),
        )
        .unwrap();
        std::fs::write(
            root.join("meminfo"),
            format!("MemTotal: {} kB\nMemAvailable: {} kB\n", mem.0, mem.1),
        )
        .unwrap();
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn shares_over_each_interval() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // Since boot: 1000 ticks on 2 CPUs, 250 busy. The process started at tick 300 of each
        // CPU, so its lifetime is 1000 - 2 * 300 = 400 CPU ticks, of which it used 100.
        write_proc(root, 250, 750, 100, 300, (1000, 400));
        let mut s = LoadSampler::with_proc_root(root);
        let m = s.sample();
        assert!(s.is_available(), "{:?}", s.unavailable_reason());
        assert!(close(m.cpu_use, 0.25), "{m:?}");
        assert!(close(m.process_cpu_use, 0.25), "{m:?}");
        assert!(close(m.mem_use, 0.6), "{m:?}");
        assert_eq!(m.large_value_share, 0.0);

        // Next interval: 200 ticks, 150 busy, 50 of them this process's.
        write_proc(root, 400, 800, 150, 300, (1000, 900));
        let m = s.sample();
        assert!(close(m.cpu_use, 0.75), "{m:?}");
        assert!(close(m.process_cpu_use, 0.25), "{m:?}");
        assert!(close(m.mem_use, 0.1), "{m:?}");

        // No tick elapsed: the previous CPU shares stand; memory is read afresh.
        write_proc(root, 400, 800, 150, 300, (1000, 500));
        let m = s.sample();
        assert!(
            close(m.cpu_use, 0.75) && close(m.process_cpu_use, 0.25),
            "{m:?}"
        );
        assert!(close(m.mem_use, 0.5), "{m:?}");
    }

    #[test]
    fn missing_or_garbled_proc_reads_zero_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = LoadSampler::with_proc_root(dir.path().join("absent"));
        let m = s.sample();
        assert_eq!(m, Measurements::default());
        assert!(!s.is_available());
        assert!(s.unavailable_reason().unwrap().contains("cannot read"));

        let root = dir.path();
        write_proc(root, 250, 750, 100, 300, (1000, 400));
        std::fs::write(root.join("stat"), "garbage\n").unwrap();
        let mut s = LoadSampler::with_proc_root(root);
        let m = s.sample();
        // Both CPU figures need /proc/stat; memory is still measured.
        assert_eq!((m.cpu_use, m.process_cpu_use), (0.0, 0.0));
        assert!(close(m.mem_use, 0.6));
        assert!(s.unavailable_reason().unwrap().contains("/proc/stat"));

        // Once the file is readable again the sampler recovers, measuring since boot.
        write_proc(root, 250, 750, 100, 300, (1000, 400));
        let m = s.sample();
        assert!(s.is_available());
        assert!(close(m.cpu_use, 0.25), "{m:?}");
    }

    #[test]
    fn counters_going_backwards_do_not_underflow() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write_proc(root, 500, 500, 300, 0, (100, 50));
        let mut s = LoadSampler::with_proc_root(root);
        s.sample();
        write_proc(root, 100, 100, 10, 0, (100, 50));
        let m = s.sample();
        for v in [m.cpu_use, m.process_cpu_use, m.mem_use] {
            assert!((0.0..=1.0).contains(&v), "{m:?}");
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_the_real_proc() {
        let mut s = LoadSampler::new();
        let first = s.sample();
        assert!(s.is_available(), "{:?}", s.unavailable_reason());
        // Burn some CPU so the second interval sees ticks of this process.
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let second = s.sample();
        for m in [first, second] {
            for v in [m.cpu_use, m.process_cpu_use, m.mem_use] {
                assert!((0.0..=1.0).contains(&v), "{m:?}");
            }
            assert!(m.mem_use > 0.0, "{m:?}");
        }
    }
}
