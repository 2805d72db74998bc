//! The flags that send compactions to workers (`sluice worker`), shared by `bench` and
//! `compact`: their own group beside the engine flags, turned into `Options::offload`.

use std::path::PathBuf;

use clap::Args;
use sluice_offload::{OffloadOptions, Secret, SideMode, Split, VerifyOutputs};

use crate::units::parse_size;

/// The clap group id of [`OffloadArgs`], for `conflicts_with`.
pub const OFFLOAD: &str = "offload";

/// Compaction offload to worker processes.
#[derive(Clone, Debug, Args)]
#[group(id = OFFLOAD, multiple = true)]
#[command(next_help_heading = "Offload to compaction workers")]
pub struct OffloadArgs {
    /// Share big compactions with the compaction worker at ADDR (host:port); repeat for more
    /// workers. Each must serve this database's directories (`sluice worker --root`).
    #[arg(long = "worker", value_name = "ADDR")]
    pub workers: Vec<String>,
    /// File holding the secret shared with the workers.
    #[arg(long, value_name = "FILE", requires = "workers")]
    pub worker_secret_file: Option<PathBuf>,
    /// How a compaction is shared: `static` (Co-KV: half to the host), `static:RATIO` (the
    /// host's share, 0 to 1) or `dynamic` (contiguous chunks handed out on demand, sized by
    /// each side's measured bandwidth).
    #[arg(long, value_name = "SPLIT", default_value = "static", value_parser = parse_split)]
    pub split: Split,
    /// The executor of the host's share: `decide` (the CoPro+ decision component), or
    /// sequential, pipelined, parallel, streaming, auto (the engine's own choice).
    #[arg(long, value_name = "MODE", default_value = "decide", value_parser = parse_side_mode)]
    pub host_mode: SideMode,
    /// The executor of a worker's share: `decide` (the worker's decision component) or a mode.
    #[arg(long, value_name = "MODE", default_value = "decide", value_parser = parse_side_mode)]
    pub worker_mode: SideMode,
    /// Compactions with fewer input bytes stay on the host.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "4M")]
    pub offload_min_bytes: u64,
    /// The static split sends a worker's share in pieces of about this many input bytes, one
    /// after another, and checks each piece's outputs while the worker runs the next (0: each
    /// share whole).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "64M")]
    pub offload_piece_bytes: u64,
    /// How far each worker's outputs are proven against the inputs before they are
    /// installed, beyond the host's read of every output byte (checksum, order, properties
    /// against the data) that always runs: `none`, `digest` (inputs = outputs + dropped, in
    /// counts and entry digests), `audit` (also every entry the worker dropped checked
    /// against the snapshots, range tombstones and bottommost flag), `sample:K` (also K keys
    /// per worker task, a static piece or a dynamic chunk, drawn from its inputs and outputs,
    /// re-merged on the host) or `full` (every worker task merged again on the host and
    /// compared byte for byte).
    #[arg(long, value_name = "LEVEL", default_value = "audit", value_parser = parse_verify)]
    pub verify_outputs: VerifyOutputs,
    /// This database's name on the workers, when one worker serves several databases
    /// (`sluice worker --root NAME=DIR`); by default the workers' unnamed roots.
    #[arg(long, value_name = "NAME", default_value = "", requires = "workers")]
    pub worker_database: String,
}

fn parse_side_mode(s: &str) -> Result<SideMode, String> {
    s.parse()
}

fn parse_split(s: &str) -> Result<Split, String> {
    s.parse()
}

fn parse_verify(s: &str) -> Result<VerifyOutputs, String> {
    s.parse()
}

impl OffloadArgs {
    /// The engine's offload settings, or `None` without `--worker`.
    pub fn options(&self) -> Result<Option<OffloadOptions>, String> {
        if self.workers.is_empty() {
            return Ok(None);
        }
        let file = self
            .worker_secret_file
            .as_ref()
            .ok_or("--worker needs --worker-secret-file")?;
        let secret = Secret::from_file(file)?;
        Ok(Some(OffloadOptions {
            split: self.split,
            host_mode: self.host_mode,
            worker_mode: self.worker_mode,
            min_offload_bytes: self.offload_min_bytes,
            piece_bytes: self.offload_piece_bytes,
            database: self.worker_database.clone(),
            verify_outputs: self.verify_outputs,
            ..OffloadOptions::new(self.workers.clone(), secret)
        }))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        offload: OffloadArgs,
    }

    #[test]
    fn flags_parse() {
        let c = Cli::try_parse_from([
            "x",
            "--worker",
            "127.0.0.1:1",
            "--worker",
            "127.0.0.1:2",
            "--worker-secret-file",
            "s",
            "--split",
            "static:0.3",
            "--host-mode",
            "pipelined",
            "--offload-piece-bytes",
            "16M",
        ])
        .unwrap();
        assert_eq!(c.offload.workers.len(), 2);
        assert_eq!(c.offload.offload_piece_bytes, 16 << 20);
        assert_eq!(c.offload.split, Split::Static { host_share: 0.3 });
        assert_eq!(
            c.offload.host_mode,
            SideMode::Fixed(sluice::CompactionMode::Pipelined)
        );
        assert_eq!(c.offload.worker_mode, SideMode::Decide);
        let none = Cli::try_parse_from(["x"]).unwrap();
        assert!(none.offload.options().unwrap().is_none());
        assert!(Cli::try_parse_from(["x", "--split", "half"]).is_err());
        assert!(Cli::try_parse_from(["x", "--worker-secret-file", "s"]).is_err());
    }

    #[test]
    fn a_worker_needs_a_readable_private_secret() {
        use std::os::unix::fs::PermissionsExt;
        let c = Cli::try_parse_from(["x", "--worker", "127.0.0.1:1"]).unwrap();
        assert!(c.offload.options().is_err());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "0123456789abcdef0123").unwrap();
        let c = Cli::try_parse_from([
            "x",
            "--worker",
            "127.0.0.1:1",
            "--worker-secret-file",
            path.to_str().unwrap(),
        ])
        .unwrap();
        // The host refuses a secret others can read, as the worker does.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = c.offload.options().unwrap_err().to_string();
        assert!(err.contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let o = c.offload.options().unwrap().unwrap();
        assert_eq!(o.workers, vec!["127.0.0.1:1".to_string()]);
    }
}
