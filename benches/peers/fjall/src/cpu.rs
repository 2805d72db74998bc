//! The process's CPU time, every thread included (the client and fjall's workers, exited
//! threads too), from `/proc/self/stat`: no dependency and no `unsafe`, at the kernel's clock
//! tick resolution (10 ms). The fields are Sluice's `cpu` object's.

use serde::Serialize;

/// Linux's `USER_HZ`: `/proc` reports CPU times in 1/100 s.
const TICKS_PER_SECOND: f64 = 100.0;

/// CPU seconds, user and system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CpuUsage {
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub total_seconds: f64,
}

impl CpuUsage {
    /// The process's CPU time so far; zero if `/proc` cannot be read (not Linux).
    pub fn now() -> CpuUsage {
        std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|stat| parse_stat(&stat))
            .unwrap_or_default()
    }

    /// The CPU time spent since `before`, rounded to whole ticks.
    pub fn since(self, before: CpuUsage) -> CpuUsage {
        let round = |s: f64| (s * TICKS_PER_SECOND).round() / TICKS_PER_SECOND;
        let user_seconds = round(self.user_seconds - before.user_seconds);
        let system_seconds = round(self.system_seconds - before.system_seconds);
        CpuUsage {
            user_seconds,
            system_seconds,
            total_seconds: round(user_seconds + system_seconds),
        }
    }
}

/// utime and stime, fields 14 and 15 of `/proc/self/stat`. They follow the command name, which
/// is in parentheses and may hold spaces, so fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<CpuUsage> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace().skip(11);
    let user = fields.next()?.parse::<u64>().ok()? as f64 / TICKS_PER_SECOND;
    let system = fields.next()?.parse::<u64>().ok()? as f64 / TICKS_PER_SECOND;
    Some(CpuUsage {
        user_seconds: user,
        system_seconds: system,
        total_seconds: user + system,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_utime_and_stime_after_a_command_with_spaces() {
        let stat = "4242 (fjall bench) R 1 2 3 4 5 6 7 8 9 10 250 75 0 0 20 0 9";
        let cpu = parse_stat(stat).expect("parses");
        assert_eq!((cpu.user_seconds, cpu.system_seconds), (2.5, 0.75));
        assert!(CpuUsage::now().total_seconds >= 0.0);
    }
}
