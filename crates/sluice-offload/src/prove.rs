//! Proving an offloaded compaction against its inputs before anything of it is installed, as
//! far as `OffloadOptions::verify_outputs` asks.
//!
//! Every check of [`super::verify`] compares a worker's files with what the worker *said*
//! about them. These compare them with the inputs:
//!
//! - **digest**: the parts' outputs plus the entries they dropped must add up,
//!   in count and digest, to the input tables' ([`sluice_sst::digest`]). At **audit** (the
//!   default) and above, each worker part's drop decisions were audited when its reply was
//!   checked (`share.rs`, [`sluice_sst::compact::drop_audit`]), so its dropped counts are the
//!   host's. Input digests are
//!   known per table, not per key range, so the equation is checked over the whole job; when
//!   it fails, nothing tells which part is wrong, so every worker part is run again on the
//!   host, and a part whose host copy adds up differently is one that lied;
//! - **sample:K**: then K keys per worker part, drawn from its inputs and its outputs, must
//!   have exactly the versions merging the inputs gives ([`super::sample`]);
//! - **full**: then every worker part is run again on the host, and its files must be
//!   byte-identical to the host's (executors write identical files for the same share).
//!
//! A part that fails is replaced by the host's copy, and counts as a retry and a verification
//! failure. The job's parts must then add up, or the job fails and nothing is installed.

use sluice_sst::compact::{CompactionSpec, NewOutput};
use sluice_sst::digest::EntryDigest;

use super::ShareReport;
use super::options::VerifyOutputs;
use super::sample::check_sample;
use super::share::{Job, Part};
use sluice_sst::{Error, Result};

impl Part {
    /// What the part's outputs hold plus what it dropped.
    pub(super) fn accounted(&self) -> EntryDigest {
        sluice_sst::compact::spec::accounted(&self.files, &self.stats)
    }

    /// True if `other` wrote the same files: same count, sizes and checksums, in order.
    fn same_files(&self, other: &Part) -> bool {
        let shape = |p: &Part| {
            p.files
                .iter()
                .map(|f| (f.summary.file_size, f.summary.file_checksum))
                .collect::<Vec<_>>()
        };
        shape(self) == shape(other)
    }
}

/// What a job's proof works on: its parts and their sides' reports.
pub(super) struct Proof<'p> {
    pub parts: Vec<Part>,
    pub reports: &'p mut [(usize, ShareReport)],
}

