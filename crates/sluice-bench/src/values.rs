//! Benchmark values that compress to about half their size, as db_bench's `RandomGenerator`.
//!
//! A buffer of at least 1 MiB is built from 100-byte pieces; each piece is 50 random printable
//! bytes followed by the same 50 bytes again, so a compressor that finds repeats (lz4, snappy,
//! zstd) halves it while a random prefix keeps pieces distinct. Values are consecutive slices of
//! that buffer, wrapping to its start, so generating one costs no randomness and no copy.
//!
//! The workloads build the buffer from their benchmark's [`SplitMix64`] stream exactly as
//! `benches/peers/STREAM.md` section 3 specifies ([`ValueGenerator::from_stream`]), so Sluice and
//! the peer engines write byte-identical values. [`ValueGenerator::new`] builds the same shape
//! from any [`rand::Rng`] (the experiment's data sets use it); its bytes differ.

use rand::Rng;

use crate::stream::SplitMix64;

/// Bytes of the buffer values are sliced from (at least; it grows for larger values).
pub const BUFFER_BYTES: usize = 1 << 20;

/// Bytes per compressible piece.
pub const PIECE_BYTES: usize = 100;

/// Random bytes at the start of each piece; the rest of the piece repeats them.
pub const PIECE_RAW_BYTES: usize = PIECE_BYTES / 2;

/// Fraction of each piece that is random; the rest repeats it.
pub const COMPRESSION_RATIO: f64 = PIECE_RAW_BYTES as f64 / PIECE_BYTES as f64;

/// Printable ASCII, `' '` to `'~'`: the alphabet of value bytes.
const PRINTABLE: u8 = b'~' - b' ' + 1;

