//! Turning what the scale-out experiment measured into the model's parameters.

use sluice::{Error, Result};

use super::measure::Point;
use super::model::{Calibration, Job, open_seconds};
use super::probes::{BucketProbe, OpenProbe};

/// The job a point compacted.
pub fn job(point: &Point) -> Job {
    // An inverted LSM: every L0 table is a run of its own.
    Job {
        input_bytes: point.input_bytes,
        runs: point.input_tables,
        tables: point.input_tables,
    }
}

/// A worker's part of a point: the call's wall seconds beyond its table opens, its CPU
/// seconds, the host's check seconds, and the input bytes.
struct Part {
    call: f64,
    cpu: f64,
    check: f64,
    bytes: f64,
}

impl Part {
    fn of(point: &Point, requests_per_open: f64, request_seconds: f64) -> Result<Part> {
        let share = point.worker_shares().next().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the {}-worker point has no worker share",
                point.workers
            ))
        })?;
        let opens = open_seconds(
            point.input_tables as f64,
            requests_per_open,
            request_seconds,
        );
        Ok(Part {
            call: share.seconds - share.check_seconds - opens,
            cpu: point
                .worker_cpu_seconds
                .first()
                .copied()
                .unwrap_or(share.cpu_seconds),
            check: share.check_seconds,
            bytes: point.input_bytes.max(1) as f64,
        })
    }
}

/// `(fixed, per byte)` of the line through `(x1, y1)` and `(x2, y2)`, each at least 0: a cost
/// that cannot be told apart from noise is put in the per-byte part.
fn line(x1: f64, y1: f64, x2: f64, y2: f64) -> (f64, f64) {
    let proportional = (0.0, y1.max(0.0) / x1.max(1.0));
    if (x1 - x2).abs() < 1.0 {
        return proportional;
    }
    let slope = (y1 - y2) / (x1 - x2);
    let fixed = y1 - slope * x1;
    match slope > 0.0 && fixed > 0.0 {
        true => (fixed, slope),
        false => proportional,
    }
}

/// The model's parameters from the host-only point, the probes, and one worker compacting the
/// whole data set (`one`) and half of it (`half`): a worker's call, its CPU and the host's
/// check are each fitted as a fixed part per share plus a part per byte.
pub fn calibrate(
    host: &Point,
    opens: &OpenProbe,
    bucket: &BucketProbe,
    one: &Point,
    half: &Point,
) -> Result<Calibration> {
    let d = host.input_bytes.max(1) as f64;
    let r = &host.host_requests;
    let requests_per_open = opens.requests as f64 / opens.tables.max(1) as f64;
    let request_seconds = opens.seconds / opens.requests.max(1) as f64;
    let (a, b) = (
        Part::of(one, requests_per_open, request_seconds)?,
        Part::of(half, requests_per_open, request_seconds)?,
    );
    let (cpu_fixed, cpu_per_byte) = line(a.bytes, a.cpu, b.bytes, b.cpu);
    // The waits are what a call took beyond its CPU, fitted on their own so that CPU and waits
    // add up to the calls measured.
    let (wait_fixed, wait_per_byte) = line(a.bytes, a.call - a.cpu, b.bytes, b.call - b.cpu);
    let (check_fixed, check_per_byte) = line(a.bytes, a.check, b.bytes, b.check);
    let share_seconds = one.worker_shares().next().map_or(0.0, |s| s.seconds);
    Ok(Calibration {
        requests_per_open,
        request_seconds,
        cpu_fixed_seconds: cpu_fixed,
        cpu_seconds_per_byte: cpu_per_byte,
        wait_fixed_seconds: wait_fixed,
        wait_seconds_per_byte: wait_per_byte,
        check_fixed_seconds: check_fixed,
        check_seconds_per_byte: check_per_byte,
        install_seconds_per_table: (one.seconds - share_seconds).max(0.0)
            / one.input_tables.max(1) as f64,
        machine_seconds_per_byte: (one.machine_busy_seconds - a.cpu - a.check).max(0.0) / a.bytes,
        reads_per_byte: ((r.gets + r.heads + r.lists) as f64
            - host.input_tables as f64 * requests_per_open)
            .max(0.0)
            / d,
        writes_per_byte: (r.puts + r.deletes + r.copies) as f64 / d,
        bytes_moved_per_byte: (r.bytes_downloaded + r.bytes_uploaded) as f64 / d,
        bucket_seconds_per_byte: (r.bytes_downloaded as f64
            / bucket.download_bytes_per_second.max(1.0)
            + r.bytes_uploaded as f64 / bucket.upload_bytes_per_second.max(1.0))
            / d,
    })
}

#[cfg(test)]
mod tests {
    use super::line;

    #[test]
    fn a_line_splits_a_cost_into_fixed_and_per_byte() {
        assert_eq!(line(100.0, 12.0, 50.0, 7.0), (2.0, 0.1));
        // Less for more bytes: noise; all of it per byte.
        assert_eq!(line(100.0, 10.0, 50.0, 11.0), (0.0, 0.1));
        // More than proportional: no negative fixed part.
        assert_eq!(line(100.0, 10.0, 50.0, 2.0), (0.0, 0.1));
        assert_eq!(line(100.0, 10.0, 100.0, 10.0), (0.0, 0.1));
    }
}
