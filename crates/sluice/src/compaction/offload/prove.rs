//! Proving an offloaded compaction against its inputs before anything of it is installed.
//!
//! Every check of [`super::verify`] compares a worker's files with what the worker *said*
//! about them. This one compares them with the inputs: the parts' outputs plus the entries they
//! dropped must add up, in count and digest, to the input tables' ([`sluice_sst::digest`]).
//! Input digests are known per table, not per key range, so the equation is checked over the
//! whole job; when it fails, nothing tells which part is wrong, so every worker part is run
//! again on the host, and a part whose host copy adds up differently is the one that lied.
//! The host's copies replace the workers' outputs, and the equation must then hold, or the
//! job fails and nothing is installed.

use sluice_sst::compact::NewOutput;
use sluice_sst::digest::EntryDigest;

use super::ShareReport;
use super::share::{Job, Part};
use crate::db::DbInner;
use crate::{Error, Result};

impl Part {
    /// What the part's outputs hold plus what it dropped.
    pub(super) fn accounted(&self) -> EntryDigest {
        let written: EntryDigest = self
            .files
            .iter()
            .map(|f| f.summary.properties.digest().unwrap_or_default())
            .sum();
        written + self.stats.dropped()
    }
}

impl DbInner {
    /// Returns `parts` once they account for the job's inputs, re-running worker parts on the
    /// host if they do not (see the module docs). A part that failed the check counts as a
    /// retry, and its side's report is marked retried. On error every part's outputs are
    /// deleted.
    pub(super) fn prove_parts(
        &self,
        job: &Job<'_>,
        mut parts: Vec<Part>,
        reports: &mut [(usize, ShareReport)],
        new_output: &mut NewOutput<'_>,
    ) -> Result<Vec<Part>> {
        let Some(expected) = job.spec.input_digest() else {
            return Ok(parts);
        };
        let sum = |parts: &[Part]| parts.iter().map(Part::accounted).sum::<EntryDigest>();
        let claimed = sum(&parts);
        if claimed == expected {
            return Ok(parts);
        }
        tracing::warn!(
            job = job.id,
            inputs = %expected,
            outputs_and_dropped = %claimed,
            "an offloaded compaction does not account for its inputs; running the workers' parts \
             again on the host"
        );
        for i in 0..parts.len() {
            let side = parts[i].share.side;
            if side == 0 {
                continue;
            }
            let share = parts[i].share.clone();
            let rerun = self.run_share_on_host(job, job.spec, &share, &job.control, new_output);
            let fresh = match rerun {
                Ok((fresh, _)) => fresh,
                Err(e) => {
                    self.delete_parts(&parts);
                    return Err(e);
                }
            };
            let (told, proven) = (parts[i].accounted(), fresh.accounted());
            if told != proven {
                let worker = job.off.clients[side - 1].addr();
                tracing::warn!(
                    %worker,
                    lower = ?share.lower,
                    upper = ?share.upper,
                    worker_accounts_for = %told,
                    host_accounts_for = %proven,
                    "a worker's part fails the digest check: its outputs lose, change or invent \
                     entries; the host's copy replaces them"
                );
                let mut m = job.off.metrics.lock();
                m.retries += 1;
                m.digest_failures += 1;
                drop(m);
                for (_, report) in reports.iter_mut().filter(|(s, _)| *s == side) {
                    report.retried = true;
                }
            }
            let lied = std::mem::replace(&mut parts[i], fresh);
            self.delete_parts(std::slice::from_ref(&lied));
        }
        let proven = sum(&parts);
        if proven != expected {
            self.delete_parts(&parts);
            return Err(Error::corruption(
                "<offloaded compaction>",
                0,
                format!(
                    "compaction {} does not account for its inputs even when the host runs \
                     every part: inputs hold {expected}, outputs plus dropped entries {proven}",
                    job.id
                ),
            ));
        }
        Ok(parts)
    }
}
