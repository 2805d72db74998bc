//! The portable key/value stream of `benches/peers/STREAM.md`: SplitMix64 generators, one per
//! (seed, benchmark position, client thread), from which the workloads draw their key numbers
//! and build their value buffers.
//!
//! Every peer benchmark program (Pebble, fjall, LevelDB in `benches/peers/`) implements the same
//! specification, so with the same `--seed`, `--num`, `--key-size`, `--value-size` and
//! `--benchmarks` list every engine writes and reads exactly the same keys and values in the
//! same order. The constants and the order of draws are therefore frozen: changing any of them
//! breaks the comparison with the peers (and STREAM.md's test vectors, asserted below).
//!
//! Order of draws within one benchmark's stream (STREAM.md sections 3 to 5): a write benchmark
//! first builds its value buffer ([`crate::values::ValueGenerator::from_stream`]), then draws
//! one key number per operation with [`SplitMix64::below`]; a read benchmark only draws keys.

/// SplitMix64's increment, also the per-position seed step. Frozen (STREAM.md section 1).
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The finalizer's first multiplier, also the per-thread seed step. Frozen.
pub const MIX_C1: u64 = 0xBF58_476D_1CE4_E5B9;

/// The finalizer's second multiplier. Frozen.
pub const MIX_C2: u64 = 0x94D0_49BB_1331_11EB;

/// SplitMix64's finalizer (Stafford's variant 13): a bijection of `u64` that scatters nearby
/// inputs.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(MIX_C1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX_C2);
    z ^ (z >> 31)
}

/// A SplitMix64 generator (Steele, Lea and Flood; as `java.util.SplittableRandom`).
///
/// Not cryptographic and not meant to be: it is cheap, has a 2^64 period, and is trivial to
/// reproduce in any language, which is what a cross-engine benchmark stream needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose next output is `mix64(state + GOLDEN)`.
    pub fn from_state(state: u64) -> Self {
        SplitMix64 { state }
    }

    /// The stream of the benchmark at 0-based `position` of the run's benchmark list, client
    /// thread `thread`: `state = mix64(seed + position * GOLDEN + thread * MIX_C1)`.
    ///
    /// The outer [`mix64`] keeps the streams of consecutive positions unrelated: without it,
    /// position p + 1 would replay position p's sequence one draw later (the state advances by
    /// `GOLDEN` per draw), so overwrite after fillrandom would rewrite the same keys.
    pub fn for_benchmark(seed: u64, position: u64, thread: u64) -> Self {
        SplitMix64::from_state(mix64(
            seed.wrapping_add(position.wrapping_mul(GOLDEN))
                .wrapping_add(thread.wrapping_mul(MIX_C1)),
        ))
    }

    /// The current state (the seed of the next draw).
    pub fn state(&self) -> u64 {
        self.state
    }

    /// The next 64-bit output.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A number in `[0, n)` by Lemire's multiply-shift without rejection: uniform up to a bias
    /// below `n / 2^64`, and one draw per call whatever `n` is (so the stream stays aligned
    /// across implementations). Returns 0 when `n` is 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// 64-bit FNV-1a of `bytes`: how STREAM.md and the peers' `--dump-keys` fingerprint a value
/// buffer.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    //! STREAM.md section 6's generator vectors. The value and key vectors, which involve the
    //! value buffer, are in `values.rs` and `workloads/worker.rs`.
    use super::*;

    fn outputs(g: &mut SplitMix64, k: usize) -> Vec<u64> {
        (0..k).map(|_| g.next_u64()).collect()
    }

    #[test]
    fn splitmix64_matches_the_reference() {
        let got = outputs(&mut SplitMix64::from_state(0), 3);
        assert_eq!(
            got,
            [0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f]
        );
    }

    #[test]
    fn benchmark_streams_are_seeded_as_specified() {
        assert_eq!(mix64(301), 0x2ea7d2fa987b76eb);
        let g = SplitMix64::for_benchmark(301, 0, 0);
        assert_eq!(g.state(), 0x2ea7d2fa987b76eb);
        assert_eq!(
            SplitMix64::for_benchmark(301, 1, 0).state(),
            0xe525d2a3b2002e14
        );
        assert_eq!(
            outputs(&mut g.clone(), 5),
            [
                0xccfab28b74453852,
                0x6f89713b8aeb9f8d,
                0x8141311f6ad3d253,
                0x86a93c15cfafa663,
                0xc34a84a95ecb7732
            ]
        );
        // The thread term moves the seed by MIX_C1.
        assert_eq!(
            SplitMix64::for_benchmark(301, 0, 1).state(),
            mix64(301u64.wrapping_add(MIX_C1))
        );
    }

    #[test]
    fn neighbouring_positions_do_not_replay_each_other() {
        let a = outputs(&mut SplitMix64::for_benchmark(301, 0, 0), 64);
        let b = outputs(&mut SplitMix64::for_benchmark(301, 1, 0), 64);
        assert!(a.iter().all(|x| !b.contains(x)));
    }

    #[test]
    fn below_stays_in_range_and_uses_one_draw() {
        let mut g = SplitMix64::for_benchmark(7, 0, 0);
        let mut twin = g.clone();
        for n in [1, 2, 3, 10, 1_000_000, u64::MAX] {
            let x = g.below(n);
            assert!(x < n, "{x} >= {n}");
            twin.next_u64();
            assert_eq!(g, twin, "below({n}) must consume exactly one draw");
        }
        assert_eq!(g.below(0), 0);
        // u64::MAX as the bound returns the high part of the product: nearly the draw itself.
        let mut h = SplitMix64::from_state(0);
        assert_eq!(h.below(u64::MAX), 0xe220a8397b1dcdaf - 1);
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut g = SplitMix64::for_benchmark(301, 0, 0);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[g.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn fnv1a64_known_values() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }
}
