//! Differential test against RocksDB 11: random scripts of puts, deletes, range deletes,
//! merges, atomic batches, flushes, compactions and snapshots run on Sluice and on RocksDB (the release build
//! in Maven Central's rocksdbjni, through `benches/peers/rocksdbjni`'s `Replay`), and every read
//! must return the same bytes on both: gets, gets at a snapshot, and full scans forward,
//! backward and at a snapshot. Merges use each engine's built-in append (`,`) and u64 add
//! operators, whose semantics match for well-formed operands.
//!
//! A second set of scripts does the same over keyspaces (RocksDB's column families): each
//! creates one or two early, spreads every operation over them and the default one (batches
//! write several at once, snapshots are read in all of them), and now and then closes and
//! reopens the database, after which both print the keyspaces they found.
//!
//! It needs Java 17 and the peer jar, so it is `#[ignore]`d by the README's test command and
//! run on its own with `--ignored` and `SLUICE_ROCKSDB_JAR` naming the jar, as `.ci/run` does
//! (`benches/peers/run` builds the jar into `<target>/peers/rocksdbjni/rocksdbjni-bench.jar`;
//! `mvn -q package` in `benches/peers/rocksdbjni` builds it into its `target/`). Run so without
//! the jar, it fails rather than passes having checked nothing:
//!
//! ```sh
//! SLUICE_ROCKSDB_JAR=target/peers/rocksdbjni/rocksdbjni-bench.jar \
//!     cargo test -p sluicedb --test rocksdb_differential -- --ignored --nocapture
//! ```
//!
//! `SLUICE_DIFF_SEEDS` sets how many scripts per operator and set (default 20).

#![allow(clippy::unwrap_used, reason = "a failed unwrap is a failed test")]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use sluice::merge_operator::{Append, U64Add};
use sluice::{
    CompactionOptions, Db, Keyspace, KeyspaceOptions, MemtableOptions, MergeOperator, Options,
    ReadOptions, Snapshot, TableOptions, WriteBatch, WriteOptions,
};

/// SplitMix64: the same stream on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Operator {
    Append,
    U64Add,
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn key(rng: &mut Rng) -> Vec<u8> {
    format!("k{:04}", rng.below(200)).into_bytes()
}

/// A value or operand: 8-byte counters for u64 add, short byte strings for append.
fn value(rng: &mut Rng, op: Operator) -> Vec<u8> {
    match op {
        Operator::U64Add => rng.below(1000).to_le_bytes().to_vec(),
        Operator::Append => (0..rng.below(12)).map(|_| rng.below(256) as u8).collect(),
    }
}

/// One write, as a script line.
fn write_line(rng: &mut Rng, op: Operator) -> String {
    let k = key(rng);
    match rng.below(40) {
        0..=15 => format!("put {} {}", hex(&k), hex(&value(rng, op))),
        16..=23 => format!("delete {}", hex(&k)),
        24..=38 => format!("merge {} {}", hex(&k), hex(&value(rng, op))),
        _ => {
            // Mostly short ranges, now and then a wide one.
            let start: u64 = k[1..].iter().fold(0, |n, d| n * 10 + u64::from(d - b'0'));
            let span = if rng.below(8) == 0 {
                rng.below(100)
            } else {
                rng.below(8)
            };
            let end = format!("k{:04}", start + span).into_bytes();
            format!("delete_range {} {}", hex(&k), hex(&end))
        }
    }
}

/// The keyspaces a keyspace script may create, in order.
const KEYSPACES: [&str; 2] = ["users", "logs"];

/// The keyspaces (as `Replay` prefixes) an operation may name, the default one first as `""`.
struct Targets(Vec<String>);

impl Targets {
    /// A prefix for the next operation: the default keyspace a third of the time when there
    /// are others, else one of those; always the default one without keyspaces.
    fn pick(&self, rng: &mut Rng) -> &str {
        if self.0.len() == 1 || rng.below(3) == 0 {
            return &self.0[0];
        }
        &self.0[1 + rng.below(self.0.len() as u64 - 1) as usize]
    }
}

