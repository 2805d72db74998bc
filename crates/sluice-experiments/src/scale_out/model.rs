//! The scale-out model: how long one compaction takes when it is split statically over `N`
//! workers that reach the tables only through a bucket, and the host only checks and installs
//! their outputs (`docs/scale.md` explains each term and where it breaks).
//!
//! A [`Job`] of `D` input bytes in `runs` sorted runs of `tables` tables in all is cut into
//! `N` key ranges of `d = D / N` bytes. Each worker opens the tables its range overlaps (in
//! each run, `1 + tables_per_run / N` of them, at most the run's) and spends
//!
//! ```text
//! open  = opened tables / 8 x requests_per_open x request_seconds   (8 opens at once)
//! cpu   = cpu_fixed_seconds + cpu_seconds_per_byte x d
//! wait  = wait_fixed_seconds + wait_seconds_per_byte x d     (ranged reads and uploads)
//! net   = bytes_moved_per_byte x d / nic_bytes_per_second   (overlaps cpu: the larger counts)
//! ```
//!
//! The bucket serves at most `get_limit` reads and `put_limit` writes a second per prefix; if
//! the workers together would ask for more, every worker slows to fit. Where the workers share
//! `shared_cores` cores with the host and the bucket's server (this machine), they cannot
//! finish before all of that CPU, `(cpu_seconds_per_byte + machine_seconds_per_byte) x D`, has
//! run on those cores, and workers running side by side each take `concurrency_slowdown`
//! times the CPU they take alone (measured: two compactions at once against one). The host checks the
//! answers as they arrive, `check_threads` at a time (its cores: `sluice-offload` checks the
//! static split's answers in parallel), `check_fixed_seconds + check_seconds_per_byte x d` each,
//! then installs
//! (`install_seconds_per_table` per input table: planning, the MANIFEST write, deleting the
//! inputs).
//!
//! The model is a handful of events, not a queueing simulation: every share is the same size
//! and every worker the same machine, so the workers answer together and the host's check
//! queue is the only place where order matters.

use serde::{Deserialize, Serialize};

/// What one compaction costs, measured on this machine (see `measure.rs`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// Requests to open one table from the bucket (a HEAD, and one GET of its tail).
    pub requests_per_open: f64,
    /// Mean seconds per request, as the table opens saw them (the store's latency).
    pub request_seconds: f64,
    /// A worker's CPU seconds per share, whatever its size (the task, the inputs' indexes).
    pub cpu_fixed_seconds: f64,
    /// A worker's CPU seconds per input byte.
    pub cpu_seconds_per_byte: f64,
    /// A worker's wall seconds per share beyond its CPU time and its table opens.
    pub wait_fixed_seconds: f64,
    /// A worker's wall seconds per input byte beyond its CPU time: waiting for ranged reads
    /// and uploads.
    pub wait_seconds_per_byte: f64,
    /// The host's seconds to check a share, whatever its size.
    pub check_fixed_seconds: f64,
    /// The host's seconds per input byte to check a share's outputs.
    pub check_seconds_per_byte: f64,
    /// The host's seconds per input table outside the shares: planning and installing (the
    /// MANIFEST write, deleting the inputs).
    pub install_seconds_per_table: f64,
    /// CPU seconds per input byte the rest of the machine spends while a worker compacts: the
    /// host beyond its checks, the bucket's server and the latency proxy when they run here,
    /// the kernel writing back. It competes with workers only where they share its cores.
    pub machine_seconds_per_byte: f64,
    /// Read requests (GET, HEAD, LIST) per input byte beyond the table opens.
    pub reads_per_byte: f64,
    /// Write requests (PUT, multipart parts, DELETE, COPY) per input byte.
    pub writes_per_byte: f64,
    /// Bytes moved between a worker and the bucket per input byte (read plus written).
    pub bytes_moved_per_byte: f64,
    /// Seconds the bucket itself needs per input byte to serve those bytes, at the aggregate
    /// rates it reached with several objects moving at once: what a server on this machine
    /// (its disk, its cores) can do, shared by every worker. Used only for a single-server
    /// bucket ([`Cluster::single_server`]): S3 spreads a prefix's bytes over many servers.
    pub bucket_seconds_per_byte: f64,
}