impl Job<'_> {
    /// Returns the job's parts once they are proven as far as the options ask (see the
    /// module docs). On error every part's outputs are deleted.
    pub(super) fn prove_parts(
        &self,
        mut proof: Proof<'_>,
        new_output: &mut NewOutput<'_>,
    ) -> Result<Vec<Part>> {
        let level = self.off.options.verify_outputs;
        let Some(expected) = self
            .spec
            .input_digest()
            .filter(|_| level != VerifyOutputs::None)
        else {
            return Ok(proof.parts);
        };
        let outcome = self.prove(&mut proof, expected, level, new_output);
        if let Err(e) = outcome {
            self.delete_parts(&proof.parts);
            return Err(e);
        }
        Ok(proof.parts)
    }

    fn prove(
        &self,
        proof: &mut Proof<'_>,
        expected: EntryDigest,
        level: VerifyOutputs,
        new_output: &mut NewOutput<'_>,
    ) -> Result<()> {
        let sum = |parts: &[Part]| parts.iter().map(Part::accounted).sum::<EntryDigest>();
        let claimed = sum(&proof.parts);
        if claimed != expected {
            tracing::warn!(
                job = self.id,
                inputs = %expected,
                outputs_and_dropped = %claimed,
                "an offloaded compaction does not account for its inputs; running the workers' \
                 parts again on the host"
            );
            for i in worker_parts(&proof.parts) {
                let fresh = self.host_copy(&proof.parts[i], new_output)?;
                let (told, proven) = (proof.parts[i].accounted(), fresh.accounted());
                if told != proven {
                    let why = format!(
                        "its outputs account for {told}, the host's copy for {proven}: it lost, \
                         changed or invented entries"
                    );
                    failed(self, proof, i, &why);
                }
                self.replace(&mut proof.parts[i], fresh);
            }
        }
        match level {
            VerifyOutputs::Sample(k) => {
                for i in worker_parts(&proof.parts) {
                    let part = &proof.parts[i];
                    let (lower, upper) = (part.share.lower.as_deref(), part.share.upper.as_deref());
                    let verdict = match check_sample(self.spec, lower, upper, &part.files, k) {
                        Ok(None) => continue,
                        Ok(Some(m)) => format!(
                            "key {:?} has {} versions in its outputs, {} in the inputs' merge",
                            String::from_utf8_lossy(&m.key),
                            m.found,
                            m.expected
                        ),
                        Err(e) => format!("its outputs cannot be sampled: {e}"),
                    };
                    failed(self, proof, i, &verdict);
                    let fresh = self.host_copy(&proof.parts[i], new_output)?;
                    self.replace(&mut proof.parts[i], fresh);
                }
            }
            VerifyOutputs::Full => {
                for i in worker_parts(&proof.parts) {
                    let fresh = self.host_copy(&proof.parts[i], new_output)?;
                    if proof.parts[i].same_files(&fresh) {
                        self.delete_parts(std::slice::from_ref(&fresh));
                        continue;
                    }
                    failed(
                        self,
                        proof,
                        i,
                        "its files differ from the host's merge of its share",
                    );
                    self.replace(&mut proof.parts[i], fresh);
                }
            }
            VerifyOutputs::None | VerifyOutputs::Digest | VerifyOutputs::Audit => {}
        }
        let proven = sum(&proof.parts);
        if proven != expected {
            return Err(Error::corruption(
                "<offloaded compaction>",
                0,
                format!(
                    "compaction {} does not account for its inputs even when the host runs \
                     every part: inputs hold {expected}, outputs plus dropped entries {proven}",
                    self.id
                ),
            ));
        }
        Ok(())
    }

    /// The host's own run of `part`'s share, as an answer to the same task (its outputs carry
    /// the part's task nonce, so an honest part's files and the copy's are byte-identical).
    fn host_copy(&self, part: &Part, new_output: &mut NewOutput<'_>) -> Result<Part> {
        let spec = CompactionSpec {
            task_nonce: part.task_nonce,
            ..self.spec.clone()
        };
        let (fresh, _) = self.run_share_on_host(&spec, &part.share, &self.control, new_output)?;
        Ok(fresh)
    }

    /// Puts `fresh` in `slot`'s place and deletes what `slot` wrote.
    fn replace(&self, slot: &mut Part, fresh: Part) {
        let old = std::mem::replace(slot, fresh);
        self.delete_parts(std::slice::from_ref(&old));
    }
}

/// Positions of the parts a worker ran.
fn worker_parts(parts: &[Part]) -> Vec<usize> {
    (0..parts.len())
        .filter(|&i| parts[i].share.side > 0)
        .collect()
}

/// Records that worker part `i` failed verification: logged, a retry and a verification
/// failure in the metrics, and its side's report marked retried.
fn failed(job: &Job<'_>, proof: &mut Proof<'_>, i: usize, why: &str) {
    let share = &proof.parts[i].share;
    let worker = job.off.clients[share.side - 1].addr();
    tracing::warn!(
        %worker,
        lower = ?share.lower,
        upper = ?share.upper,
        reason = why,
        "a worker's part fails verification; the host's copy replaces it"
    );
    let mut m = job.off.metrics.lock();
    m.retries += 1;
    m.verify_failures += 1;
    drop(m);
    for (_, report) in proof.reports.iter_mut().filter(|(s, _)| *s == share.side) {
        report.retried = true;
    }
}
