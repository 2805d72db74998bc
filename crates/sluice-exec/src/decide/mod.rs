//! The CoPro+ decision component (the CoPro paper, sections 3.2 and 3.3): before each share of a
//! compaction, pipeline it or not, from the load of the side that runs it.
//!
//! The CoPro paper's formula (1) is
//!
//! ```text
//! f = α · C_cost + β · M_usage + φ · V_size
//! ```
//!
//! with `C_cost` the CPU use, `M_usage` the memory use and `V_size` the share of the input's
//! values that are "large". When `f` reaches the threshold the pipeline is switched off and the
//! share runs sequentially (one thread): the pipeline's extra threads cost CPU, which a busy or
//! weak side (the document's near-data device) cannot spare, and for large values they buy less
//! bandwidth than they cost (the CoPro paper Fig. 7: on the host the bandwidth-gain / CPU-gain
//! ratio falls below 1 from 32 KB values, on the device below 0.5 from 16 KB). Below the
//! threshold the share is pipelined.
//!
//! Which CPU figure: `C_cost` is the *system-wide* CPU use ([`Measurements::cpu_use`]), as the
//! document's "CPU 使用率" is: the component exists to leave CPU to the device's other tasks,
//! so what counts is how busy the machine is, not how much of it this process takes.
//! [`Measurements::process_cpu_use`] is measured and logged alongside but does not enter `f`.
//!
//! This module only decides; [`LoadSampler`] measures and the caller (host or worker) logs the
//! [`Decision`], counts it in [`DecisionCounters`] and runs the chosen executor. It is separate
//! from [`crate::auto`], which picks among all executors from measured step times.

mod proc;
mod sampler;
mod value_share;

#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_sst::{Error, Result};

use crate::CompactionMode;

pub use sampler::LoadSampler;
pub use value_share::large_value_share;

/// Weights and thresholds of formula (1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DecisionConfig {
    /// α, the weight of the system-wide CPU use.
    pub cpu_weight: f64,
    /// β, the weight of the memory use.
    pub mem_weight: f64,
    /// φ, the weight of the large-value share.
    pub value_weight: f64,
    /// `f_threshold`: at or above it the share runs sequentially, below it pipelined.
    pub threshold: f64,
    /// A value of more than this many bytes is large (see [`large_value_share`] for how the
    /// histogram's buckets are read against it).
    pub large_value_bytes: u64,
}

impl DecisionConfig {
    /// The CoPro paper's proportion threshold: 70% of large values.
    pub const DEFAULT_THRESHOLD: f64 = 0.7;
    /// Large values on the host: more than 32 KiB (the CoPro paper section 3.3).
    pub const HOST_LARGE_VALUE_BYTES: u64 = 32 << 10;
    /// Large values on the device (here, a worker): more than 16 KiB.
    pub const WORKER_LARGE_VALUE_BYTES: u64 = 16 << 10;

    /// The host's settings in the CoPro paper's experiment: `f` is the large-value share alone
    /// (α = β = 0, φ = 1), threshold 0.7, large values above 32 KiB.
    pub fn host() -> Self {
        DecisionConfig {
            cpu_weight: 0.0,
            mem_weight: 0.0,
            value_weight: 1.0,
            threshold: Self::DEFAULT_THRESHOLD,
            large_value_bytes: Self::HOST_LARGE_VALUE_BYTES,
        }
    }

    /// [`DecisionConfig::host`] with the device's 16 KiB large-value size, for workers.
    pub fn worker() -> Self {
        DecisionConfig {
            large_value_bytes: Self::WORKER_LARGE_VALUE_BYTES,
            ..Self::host()
        }
    }

    /// Checks that the weights are finite and not negative and the threshold is finite and
    /// above 0; returns [`Error::InvalidArgument`] naming the field otherwise. All weights 0
    /// is allowed: `f` is then always 0 and every share is pipelined (the CoPro paper's plain CoPro).
    pub fn validate(&self) -> Result<()> {
        for (name, w) in [
            ("cpu_weight", self.cpu_weight),
            ("mem_weight", self.mem_weight),
            ("value_weight", self.value_weight),
        ] {
            if !w.is_finite() || w < 0.0 {
                return Err(Error::InvalidArgument(format!(
                    "decision {name} must be a finite number >= 0, not {w}"
                )));
            }
        }
        if !(self.threshold > 0.0 && self.threshold.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "decision threshold must be a finite number > 0, not {}",
                self.threshold
            )));
        }
        Ok(())
    }
}

