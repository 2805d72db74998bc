//! Benchmark values that compress to about half their size, as db_bench's `RandomGenerator`.
//!
//! A buffer of at least 1 MiB is built from 100-byte pieces; each piece is 50 random printable
//! bytes followed by the same 50 bytes again, so a compressor that finds repeats (lz4, snappy,
//! zstd) halves it while a random prefix keeps pieces distinct. Values are consecutive slices of
//! that buffer, wrapping to its start, so generating one costs no randomness and no copy.

use rand::Rng;

/// Bytes of the buffer values are sliced from (at least; it grows for larger values).
pub const BUFFER_BYTES: usize = 1 << 20;

/// Bytes per compressible piece.
pub const PIECE_BYTES: usize = 100;

/// Fraction of each piece that is random; the rest repeats it.
pub const COMPRESSION_RATIO: f64 = 0.5;

/// Produces benchmark values. One per thread: it is not shared.
#[derive(Clone, Debug)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

/// Appends `len` bytes to `out`: `len * ratio` random printable bytes, repeated to fill `len`.
fn compressible_piece(rng: &mut impl Rng, ratio: f64, len: usize, out: &mut Vec<u8>) {
    let raw_len = ((len as f64 * ratio) as usize).clamp(1, len.max(1));
    let raw: Vec<u8> = (0..raw_len).map(|_| rng.gen_range(b' '..=b'~')).collect();
    out.extend(raw.iter().cycle().take(len));
}

impl ValueGenerator {
    /// A generator able to produce values of up to `max_value_size` bytes.
    pub fn new(rng: &mut impl Rng, max_value_size: usize) -> Self {
        let target = BUFFER_BYTES.max(max_value_size);
        let mut data = Vec::with_capacity(target + PIECE_BYTES);
        while data.len() < target {
            compressible_piece(rng, COMPRESSION_RATIO, PIECE_BYTES, &mut data);
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next value of `len` bytes. `len` larger than the generator was built for is clamped
    /// to the buffer size.
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
    use rand::SeedableRng;
    use rand::rngs::SmallRng;
    use sluice_sst::compression::{CompressionType, compress};

    fn generator(seed: u64, max: usize) -> ValueGenerator {
        ValueGenerator::new(&mut SmallRng::seed_from_u64(seed), max)
    }

    #[test]
    fn values_have_the_requested_length_and_vary() {
        let mut g = generator(1, 100);
        let a = g.generate(100).to_vec();
        let b = g.generate(100).to_vec();
        assert_eq!(a.len(), 100);
        assert_ne!(a, b);
        assert!(a.iter().all(|c| (b' '..=b'~').contains(c)));
        assert!(g.generate(0).is_empty());
        // Wrapping around the buffer keeps producing full-length values.
        for _ in 0..(2 * BUFFER_BYTES / 333) {
            assert_eq!(g.generate(333).len(), 333);
        }
    }

    #[test]
    fn large_values_grow_the_buffer() {
        let mut g = generator(2, 3 << 20);
        assert_eq!(g.generate(3 << 20).len(), 3 << 20);
    }

    #[test]
    fn same_seed_same_values() {
        assert_eq!(
            generator(7, 100).generate(100),
            generator(7, 100).generate(100)
        );
        assert_ne!(
            generator(7, 100).generate(100),
            generator(8, 100).generate(100)
        );
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
        let mut g = generator(3, 100);
        for _ in 0..100 {
            let ratio = lz4_ratio(g.generate(100));
            assert!((0.50..=0.70).contains(&ratio), "ratio {ratio}");
        }
    }

    #[test]
    fn a_stream_of_values_compresses_to_about_half() {
        // A 4 KiB data block of 100-byte values, as a table stores them: the fixed costs are
        // spread over 41 values and the ratio approaches the generator's 50%.
        let mut g = generator(4, 100);
        let mut block = Vec::new();
        while block.len() < 4096 {
            block.extend_from_slice(g.generate(100));
        }
        let ratio = lz4_ratio(&block);
        assert!((0.40..=0.65).contains(&ratio), "ratio {ratio}");
    }
}