/// A script of `n` operations (see `Replay.java` for the format). Without `keyspaces` every
/// operation is on the default keyspace (and the stream of a seed is as it always was); with
/// it the script creates one or two keyspaces early, names one on most operations, and now
/// and then reopens the database.
fn script(seed: u64, op: Operator, n: usize, keyspaces: bool) -> String {
    let mut rng = Rng(seed);
    let mut s = String::new();
    let name = match op {
        Operator::Append => "append",
        Operator::U64Add => "u64add",
    };
    writeln!(s, "operator {name}").unwrap();
    let mut targets = Targets(vec![String::new()]);
    // Which of the first operations create the keyspaces: the first before any, the second
    // (if any) a little later, so it is born beside data, flushed tables and snapshots.
    let mut creations = Vec::new();
    if keyspaces {
        creations.push(0);
        if rng.below(2) == 0 {
            creations.push(1 + rng.below(300) as usize);
        }
    }
    for i in 0..n {
        if let Some(k) = creations.iter().position(|&at| at == i) {
            writeln!(s, "cf {}", KEYSPACES[k]).unwrap();
            targets.0.push(format!("@{} ", KEYSPACES[k]));
        }
        if keyspaces && rng.below(400) == 0 {
            writeln!(s, "reopen").unwrap();
            continue;
        }
        let line = match rng.below(100) {
            0..=54 => format!("{}{}", targets.pick(&mut rng), write_line(&mut rng, op)),
            55..=59 => {
                let len = 1 + rng.below(10);
                let mut batch = format!("batch {len}");
                for _ in 0..len {
                    batch.push('\n');
                    batch.push_str(targets.pick(&mut rng));
                    batch.push_str(&write_line(&mut rng, op));
                }
                batch
            }
            60..=63 => format!("{}flush", targets.pick(&mut rng)),
            64 => format!("{}compact", targets.pick(&mut rng)),
            65..=66 => {
                let at = targets.pick(&mut rng).to_string();
                let (a, b) = (key(&mut rng), key(&mut rng));
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                format!("{at}compact_range {} {}", hex(&a), hex(&b))
            }
            67..=69 => "snapshot".into(),
            70..=71 => "release".into(),
            72..=86 => {
                let at = targets.pick(&mut rng).to_string();
                format!("{at}get {}", hex(&key(&mut rng)))
            }
            87..=92 => {
                let at = targets.pick(&mut rng).to_string();
                format!("{at}get_at {}", hex(&key(&mut rng)))
            }
            93..=95 => format!("{}scan", targets.pick(&mut rng)),
            96..=97 => format!("{}scan_reverse", targets.pick(&mut rng)),
            _ => format!("{}scan_at", targets.pick(&mut rng)),
        };
        writeln!(s, "{line}").unwrap();
    }
    for at in &targets.0 {
        writeln!(s, "{at}scan").unwrap();
    }
    s
}

