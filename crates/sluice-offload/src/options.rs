//! How a host offloads compactions to workers: `Options::offload`.

use std::time::Duration;

use sluice_rpc::auth::Secret;

use sluice::CompactionMode;
use sluice::{Error, Result};

/// How a compaction's sub-tasks are shared between the host and its workers.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Split {
    /// Co-KV: the host takes `host_share` of the input bytes, the workers share the rest
    /// equally.
    Static {
        /// The host's share, in `[0, 1]`.
        host_share: f64,
    },
    /// TStore/DStore, self-scheduled: the sub-tasks are handed out as contiguous chunks on
    /// demand, so each side takes work as fast as it gets through it and a slower side ends
    /// up with less. Chunks shrink as the queue drains (guided self-scheduling), sized by
    /// each side's recently measured bandwidth (a moving average) where known.
    Dynamic,
}

impl Default for Split {
    fn default() -> Self {
        Split::Static { host_share: 0.5 }
    }
}

impl std::str::FromStr for Split {
    type Err = String;

    /// `static`, `static:0.3` (the host's share) or `dynamic`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.split_once(':') {
            None if s == "dynamic" => Ok(Split::Dynamic),
            None if s == "static" => Ok(Split::default()),
            Some(("static", r)) => match r.parse::<f64>() {
                Ok(host_share) if (0.0..=1.0).contains(&host_share) => {
                    Ok(Split::Static { host_share })
                }
                _ => Err(format!(
                    "static split ratio {r:?} is not a number in [0, 1]"
                )),
            },
            _ => Err(format!(
                "unknown split {s:?} (static, static:RATIO or dynamic)"
            )),
        }
    }
}

impl std::fmt::Display for Split {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Split::Static { host_share } => write!(f, "static:{host_share}"),
            Split::Dynamic => f.write_str("dynamic"),
        }
    }
}

/// How far the host proves each worker's outputs against the compaction's inputs before it
/// installs them, beyond the structural checks that always run (`verify.rs`). The costs are
/// measured in `docs/design/0005-compaction-offload.md`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerifyOutputs {
    /// Trust the worker's files once they pass the structural checks.
    None,
    /// Check that outputs plus dropped entries add up to the inputs, in count and digest,
    /// from table properties alone: catches any lost, changed, invented or re-sequenced entry
    /// unless the worker also forges its dropped-entry digest, but not a wrong drop decision
    /// the worker reports honestly (a version a snapshot still needs, counted as dropped).
    Digest,
    /// `Digest`, after checking every drop the worker logged against the rules of compaction
    /// (the host's snapshots, range tombstones and bottommost flag:
    /// `sluice_sst::compact::drop_audit`) and counting the drops from that log: catches any
    /// wrong drop decision too, unless the worker forges its log and digest.
    #[default]
    Audit,
    /// `Audit`, and for each worker part (a static share's piece, a dynamic chunk), this many
    /// user keys drawn from its inputs and its outputs: their versions in the outputs must be exactly what merging the inputs gives.
    /// Catches a forged dropped digest with a probability that grows with the keys sampled.
    Sample(u32),
    /// `Digest`, and every worker part merged again on the host: its files must be
    /// byte-identical to the host's.
    Full,
}

impl std::str::FromStr for VerifyOutputs {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "none" => Ok(VerifyOutputs::None),
            "digest" => Ok(VerifyOutputs::Digest),
            "audit" => Ok(VerifyOutputs::Audit),
            "full" => Ok(VerifyOutputs::Full),
            _ => s
                .strip_prefix("sample:")
                .and_then(|k| k.parse::<u32>().ok())
                .filter(|&k| k > 0)
                .map(VerifyOutputs::Sample)
                .ok_or_else(|| {
                    format!(
                        "unknown verification {s:?}: none, digest, audit, sample:K (K > 0) or full"
                    )
                }),
        }
    }
}

impl std::fmt::Display for VerifyOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VerifyOutputs::None => f.write_str("none"),
            VerifyOutputs::Digest => f.write_str("digest"),
            VerifyOutputs::Audit => f.write_str("audit"),
            VerifyOutputs::Sample(k) => write!(f, "sample:{k}"),
            VerifyOutputs::Full => f.write_str("full"),
        }
    }
}

/// Who picks the executor of one side's parts of an offloaded compaction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SideMode {
    /// The side's CoPro+ decision component, per share, from its CPU and memory use and the
    /// share of large values (pipelined or sequential).
    #[default]
    Decide,
    /// This executor. On the host, `Auto` means the executor the engine chose for the
    /// compaction (its step-time chooser, or the options' fixed mode); a worker has no such
    /// history, so `Auto` is refused for workers.
    Fixed(CompactionMode),
}

impl SideMode {
    /// The executor a worker is told to use (`None`: its decision component chooses).
    pub fn for_worker(self) -> Option<CompactionMode> {
        match self {
            SideMode::Decide => None,
            SideMode::Fixed(mode) => Some(mode),
        }
    }
}

impl std::str::FromStr for SideMode {
    type Err = String;

    /// `decide`, or an executor name (`sequential`, `pipelined`, `parallel`, `streaming`,
    /// `auto`).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "decide" => Ok(SideMode::Decide),
            _ => s.parse().map(SideMode::Fixed),
        }
    }
}

impl std::fmt::Display for SideMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SideMode::Decide => f.write_str("decide"),
            SideMode::Fixed(mode) => write!(f, "{mode}"),
        }
    }
}

