//! A worker that can reach the host only over gRPC and the bucket: the worker process runs in
//! a network namespace of its own, whose only links are its loopback and one end of a veth
//! pair (10.213.N.2/30, the host end 10.213.N.1/30 in the root namespace, N from the test's
//! pid), and in a mount namespace of its own, where an empty tmpfs is mounted over the host's
//! directory (the database, its MANIFEST and WAL, the host's object cache) and over the
//! server's objects. Its `--root` and object cache are a directory of its own. The S3 server
//! (`s3s-fs`) listens on the host end of the link; the host reaches the worker at its end.
//!
//! Before any compaction the test checks the isolation it relies on: the namespace holds only
//! `lo` and the veth end and routes only the /30, the server is reachable from inside it while
//! a listener on the host's 127.0.0.1 is not, and the running worker (`/proc/PID`) is in that
//! namespace and sees its own directory but neither the host's `CURRENT` nor the server's
//! bucket. Then, as `object_store.rs` does on one machine, the host compacts an inverted tree
//! under the static and the dynamic split with the worker taking part: the tree holds what a
//! model says, `check` passes, the bucket holds exactly the live tables and neither directory
//! holds a table. So a worker that shares nothing with the host but the link and the bucket
//! compacts the host's tables, and nothing else (no shared file, no loopback) made it work.
//!
//! It needs root and iproute2 (`ip netns add`, veth) and `unshare` and `mount` (util-linux).
//! Without them it fails, saying so, unless `SLUICE_SKIP_NETNS=1` is set: then it prints
//! that it skipped and why, and passes. The namespace, the link, the worker and the server are
//! removed when the test ends, failed or not (a SIGKILLed test leaves `sluice-w-PID` behind;
//! `ip netns del` removes it and its link).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

mod store_worker;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use sluice_object::{ObjectCache, ObjectFs};
use sluice_sst::fs::os_fs;

use store_worker::s3::{BUCKET, S3Server};
use store_worker::{PREFIX, Worker, assert_no_local_tables, compact_through, inverted};

/// Runs `ip ARGS`: its stdout, or what went wrong.
fn try_ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run `ip` (iproute2): {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "`ip {}` failed ({}): {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn ip(args: &[&str]) -> String {
    try_ip(args).unwrap_or_else(|e| panic!("{e}"))
}

fn is_root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    // `Uid:` real, effective, saved, file system.
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
        .unwrap_or(false)
}

/// A network namespace joined to the root one by a veth pair; deleted with the pair when
/// dropped.
struct Netns {
    name: String,
    host_veth: String,
    worker_veth: String,
    /// The link's /30.
    subnet: String,
    /// The host end of the link, in the root namespace.
    host_addr: String,
    /// The worker's end, inside the namespace.
    worker_addr: String,
}