/// One compaction's inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Job {
    pub input_bytes: u64,
    /// Sorted runs: each L0 table is one, each level below one.
    pub runs: u64,
    /// Tables in all the runs.
    pub tables: u64,
}

impl Job {
    /// This job grown to `input_bytes` with tables of the same size in as many runs.
    pub fn scaled_to(&self, input_bytes: u64) -> Job {
        let per_table = self.input_bytes as f64 / self.tables.max(1) as f64;
        let tables = (input_bytes as f64 / per_table.max(1.0)).ceil() as u64;
        Job {
            input_bytes,
            runs: self.runs.min(tables).max(1),
            tables: tables.max(1),
        }
    }

    /// Tables one of `workers` workers opens: in each run, those its key range overlaps.
    fn tables_per_worker(&self, workers: f64) -> f64 {
        let per_run = self.tables as f64 / self.runs.max(1) as f64;
        self.runs as f64 * (1.0 + per_run / workers).min(per_run)
    }
}

/// Where the workers run and what the bucket and the network allow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Cores the workers share; `None`: each worker has a machine of its own.
    pub shared_cores: Option<usize>,
    /// Shares the host checks at once: its cores (`sluice-offload` checks the static split's
    /// answers as they arrive, as many at once as the host has cores).
    pub check_threads: usize,
    /// Read requests a second the bucket serves on one prefix.
    pub get_limit: f64,
    /// Write requests a second the bucket serves on one prefix.
    pub put_limit: f64,
    /// Each worker's network bandwidth to the bucket, bytes a second.
    pub nic_bytes_per_second: f64,
    /// The bucket's own bandwidth is shared by all workers (a single server, as on this
    /// machine); false for S3, which spreads a prefix over many servers.
    pub single_server: bool,
    /// How much slower each of two compactions runs at once than one alone, where workers
    /// share this machine's cores (shared caches and memory bandwidth): 1.0 for a cluster.
    pub concurrency_slowdown: f64,
}

impl Cluster {
    /// S3 Standard's published per-prefix request rates (5,500 GET/HEAD and 3,500
    /// PUT/COPY/POST/DELETE a second), a 10 Gb/s network per worker, each worker on its own
    /// machine, a host of `host_cores` cores.
    pub fn s3_standard(host_cores: usize) -> Cluster {
        Cluster {
            shared_cores: None,
            check_threads: host_cores.max(1),
            get_limit: 5_500.0,
            put_limit: 3_500.0,
            nic_bytes_per_second: 1.25e9,
            single_server: false,
            concurrency_slowdown: 1.0,
        }
    }

    /// This machine as measured: every worker and the host on `cores` cores, where two
    /// compactions at once each take `slowdown` times as long as one alone, and one bucket
    /// server serving at most `gets_per_second` reads with no network between (right for a
    /// server on 127.0.0.1; a remote bucket makes the two-worker prediction pessimistic).
    pub fn this_machine(cores: usize, slowdown: f64, gets_per_second: f64) -> Cluster {
        Cluster {
            shared_cores: Some(cores.max(1)),
            check_threads: cores.max(1),
            get_limit: gets_per_second,
            put_limit: f64::INFINITY,
            nic_bytes_per_second: f64::INFINITY,
            single_server: true,
            concurrency_slowdown: slowdown.max(1.0),
        }
    }
}

/// What bounds a prediction: the term that takes longest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// The workers' CPU.
    Workers,
    /// The cores the workers share with the host and the bucket's server.
    Cores,
    /// The workers' waits for the bucket (opens, ranged reads, uploads).
    Requests,
    /// The bucket: its request rate, or a single server's bandwidth.
    Bucket,
    /// The workers' network.
    Network,
    /// The host's checks.
    Checks,
}