/// Compaction workers and how to use them. A worker must serve (as its `--root`s) the
/// directories this database keeps its tables in: tasks name files, not bytes.
#[derive(Clone, Debug)]
pub struct OffloadOptions {
    /// Worker addresses, `host:port`.
    pub workers: Vec<String>,
    /// The secret every call carries.
    pub secret: Secret,
    /// How sub-tasks are shared out.
    pub split: Split,
    /// Compactions with fewer input bytes stay on the host: a round trip and a second
    /// writer's partial last file are not worth it for small jobs.
    pub min_offload_bytes: u64,
    /// The dynamic split's smallest chunk, in input bytes (at least four sub-tasks are
    /// taken regardless): smaller chunks balance the sides' finishing times more finely,
    /// at the cost of a round trip and a partial output file each.
    pub min_chunk_bytes: u64,
    /// The static split sends a worker's share in pieces of about this many input bytes, one
    /// after another, and checks each piece's outputs as soon as it is answered, while the
    /// worker runs the next: the host's check then waits only for the last piece, not for the
    /// whole share. Each piece costs a round trip and a partial output file. 0 sends every
    /// share whole.
    pub piece_bytes: u64,
    /// Who picks the executor of the host's shares.
    pub host_mode: SideMode,
    /// Who picks the executor a worker runs its shares with.
    pub worker_mode: SideMode,
    /// A worker share not answered within this time is abandoned and re-run on the host.
    pub task_timeout: Duration,
    /// How far each worker's outputs are proven against the inputs before they are installed.
    pub verify_outputs: VerifyOutputs,
    /// The database's name on the workers (their `--root NAME=DIR`): a worker serving several
    /// databases resolves this database's files only in its roots. `""`: the workers' unnamed
    /// roots.
    pub database: String,
}

impl OffloadOptions {
    /// Offload to `workers`, authenticating with `secret`, with the defaults: a static
    /// half-and-half split, CoPro+ decisions on both sides, outputs verified at the default
    /// level ([`VerifyOutputs::Audit`]).
    pub fn new(workers: Vec<String>, secret: Secret) -> OffloadOptions {
        OffloadOptions {
            workers,
            secret,
            split: Split::default(),
            min_offload_bytes: 4 << 20,
            min_chunk_bytes: 4 << 20,
            piece_bytes: 64 << 20,
            host_mode: SideMode::Decide,
            worker_mode: SideMode::Decide,
            task_timeout: Duration::from_secs(120),
            verify_outputs: VerifyOutputs::default(),
            database: String::new(),
        }
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if self.workers.is_empty() {
            return bad("offload needs at least one worker address".into());
        }
        if let Split::Static { host_share } = self.split
            && !(0.0..=1.0).contains(&host_share)
        {
            return bad(format!(
                "static split host share {host_share} is not in [0, 1]"
            ));
        }
        if self.worker_mode == SideMode::Fixed(CompactionMode::Auto) {
            return bad(
                "offload worker_mode auto: a worker has no step times to choose from; use \
                 decide or an executor"
                    .into(),
            );
        }
        if self.task_timeout.is_zero() {
            return bad("offload task_timeout must be positive".into());
        }
        if let Err(e) = sluice_rpc::names::check_database_name(&self.database) {
            return bad(format!("offload: {e}"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_levels_parse_and_print() {
        for level in [
            VerifyOutputs::None,
            VerifyOutputs::Digest,
            VerifyOutputs::Audit,
            VerifyOutputs::Sample(64),
            VerifyOutputs::Full,
        ] {
            assert_eq!(level.to_string().parse::<VerifyOutputs>(), Ok(level));
        }
        assert_eq!(VerifyOutputs::default(), VerifyOutputs::Audit);
        for bad in ["", "sample", "sample:0", "sample:x", "all"] {
            assert!(bad.parse::<VerifyOutputs>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn side_modes_parse_and_a_worker_cannot_be_told_auto() {
        for mode in [
            SideMode::Decide,
            SideMode::Fixed(CompactionMode::Pipelined),
            SideMode::Fixed(CompactionMode::Auto),
        ] {
            assert_eq!(mode.to_string().parse::<SideMode>(), Ok(mode));
        }
        assert!("faster".parse::<SideMode>().is_err());
        assert_eq!(SideMode::Decide.for_worker(), None);
        let secret = Secret::new("a-long-enough-test-secret").unwrap();
        let mut options = OffloadOptions::new(vec!["127.0.0.1:1".into()], secret);
        options.host_mode = SideMode::Fixed(CompactionMode::Auto);
        options.validate().unwrap();
        options.worker_mode = SideMode::Fixed(CompactionMode::Auto);
        let err = options.validate().unwrap_err();
        assert!(err.to_string().contains("worker_mode auto"), "{err}");
    }

    #[test]
    fn splits_parse() {
        assert_eq!("dynamic".parse::<Split>(), Ok(Split::Dynamic));
        assert_eq!(
            "static".parse::<Split>(),
            Ok(Split::Static { host_share: 0.5 })
        );
        assert_eq!(
            "static:0.25".parse::<Split>(),
            Ok(Split::Static { host_share: 0.25 })
        );
        for bad in ["static:2", "static:x", "half", "dynamic:1"] {
            assert!(bad.parse::<Split>().is_err(), "{bad}");
        }
    }
}
