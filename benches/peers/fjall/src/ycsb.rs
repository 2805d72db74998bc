//! The YCSB operation stream of `../STREAM.md` section 8: YCSB's scrambled zipfian key choice
//! (constant 0.99, FNV-64 scrambling) and the operation mixes of workloads A, B, C and F, as
//! `sluice ycsb` draws them, bit for bit. `f64::powf` is libm's `pow`, as STREAM.md requires.

use serde::Serialize;
use serde::ser::SerializeMap;

use crate::stream::{SplitMix64, ValueGenerator, fnv1a64};

/// YCSB's `ZipfianGenerator.ZIPFIAN_CONSTANT`.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// YCSB's `ScrambledZipfianGenerator.ITEM_COUNT`.
pub const SCRAMBLED_ITEMS: u64 = 10_000_000_000;
/// YCSB's `ScrambledZipfianGenerator.ZETAN`: `zeta(SCRAMBLED_ITEMS, 0.99)`.
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;
/// Redraws of a key not yet inserted before taking the newest key (Sluice's `MAX_REDRAWS`).
const MAX_REDRAWS: u32 = 64;

/// Operation codes: Sluice's `Operation` discriminants, also the byte hashed into
/// `ops_fnv1a64`.
pub const READ: usize = 0;
pub const UPDATE: usize = 1;
pub const INSERT: usize = 2;
pub const READ_MODIFY_WRITE: usize = 4;
pub const NUM_OPS: usize = 5;
pub const OP_NAMES: [&str; NUM_OPS] = ["read", "update", "insert", "scan", "read-modify-write"];