impl Bound {
    pub fn name(self) -> &'static str {
        match self {
            Bound::Workers => "worker CPU",
            Bound::Cores => "shared cores",
            Bound::Requests => "request waits",
            Bound::Bucket => "bucket rate",
            Bound::Network => "network",
            Bound::Checks => "host checks",
        }
    }
}

/// The model's answer for `workers` workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prediction {
    pub workers: usize,
    /// Seconds of the whole compaction.
    pub seconds: f64,
    /// Input MB compacted a second.
    pub mb_per_second: f64,
    /// Speedup over one worker, divided by `workers`.
    pub efficiency: f64,
    /// Seconds until the last worker answers.
    pub worker_seconds: f64,
    /// Seconds the host spends checking, in all.
    pub check_seconds: f64,
    pub bound: Bound,
}

/// Tables a worker (and the host, planning) opens from an object store at once.
pub const OPENS_AT_ONCE: f64 = sluice_sst::table::REMOTE_OPENS_AT_ONCE as f64;

/// Seconds to open `tables` tables of `requests_per_open` requests of `request_seconds` each,
/// [`OPENS_AT_ONCE`] at a time.
pub fn open_seconds(tables: f64, requests_per_open: f64, request_seconds: f64) -> f64 {
    (tables / OPENS_AT_ONCE).ceil() * requests_per_open * request_seconds
}

/// What the model gives `workers` workers (at least 1) for `job`, but its efficiency (which
/// needs the one-worker time).
fn seconds(cal: &Calibration, cluster: &Cluster, job: &Job, workers: usize) -> Prediction {
    let n = workers.max(1) as f64;
    let d = job.input_bytes as f64 / n;
    let tables = job.tables_per_worker(n);
    let opened = tables * cal.requests_per_open;
    let open = open_seconds(tables, cal.requests_per_open, cal.request_seconds);
    // Workers side by side on one machine's cores run slower than one alone.
    let slowdown = match (cluster.shared_cores, workers > 1) {
        (Some(_), true) => cluster.concurrency_slowdown,
        _ => 1.0,
    };
    let cpu = (cal.cpu_fixed_seconds + cal.cpu_seconds_per_byte * d) * slowdown;
    let net = cal.bytes_moved_per_byte * d / cluster.nic_bytes_per_second;
    let wait = cal.wait_fixed_seconds + cal.wait_seconds_per_byte * d;
    let alone = open + cpu.max(net) + wait;
    // Every worker's requests over the time they would take unthrottled; if the bucket cannot
    // serve that rate, the whole phase stretches to the rate it can.
    let reads = n * opened + cal.reads_per_byte * job.input_bytes as f64;
    let writes = cal.writes_per_byte * job.input_bytes as f64;
    let throttled = (reads / cluster.get_limit).max(writes / cluster.put_limit);
    let shared = cluster.shared_cores.map_or(0.0, |cores| {
        let workers_cpu = (n * cal.cpu_fixed_seconds
            + cal.cpu_seconds_per_byte * job.input_bytes as f64)
            * slowdown;
        (workers_cpu + cal.machine_seconds_per_byte * job.input_bytes as f64) / cores as f64
    });
    let server = match cluster.single_server {
        true => cal.bucket_seconds_per_byte * job.input_bytes as f64,
        false => 0.0,
    };
    let worker_seconds = alone.max(throttled).max(shared).max(server);
    // The host's check queue: the answers arrive together, `check_threads` at a time.
    let rounds = workers.max(1).div_ceil(cluster.check_threads.max(1)) as f64;
    let check_seconds = rounds * (cal.check_fixed_seconds + cal.check_seconds_per_byte * d);
    let install = cal.install_seconds_per_table * job.tables as f64;
    let total = install + worker_seconds + check_seconds;
    let terms = [
        (cpu, Bound::Workers),
        (shared, Bound::Cores),
        (open + wait, Bound::Requests),
        (throttled.max(server), Bound::Bucket),
        (net, Bound::Network),
        (check_seconds, Bound::Checks),
    ];
    let bound = terms
        .into_iter()
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map_or(Bound::Workers, |(_, b)| b);
    Prediction {
        workers,
        seconds: total,
        mb_per_second: job.input_bytes as f64 / total / 1e6,
        efficiency: 0.0,
        worker_seconds,
        check_seconds,
        bound,
    }
}