/// What one side measured before a share: the inputs of formula (1) and the process's CPU use.
/// Every field is a share in `0.0..=1.0`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measurements {
    /// System-wide CPU use since the last sample: busy ticks of all CPUs over all ticks. This
    /// is `C_cost`.
    pub cpu_use: f64,
    /// This process's CPU use over the same interval, as a share of all cores (logged only).
    pub process_cpu_use: f64,
    /// Memory use: `1 - MemAvailable / MemTotal`. This is `M_usage`.
    pub mem_use: f64,
    /// Share of the input's entries whose value is large ([`large_value_share`]). This is
    /// `V_size`.
    pub large_value_share: f64,
}

/// The outcome of [`decide`].
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// [`CompactionMode::Pipelined`] or [`CompactionMode::Sequential`], nothing else.
    pub mode: CompactionMode,
    /// The value of formula (1); finite whenever the configuration is valid.
    pub f: f64,
    /// The measurements as given.
    pub inputs: Measurements,
    /// A sentence for the log: the terms of `f`, the threshold, the choice.
    pub reason: String,
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} (process cpu {:.3}): {}",
            self.mode, self.inputs.process_cpu_use, self.reason
        )
    }
}

/// Evaluates formula (1) and chooses: [`CompactionMode::Sequential`] when `f >= threshold`,
/// else [`CompactionMode::Pipelined`]. Pure: same inputs, same decision.
///
/// Each input is clamped to `0.0..=1.0` first (they are shares; a NaN counts as 0), so a
/// faulty measurement cannot push `f` beyond what the weights allow. If `f` is still not a
/// number (only with an invalid `cfg`, e.g. a NaN weight), the share runs sequentially: the
/// cheaper choice when nothing is known. Callers should [`DecisionConfig::validate`] once when
/// the configuration is set.
pub fn decide(cfg: &DecisionConfig, m: &Measurements) -> Decision {
    let clamp = |v: f64| if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
    let (cpu, mem, large) = (
        clamp(m.cpu_use),
        clamp(m.mem_use),
        clamp(m.large_value_share),
    );
    let f = cfg.cpu_weight * cpu + cfg.mem_weight * mem + cfg.value_weight * large;
    let sequential = f.is_nan() || f >= cfg.threshold;
    let mode = if sequential {
        CompactionMode::Sequential
    } else {
        CompactionMode::Pipelined
    };
    let clamped = if (cpu, mem, large) != (m.cpu_use, m.mem_use, m.large_value_share) {
        " (inputs outside 0..=1 clamped)"
    } else {
        ""
    };
    let reason = format!(
        "f = {:.3}*cpu {cpu:.3} + {:.3}*mem {mem:.3} + {:.3}*large values (> {} B) {large:.3} \
         = {f:.3} {} threshold {:.3}{clamped}: {}",
        cfg.cpu_weight,
        cfg.mem_weight,
        cfg.value_weight,
        cfg.large_value_bytes,
        if sequential { ">=" } else { "<" },
        cfg.threshold,
        if sequential {
            "sequential, the pipeline's threads would cost more than they gain"
        } else {
            "pipelined, resources to spare"
        },
    );
    Decision {
        mode,
        f,
        inputs: *m,
        reason,
    }
}

/// Decisions taken so far, for `stats`. Relaxed atomics: each count is exact, but a reader
/// may see one count updated before the other.
#[derive(Debug, Default)]
pub struct DecisionCounters {
    pipelined: AtomicU64,
    sequential: AtomicU64,
}

impl DecisionCounters {
    /// Counts `d` under its mode (anything but `Pipelined` counts as sequential, which is all
    /// [`decide`] returns besides).
    pub fn record(&self, d: &Decision) {
        let counter = match d.mode {
            CompactionMode::Pipelined => &self.pipelined,
            _ => &self.sequential,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Decisions to pipeline.
    pub fn pipelined(&self) -> u64 {
        self.pipelined.load(Ordering::Relaxed)
    }

    /// Decisions to run sequentially.
    pub fn sequential(&self) -> u64 {
        self.sequential.load(Ordering::Relaxed)
    }
}