impl Netns {
    /// Creates `sluice-w-PID` and the link, with a /30 of 10.213.0.0/16 that no address or
    /// route of the host uses.
    fn create() -> Result<Netns, String> {
        let pid = std::process::id();
        let name = format!("sluice-w-{pid}");
        let (host_veth, worker_veth) = (format!("slw{pid}h"), format!("slw{pid}w"));
        // What a SIGKILLed run of a process with the same pid left behind.
        let _ = try_ip(&["link", "del", &host_veth]);
        if Path::new("/run/netns").join(&name).exists() {
            let _ = try_ip(&["netns", "del", &name]);
        }
        let used =
            try_ip(&["-o", "-4", "addr"])? + &try_ip(&["-4", "route", "show", "table", "all"])?;
        let n = (0..254)
            .map(|i| (pid + i) % 254 + 1)
            .find(|n| !used.contains(&format!("10.213.{n}.")))
            .ok_or("every 10.213.N.0/30 is in use")?;
        try_ip(&["netns", "add", &name])?;
        let ns = Netns {
            name,
            host_veth,
            worker_veth,
            subnet: format!("10.213.{n}.0/30"),
            host_addr: format!("10.213.{n}.1"),
            worker_addr: format!("10.213.{n}.2"),
        };
        let (name, host_veth, worker_veth) = (&*ns.name, &*ns.host_veth, &*ns.worker_veth);
        try_ip(&[
            "link",
            "add",
            host_veth,
            "type",
            "veth",
            "peer",
            "name",
            worker_veth,
        ])?;
        try_ip(&["link", "set", worker_veth, "netns", name])?;
        try_ip(&[
            "addr",
            "add",
            &format!("{}/30", ns.host_addr),
            "dev",
            host_veth,
        ])?;
        try_ip(&["link", "set", host_veth, "up"])?;
        let worker_cidr = format!("{}/30", ns.worker_addr);
        try_ip(&["-n", name, "addr", "add", &worker_cidr, "dev", worker_veth])?;
        try_ip(&["-n", name, "link", "set", worker_veth, "up"])?;
        try_ip(&["-n", name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Whether a TCP connection to `addr` made from inside the namespace succeeds (a thread
    /// of this process joins it for the one connection).
    fn connects(&self, addr: SocketAddr) -> bool {
        let path = Path::new("/run/netns").join(&self.name);
        std::thread::spawn(move || {
            let ns = std::fs::File::open(&path).unwrap();
            nix::sched::setns(&ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok()
        })
        .join()
        .unwrap()
    }

    /// The namespace holds its loopback and its end of the link, and routes only the link's
    /// /30: from inside, only the two ends and its own 127.0.0.1 are reachable.
    fn assert_isolated(&self) {
        let links = ip(&["-n", &self.name, "-o", "link"]);
        let mut names: Vec<&str> = links
            .lines()
            .map(|l| l.split(':').nth(1).unwrap().trim())
            .map(|n| n.split('@').next().unwrap())
            .collect();
        names.sort_unstable();
        assert_eq!(names, ["lo", self.worker_veth.as_str()], "{links}");
        // Besides the link, the namespace's own addresses (`local`, `broadcast`).
        let routes = ip(&["-n", &self.name, "-4", "route", "show", "table", "all"]);
        for route in routes.lines() {
            assert!(
                route.starts_with(&format!("{} ", self.subnet))
                    || route.starts_with("local ")
                    || route.starts_with("broadcast "),
                "a route out of the link: {route}\n{routes}"
            );
        }
        let routes6 = ip(&["-n", &self.name, "-6", "route", "show", "table", "all"]);
        assert!(
            !routes6.contains("default"),
            "the namespace has a default route: {routes6}"
        );
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace would free the pair once nothing holds the namespace; deleting
        // the host end removes both at once.
        if let Err(e) = try_ip(&["link", "del", &self.host_veth]) {
            eprintln!("netns test cleanup: {e}");
        }
        if let Err(e) = try_ip(&["netns", "del", &self.name]) {
            eprintln!("netns test cleanup: {e}");
        }
    }
}

/// The namespace, or `None` when the test may not run here and `SLUICE_SKIP_NETNS=1` says to
/// skip it.
fn netns_or_skip() -> Option<Netns> {
    let why = if is_root() {
        match Netns::create() {
            Ok(ns) => return Some(ns),
            Err(e) => e,
        }
    } else {
        "not running as root".to_string()
    };
    if std::env::var("SLUICE_SKIP_NETNS").is_ok_and(|v| v == "1") {
        eprintln!(
            "\n*** SKIPPED the network-namespace worker test (SLUICE_SKIP_NETNS=1): {why} ***\n"
        );
        return None;
    }
    panic!(
        "the network-namespace worker test needs root and iproute2 (`ip netns add`, veth): \
         {why}. Run it as root with `ip` installed, or set SLUICE_SKIP_NETNS=1 to skip it."
    );
}

/// Run by `sh -c` in the worker's mount namespace: hides `$1` and `$2` under empty tmpfs
/// mounts, then becomes the command that follows them.
const HIDE_AND_EXEC: &str =
    r#"mount -t tmpfs tmpfs "$1" && mount -t tmpfs tmpfs "$2" && shift 2 && exec "$@""#;

/// `path` as the process `pid` sees it, through its root in its own mount namespace.
fn seen_by(pid: u32, path: &Path) -> PathBuf {
    Path::new(&format!("/proc/{pid}/root")).join(path.strip_prefix("/").unwrap())
}

#[test]
fn a_worker_in_its_own_network_and_mount_namespace_compacts_through_grpc_and_the_bucket() {
    let started = Instant::now();
    let Some(ns) = netns_or_skip() else { return };
    ns.assert_isolated();
    let server = S3Server::start_on(&ns.host_addr);
    // From inside: the server across the link answers, the host's loopback does not.
    let on_link: SocketAddr = format!("{}:{}", ns.host_addr, server.port())
        .parse()
        .unwrap();
    assert!(ns.connects(on_link), "the server at {on_link} from inside");
    let loopback = TcpListener::bind("127.0.0.1:0").unwrap();
    let host_loopback = loopback.local_addr().unwrap();
    assert!(
        !ns.connects(host_loopback),
        "the host's {host_loopback} is reachable from inside the namespace"
    );

    // The host's side, hidden from the worker: the database and the host's object cache.
    let host = tempfile::tempdir().unwrap();
    let db = host.path().join("db");
    std::fs::create_dir(&db).unwrap();
    let cache = ObjectCache::open(&host.path().join("cache"), 256 << 20).unwrap();
    let fs = ObjectFs::new(os_fs(), server.store(), &db, PREFIX)
        .unwrap()
        .with_cache(cache)
        .unwrap();
    let model = inverted(&fs, &db);
    // The worker's own directory: its root, object cache and the shared secret.
    let own = tempfile::tempdir().unwrap();
    let secret_file = own.path().join("secret");
    store_worker::write_secret(&secret_file);
    let root = own.path().join("root");
    std::fs::create_dir(&root).unwrap();

    // `ip netns exec` and `unshare` exec; the shell mounts the tmpfs and execs the worker, so
    // the child's pid is the worker's.
    let listen = format!("{}:0", ns.worker_addr);
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns.name])
        .args(["unshare", "--mount", "--propagation", "private"])
        .args(["sh", "-c", HIDE_AND_EXEC, "sh"])
        .arg(host.path())
        .arg(&server.data)
        .arg(env!("CARGO_BIN_EXE_sluice-worker"))
        .args(Worker::args(&listen, &root, &secret_file));
    let worker = Worker::spawn(cmd, &server.endpoint);
    assert!(
        worker.addr.starts_with(&format!("{}:", ns.worker_addr)),
        "{}",
        worker.addr
    );
    let pid = worker.pid();
    assert_eq!(
        std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(),
        std::fs::canonicalize(env!("CARGO_BIN_EXE_sluice-worker")).unwrap(),
        "the child is not the worker itself"
    );
    assert_eq!(ip(&["netns", "identify", &pid.to_string()]).trim(), ns.name);
    // What the worker sees: its own directory, and neither the host's database nor the
    // server's objects.
    assert!(seen_by(pid, &root).is_dir());
    assert!(db.join("CURRENT").is_file());
    assert!(
        !seen_by(pid, &db).exists(),
        "the worker sees {}",
        db.display()
    );
    let hidden: Vec<_> = std::fs::read_dir(seen_by(pid, host.path()))
        .unwrap()
        .collect();
    assert!(hidden.is_empty(), "the worker sees the host's {hidden:?}");
    assert!(server.data.join(BUCKET).is_dir());
    assert!(!seen_by(pid, &server.data.join(BUCKET)).exists());
    eprintln!(
        "worker {pid} in {} at {} (server {}), set up in {:.1?}",
        ns.name,
        worker.addr,
        server.endpoint,
        started.elapsed()
    );

    compact_through(&fs, &db, &worker.addr, model);
    assert_no_local_tables(&db, &root);
    eprintln!("done in {:.1?}", started.elapsed());
}