/// The model's predictions of `job` for each of `workers`.
pub fn predict(
    cal: &Calibration,
    cluster: &Cluster,
    job: &Job,
    workers: &[usize],
) -> Vec<Prediction> {
    let one = seconds(cal, cluster, job, 1).seconds;
    workers
        .iter()
        .map(|&n| {
            let p = seconds(cal, cluster, job, n);
            Prediction {
                efficiency: one / p.seconds / n.max(1) as f64,
                ..p
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The host checking at a tenth of the workers' cost.
    fn calibration() -> Calibration {
        Calibration {
            requests_per_open: 3.0,
            request_seconds: 0.005,
            cpu_fixed_seconds: 0.0,
            cpu_seconds_per_byte: 10e-9,
            wait_fixed_seconds: 0.0,
            wait_seconds_per_byte: 1e-9,
            check_fixed_seconds: 0.0,
            check_seconds_per_byte: 1e-9,
            install_seconds_per_table: 0.001,
            machine_seconds_per_byte: 0.0,
            reads_per_byte: 1e-6,
            writes_per_byte: 0.5e-6,
            bytes_moved_per_byte: 2.0,
            bucket_seconds_per_byte: 0.0,
        }
    }

    /// 1 GB in 100 runs of one table each (an inverted LSM).
    fn job() -> Job {
        Job {
            input_bytes: 1_000_000_000,
            runs: 100,
            tables: 100,
        }
    }

    fn unlimited() -> Cluster {
        Cluster {
            get_limit: f64::INFINITY,
            put_limit: f64::INFINITY,
            nic_bytes_per_second: f64::INFINITY,
            ..Cluster::s3_standard(1)
        }
    }

    #[test]
    fn one_worker_is_the_sum_of_its_parts() {
        let p = &predict(&calibration(), &unlimited(), &job(), &[1])[0];
        // 100 tables opened 8 at a time: 13 rounds of 3 requests of 5 ms.
        let expected = 0.1 + 13.0 * 3.0 * 0.005 + 10.0 + 1.0 + 1.0;
        assert!((p.seconds - expected).abs() < 1e-9, "{p:?}");
        assert!((p.efficiency - 1.0).abs() < 1e-12);
        assert_eq!(p.bound, Bound::Workers);
    }

    #[test]
    fn serial_checks_cap_the_speedup_and_parallel_checks_lift_it() {
        // Two levels: a worker opens only the tables of its range.
        let job = Job { runs: 2, ..job() };
        let cal = calibration();
        let serial = predict(&cal, &unlimited(), &job, &[1, 8, 64]);
        // The checks stay 1 s whatever N, and the install 0.1 s: Amdahl's bound.
        assert!((serial[2].check_seconds - 1.0).abs() < 1e-9, "{serial:?}");
        assert!(serial[1].efficiency > serial[2].efficiency);
        let speedup_64 = serial[0].seconds / serial[2].seconds;
        assert!(speedup_64 < serial[0].seconds / 1.1, "{serial:?}");
        assert_eq!(serial[2].bound, Bound::Checks);
        let parallel = Cluster {
            check_threads: 8,
            ..unlimited()
        };
        let p = &predict(&cal, &parallel, &job, &[64])[0];
        assert!((p.check_seconds - 8.0 / 64.0).abs() < 1e-9, "{p:?}");
        assert!(p.seconds < serial[2].seconds, "{p:?}");
    }

    #[test]
    fn the_bucket_rate_slows_many_workers() {
        let cal = Calibration {
            reads_per_byte: 1e-4,
            ..calibration()
        };
        let limited = Cluster {
            get_limit: 5_500.0,
            ..unlimited()
        };
        let free = &predict(&cal, &unlimited(), &job(), &[64])[0];
        let capped = &predict(&cal, &limited, &job(), &[64])[0];
        // 100,000 reads and 64 x 300 opens at 5,500 a second.
        let expected = (100_000.0 + 64.0 * 300.0) / 5_500.0;
        assert!(
            (capped.worker_seconds - expected).abs() < 1e-9,
            "{capped:?}"
        );
        assert!(capped.seconds > free.seconds, "{capped:?} vs {free:?}");
        assert_eq!(capped.bound, Bound::Bucket);
    }

    #[test]
    fn workers_open_only_the_tables_their_range_overlaps() {
        let leveled = Job {
            input_bytes: 1_000_000_000,
            runs: 2,
            tables: 200,
        };
        assert_eq!(leveled.tables_per_worker(1.0), 200.0);
        assert_eq!(leveled.tables_per_worker(100.0), 2.0 * 2.0);
        // An inverted LSM: every worker opens every table.
        assert_eq!(job().tables_per_worker(64.0), 100.0);
        let big = job().scaled_to(10_000_000_000);
        assert_eq!((big.runs, big.tables), (100, 1_000));
    }

    #[test]
    fn shared_cores_slow_workers_beyond_the_core_count() {
        let machine = Cluster::this_machine(2, 1.0, f64::INFINITY);
        let p = predict(&calibration(), &machine, &job(), &[1, 2, 4]);
        // Two workers on two cores each run at full speed; four share them: 10 s of CPU
        // on two cores.
        assert!(p[1].efficiency > 0.8, "{p:?}");
        assert!((p[2].worker_seconds - 5.0).abs() < 1e-9, "{p:?}");
        assert_eq!(p[2].bound, Bound::Cores);
        // The bucket's server on the same cores takes its share of them.
        let busy = Calibration {
            machine_seconds_per_byte: 10e-9,
            ..calibration()
        };
        let q = predict(&busy, &machine, &job(), &[2]);
        assert!((q[0].worker_seconds - 10.0).abs() < 1e-9, "{q:?}");
        // Cores that get in each other's way: two workers at once each take longer.
        let slow = predict(
            &calibration(),
            &Cluster::this_machine(2, 1.5, f64::INFINITY),
            &job(),
            &[1, 2],
        );
        assert!(
            (slow[0].seconds - p[0].seconds).abs() < 1e-9,
            "one worker runs alone"
        );
        // Two workers' CPU, 5 s each alone, takes 7.5 s side by side.
        assert!(
            (slow[1].worker_seconds - (p[1].worker_seconds + 2.5)).abs() < 1e-9,
            "{slow:?}"
        );
        // A cluster gives every worker its own machine.
        let r = predict(&busy, &unlimited(), &job(), &[4]);
        assert!(r[0].worker_seconds < 5.0, "{r:?}");
    }

    #[test]
    fn fixed_costs_per_share_grow_with_the_workers() {
        let cal = Calibration {
            check_fixed_seconds: 0.5,
            wait_fixed_seconds: 0.25,
            ..calibration()
        };
        let p = predict(&cal, &unlimited(), &job(), &[1, 64]);
        assert!(
            (p[1].check_seconds - (64.0 * 0.5 + 1.0)).abs() < 1e-9,
            "{p:?}"
        );
        assert!(
            p[1].seconds > p[0].seconds,
            "too many shares cost more than they save: {p:?}"
        );
    }

    #[test]
    fn slow_networks_bound_the_workers() {
        let slow = Cluster {
            nic_bytes_per_second: 10e6,
            ..unlimited()
        };
        assert_eq!(
            predict(&calibration(), &slow, &job(), &[4])[0].bound,
            Bound::Network
        );
    }
}
