//! The `auto` mode: picks an executor before each compaction from the step times measured so
//! far, following the PCP paper section III.
//!
//! A pipeline's bandwidth is bounded by its slowest stage. If I/O (S1 + S7) and compute
//! (S2..S6) are both significant, overlapping them (PCP) hides the smaller; if compute dominates,
//! only more compute threads (C-PPCP) help, up to the number of cores; if one side dominates
//! and there is a single core, extra threads only add hand-offs, so SCP stays.
//!
//! Step times predict; bandwidth measures. Hand-offs, caches and a busy machine can make an
//! overlapping executor slower than SCP however the steps split, so [`no_slower_than_sequential`]
//! overrules the prediction when this database has measured the chosen executor below SCP.

use super::CompactionMode;

/// A side must take at least this share of the step time to be worth overlapping.
const SIGNIFICANT_SHARE: f64 = 0.25;
/// Compute must be this many times the I/O time for more compute threads to pay.
const COMPUTE_BOUND_RATIO: f64 = 2.0;

/// What `auto` picked and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The executor to run.
    pub mode: CompactionMode,
    /// Compute threads, for the parallel executor.
    pub compute_threads: usize,
    /// A sentence for the log.
    pub reason: String,
}

/// Chooses an executor from the step times of the `jobs` compactions run so far (`io`: seconds
/// in S1 and S7; `compute`: seconds in S2..S6), the machine's `cores`, and the configured
/// thread limit.
pub fn choose(io: f64, compute: f64, jobs: u64, cores: usize, max_threads: usize) -> Decision {
    let total = io + compute;
    if jobs == 0 || total <= 0.0 {
        return Decision {
            mode: CompactionMode::Sequential,
            compute_threads: 1,
            reason: "no compaction measured yet: SCP measures the steps".into(),
        };
    }
    let (io_share, compute_share) = (io / total, compute / total);
    let shares = format!(
        "I/O {:.0}%, compute {:.0}%",
        io_share * 100.0,
        compute_share * 100.0
    );
    let threads = cores.min(max_threads).max(1);
    if threads >= 2 && compute >= COMPUTE_BOUND_RATIO * io {
        Decision {
            mode: CompactionMode::Parallel,
            compute_threads: threads,
            reason: format!("compute bound ({shares}): {threads} compute threads"),
        }
    } else if cores >= 2 && io_share >= SIGNIFICANT_SHARE && compute_share >= SIGNIFICANT_SHARE {
        Decision {
            mode: CompactionMode::Pipelined,
            compute_threads: 1,
            reason: format!("I/O and compute both significant ({shares}): overlap them"),
        }
    } else {
        Decision {
            mode: CompactionMode::Sequential,
            compute_threads: 1,
            reason: format!(
                "one resource dominates ({shares}) on {cores} core(s): no overlap to gain"
            ),
        }
    }
}

/// Measurements needed of an executor before its bandwidth counts: enough bytes that one
/// small compaction's fixed costs do not decide.
pub const MIN_MEASURED_BYTES: u64 = 32 << 20;

/// `decision`, unless `bandwidth(mode)` (input bytes per second this database measured of
/// `mode`, `None` when not measured enough) shows its mode slower than SCP's: then SCP.
pub fn no_slower_than_sequential(
    decision: Decision,
    bandwidth: impl Fn(CompactionMode) -> Option<f64>,
) -> Decision {
    if decision.mode == CompactionMode::Sequential {
        return decision;
    }
    match (
        bandwidth(decision.mode),
        bandwidth(CompactionMode::Sequential),
    ) {
        (Some(chosen), Some(sequential)) if chosen < sequential => Decision {
            mode: CompactionMode::Sequential,
            compute_threads: 1,
            reason: format!(
                "{} measured at {:.0} MB/s, below SCP's {:.0} MB/s (the step times said: {})",
                decision.mode,
                chosen / 1e6,
                sequential / 1e6,
                decision.reason
            ),
        },
        _ => decision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_first_then_follows_the_bottleneck() {
        assert_eq!(choose(0.0, 0.0, 0, 2, 4).mode, CompactionMode::Sequential);
        let d = choose(1.0, 4.0, 3, 2, 4);
        assert_eq!((d.mode, d.compute_threads), (CompactionMode::Parallel, 2));
        assert!(d.reason.contains("compute bound"), "{}", d.reason);
        assert_eq!(choose(1.0, 1.5, 3, 2, 4).mode, CompactionMode::Pipelined);
        assert_eq!(choose(9.0, 1.0, 3, 2, 4).mode, CompactionMode::Sequential);
        assert_eq!(choose(1.0, 4.0, 3, 1, 4).mode, CompactionMode::Sequential);
    }

    #[test]
    fn an_executor_measured_slower_than_sequential_is_not_chosen() {
        let pipelined = choose(1.0, 1.5, 3, 2, 4);
        let measured = |p: f64, s: f64| {
            move |m: CompactionMode| match m {
                CompactionMode::Pipelined => Some(p),
                CompactionMode::Sequential => Some(s),
                _ => None,
            }
        };
        let d = no_slower_than_sequential(pipelined.clone(), measured(90e6, 100e6));
        assert_eq!(d.mode, CompactionMode::Sequential);
        assert!(d.reason.contains("below SCP's 100 MB/s"), "{}", d.reason);
        // Faster, or not measured yet: the prediction stands.
        let d = no_slower_than_sequential(pipelined.clone(), measured(110e6, 100e6));
        assert_eq!(d, pipelined);
        assert_eq!(
            no_slower_than_sequential(pipelined.clone(), |_| None),
            pipelined
        );
    }
}
