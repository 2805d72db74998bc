//! How close the executors come to the machine. The PCP paper (and issue 3) measure them
//! against two ceilings: every core running the compute steps S2..S6 alone at one core's
//! speed, and the device's sequential bandwidth. The first comes from SCP's own step profile
//! on the largest data set (the compute steps' seconds, with reading and writing left out);
//! the second from writing and syncing a file in the experiment's directory.
//!
//! The compute ceiling assumes the cores scale perfectly. On a VM they may not: two vCPUs can
//! share a physical core or a busy host (`cargo bench -p sluice-sst --bench steps -- "two
//! cores"` measures it), so a share of the ceiling well under 100% can still be all the
//! machine has.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use sluice::options::CompactionMode;
use sluice::{IoContext, Result};

use crate::results::{Figure, SummaryRow};

/// Bytes the experiment writes to measure the device: enough that the sync, not the page
/// cache, sets the pace.
pub const DISK_PROBE_BYTES: usize = 256 << 20;

/// The two ceilings and the best executor's distance to them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MachineLimit {
    /// CPUs available to the process.
    pub cpus: usize,
    /// SCP's input bytes over its compute steps' seconds (S2..S6), MB/s: one core merging
    /// with free reads and writes.
    pub one_core_compute_mb_s: f64,
    /// `cpus * one_core_compute_mb_s`.
    pub compute_limit_mb_s: f64,
    /// Sequential write bandwidth of the experiment directory's device, file synced, MB/s
    /// (0 when not measured).
    pub disk_write_mb_s: f64,
    /// The fastest executor on the largest data set.
    pub best_executor: String,
    /// Its compaction bandwidth, MB/s.
    pub best_mb_s: f64,
    /// `best_mb_s / compute_limit_mb_s`.
    pub share_of_compute_limit: f64,
}

/// The ceilings from Fig. 10's SCP series and the summary rows; `None` without an SCP point
/// whose compute steps took time.
pub fn machine_limit(
    fig10: &Figure,
    summary: &[SummaryRow],
    cpus: usize,
    disk_write_mb_s: f64,
) -> Option<MachineLimit> {
    let scp = fig10
        .series_of(CompactionMode::Sequential.name())?
        .points
        .last()?;
    let run = &scp.measurement.median;
    let p = &run.stage_profile;
    let compute_seconds = p.checksum + p.decompress + p.merge + p.compress + p.rechecksum;
    if compute_seconds <= 0.0 {
        return None;
    }
    let one_core = run.input_bytes as f64 / compute_seconds / 1e6;
    let limit = one_core * cpus as f64;
    let best = summary
        .iter()
        .max_by(|a, b| a.bandwidth_mb_s.total_cmp(&b.bandwidth_mb_s))?;
    Some(MachineLimit {
        cpus,
        one_core_compute_mb_s: one_core,
        compute_limit_mb_s: limit,
        disk_write_mb_s,
        best_executor: best.label.clone(),
        best_mb_s: best.bandwidth_mb_s,
        share_of_compute_limit: best.bandwidth_mb_s / limit,
    })
}

/// Writes `bytes` (rounded down to MiB) to a file in `dir` in 1 MiB appends, syncs it, removes
/// it, and returns the MB/s.
pub fn disk_write_mb_s(dir: &Path, bytes: usize) -> Result<f64> {
    let path = dir.join("disk-probe");
    let chunk = vec![0x5au8; 1 << 20];
    let start = Instant::now();
    let written = (|| {
        let mut file = std::fs::File::create(&path)?;
        for _ in 0..bytes / chunk.len() {
            file.write_all(&chunk)?;
        }
        file.sync_all()
    })();
    let seconds = start.elapsed().as_secs_f64();
    let removed = std::fs::remove_file(&path);
    written.with_path(&path)?;
    removed.with_path(&path)?;
    Ok((bytes / chunk.len() * chunk.len()) as f64 / seconds.max(1e-9) / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::summarize;
    use crate::results::tests::series;

    #[test]
    fn the_ceiling_is_every_cpu_at_scps_compute_speed() {
        let fig10 = Figure {
            id: "fig10".into(),
            title: String::new(),
            x_label: String::new(),
            series: vec![
                series(CompactionMode::Sequential, &[(1, 50.0), (2, 100.0)]),
                series(CompactionMode::Parallel, &[(1, 80.0), (2, 160.0)]),
            ],
        };
        let summary = summarize(&fig10);
        let limit = machine_limit(&fig10, &summary, 2, 300.0).unwrap();
        // The test point: 10 MB in, compute steps merge 0.3 s + compress 0.4 s.
        assert!((limit.one_core_compute_mb_s - 10.0 / 0.7).abs() < 1e-9);
        assert!((limit.compute_limit_mb_s - 20.0 / 0.7).abs() < 1e-9);
        assert_eq!(limit.best_executor, "C-PPCP (parallel)");
        assert_eq!(limit.best_mb_s, 160.0);
        assert!((limit.share_of_compute_limit - 160.0 * 0.7 / 20.0).abs() < 1e-9);
        assert_eq!(limit.disk_write_mb_s, 300.0);
        // Without SCP there is no ceiling to give.
        let no_scp = Figure {
            series: fig10.series[1..].to_vec(),
            ..fig10.clone()
        };
        assert!(machine_limit(&no_scp, &summary, 2, 0.0).is_none());
    }

    #[test]
    fn the_disk_probe_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        assert!(disk_write_mb_s(dir.path(), 4 << 20).unwrap() > 0.0);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
