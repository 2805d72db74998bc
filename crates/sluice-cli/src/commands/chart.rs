//! `chart`: draws charts (PNG and SVG, `sluice_bench::charts`) from results other tools saved,
//! so a script in any language can have them drawn the same way as `sluice bench --out`'s.
//!
//! `chart peers --results FILE --out DIR` reads a `results.json` of `benches/peers/run --out`
//! (its `chart` object, `sluice_bench::charts::peers`) and writes the peer comparison charts.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use sluice_bench::charts::write_peer_charts;

use crate::failure::CmdResult;

/// What to draw.
#[derive(Debug, Subcommand)]
pub enum ChartCommand {
    /// Sluice vs each peer engine, from a results.json of `benches/peers/run --out`:
    /// peers_ratio (Sluice / peer per workload, log scale around 1) and peers_medians (each
    /// engine's median with its lowest and highest run, one panel per workload).
    Peers(PeersChartArgs),
}

#[derive(Debug, Args)]
pub struct PeersChartArgs {
    /// The results.json that `benches/peers/run --out DIR` wrote.
    #[arg(long, value_name = "FILE")]
    pub results: PathBuf,
    /// Directory for the charts, created if needed.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub fn run(command: &ChartCommand, out: &mut dyn Write) -> CmdResult {
    match command {
        ChartCommand::Peers(args) => {
            let written = write_peer_charts(&args.results, &args.out)?;
            super::list_written(&args.out, &written, out)?;
            Ok(())
        }
    }
}
