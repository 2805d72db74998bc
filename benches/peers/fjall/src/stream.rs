//! The key/value stream of `../STREAM.md`: SplitMix64 streams, zero-padded decimal keys and a
//! buffer of half-compressible values. Every peer program reproduces it bit for bit.

/// SplitMix64's increment, also the per-position seed step.
pub const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
/// First finalizer multiplier, also the per-thread seed step.
pub const MIX_C1: u64 = 0xBF58_476D_1CE4_E5B9;
/// Second finalizer multiplier.
pub const MIX_C2: u64 = 0x94D0_49BB_1331_11EB;

/// The value buffer holds at least this many bytes.
pub const VALUE_BUFFER_BYTES: usize = 1 << 20;
/// Bytes per compressible piece.
pub const PIECE_BYTES: usize = 100;
/// Random bytes per piece; the rest repeats them.
pub const PIECE_RAW_BYTES: usize = 50;

/// SplitMix64's finalizer.
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(MIX_C1);
    z = (z ^ (z >> 27)).wrapping_mul(MIX_C2);
    z ^ (z >> 31)
}

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    pub state: u64,
}

impl SplitMix64 {
    /// The stream of the benchmark at `position` of the run, client thread `thread` (0 but for
    /// readwhilewriting's readers): `state = mix(seed + position * GOLDEN + thread * MIX_C1)`.
    pub fn stream(seed: u64, position: u64, thread: u64) -> Self {
        SplitMix64 {
            state: mix64(
                seed.wrapping_add(position.wrapping_mul(GOLDEN))
                    .wrapping_add(thread.wrapping_mul(MIX_C1)),
            ),
        }
    }

    /// The next 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix64(self.state)
    }

    /// A number in `[0, n)` by Lemire's multiply-shift (no rejection).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// Decimal digits of `n` (1 for 0).
fn decimal_digits(mut n: u64) -> usize {
    let mut d = 1;
    while n >= 10 {
        n /= 10;
        d += 1;
    }
    d
}

/// Writes key numbers as `size` zero-padded decimal bytes.
#[derive(Clone, Copy, Debug)]
pub struct KeyFormat {
    size: usize,
}

impl KeyFormat {
    /// Fails when `num - 1` needs more than `key_size` digits (keys would collide).
    pub fn new(key_size: usize, num: u64) -> Result<Self, String> {
        let need = decimal_digits(num.saturating_sub(1));
        if key_size < need {
            return Err(format!(
                "key-size {key_size} is too small for {num} keys (needs at least {need} digits)"
            ));
        }
        Ok(KeyFormat { size: key_size })
    }

    /// Replaces the contents of `buf` with the key of `n`.
    pub fn write(&self, mut n: u64, buf: &mut Vec<u8>) {
        buf.clear();
        buf.resize(self.size, b'0');
        for byte in buf.iter_mut().rev() {
            *byte = b'0' + (n % 10) as u8;
            n /= 10;
        }
    }
}