/// A double in `[0, 1)` from the top 53 bits of one draw.
pub fn next_f64(g: &mut SplitMix64) -> f64 {
    (g.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// YCSB's `fnvhash64`: FNV-1a of `v`'s 8 little-endian bytes, then the absolute value of the
/// result read as a signed integer (2^63 stays 2^63).
pub fn ycsb_fnv64(v: u64) -> u64 {
    (fnv1a64(&v.to_le_bytes()) as i64).unsigned_abs()
}

/// YCSB's `ScrambledZipfianGenerator` over `[0, items)`.
pub struct ScrambledZipfian {
    items: u64,
    alpha: f64,
    eta: f64,
    second: f64,
}

impl ScrambledZipfian {
    pub fn new(items: u64) -> Self {
        let theta = ZIPFIAN_CONSTANT;
        let zeta2theta = (0.0 + 1.0 / 1f64.powf(theta)) + 1.0 / 2f64.powf(theta);
        ScrambledZipfian {
            items: items.max(1),
            alpha: 1.0 / (1.0 - theta),
            eta: (1.0 - (2.0 / SCRAMBLED_ITEMS as f64).powf(1.0 - theta))
                / (1.0 - zeta2theta / SCRAMBLED_ZETAN),
            second: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// The item before scrambling (0 is the most popular).
    pub fn zipfian(&self, g: &mut SplitMix64) -> u64 {
        let u = next_f64(g);
        let uz = u * SCRAMBLED_ZETAN;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.second {
            return 1;
        }
        let base = self.eta * u - self.eta + 1.0;
        let spread = (SCRAMBLED_ITEMS as f64 * base.powf(self.alpha)) as u64;
        spread.min(SCRAMBLED_ITEMS - 1)
    }

    pub fn next(&self, g: &mut SplitMix64) -> u64 {
        ycsb_fnv64(self.zipfian(g)) % self.items
    }
}

/// A workload's share of each operation, indexed by operation code.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mix(pub [f64; NUM_OPS]);

impl Mix {
    /// The mix of a workload the peers run (those without inserts or scans).
    pub fn of(workload: &str) -> Result<Mix, String> {
        let mut m = [0.0; NUM_OPS];
        match workload {
            "a" => (m[READ], m[UPDATE]) = (0.5, 0.5),
            "b" => (m[READ], m[UPDATE]) = (0.95, 0.05),
            "c" => m[READ] = 1.0,
            "f" => (m[READ], m[READ_MODIFY_WRITE]) = (0.5, 0.5),
            other => {
                return Err(format!(
                    "unknown or unsupported YCSB workload {other:?} (the peers run a, b, c and \
                     f: the workloads without inserts or scans)"
                ));
            }
        }
        Ok(Mix(m))
    }

    /// The first operation (in code order, skipping zero shares) whose cumulative share
    /// exceeds `u`; the last one when rounding leaves the sum just below 1.
    pub fn pick(&self, u: f64) -> usize {
        let (mut acc, mut last) = (0.0, READ);
        for (op, &share) in self.0.iter().enumerate() {
            if share <= 0.0 {
                continue;
            }
            acc += share;
            last = op;
            if u < acc {
                return op;
            }
        }
        last
    }
}

/// The run phase's source of operations.
pub struct Chooser {
    mix: Mix,
    zipf: ScrambledZipfian,
    g: SplitMix64,
}

impl Chooser {
    pub fn new(mix: Mix, records: u64, operations: u64, seed: u64) -> Self {
        let expected_new = (operations as f64 * mix.0[INSERT] * 2.0) as u64;
        Chooser {
            mix,
            zipf: ScrambledZipfian::new(records.saturating_add(expected_new)),
            g: SplitMix64::stream(seed, 0, 0),
        }
    }

    /// The next operation code and key number, given that keys `0..inserted` exist.
    pub fn next(&mut self, inserted: u64) -> (usize, u64) {
        let op = self.mix.pick(next_f64(&mut self.g));
        let inserted = inserted.max(1);
        for _ in 0..MAX_REDRAWS {
            let k = self.zipf.next(&mut self.g);
            if k < inserted {
                return (op, k);
            }
        }
        (op, inserted - 1)
    }
}

/// Operation counts, serialized as an object in code order.
pub struct OpCounts(pub [u64; NUM_OPS]);

impl Serialize for OpCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(NUM_OPS))?;
        for (name, n) in OP_NAMES.iter().zip(self.0) {
            m.serialize_entry(name, &n)?;
        }
        m.end()
    }
}

/// The `--dump-ycsb-ops` line; every peer prints the same bytes.
#[derive(Serialize)]
pub struct OpsDump {
    workload: String,
    distribution: &'static str,
    records: u64,
    operations: u64,
    seed: u64,
    value_size: usize,
    load_value_buffer_fnv1a64: String,
    run_value_buffer_fnv1a64: String,
    op_counts: OpCounts,
    ops_fnv1a64: String,
    first_ops: Vec<String>,
}

/// The whole run phase's operation counts and FNV-1a 64 digest (per operation its code byte,
/// then the key number's 8 little-endian bytes), the value buffers' digests and the first `n`
/// operations.
pub fn dump(
    workload: &str,
    records: u64,
    operations: u64,
    seed: u64,
    value_size: usize,
    n: u64,
) -> Result<OpsDump, String> {
    let mut chooser = Chooser::new(Mix::of(workload)?, records, operations, seed);
    let mut counts = [0u64; NUM_OPS];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut first_ops = Vec::new();
    for i in 0..operations {
        let (op, k) = chooser.next(records);
        counts[op] += 1;
        for b in std::iter::once(op as u8).chain(k.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        if i < n {
            first_ops.push(format!("{} {k}", OP_NAMES[op]));
        }
    }
    let buffer = |position| {
        let v = ValueGenerator::new(&mut SplitMix64::stream(seed, position, 0), value_size);
        format!("{:016x}", fnv1a64(&v.data))
    };
    Ok(OpsDump {
        workload: workload.to_string(),
        distribution: "zipfian",
        records,
        operations,
        seed,
        value_size,
        load_value_buffer_fnv1a64: buffer(0),
        run_value_buffer_fnv1a64: buffer(1),
        op_counts: OpCounts(counts),
        ops_fnv1a64: format!("{h:016x}"),
        first_ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// STREAM.md section 8.4: `--dump-ycsb-ops 5 --ycsb a|f --records 1000000 --operations
    /// 1000000` (seed 301, 100-byte values), the same bytes as every peer and Sluice's Chooser.
    const VECTORS: [(&str, &str); 2] = [
        (
            "a",
            r#"{"workload":"a","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":500317,"insert":0,"scan":0,"read-modify-write":0},"ops_fnv1a64":"404df34d30a68eca","first_ops":["update 49015","update 291577","update 842051","read 342734","read 213555"]}"#,
        ),
        (
            "f",
            r#"{"workload":"f","distribution":"zipfian","records":1000000,"operations":1000000,"seed":301,"value_size":100,"load_value_buffer_fnv1a64":"eaa93389abcf248d","run_value_buffer_fnv1a64":"96f9f4a4a4348e8d","op_counts":{"read":499683,"update":0,"insert":0,"scan":0,"read-modify-write":500317},"ops_fnv1a64":"1fa7a5825029d1cf","first_ops":["read-modify-write 49015","read-modify-write 291577","read-modify-write 842051","read 342734","read 213555"]}"#,
        ),
    ];

    #[test]
    fn dumps_match_stream_md() {
        for (w, want) in VECTORS {
            let d = dump(w, 1_000_000, 1_000_000, 301, 100, 5).unwrap();
            assert_eq!(serde_json::to_string(&d).unwrap(), want, "workload {w}");
        }
    }

    #[test]
    fn zipfian_constants() {
        assert_eq!(ycsb_fnv64(0), 0x5738_07cd_d7e5_c63b);
        let z = ScrambledZipfian::new(1_000_000);
        assert_eq!(z.eta.to_bits(), 0x3fcb_295e_e6b5_a1de);
        assert!((z.alpha - 100.0).abs() < 1e-9);
    }

    #[test]
    fn operation_mix_is_within_one_percent() {
        for w in ["a", "b", "c", "f"] {
            let mix = Mix::of(w).unwrap();
            let mut c = Chooser::new(mix, 10_000, 100_000, 7);
            let mut counts = [0u64; NUM_OPS];
            for _ in 0..100_000 {
                let (op, k) = c.next(10_000);
                assert!(k < 10_000);
                counts[op] += 1;
            }
            for (op, &count) in counts.iter().enumerate() {
                let got = count as f64 / 100_000.0;
                assert!(
                    (got - mix.0[op]).abs() <= 0.01,
                    "{w} {}: {got}",
                    OP_NAMES[op]
                );
            }
        }
    }

    #[test]
    fn workloads_with_inserts_or_scans_are_refused() {
        for w in ["d", "e", "x"] {
            assert!(Mix::of(w).is_err());
        }
    }
}
