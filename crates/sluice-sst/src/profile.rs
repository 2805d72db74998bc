//! The stage profile: where one compaction (or flush) spent its time, step by step.
//!
//! The PCP paper splits a compaction into seven steps per data block. Every executor records the
//! time it spends in each, so users can see which resource bounds a compaction. Times are summed
//! across threads, so for parallel executors the sum of steps may exceed the wall time.

use std::time::Duration;

/// The seven steps of a compaction (DESIGN.md section 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// S1: read a block and its trailer from storage.
    Read,
    /// S2: verify the block's checksum.
    Checksum,
    /// S3: decompress it.
    Decompress,
    /// S4: merge the inputs, drop shadowed versions, build the new block.
    Merge,
    /// S5: compress the new block.
    Compress,
    /// S6: checksum the new block.
    Rechecksum,
    /// S7: write the new block to the output file.
    Write,
}

impl Step {
    /// All steps in order.
    pub const ALL: [Step; 7] = [
        Step::Read,
        Step::Checksum,
        Step::Decompress,
        Step::Merge,
        Step::Compress,
        Step::Rechecksum,
        Step::Write,
    ];

    /// The lower-case name used in JSON and tables.
    pub fn name(self) -> &'static str {
        match self {
            Step::Read => "read",
            Step::Checksum => "checksum",
            Step::Decompress => "decompress",
            Step::Merge => "merge",
            Step::Compress => "compress",
            Step::Rechecksum => "rechecksum",
            Step::Write => "write",
        }
    }
}

/// Time per step plus the volume a compaction or flush moved.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageProfile {
    /// Nanoseconds spent in each step, indexed like [`Step::ALL`].
    pub step_nanos: [u64; 7],
    /// Bytes read from input files (stored, i.e. compressed, sizes including trailers).
    pub bytes_read: u64,
    /// Bytes written to output files.
    pub bytes_written: u64,
    /// Entries read from the inputs.
    pub entries_in: u64,
    /// Entries written to the outputs.
    pub entries_out: u64,
    /// Wall-clock nanoseconds from start to finish.
    pub wall_nanos: u64,
    /// CPU nanoseconds (user + system) of the threads that did the work.
    pub cpu_nanos: u64,
}

impl StageProfile {
    /// Adds `d` to step `s`.
    #[inline]
    pub fn add(&mut self, s: Step, d: Duration) {
        self.step_nanos[s as usize] += d.as_nanos() as u64;
    }

    /// Seconds spent in step `s`.
    pub fn step_seconds(&self, s: Step) -> f64 {
        self.step_nanos[s as usize] as f64 / 1e9
    }

    /// Wall seconds.
    pub fn wall_seconds(&self) -> f64 {
        self.wall_nanos as f64 / 1e9
    }

    /// Input bytes per wall second, in MB/s (10^6 bytes): the document's compaction bandwidth.
    pub fn bandwidth_mb_s(&self) -> f64 {
        if self.wall_nanos == 0 {
            0.0
        } else {
            self.bytes_read as f64 / self.wall_seconds() / 1e6
        }
    }

    /// Accumulates `other` into `self` (all fields are sums).
    pub fn merge(&mut self, other: &StageProfile) {
        for (a, b) in self.step_nanos.iter_mut().zip(other.step_nanos) {
            *a += b;
        }
        self.bytes_read += other.bytes_read;
        self.bytes_written += other.bytes_written;
        self.entries_in += other.entries_in;
        self.entries_out += other.entries_out;
        self.wall_nanos += other.wall_nanos;
        self.cpu_nanos += other.cpu_nanos;
    }
}

/// Busy and idle time of one stage of a multi-threaded executor, summed over its threads, so a
/// user can see which stage is the bottleneck: the busiest stage bounds the pipeline, and idle
/// time is time spent waiting on a queue for a neighbour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageTiming {
    /// Stage name: `read`, `compute`, `write`, `index decoder`, `data decoder`, ...
    pub stage: String,
    /// Threads that ran the stage.
    pub threads: u32,
    /// Nanoseconds working.
    pub busy_nanos: u64,
    /// Nanoseconds blocked on a queue.
    pub idle_nanos: u64,
}

/// CPU time consumed so far by the calling thread (user + system), with the clock's full
/// resolution (`CLOCK_THREAD_CPUTIME_ID`), so short jobs are not rounded to zero. Zero if the
/// platform offers no thread clock.
pub fn thread_cpu_time() -> Duration {
    cpu_time::ThreadTime::try_now().map_or(Duration::ZERO, |t| t.as_duration())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sums_and_bandwidth_uses_wall_time() {
        let mut a = StageProfile::default();
        a.add(Step::Read, Duration::from_millis(5));
        a.bytes_read = 10_000_000;
        a.wall_nanos = 1_000_000_000;
        let mut b = a;
        b.add(Step::Write, Duration::from_millis(7));
        b.merge(&a);
        assert_eq!(b.step_nanos[Step::Read as usize], 10_000_000);
        assert_eq!(b.step_nanos[Step::Write as usize], 7_000_000);
        assert_eq!(a.bandwidth_mb_s(), 10.0);
        assert_eq!(b.bandwidth_mb_s(), 10.0);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let before = thread_cpu_time();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        assert!(
            thread_cpu_time() > before,
            "busy work must advance the thread CPU clock"
        );
    }
}
