//! Experiments: reproductions of a document's evaluation on this machine, and measurements an
//! issue asks for, each producing a human table, a JSON file with every data point, and charts.
//! `sluice experiment <name>` (and its older spelling `sluice bench --experiment <name>`) runs
//! them.
//!
//! They are built from the benchmark's pieces (`sluice-bench`: workloads, key and value
//! generators, metric deltas, chart kinds) and kept apart from it, so the benchmark stays the
//! benchmark; this crate depends on `sluice-bench`, never the reverse.
//!
//! | name    | document                                             | module    |
//! |---------|------------------------------------------------------|-----------|
//! | `pcp`   | 000, Pipelined Compaction for the LSM-tree           | [`pcp`]   |
//! | `copro` | 004, CoPro: host/device collaborative compaction     | [`copro`] |
//! | `mstore`| 001, MStore: partitions owned by near-data devices   | [`mstore`]|
//! | `scale` | issue 21, item 7: fill and full compaction cost vs N | [`scale`] |
//! | `scale-out` | issue 37, item 5: offloaded compaction over 1-64 bucket-only workers, measured and modelled | [`scale_out`] |
//!
//! Measurements are taken once per data point by default: on a shared machine a single run can
//! be off by tens of percent, so read differences of a few percent as noise, or pass a repeat
//! count and take the median.
//!
//! ```no_run
//! use sluice_experiments::{PcpConfig, run_pcp, write_outputs, table};
//! let scratch = tempfile::tempdir()?;
//! let report = run_pcp(&PcpConfig { num: 100_000, ..PcpConfig::default() }, scratch.path())?;
//! print!("{}", table::render(&report));
//! write_outputs(&report, std::path::Path::new("results"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod charts;
pub mod copro;
pub mod dataset;
pub mod machine_limit;
pub mod measure;
pub mod mstore;
pub mod pcp;
pub mod results;
pub mod scale;
pub mod scale_out;
pub mod table;
pub mod workers;

#[cfg(test)]
mod tests;

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sluice::{IoContext, Result};

pub use pcp::{PcpConfig, run_pcp};
pub use results::PcpReport;

/// An experiment, by the name given on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Experiment {
    /// The PCP paper: SCP vs PCP vs the parallel variants (Figs. 8, 10, 11, 12).
    Pcp,
    /// The CoPro paper: host only, Co-KV, CoPro, CoPro+ and the dynamic split with worker
    /// processes (Fig. 9, Table 5).
    Copro,
    /// The MStore paper: MStore-basic against MStore (storage and compaction-load balancing)
    /// with one worker process per owner (Fig. 3).
    Mstore,
    /// Cost as work grows (issue 21, item 7): fillrandom and one full compaction of an
    /// inverted LSM, sequential and parallel, at growing numbers of keys.
    Scale,
    /// How far offloading scales (issue 37, item 5): the host alone and 1 and 2 workers that
    /// share only the bucket, measured, and a model calibrated from them predicting 1 to 64.
    ScaleOut,
}

impl Experiment {
    /// Every experiment.
    pub const ALL: [Experiment; 5] = [
        Experiment::Pcp,
        Experiment::Copro,
        Experiment::Mstore,
        Experiment::Scale,
        Experiment::ScaleOut,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Pcp => "pcp",
            Experiment::Copro => "copro",
            Experiment::Mstore => "mstore",
            Experiment::Scale => "scale",
            Experiment::ScaleOut => "scale-out",
        }
    }
}

impl fmt::Display for Experiment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Experiment {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        Experiment::ALL
            .into_iter()
            .find(|e| e.name() == s.trim())
            .ok_or_else(|| {
                let names: Vec<&str> = Experiment::ALL.iter().map(|e| e.name()).collect();
                format!(
                    "unknown experiment {s:?} (expected one of {})",
                    names.join(", ")
                )
            })
    }
}

/// Writes `dir/pcp.json` and the charts (PNG and SVG) into `dir`, creating it if needed.
/// Returns every path written, the JSON first.
pub fn write_outputs(report: &PcpReport, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_path(dir)?;
    let json = dir.join("pcp.json");
    std::fs::write(&json, report.to_json() + "\n").with_path(&json)?;
    let mut written = vec![json];
    written.extend(charts::write_charts(report, dir)?);
    Ok(written)
}