/// Produces benchmark values. One per thread: it is not shared.
///
/// Invariant: `data` is a whole number of pieces, at least `BUFFER_BYTES` long, and
/// `pos <= data.len()`.
#[derive(Clone, Debug)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGenerator {
    /// Builds the buffer of STREAM.md section 3 from `stream`: pieces of 50 bytes
    /// `0x20 + next_u64() % 95`, drawn in order, each written twice, until the buffer holds
    /// `max(BUFFER_BYTES, max_value_size)` bytes. Consumes 50 draws per piece (524,300 for
    /// the default buffer); the workloads call it before drawing any key number.
    pub fn from_stream(stream: &mut SplitMix64, max_value_size: usize) -> Self {
        // The remainder is below 95, so the narrowing cannot lose bits.
        Self::build(max_value_size, || {
            b' ' + (stream.next_u64() % u64::from(PRINTABLE)) as u8
        })
    }

    /// A generator able to produce values of up to `max_value_size` bytes, its random bytes
    /// drawn from `rng` (uniform printable ASCII). Same layout as [`Self::from_stream`],
    /// different bytes: use that one where values must match the peer engines.
    pub fn new(rng: &mut impl Rng, max_value_size: usize) -> Self {
        Self::build(max_value_size, || rng.gen_range(b' '..=b'~'))
    }

    /// Appends pieces of `PIECE_RAW_BYTES` bytes from `next_byte`, each written twice, until
    /// the buffer holds at least `max(BUFFER_BYTES, max_value_size)` bytes.
    fn build(max_value_size: usize, mut next_byte: impl FnMut() -> u8) -> Self {
        let target = BUFFER_BYTES.max(max_value_size);
        let mut data = Vec::with_capacity(target + PIECE_BYTES);
        let mut raw = [0u8; PIECE_RAW_BYTES];
        while data.len() < target {
            for byte in raw.iter_mut() {
                *byte = next_byte();
            }
            data.extend_from_slice(&raw);
            data.extend_from_slice(&raw);
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The whole buffer values are sliced from.
    pub fn buffer(&self) -> &[u8] {
        &self.data
    }

    /// The next value of `len` bytes. `len` larger than the generator was built for is clamped
    /// to the buffer size. A value that would run past the end starts over at the buffer's
    /// start instead (STREAM.md section 3).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        let start = self.pos;
        self.pos += len;
        self.data.get(start..start + len).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::fnv1a64;
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use sluice_sst::compression::{CompressionType, compress};

    /// The generator of the benchmark at `position` of a run seeded `seed`, thread 0.
    fn generator(seed: u64, position: u64, max: usize) -> ValueGenerator {
        ValueGenerator::from_stream(&mut SplitMix64::for_benchmark(seed, position, 0), max)
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// STREAM.md section 6: seed 301, value size 100.
    #[test]
    fn stream_md_value_vectors() {
        let mut g = generator(301, 0, 100);
        assert_eq!(g.buffer().len(), 1_048_600);
        assert_eq!(fnv1a64(g.buffer()), 0xeaa93389abcf248d);
        let half = "247d383a6237622a3b3554376553534e26473f207e3470334b2d284340714e586e403d266251742146667c7635656d5f676a";
        let first = g.generate(100).to_vec();
        assert_eq!(hex(&first), format!("{half}{half}"));
        assert_eq!(
            &first[..50],
            b"$}8:b7b*;5T7eSSN&G? ~4p3K-(C@qNXn@=&bQt!Ff|v5em_gj"
        );
        assert_eq!(
            hex(&g.generate(100)[..16]),
            "7560342074345949372c322f61754f29"
        );
        // overwrite at position 2 of fillrandom,readrandom,overwrite.
        let mut g = generator(301, 2, 100);
        assert_eq!(fnv1a64(g.buffer()), 0x5efd3fff3cbd09b1);
        assert_eq!(&g.generate(100)[..8], b"S94!^-65");
    }

    #[test]
    fn building_the_buffer_consumes_fifty_draws_per_piece() {
        let mut stream = SplitMix64::for_benchmark(301, 0, 0);
        let g = ValueGenerator::from_stream(&mut stream, 100);
        let mut expected = SplitMix64::for_benchmark(301, 0, 0);
        for _ in 0..524_300 {
            expected.next_u64();
        }
        assert_eq!(g.buffer().len() / PIECE_BYTES * PIECE_RAW_BYTES, 524_300);
        assert_eq!(stream, expected);
    }

    #[test]
    fn values_have_the_requested_length_and_vary() {
        let mut g = generator(1, 0, 100);
        let a = g.generate(100).to_vec();
        let b = g.generate(100).to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        assert_eq!(a[..50], a[50..], "a piece is its random half twice");
        assert!(g.buffer().iter().all(|c| (b' '..=b'~').contains(c)));
        assert!(g.generate(0).is_empty());
        // Wrapping around the buffer keeps producing full-length values, restarting at the
        // buffer's start when the rest is too short.
        let mut g = generator(1, 0, 333);
        for _ in 0..g.buffer().len() / 333 {
            assert_eq!(g.generate(333).len(), 333);
        }
        let start = g.buffer().as_ptr();
        assert_eq!(g.generate(333).as_ptr(), start, "did not wrap");
    }

    #[test]
    fn large_values_grow_the_buffer() {
        // STREAM.md section 6: a 3 MiB value size.
        let mut g = generator(301, 0, 3 << 20);
        assert_eq!(g.buffer().len(), 3_145_800);
        assert_eq!(fnv1a64(g.buffer()), 0xce218f4e3e3ed34d);
        assert_eq!(g.generate(3 << 20).len(), 3 << 20);
        // A request beyond the buffer is clamped to it.
        assert_eq!(g.generate(4 << 20).len(), 3_145_800);
    }

    #[test]
    fn same_stream_same_values() {
        assert_eq!(
            generator(7, 0, 100).generate(100),
            generator(7, 0, 100).generate(100)
        );
        assert_ne!(
            generator(7, 0, 100).generate(100),
            generator(8, 0, 100).generate(100)
        );
        assert_ne!(
            generator(7, 0, 100).generate(100),
            generator(7, 1, 100).generate(100)
        );
    }

    #[test]
    fn rng_built_values_have_the_same_layout() {
        let build = |seed| ValueGenerator::new(&mut SmallRng::seed_from_u64(seed), 100);
        let mut g = build(7);
        assert_eq!(g.buffer().len(), 1_048_600);
        assert!(g.buffer().iter().all(|c| (b' '..=b'~').contains(c)));
        let v = g.generate(100).to_vec();
        assert_eq!(v[..50], v[50..]);
        assert_eq!(build(7).buffer(), build(7).buffer());
        assert_ne!(build(7).buffer(), build(8).buffer());
    }

    /// The compressed share of `input` under lz4, as the table writer would store it.
    fn lz4_ratio(input: &[u8]) -> f64 {
        let mut out = Vec::new();
        let used = compress(CompressionType::Lz4, input, &mut out);
        assert_eq!(used, CompressionType::Lz4, "lz4 should pay off");
        out.len() as f64 / input.len() as f64
    }

    #[test]
    fn one_value_compresses_to_about_two_thirds() {
        // Alone, a 100-byte value pays lz4's fixed costs: the 4-byte length prefix, a token
        // per sequence and the 5 literal bytes lz4 must end with, on top of its 50 new bytes.
        let mut g = generator(3, 0, 100);
        for _ in 0..100 {
            let ratio = lz4_ratio(g.generate(100));
            assert!((0.50..=0.70).contains(&ratio), "ratio {ratio}");
        }
    }

    #[test]
    fn a_stream_of_values_compresses_to_about_half() {
        // A 4 KiB data block of 100-byte values, as a table stores them: the fixed costs are
        // spread over 41 values and the ratio approaches the generator's 50%.
        let mut g = generator(4, 0, 100);
        let mut block = Vec::new();
        while block.len() < 4096 {
            block.extend_from_slice(g.generate(100));
        }
        let ratio = lz4_ratio(&block);
        assert!((0.40..=0.65).contains(&ratio), "ratio {ratio}");
        assert!((COMPRESSION_RATIO - 0.5).abs() < f64::EPSILON);
    }
}