fn unhex(s: &str) -> Vec<u8> {
    if s == "-" {
        return Vec::new();
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn options(op: Operator) -> Options {
    let merge_operator: Arc<dyn MergeOperator> = match op {
        Operator::Append => Arc::new(Append::with_delimiter(b",")),
        Operator::U64Add => Arc::new(U64Add),
    };
    Options {
        merge_operator: Some(merge_operator),
        memtable: MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        },
        table: TableOptions {
            block_size: 1024,
            ..TableOptions::default()
        },
        compaction: CompactionOptions {
            target_file_size_base: 64 << 10,
            max_bytes_for_level_base: 256 << 10,
            l0_compaction_trigger: 2,
            ..CompactionOptions::default()
        },
        ..Options::default()
    }
}

/// The keyspace a script line names with `@NAME ` (`default` without one), and its fields.
fn target(line: &str) -> (&str, Vec<&str>) {
    match line.strip_prefix('@') {
        Some(rest) => {
            let (name, op) = rest.split_once(' ').unwrap();
            (name, op.split(' ').collect())
        }
        None => ("default", line.split(' ').collect()),
    }
}

/// The options a database with `keyspaces` opens with: each keyspace has the default one's.
fn options_with(op: Operator, keyspaces: &[String]) -> Options {
    let mut options = options(op);
    let same = KeyspaceOptions::of_default(&options);
    options.keyspaces = keyspaces
        .iter()
        .map(|name| (name.clone(), same.clone()))
        .collect();
    options
}

/// Runs `script` on Sluice in `dir`; returns what its reads printed, as `Replay` prints it.
fn run_sluice(dir: &Path, op: Operator, script: &str) -> String {
    let mut db = Db::open(dir, options(op)).unwrap();
    let wo = WriteOptions::default();
    let mut snapshots: std::collections::VecDeque<Snapshot> = Default::default();
    // Every keyspace's handle, the default one's included.
    let mut keyspaces: HashMap<String, Keyspace> = HashMap::new();
    keyspaces.insert("default".into(), db.keyspace("default").unwrap());
    let mut out = String::new();
    let mut lines = script.lines().skip(1);
    let scan = |tree: &Keyspace, snapshot: Option<&Snapshot>, back: bool, out: &mut String| {
        let opts = ReadOptions {
            snapshot,
            ..ReadOptions::default()
        };
        let range = tree.range_opt(&opts, ..);
        let entries: Vec<_> = if back {
            range.rev().map(Result::unwrap).collect()
        } else {
            range.map(Result::unwrap).collect()
        };
        for (k, v) in entries {
            writeln!(out, "{} {}", hex(&k), hex(&v)).unwrap();
        }
        writeln!(out, "end").unwrap();
    };
    while let Some(line) = lines.next() {
        let (at, f) = target(line);
        let tree = keyspaces
            .get(at)
            .unwrap_or_else(|| panic!("no keyspace {at}: {line}"));
        match f[0] {
            "put" => tree.put_opt(&wo, unhex(f[1]), unhex(f[2])).unwrap(),
            "delete" => tree.delete_opt(&wo, unhex(f[1])).unwrap(),
            "merge" => tree.merge_opt(&wo, unhex(f[1]), unhex(f[2])).unwrap(),
            "delete_range" => tree
                .delete_range_opt(&wo, unhex(f[1]), unhex(f[2]))
                .unwrap(),
            "batch" => {
                let mut batch = WriteBatch::new();
                for _ in 0..f[1].parse::<usize>().unwrap() {
                    let entry = lines.next().unwrap();
                    let (at, e) = target(entry);
                    let ks = keyspaces
                        .get(at)
                        .unwrap_or_else(|| panic!("no keyspace {at}: {entry}"));
                    match e[0] {
                        "put" => batch.put_in(ks, unhex(e[1]), unhex(e[2])),
                        "delete" => batch.delete_in(ks, unhex(e[1])),
                        "merge" => batch.merge_in(ks, unhex(e[1]), unhex(e[2])),
                        "delete_range" => batch.delete_range_in(ks, unhex(e[1]), unhex(e[2])),
                        other => panic!("{other} in a batch"),
                    }
                }
                db.write(&wo, batch).unwrap();
            }
            "flush" => tree.flush().unwrap(),
            "compact" => tree.compact_range(None, None).unwrap(),
            "compact_range" => tree
                .compact_range(Some(&unhex(f[1])), Some(&unhex(f[2])))
                .unwrap(),
            "snapshot" => snapshots.push_back(db.snapshot()),
            "release" => drop(snapshots.pop_front()),
            "get" | "get_at" => {
                let snapshot = snapshots.back().filter(|_| f[0] == "get_at");
                let opts = ReadOptions {
                    snapshot,
                    ..ReadOptions::default()
                };
                let v = tree.get_opt(&opts, unhex(f[1])).unwrap();
                let shown = v.as_deref().map_or_else(|| "none".to_string(), hex);
                writeln!(out, "get {} {shown}", f[1]).unwrap();
            }
            "scan" => scan(tree, None, false, &mut out),
            "scan_reverse" => scan(tree, None, true, &mut out),
            "scan_at" => scan(tree, snapshots.back(), false, &mut out),
            "cf" => {
                let ks = db
                    .create_keyspace(f[1], &KeyspaceOptions::of_default(&options(op)))
                    .unwrap();
                keyspaces.insert(f[1].to_string(), ks);
            }
            "reopen" => {
                snapshots.clear();
                let mut names: Vec<String> = keyspaces
                    .drain()
                    .map(|(name, _)| name)
                    .filter(|name| name != "default")
                    .collect();
                names.sort();
                db.close().unwrap();
                db = Db::open(dir, options_with(op, &names)).unwrap();
                let mut found = db.keyspace_names();
                found[1..].sort();
                writeln!(out, "cfs {}", found.join(" ")).unwrap();
                for name in &found {
                    keyspaces.insert(name.clone(), db.keyspace(name).unwrap());
                }
            }
            other => panic!("unknown operation {other}"),
        }
    }
    drop(snapshots);
    drop(keyspaces);
    db.close().unwrap();
    out
}

fn run_rocksdb(jar: &str, dir: &Path, script: &str) -> String {
    let mut child = Command::new("java")
        .args(["-cp", jar, "sluice.peers.Replay"])
        .arg(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("java");
    // Written from another thread: the replay prints while it reads, and either side may
    // fill its pipe first. A failed write means it exited, which the status reports.
    let mut stdin = child.stdin.take().unwrap();
    let input = script.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    let _ = writer.join();
    assert!(
        out.status.success(),
        "Replay failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
#[ignore = "needs Java 17 and RocksDB 11's peer jar: run with --ignored and SLUICE_ROCKSDB_JAR set, as .ci/run does"]
fn every_read_returns_what_rocksdb_returns() {
    let jar = std::env::var("SLUICE_ROCKSDB_JAR").expect(
        "SLUICE_ROCKSDB_JAR must name RocksDB 11's peer jar (see the module docs): without it \
         this test would check nothing",
    );
    // A relative path is taken from the workspace root, where the command is typed.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let jar = root.join(jar).to_string_lossy().into_owned();
    let seeds: u64 = std::env::var("SLUICE_DIFF_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let mut reads = 0usize;
    let mut scripts = 0usize;
    for (keyspaces, set) in [(false, "default only"), (true, "keyspaces")] {
        for (op, name) in [(Operator::Append, "append"), (Operator::U64Add, "u64add")] {
            for seed in 0..seeds {
                let script = script(seed, op, 3000, keyspaces);
                let dir = tempfile::tempdir().unwrap();
                let ours = run_sluice(&dir.path().join("sluice"), op, &script);
                let theirs = run_rocksdb(&jar, &dir.path().join("rocksdb"), &script);
                let differs = ours
                    .lines()
                    .zip(theirs.lines())
                    .enumerate()
                    .find(|(_, (a, b))| a != b);
                if differs.is_some() || ours.lines().count() != theirs.lines().count() {
                    // Kept for `java -cp JAR sluice.peers.Replay DIR < script`.
                    let kept = std::env::temp_dir().join(format!(
                        "sluice-diff-{}-{name}-{seed}.script",
                        if keyspaces { "keyspaces" } else { "default" }
                    ));
                    std::fs::write(&kept, &script).unwrap();
                    let which = format!("seed {seed} ({set}, {name}; script in {kept:?})");
                    if let Some((i, (a, b))) = differs {
                        panic!("{which}: read line {i} differs:\n  sluice:  {a}\n  rocksdb: {b}");
                    }
                    panic!(
                        "{which}: sluice printed {} lines, rocksdb {}",
                        ours.lines().count(),
                        theirs.lines().count()
                    );
                }
                reads += ours.lines().count();
                scripts += 1;
            }
        }
    }
    eprintln!("{reads} result lines identical over {scripts} scripts");
}