/// Hands out consecutive slices of a buffer of half-compressible pieces.
#[derive(Clone, Debug)]
pub struct ValueGenerator {
    pub data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// Builds the buffer from `g`: pieces of 50 printable bytes, each repeated once, until it
    /// holds `max(1 MiB, value_size)` bytes.
    pub fn new(g: &mut SplitMix64, value_size: usize) -> Self {
        let target = VALUE_BUFFER_BYTES.max(value_size);
        let mut data = Vec::with_capacity(target + PIECE_BYTES);
        let mut raw = [0u8; PIECE_RAW_BYTES];
        while data.len() < target {
            for b in raw.iter_mut() {
                *b = b' ' + (g.next_u64() % 95) as u8;
            }
            data.extend_from_slice(&raw);
            data.extend_from_slice(&raw);
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next value of `len` bytes (at most the buffer's length), wrapping to the buffer's
    /// start when the rest is too short.
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        let start = self.pos;
        self.pos += len;
        &self.data[start..self.pos]
    }
}

/// The `[first, end)` slice of `0..total` that thread `index` of `threads` owns: how
/// readwhilewriting's readers divide `reads` (STREAM.md section 4), as Sluice divides a
/// benchmark's operations.
pub fn share(total: u64, threads: usize, index: usize) -> (u64, u64) {
    let at = |i: usize| (u128::from(total) * i as u128 / threads.max(1) as u128) as u64;
    (at(index), at(index + 1))
}

/// 64-bit FNV-1a of `bytes` (to check value buffers across languages).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    //! The test vectors of STREAM.md section 6.
    use super::*;

    fn first_keys(g: &mut SplitMix64, num: u64, k: usize) -> Vec<u64> {
        (0..k).map(|_| g.below(num)).collect()
    }

    #[test]
    fn splitmix64_reference() {
        let mut g = SplitMix64 { state: 0 };
        let got: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(
            got,
            [0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f]
        );
    }

    #[test]
    fn stream_seeds() {
        assert_eq!(mix64(301), 0x2ea7d2fa987b76eb);
        assert_eq!(SplitMix64::stream(301, 1, 0).state, 0xe525d2a3b2002e14);
        let mut g = SplitMix64::stream(301, 0, 0);
        let got: Vec<u64> = (0..5).map(|_| g.next_u64()).collect();
        assert_eq!(
            got,
            [
                0xccfab28b74453852,
                0x6f89713b8aeb9f8d,
                0x8141311f6ad3d253,
                0x86a93c15cfafa663,
                0xc34a84a95ecb7732
            ]
        );
    }

    #[test]
    fn key_numbers_and_values() {
        let (seed, num) = (301, 1_000_000);
        // fillrandom at position 0: value buffer first, then keys.
        let mut g = SplitMix64::stream(seed, 0, 0);
        let mut v = ValueGenerator::new(&mut g, 100);
        assert_eq!(v.data.len(), 1_048_600);
        assert_eq!(fnv1a64(&v.data), 0xeaa93389abcf248d);
        let half = "247d383a6237622a3b3554376553534e26473f207e3470334b2d284340714e586e403d266251742146667c7635656d5f676a";
        let first = v.generate(100).to_vec();
        assert_eq!(to_hex(&first), format!("{half}{half}"));
        assert_eq!(
            &first[..50],
            b"$}8:b7b*;5T7eSSN&G? ~4p3K-(C@qNXn@=&bQt!Ff|v5em_gj"
        );
        assert_eq!(
            to_hex(&v.generate(100)[..16]),
            "7560342074345949372c322f61754f29"
        );
        assert_eq!(
            first_keys(&mut g, num, 5),
            [568985, 555461, 548675, 856306, 142518]
        );
        // readrandom at position 1: keys only.
        assert_eq!(
            first_keys(&mut SplitMix64::stream(seed, 1, 0), num, 5),
            [200265, 681718, 426965, 265444, 238721]
        );
        // overwrite at position 2.
        let mut g = SplitMix64::stream(seed, 2, 0);
        let mut v = ValueGenerator::new(&mut g, 100);
        assert_eq!(fnv1a64(&v.data), 0x5efd3fff3cbd09b1);
        assert_eq!(&v.generate(100)[..8], b"S94!^-65");
        assert_eq!(
            first_keys(&mut g, num, 5),
            [587334, 706572, 126095, 749313, 128125]
        );
        // A value larger than 1 MiB grows the buffer.
        let mut v = ValueGenerator::new(&mut SplitMix64::stream(seed, 0, 0), 3 << 20);
        assert_eq!(v.data.len(), 3_145_800);
        assert_eq!(fnv1a64(&v.data), 0xce218f4e3e3ed34d);
        assert_eq!(v.generate(3 << 20).len(), 3 << 20);
    }

    /// readwhilewriting's reader threads (position 0, threads 1 and 2) and their shares.
    #[test]
    fn reader_streams_and_shares() {
        assert_eq!(SplitMix64::stream(301, 0, 1).state, 0xe3b0b46bb6dda086);
        let want = [
            [262325, 89055, 863800, 829571, 336372],
            [655449, 522333, 949794, 372108, 980815],
        ];
        for (r, w) in want.iter().enumerate() {
            let mut g = SplitMix64::stream(301, 0, r as u64 + 1);
            assert_eq!(&first_keys(&mut g, 1_000_000, 5), w, "reader {r}");
        }
        assert_eq!(
            [share(10, 3, 0), share(10, 3, 1), share(10, 3, 2)],
            [(0, 3), (3, 6), (6, 10)]
        );
    }

    #[test]
    fn values_wrap_and_are_printable() {
        let mut v = ValueGenerator::new(&mut SplitMix64::stream(1, 0, 0), 100);
        for _ in 0..v.data.len() / 333 {
            v.generate(333);
        }
        let start = v.data.as_ptr();
        assert_eq!(v.generate(333).as_ptr(), start, "did not wrap");
        assert!(v.data.iter().all(|c| (b' '..=b'~').contains(c)));
    }

    #[test]
    fn keys_are_zero_padded_decimal() {
        let f = KeyFormat::new(16, 1_000_000).expect("fits");
        let mut buf = b"leftover".to_vec();
        f.write(568985, &mut buf);
        assert_eq!(buf, b"0000000000568985");
        assert!(KeyFormat::new(3, 1001).is_err());
        assert!(KeyFormat::new(3, 1000).is_ok());
    }
}
